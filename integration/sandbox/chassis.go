package sandbox

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Topology is what StartLocal builds.
type Topology struct {
	// Gateways are gateway candidates: ovn-cms-options=enable-chassis-as-gw,
	// a bridge br-ex mapped to PhysicalNetwork, and a wire port "ext0" on it.
	Gateways []string
	// Workers carry VM ports.
	Workers []string
	// PhysicalNetwork is the localnet network_name the gateways map
	// (default "physnet1").
	PhysicalNetwork string
}

// DefaultTopology is two gateway candidates and two workers.
func DefaultTopology() Topology {
	return Topology{Gateways: []string{"gw1", "gw2"}, Workers: []string{"hv1", "hv2"}, PhysicalNetwork: "physnet1"}
}

// ExternalPort is the gateways' wire to the external network.
const ExternalPort = "ext0"

// Local is a real multi-chassis OVN on this machine: Central plus, per
// chassis, an Open_vSwitch ovsdb-server, ovs-vswitchd on the userspace
// (dummy) datapath and ovn-controller. The chassis are joined by geneve over
// a simulated underlay: bridge n1 in a separate vswitchd ("main"), linked to
// each chassis's br-phys by a unix-socket dummy netdev. The underlay
// addresses exist only inside OVS; nothing reaches the host's network.
type Local struct {
	*Central
	Topology Topology
	chassis  []string
	encapIP  map[string]string
	// sims are the per-chassis daemons; stopped before Central's.
	sims daemons
	// killed are the command lines of the daemons of the chassis
	// KillChassis ended, for RestartChassis.
	killed map[string]map[string][]string
}

// StartLocal starts Central and the chassis of t under dir and waits until
// every chassis has registered in the SB. On error, whatever started is
// stopped.
func StartLocal(dir string, t Topology) (_ *Local, err error) {
	if t.PhysicalNetwork == "" {
		t.PhysicalNetwork = "physnet1"
	}
	if _, err := os.Stat(VSwitchSchema); err != nil {
		return nil, fmt.Errorf("this machine has no Open vSwitch (%w): run 'make deps'", err)
	}
	c, err := StartCentral(dir)
	if err != nil {
		return nil, err
	}
	l := &Local{Central: c, Topology: t, encapIP: map[string]string{}}
	defer func() {
		if err != nil {
			l.Stop()
		}
	}()
	return l, l.startChassis(t)
}

// StartLocalOnNBCluster is StartLocal on a Raft NB of members members
// (StartNBCluster, under dir/central): production's layout. The Local's
// Central names the cluster's endpoints (NB and NBTCP: every member) and
// runs no daemon of its own: stop the chassis (Local.Stop) before the
// cluster (NBCluster.Stop).
func StartLocalOnNBCluster(dir string, t Topology, members int) (_ *Local, _ *NBCluster, err error) {
	if t.PhysicalNetwork == "" {
		t.PhysicalNetwork = "physnet1"
	}
	if _, err := os.Stat(VSwitchSchema); err != nil {
		return nil, nil, fmt.Errorf("this machine has no Open vSwitch (%w): run 'make deps'", err)
	}
	nc, err := StartNBCluster(filepath.Join(dir, "central"), members)
	if err != nil {
		return nil, nil, err
	}
	l := &Local{Central: &Central{Dir: nc.Dir, NB: nc.NB, NBTCP: nc.NB, SB: nc.SB, SBTCP: nc.SBTCP}, Topology: t, encapIP: map[string]string{}}
	if err := l.startChassis(t); err != nil {
		return nil, nil, errors.Join(err, l.Stop(), nc.Stop())
	}
	return l, nc, nil
}

