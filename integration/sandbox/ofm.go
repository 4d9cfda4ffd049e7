package sandbox

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kubevirt-ovn/kubevirt-ovn/integration/wire"
)

// OFM is an ovn-fake-multinode cluster (github.com/ovn-org/ovn-fake-multinode)
// that is already running, started by integration/ofm/ofm.sh or by its
// user's own `ovn_cluster.sh start`: a central container holding the NB, SB
// and ovn-northd, gateway containers ovn-gw-N and chassis containers
// ovn-chassis-N, each with its own OVS and ovn-controller, joined by an
// underlay bridge br-ovn, with eth2 of every node on the external bridge
// br-ovn-ext (mapped as physical network "public" to each node's br-ex).
//
// VMs are network namespaces inside a chassis container, with a veth whose
// other end is on br-int with external_ids:iface-id, so they have a real
// kernel TCP/IP stack; the external network is a namespace on the host on
// br-ovn-ext. Captures are tcpdump's pcap files, read with gopacket.
//
// OFM implements Deployment: Inject is an OpenFlow packet-out on the port's
// bridge (the frame enters the pipeline as if the port had received it) and
// Capture reads what the port has sent since its first Capture.
type OFM struct {
	// Central is the container holding the NB, SB and ovn-northd.
	Central string
	// PhysicalNetwork is the network_name every node maps to br-ex.
	PhysicalNetwork string

	dir      string
	runtime  string
	gateways []string
	workers  []string

	mu       sync.Mutex
	pids     map[string]int
	captures map[string]*ofmCapture
	vms      map[string][]string // node -> VM names this OFM made
	ext      bool
	bg       []*ofmBackground
	seq      int
	killed   map[string]ofmKilled
	// frwCleared: nodes whose flow-restore-wait RestartChassis cleared.
	frwCleared []string
}

var _ Deployment = (*OFM)(nil)

// OFM's names: ovn_cluster.sh's defaults.
const (
	OFMCentral = "ovn-central-az1"
	// OFMExternalNS is the host namespace of the external network's peer.
	OFMExternalNS = "kubevirt-ovn-ext"
	ofmExtIf      = "kvo-ext"
	ofmExtBridge  = "br-ovn-ext"
	// OFMExternalIf is the peer's interface in OFMExternalNS.
	OFMExternalIf = ofmExtIf
	// ofmTmp is where captures live inside a node.
	ofmTmp = "/tmp/kubevirt-ovn"
)

// AttachOFM finds a running ovn-fake-multinode cluster: its central
// (OFM_CENTRAL, default ovn-central-az1), gateways ovn-gw-* and chassis
// ovn-chassis-*, with RUNC_CMD (default podman) as the container engine,
// as ovn_cluster.sh names them. dir holds the host side's files.
func AttachOFM(dir string) (*OFM, error) {
	o := &OFM{
		Central: envOr("OFM_CENTRAL", OFMCentral), PhysicalNetwork: "public",
		dir: dir, runtime: envOr("RUNC_CMD", "podman"),
		pids: map[string]int{}, captures: map[string]*ofmCapture{}, vms: map[string][]string{},
	}
	out, err := o.engine("ps", "--format", "{{.Names}}")
	if err != nil {
		return nil, fmt.Errorf("ovn-fake-multinode: %w", err)
	}
	var central bool
	for _, n := range strings.Fields(out) {
		switch {
		case n == o.Central:
			central = true
		case strings.HasPrefix(n, "ovn-gw-"):
			o.gateways = append(o.gateways, n)
		case strings.HasPrefix(n, "ovn-chassis-"):
			o.workers = append(o.workers, n)
		}
	}
	slices.Sort(o.gateways)
	slices.Sort(o.workers)
	if !central || len(o.gateways) == 0 || len(o.workers) == 0 {
		return nil, fmt.Errorf("ovn-fake-multinode: no running cluster (central %s: %v, gateways %v, chassis %v); start one with integration/ofm/ofm.sh start", o.Central, central, o.gateways, o.workers)
	}
	for _, n := range append(o.Gateways(), o.Workers()...) {
		if _, err := o.Exec(n, "mkdir", "-p", ofmTmp); err != nil {
			return nil, err
		}
	}
	return o, nil
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// engine runs the container engine.
func (o *OFM) engine(args ...string) (string, error) {
	return runCmd(exec.Command(o.runtime, args...))
}

func runCmd(cmd *exec.Cmd) (string, error) {
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%s: %w: %s", strings.Join(cmd.Args, " "), err, strings.TrimSpace(stderr.String()+" "+stdout.String()))
	}
	return stdout.String(), nil
}