// startChassis starts the underlay and the chassis of t on l's SB and
// waits until each has registered.
func (l *Local) startChassis(t Topology) error {
	h := l.hosts()
	if err := h.underlay(); err != nil {
		return err
	}
	var arp []underlayMAC
	attach := func(name string, ip string) error {
		if err := h.simAdd(name); err != nil {
			return err
		}
		mac, err := h.attach(name, ip, l.SB)
		if err != nil {
			return err
		}
		arp = append(arp, underlayMAC{name, ip, mac})
		l.chassis = append(l.chassis, name)
		l.encapIP[name] = ip
		return nil
	}
	for i, gw := range t.Gateways {
		if err := attach(gw, fmt.Sprintf("192.168.0.%d", 1+i)); err != nil {
			return err
		}
		if err := h.gatewayWire(gw, t.PhysicalNetwork); err != nil {
			return err
		}
	}
	for i, hv := range t.Workers {
		if err := attach(hv, fmt.Sprintf("192.168.0.%d", 11+i)); err != nil {
			return err
		}
	}
	if err := h.neighbours(arp); err != nil {
		return err
	}
	for _, ch := range l.chassis {
		if err := poll(90*time.Second, "chassis "+ch+" in the SB", func() (bool, error) {
			out, err := l.SBCtl("--bare", "--columns=ip", "find", "Encap", "chassis_name="+ch)
			return strings.TrimSpace(out) != "", err
		}); err != nil {
			return err
		}
	}
	return nil
}

func (l *Local) simDir(sim string) string { return l.hosts().simDir(sim) }

// hosts is Local's chassis side: the simulated hosts under its directory.
func (l *Local) hosts() hosts { return hosts{root: l.Dir, ds: &l.sims} }

// simAdd starts chassis sim's Open_vSwitch ovsdb-server and ovs-vswitchd.
func (l *Local) simAdd(sim string) error { return l.hosts().simAdd(sim) }

// attach plugs sim into the underlay with ip and starts its ovn-controller
// on the SB; it returns br-phys's MAC.
func (l *Local) attach(sim, ip string) (string, error) { return l.hosts().attach(sim, ip, l.SB) }

// Exec runs an OVS/OVN command on chassis sim: ovs-vsctl, ovs-appctl and
// ovs-ofctl talk to that chassis's daemons.
func (l *Local) Exec(sim string, args ...string) (string, error) { return l.hosts().exec(sim, args...) }

// hosts are simulated hosts ("sims"), each in root/<name> with its own
// Open_vSwitch database and daemons, started into ds. Local and Zones
// build their chassis with it; only the SB an ovn-controller joins differs.
type hosts struct {
	root string
	ds   *daemons
}

func (h hosts) simDir(sim string) string { return filepath.Join(h.root, sim) }

// simAdd starts a private Open_vSwitch ovsdb-server and an ovs-vswitchd on
// the dummy datapath. --enable-dummy=system keeps geneve working
// (=override would turn the tunnel ports into plain dummies).
func (h hosts) simAdd(sim string) error {
	d := h.simDir(sim)
	if err := os.MkdirAll(d, 0o755); err != nil {
		return err
	}
	db := filepath.Join(d, "conf.db")
	if _, err := run(d, "ovsdb-tool", "create", db, VSwitchSchema); err != nil {
		return err
	}
	if err := h.ds.start(d, "ovsdb-server", "ovs-appctl", "--remote=punix:"+filepath.Join(d, "db.sock"), db); err != nil {
		return err
	}
	if _, err := run(d, "ovs-vsctl", "--no-wait", "init"); err != nil {
		return err
	}
	return h.ds.start(d, "ovs-vswitchd", "ovs-appctl", "--enable-dummy=system", "--disable-system", "--disable-system-route",
		"unix:"+filepath.Join(d, "db.sock"))
}

// underlay starts the sim "main" holding bridge n1, the simulated underlay
// every chassis's br-phys is linked to.
func (h hosts) underlay() error {
	if err := h.simAdd("main"); err != nil {
		return err
	}
	_, err := h.exec("main", "ovs-vsctl", "add-br", "n1")
	return err
}

// underlayMACOf is the MAC attach gives the br-phys whose address is ip
// (IPv4): fixed, so that it is known without asking vswitchd.
func underlayMACOf(ip string) (string, error) {
	a, err := netip.ParseAddr(ip)
	if err != nil || !a.Is4() {
		return "", fmt.Errorf("underlay address %q is not IPv4", ip)
	}
	b := a.As4()
	return fmt.Sprintf("0a:00:%02x:%02x:%02x:%02x", b[0], b[1], b[2], b[3]), nil
}

// attach plugs sim's br-phys into the underlay, gives it ip, and starts
// ovn-controller on the SB endpoint sb; it returns br-phys's MAC.
//
// The MAC is set (other_config:hwaddr, underlayMACOf), not read back:
// Interface:mac_in_use of a new bridge may still hold the dummy netdev's
// first MAC when add-br returns (vswitchd writes the bridge's own MAC in a
// later status update), and a peer's tunnel neighbour entry set to that
// stale MAC makes every tunnel packet to this chassis miss its tunnel
// port (vswitchd terminates geneve only for its bridge's MAC) until this
// chassis happens to send one back.
func (h hosts) attach(sim, ip, sb string) (string, error) {
	d := h.simDir(sim)
	link := sim + "_br-phys"
	sock := filepath.Join(h.simDir("main"), link+".sock")
	if _, err := h.exec("main", "ovs-vsctl", "--", "add-port", "n1", link,
		"--", "set", "Interface", link, "type=dummy", "options:pstream=punix:"+sock); err != nil {
		return "", err
	}
	mac, err := underlayMACOf(ip)
	if err != nil {
		return "", err
	}
	if _, err := h.exec(sim, "ovs-vsctl", "--", "add-br", "br-phys",
		"--", "set", "Bridge", "br-phys", "other_config:hwaddr="+mac,
		"--", "add-port", "br-phys", "br-phys_n1",
		"--", "set", "Interface", "br-phys_n1", "type=dummy", "options:stream=unix:"+sock); err != nil {
		return "", err
	}
	if _, err := h.exec(sim, "ovs-appctl", "netdev-dummy/ip4addr", "br-phys", ip+"/24"); err != nil {
		return "", err
	}
	if _, err := h.exec(sim, "ovs-appctl", "ovs/route/add", ip+"/24", "br-phys"); err != nil {
		return "", err
	}
	if _, err := h.exec(sim, "ovs-vsctl",
		"--", "set", "Open_vSwitch", ".",
		"external-ids:hostname="+sim, "external-ids:system-id="+sim,
		"external-ids:ovn-remote="+sb, "external-ids:ovn-encap-type=geneve", "external-ids:ovn-encap-ip="+ip,
		"--", "--may-exist", "add-br", "br-int",
		"--", "set", "bridge", "br-int", "fail-mode=secure", "other-config:disable-in-band=true"); err != nil {
		return "", err
	}
	if err := h.ds.start(d, "ovn-controller", "ovn-appctl", "unix:"+filepath.Join(d, "db.sock")); err != nil {
		return "", err
	}
	return mac, nil
}

// gatewayWire gives gateway sim the bridge br-ex with the wire port
// ExternalPort (tx and rx pcap), maps physnet to it and marks sim a
// gateway candidate.
func (h hosts) gatewayWire(sim, physnet string) error {
	d := h.simDir(sim)
	_, err := h.exec(sim, "ovs-vsctl",
		"--", "add-br", "br-ex",
		"--", "add-port", "br-ex", ExternalPort,
		"--", "set", "Interface", ExternalPort, "type=dummy",
		"options:tx_pcap="+filepath.Join(d, ExternalPort+"-tx.pcap"),
		"options:rxq_pcap="+filepath.Join(d, ExternalPort+"-rx.pcap"),
		"--", "set", "Open_vSwitch", ".",
		"external-ids:ovn-bridge-mappings="+physnet+":br-ex",
		"external-ids:ovn-cms-options=enable-chassis-as-gw")
	return err
}

// underlayMAC pairs a chassis with its underlay address and br-phys MAC.
type underlayMAC struct{ sim, ip, mac string }