// pid is a node container's init pid on the host.
func (o *OFM) pid(node string) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if p, ok := o.pids[node]; ok {
		return p, nil
	}
	out, err := o.engine("inspect", "-f", "{{.State.Pid}}", node)
	if err != nil {
		return 0, err
	}
	p, err := strconv.Atoi(strings.TrimSpace(out))
	if err != nil || p == 0 {
		return 0, fmt.Errorf("%s: no pid (%q)", node, out)
	}
	o.pids[node] = p
	return p, nil
}

// root is a path inside a node, seen from the host.
func (o *OFM) root(node, path string) (string, error) {
	p, err := o.pid(node)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("/proc/%d/root%s", p, path), nil
}

// NBEndpoint is the central's NB unix socket, reached from the host through
// the container's root: no address or route on the host, and TLS or not as
// the cluster was started.
func (o *OFM) NBEndpoint() string { return o.socket("ovnnb_db.sock") }

// SBEndpoint is the SB's, as NBEndpoint.
func (o *OFM) SBEndpoint() string { return o.socket("ovnsb_db.sock") }

func (o *OFM) socket(name string) string {
	// /var/run in the image is an absolute symlink to /run: through
	// /proc/PID/root it would resolve on the host.
	p, err := o.root(o.Central, "/run/ovn/"+name)
	if err != nil {
		return "unix:/nonexistent/" + err.Error()
	}
	return "unix:" + p
}

// NBCtl runs ovn-nbctl in the central (its own version of OVN).
func (o *OFM) NBCtl(args ...string) (string, error) {
	return o.Exec(o.Central, append([]string{"ovn-nbctl", "--timeout=60"}, args...)...)
}

// SBCtl runs ovn-sbctl in the central.
func (o *OFM) SBCtl(args ...string) (string, error) {
	return o.Exec(o.Central, append([]string{"ovn-sbctl", "--timeout=60"}, args...)...)
}

// Exec runs a command in a node container.
func (o *OFM) Exec(node string, args ...string) (string, error) {
	return o.engine(append([]string{"exec", node}, args...)...)
}

// Gateways are the ovn-gw-N containers.
func (o *OFM) Gateways() []string { return slices.Clone(o.gateways) }

// Workers are the ovn-chassis-N containers.
func (o *OFM) Workers() []string { return slices.Clone(o.workers) }

// VM is a fake VM: a network namespace named Name in a chassis container
// with interface eth1 plugged into br-int for logical port IfaceID.
type VM struct {
	Name, IfaceID, MAC string
	// CIDR is the VM's address and prefix (none: a port with no stack
	// address); Gateway its default route.
	CIDR, Gateway string
	MTU           int
}

// VMIf is a VM's interface name inside its namespace.
const VMIf = "eth1"

// AddVM creates vm in chassis node (WaitBound waits for ovn-controller to
// bind its port, once the port exists). Checksum offload is off on both ends (the userspace
// datapath forwards what a veth's packet socket reads, with the checksums
// the kernel left partial).
func (o *OFM) AddVM(node string, vm VM) error {
	if len(vm.Name) > 12 {
		return fmt.Errorf("VM name %q: 12 characters at most (its veth is %s-p)", vm.Name, vm.Name)
	}
	mtu := vm.MTU
	if mtu == 0 {
		mtu = 1400
	}
	n, p := vm.Name, vm.Name+"-p"
	script := []string{
		"set -e",
		"ip netns add " + n,
		"ip link add " + p + " type veth peer name " + VMIf + " netns " + n,
		"ip link set " + p + " mtu " + strconv.Itoa(mtu) + " up",
		"ethtool -K " + p + " tx off >/dev/null",
		"ip netns exec " + n + " ip link set lo up",
		"ip netns exec " + n + " ip link set " + VMIf + " address " + vm.MAC + " mtu " + strconv.Itoa(mtu),
		"ip netns exec " + n + " ethtool -K " + VMIf + " tx off >/dev/null",
		"ip netns exec " + n + " ip link set " + VMIf + " up",
		"ovs-vsctl --timeout=30 add-port br-int " + p + " -- set Interface " + p + " external_ids:iface-id=" + vm.IfaceID,
	}
	if vm.CIDR != "" {
		script = append(script, "ip netns exec "+n+" ip addr add "+vm.CIDR+" dev "+VMIf)
	}
	if vm.Gateway != "" {
		script = append(script, "ip netns exec "+n+" ip route add default via "+vm.Gateway)
	}
	if _, err := o.Exec(node, "bash", "-c", strings.Join(script, "\n")); err != nil {
		return fmt.Errorf("VM %s on %s: %w", vm.Name, node, err)
	}
	o.mu.Lock()
	o.vms[node] = append(o.vms[node], vm.Name)
	o.mu.Unlock()
	return nil
}

// WaitBound waits until the SB binds logical port lsp to node's chassis.
func (o *OFM) WaitBound(node, lsp string) error {
	return poll(90*time.Second, lsp+" bound to "+node, func() (bool, error) {
		ch, err := o.SBCtl("--bare", "--columns=chassis", "find", "Port_Binding", "logical_port="+lsp)
		if err != nil || strings.TrimSpace(ch) == "" {
			return false, err
		}
		name, err := o.SBCtl("--bare", "--columns=name", "list", "Chassis", strings.TrimSpace(ch))
		return strings.TrimSpace(name) == node, err
	})
}

// DelVM unplugs and deletes a VM made by AddVM (or AddVMPort).
func (o *OFM) DelVM(node, name string) error {
	o.stopCapture(node, name)
	_, err := o.Exec(node, "bash", "-c", "ovs-vsctl --timeout=30 --if-exists del-port br-int "+name+"-p; ip netns del "+name)
	o.mu.Lock()
	o.vms[node] = without(o.vms[node], name)
	o.mu.Unlock()
	return err
}

// AddVMPort plugs a VM with no address: a port to inject into and capture.
func (o *OFM) AddVMPort(node, port, ifaceID string) error {
	return o.AddVM(node, VM{Name: port, IfaceID: ifaceID, MAC: "02:00:00:00:00:01"})
}

// InVM runs a command in a VM's namespace.
func (o *OFM) InVM(node, vm string, args ...string) (string, error) {
	return o.Exec(node, append([]string{"ip", "netns", "exec", vm}, args...)...)
}