// neighbours preloads each vswitchd's tunnel neighbour cache with every
// other chassis: the dummy netdevs have no kernel stack to resolve the
// tunnel endpoints.
func (h hosts) neighbours(all []underlayMAC) error {
	for _, a := range all {
		for _, b := range all {
			if a.sim != b.sim {
				if _, err := h.exec(b.sim, "ovs-appctl", "tnl/neigh/set", "br-phys", a.ip, a.mac); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// exec runs an OVS/OVN command on chassis sim (see Local.Exec).
func (h hosts) exec(sim string, args ...string) (string, error) {
	if len(args) == 0 {
		return "", errors.New("no command")
	}
	d := h.simDir(sim)
	prog := args[0]
	args = args[1:]
	switch prog {
	case "ovs-appctl":
		if len(args) == 0 || args[0] != "-t" {
			args = append([]string{"-t", filepath.Join(d, "ovs-vswitchd.ctl")}, args...)
		}
	case "ovn-appctl":
		if len(args) == 0 || args[0] != "-t" {
			b, err := os.ReadFile(filepath.Join(d, "ovn-controller.pid"))
			if err != nil {
				return "", fmt.Errorf("%s: no ovn-controller: %w", sim, err)
			}
			pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
			if err != nil {
				return "", fmt.Errorf("%s: bad ovn-controller pid file: %w", sim, err)
			}
			args = append([]string{"-t", ctlPath(d, "ovn-controller", pid)}, args...)
		}
	}
	return run(d, prog, args...)
}

// addVMPort adds a dummy interface port on sim's br-int bound to the
// logical switch port ifaceID, capturing what it sends and receives.
func (h hosts) addVMPort(sim, port, ifaceID string) error {
	d := h.simDir(sim)
	_, err := h.exec(sim, "ovs-vsctl", "--", "add-port", "br-int", port,
		"--", "set", "Interface", port, "type=dummy", "external-ids:iface-id="+ifaceID,
		"options:tx_pcap="+filepath.Join(d, port+"-tx.pcap"),
		"options:rxq_pcap="+filepath.Join(d, port+"-rx.pcap"))
	return err
}

// stop stops the chassis daemons: ovn-controllers first, while their SB is
// up, so that they remove their chassis; then the rest in reverse order.
func (h hosts) stop() error {
	var ctrl, rest []daemon
	for _, d := range h.ds.list {
		if d.name == "ovn-controller" {
			ctrl = append(ctrl, d)
		} else {
			rest = append(rest, d)
		}
	}
	var errs []error
	for _, group := range [][]daemon{ctrl, rest} {
		ds := daemons{list: group}
		errs = append(errs, ds.Stop())
	}
	h.ds.list = nil
	return errors.Join(errs...)
}

// AddVMPort adds a dummy interface port on sim's br-int bound to the
// logical switch port ifaceID, capturing what it sends and receives.
func (l *Local) AddVMPort(sim, port, ifaceID string) error {
	return l.hosts().addVMPort(sim, port, ifaceID)
}

// DelVMPort removes a port added by AddVMPort.
func (l *Local) DelVMPort(sim, port string) error {
	_, err := l.Exec(sim, "ovs-vsctl", "--if-exists", "del-port", "br-int", port)
	return err
}

// Inject makes port on sim receive the Ethernet frame, as if from its wire.
func (l *Local) Inject(sim, port string, frame []byte) error {
	_, err := l.Exec(sim, "ovs-appctl", "netdev-dummy/receive", port, fmt.Sprintf("%x", frame))
	return err
}

// CapturePath is the pcap file of what port on sim has sent.
func (l *Local) CapturePath(sim, port string) string {
	return filepath.Join(l.simDir(sim), port+"-tx.pcap")
}

// Stop stops the chassis (ovn-controllers first, while the SB is up, so
// that they remove their chassis), then Central.
func (l *Local) Stop() error {
	return errors.Join(l.hosts().stop(), l.Central.Stop())
}

// Pids returns the pids of every daemon of the sandbox.
func (l *Local) Pids() []int { return append(l.Central.Pids(), l.sims.Pids()...) }

// Logs lists every daemon's log file.
func (l *Local) Logs() []string { return append(l.Central.Logs(), l.sims.Logs()...) }

// poll calls cond every 20 ms until it is true, fails, or timeout passes.
func poll(timeout time.Duration, what string, cond func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	var lastErr error
	for {
		ok, err := cond()
		if ok {
			return nil
		}
		lastErr = err
		if time.Now().After(deadline) {
			if lastErr != nil {
				return fmt.Errorf("timed out after %s waiting for %s: %w", timeout, what, lastErr)
			}
			return fmt.Errorf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Poll is poll for tests: it waits for a condition with a deadline.
func Poll(timeout time.Duration, what string, cond func() (bool, error)) error {
	return poll(timeout, what, cond)
}