// External makes the external network's peer: namespace OFMExternalNS on
// the host, its interface OFMExternalIf on br-ovn-ext with mac and the
// address cidr, in VLAN vlan (0: untagged); more are addresses on its
// loopback (hosts beyond the peer router). Called again, it replaces the
// addresses and the VLAN.
func (o *OFM) External(mac, cidr string, vlan int, more ...string) error {
	o.mu.Lock()
	made := o.ext
	o.mu.Unlock()
	if !made {
		script := []string{
			// what an earlier run left (the names are ours)
			"ovs-vsctl --timeout=30 --if-exists del-port " + ofmExtBridge + " " + ofmExtIf + "-p",
			"ip link del " + ofmExtIf + "-p 2>/dev/null",
			"ip netns del " + OFMExternalNS + " 2>/dev/null",
			"set -e",
			"ip netns add " + OFMExternalNS,
			"ip link add " + ofmExtIf + "-p type veth peer name " + ofmExtIf + " netns " + OFMExternalNS,
			"ip link set " + ofmExtIf + "-p up",
			"ethtool -K " + ofmExtIf + "-p tx off >/dev/null",
			"ovs-vsctl --timeout=30 add-port " + ofmExtBridge + " " + ofmExtIf + "-p",
			"ip netns exec " + OFMExternalNS + " ip link set lo up",
			"ip netns exec " + OFMExternalNS + " ethtool -K " + ofmExtIf + " tx off >/dev/null",
		}
		if _, err := runCmd(exec.Command("bash", "-c", strings.Join(script, "\n"))); err != nil {
			return fmt.Errorf("external network: %w", err)
		}
		o.mu.Lock()
		o.ext = true
		o.mu.Unlock()
	}
	// The peer sits on an access port of br-ovn-ext: VLAN vlan's frames
	// reach it untagged (the host kernel may have no 8021q), the nodes'
	// wires carry the tag.
	in := "ip netns exec " + OFMExternalNS + " "
	tag := "ovs-vsctl --timeout=30 remove Port " + ofmExtIf + "-p tag 0-4095"
	if vlan != 0 {
		tag = "ovs-vsctl --timeout=30 set Port " + ofmExtIf + "-p tag=" + strconv.Itoa(vlan)
	}
	script := []string{
		"set -e",
		tag,
		in + "ip addr flush dev " + ofmExtIf,
		in + "ip addr flush dev lo",
		in + "ip addr add 127.0.0.1/8 dev lo",
		in + "ip link set " + ofmExtIf + " address " + mac + " up",
		in + "ip addr add " + cidr + " dev " + ofmExtIf,
	}
	for _, a := range more {
		script = append(script, in+"ip addr add "+a+" dev lo")
	}
	if _, err := runCmd(exec.Command("bash", "-c", strings.Join(script, "\n"))); err != nil {
		return fmt.Errorf("external network: %w", err)
	}
	return nil
}

// InExternal runs a command in the external namespace.
func (o *OFM) InExternal(args ...string) (string, error) {
	return runCmd(exec.Command("ip", append([]string{"netns", "exec", OFMExternalNS}, args...)...))
}

// Background starts a command that runs until the returned function (or
// Stop) stops it: in a node ("" is the host), in the network namespace vm
// when set. Its output goes to a file, returned by out.
func (o *OFM) Background(node, vm string, args ...string) (stop func(), out func() string, err error) {
	o.mu.Lock()
	o.seq++
	name := fmt.Sprintf("bg-%d", o.seq)
	o.mu.Unlock()
	if vm != "" {
		args = append([]string{"ip", "netns", "exec", vm}, args...)
	}
	quoted := make([]string, len(args))
	for i, a := range args {
		quoted[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	dir := o.tmp(node)
	pidfile, outfile := dir+"/"+name+".pid", dir+"/"+name+".out"
	sh := "mkdir -p " + dir + "; echo $$ > " + pidfile + "; exec " + strings.Join(quoted, " ") + " >" + outfile + " 2>&1 </dev/null"
	b := &ofmBackground{node: node, pidfile: pidfile}
	if node == "" {
		cmd := exec.Command("setsid", "bash", "-c", sh)
		if err := cmd.Start(); err != nil {
			return nil, nil, err
		}
		go func() { _ = cmd.Wait() }()
		b.out = outfile
	} else {
		if _, err := o.engine("exec", "-d", node, "bash", "-c", sh); err != nil {
			return nil, nil, err
		}
		if b.out, err = o.root(node, outfile); err != nil {
			return nil, nil, err
		}
	}
	// running once its pidfile is written
	pf := pidfile
	if node != "" {
		pf, _ = o.root(node, pidfile)
	}
	if err := poll(30*time.Second, "background "+strings.Join(args, " "), func() (bool, error) {
		st, err := os.Stat(pf)
		return err == nil && st.Size() > 0, nil
	}); err != nil {
		return nil, nil, err
	}
	o.mu.Lock()
	o.bg = append(o.bg, b)
	o.mu.Unlock()
	return func() { o.stopBackground(b) }, func() string { s, _ := os.ReadFile(b.out); return string(s) }, nil
}

// tmp is where Background and Capture keep their files: in a node, or on
// the host ("").
func (o *OFM) tmp(node string) string {
	if node == "" {
		return filepath.Join(o.dir, "bg")
	}
	return ofmTmp
}

// ofmBackground is a command started by Background.
type ofmBackground struct{ node, pidfile, out string }

func (o *OFM) stopBackground(b *ofmBackground) {
	if b.node == "" {
		if s, err := os.ReadFile(b.pidfile); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(s))); err == nil {
				_ = killPid(pid)
				waitExit(pid, 5*time.Second)
			}
		}
		return
	}
	_, _ = o.Exec(b.node, "bash", "-c", "kill -9 $(cat "+b.pidfile+") 2>/dev/null; true")
}

// ofmCapture is a tcpdump started by Background, writing a pcap file.
type ofmCapture struct {
	node, path string // path seen from the host
	stop       func()
}

// Capture returns what port has sent so far, counted from the first
// Capture of it: ExternalPort is a node's eth2 on the external bridge
// (what leaves the node), a VM name what the VM received (what br-int sent
// it), and on node "" the external namespace's interface (what the peer
// received).
func (o *OFM) Capture(node, port string) ([]wire.Seen, error) {
	c, err := o.capture(node, port)
	if err != nil {
		return nil, err
	}
	return wire.ReadPcapFile(c.path)
}

func (o *OFM) capture(node, port string) (*ofmCapture, error) {
	key := node + "/" + port
	o.mu.Lock()
	c, ok := o.captures[key]
	o.seq++
	file := fmt.Sprintf("%s/cap-%d.pcap", o.tmp(node), o.seq)
	o.mu.Unlock()
	if ok {
		return c, nil
	}
	ns, args := port, []string{"tcpdump", "-i", VMIf, "-Q", "in"}
	switch {
	case node == "":
		ns, args = OFMExternalNS, []string{"tcpdump", "-i", ofmExtIf, "-Q", "in"}
	case port == ExternalPort:
		ns, args = "", []string{"tcpdump", "-i", "eth2", "-Q", "out"}
	}
	c = &ofmCapture{node: node, path: file}
	if node != "" {
		var err error
		if c.path, err = o.root(node, file); err != nil {
			return nil, err
		}
	}
	stop, _, err := o.Background(node, ns, append(args, "-Z", "root", "-n", "-U", "-s", "256", "-w", file)...)
	if err != nil {
		return nil, fmt.Errorf("capture on %s: %w", key, err)
	}
	c.stop = stop
	// tcpdump writes the file's header once it captures.
	if err := poll(30*time.Second, "tcpdump on "+key, func() (bool, error) {
		st, err := os.Stat(c.path)
		return err == nil && st.Size() >= 24, nil
	}); err != nil {
		stop()
		return nil, err
	}
	o.mu.Lock()
	o.captures[key] = c
	o.mu.Unlock()
	return c, nil
}

// stopCapture stops the tcpdump of node's port, if any.
func (o *OFM) stopCapture(node, port string) {
	o.mu.Lock()
	c, ok := o.captures[node+"/"+port]
	delete(o.captures, node+"/"+port)
	o.mu.Unlock()
	if ok {
		c.stop()
	}
}

func killPid(pid int) error {
	p, err := os.FindProcess(pid)
	if err != nil {
		return err
	}
	return p.Kill()
}

// Inject makes port receive frame: an OpenFlow packet-out with the port as
// in_port, through OVN's pipeline on br-int (a VM's port) or the normal
// switching of br-ex (ExternalPort, eth2).
func (o *OFM) Inject(node, port string, frame []byte) error {
	bridge, in, actions := "br-int", port+"-p", "table"
	if port == ExternalPort {
		bridge, in, actions = "br-ex", "eth2", "NORMAL"
	}
	_, err := o.Exec(node, "ovs-ofctl", "packet-out", bridge, "in_port="+in+",packet="+hex.EncodeToString(frame)+",actions="+actions)
	return err
}

// KillChassis SIGKILLs a node's ovs-vswitchd and ovn-controller (by their
// pidfiles in the container) and returns their pids on the host; the
// container, its links and its SB rows stay.
func (o *OFM) KillChassis(node string) ([]int, error) {
	var host []int
	// the underlay address lives on br-phy (userspace datapath): it goes
	// with ovs-vswitchd and RestartChassis puts it back
	addr, _ := o.Exec(node, "bash", "-c", "ip -4 -o addr show dev br-phy 2>/dev/null | awk '{print $4}'")
	o.mu.Lock()
	if o.killed == nil {
		o.killed = map[string]ofmKilled{}
	}
	o.killed[node] = ofmKilled{brPhy: strings.TrimSpace(addr), gateway: slices.Contains(o.gateways, node)}
	o.mu.Unlock()
	for _, pf := range []string{"/run/openvswitch/ovs-vswitchd.pid", "/run/ovn/ovn-controller.pid"} {
		out, err := o.Exec(node, "cat", pf)
		if err != nil {
			return host, err
		}
		nsPid, err := strconv.Atoi(strings.TrimSpace(out))
		if err != nil {
			return host, fmt.Errorf("%s %s: %q", node, pf, out)
		}
		hp, err := o.hostPid(node, nsPid)
		if err != nil {
			return host, err
		}
		if err := killPid(hp); err != nil {
			return host, err
		}
		host = append(host, hp)
	}
	for _, hp := range host {
		if !waitExit(hp, 10*time.Second) {
			return host, fmt.Errorf("%s: pid %d runs after SIGKILL", node, hp)
		}
	}
	o.mu.Lock()
	o.gateways, o.workers = without(o.gateways, node), without(o.workers, node)
	o.mu.Unlock()
	return host, nil
}

// ofmKilled is what RestartChassis needs of a killed node.
type ofmKilled struct {
	brPhy   string
	gateway bool
}

// RestartChassis starts again the ovs-vswitchd and ovn-controller that
// KillChassis killed, as ovn_cluster.sh started them (with TLS when the
// node's ovn-remote is ssl:), and waits for its chassis in the SB.
//
// OVN 24.03.8, 25.03.3, 25.09.3 and 26.03.1 (621f85e92 "controller: Fix
// bfd up too early after unexpected reboot") set the Open_vSwitch
// other_config:flow-restore-wait=true while ovn-controller starts; killed
// then, it leaves it set, and the restarted ovs-vswitchd forwards nothing
// until ovn-controller clears it, which it cannot when its SB connection
// crosses that ovs-vswitchd (here the node's br-phy; with ovn-kubernetes
// the node's br-ex): a deadlock, fixed by its revert in 24.03.9, 25.09.4
// and 26.03.2, which clear the key they set (79350ef86). As those do, a
// key OVN marked as its own (external_ids:ovn-managed-flow-restore-wait)
// is removed before ovs-vswitchd starts again; FlowRestoreWaitCleared says
// on which nodes it was.
func (o *OFM) RestartChassis(node string) error {
	o.mu.Lock()
	k, ok := o.killed[node]
	o.mu.Unlock()
	if !ok {
		return fmt.Errorf("%s: not killed by KillChassis", node)
	}
	script := []string{
		"set -e",
		`if [ "$(ovs-vsctl --no-wait get open . external_ids:ovn-managed-flow-restore-wait 2>/dev/null)" = '"true"' ]; then` +
			` ovs-vsctl --no-wait remove open . other_config flow-restore-wait -- remove open . external_ids ovn-managed-flow-restore-wait; echo cleared; fi`,
		"/usr/share/openvswitch/scripts/ovs-ctl start --system-id=" + node + " >/dev/null",
	}
	if k.brPhy != "" {
		script = append(script, "ip addr replace "+k.brPhy+" dev br-phy", "ip link set br-phy up")
	}
	script = append(script,
		`ssl=; case "$(ovs-vsctl get open . external_ids:ovn-remote)" in *ssl:*) ssl="--ovn-controller-ssl-key=/opt/ovn/ovn-privkey.pem --ovn-controller-ssl-cert=/opt/ovn/ovn-cert.pem --ovn-controller-ssl-ca-cert=/opt/ovn/pki/switchca/cacert.pem";; esac`,
		"/usr/share/ovn/scripts/ovn-ctl start_controller $ssl >/dev/null")
	out, err := o.Exec(node, "bash", "-c", strings.Join(script, "\n"))
	if err != nil {
		return err
	}
	o.mu.Lock()
	if strings.Contains(out, "cleared") {
		o.frwCleared = append(o.frwCleared, node)
	}
	delete(o.killed, node)
	if k.gateway {
		o.gateways = append(o.gateways, node)
		slices.Sort(o.gateways)
	} else {
		o.workers = append(o.workers, node)
		slices.Sort(o.workers)
	}
	o.mu.Unlock()
	return nil
}

// FlowRestoreWaitCleared are the nodes whose flow-restore-wait, left set
// by a killed ovn-controller, RestartChassis cleared.
func (o *OFM) FlowRestoreWaitCleared() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.frwCleared)
}

// hostPid is the host pid of pid nsPid in node's pid namespace.
func (o *OFM) hostPid(node string, nsPid int) (int, error) {
	root, err := o.pid(node)
	if err != nil {
		return 0, err
	}
	ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", root))
	if err != nil {
		return 0, err
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if l, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", p)); err != nil || l != ns {
			continue
		}
		st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(st), "\n") {
			if f := strings.Fields(line); len(f) > 1 && f[0] == "NSpid:" && f[len(f)-1] == strconv.Itoa(nsPid) {
				return p, nil
			}
		}
	}
	return 0, fmt.Errorf("%s: no host process for pid %d", node, nsPid)
}

// AddGateway is not offered: ovn-fake-multinode's gateways are those it
// was started with (GW_COUNT).
func (o *OFM) AddGateway(chassis, physnet string) error {
	return errors.New("ovn-fake-multinode: gateways are the ones ovn_cluster.sh started (GW_COUNT)")
}

// RemoveChassis deletes a chassis from the SB.
func (o *OFM) RemoveChassis(chassis string) error {
	_, err := o.SBCtl("chassis-del", chassis)
	if err == nil {
		o.mu.Lock()
		o.gateways, o.workers = without(o.gateways, chassis), without(o.workers, chassis)
		o.mu.Unlock()
	}
	return err
}

// Pids is empty: the cluster's processes are not this process's to stop.
func (o *OFM) Pids() []int { return nil }

// Logs are the nodes' OVN and OVS logs, seen from the host.
func (o *OFM) Logs() []string {
	var out []string
	for _, n := range append([]string{o.Central}, append(o.Gateways(), o.Workers()...)...) {
		for _, f := range []string{"/var/log/ovn/ovn-controller.log", "/var/log/openvswitch/ovs-vswitchd.log", "/var/log/ovn/ovn-northd.log"} {
			if p, err := o.root(n, f); err == nil {
				if _, err := os.Stat(p); err == nil {
					out = append(out, p)
				}
			}
		}
	}
	return out
}

// Stop removes what this OFM added (captures, VMs, the external namespace,
// background commands); the cluster runs on.
func (o *OFM) Stop() error {
	o.mu.Lock()
	bg := o.bg
	o.bg = nil
	nodes := map[string][]string{}
	for n, vms := range o.vms {
		nodes[n] = slices.Clone(vms)
	}
	// captures are background commands too
	o.captures = map[string]*ofmCapture{}
	ext := o.ext
	o.mu.Unlock()
	for _, b := range bg {
		o.stopBackground(b)
	}
	var errs []error
	for n, vms := range nodes {
		for _, vm := range vms {
			if err := o.DelVM(n, vm); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if ext {
		_, err := runCmd(exec.Command("bash", "-c", "ovs-vsctl --timeout=30 --if-exists del-port "+ofmExtBridge+" "+ofmExtIf+"-p; ip netns del "+OFMExternalNS))
		errs = append(errs, err)
		o.mu.Lock()
		o.ext = false
		o.mu.Unlock()
	}
	return errors.Join(errs...)
}
