package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubevirt-ovn/kubevirt-ovn/integration/sandbox"
)

// The addresses of deploy/examples, and a destination outside. They exist
// only inside packets on the sandbox's dummy netdevs.
const (
	routerMAC = "fa:16:3e:00:00:01"
	gwPortMAC = "0a:58:ac:10:00:64" // 0a:58 + 172.16.0.100
	snatIP    = "172.16.0.100"
	peerIP    = "172.16.0.1"
	peerMAC   = "00:00:00:00:ee:01"
	remoteIP  = "198.51.100.7" // TEST-NET-2
	vmAMAC    = "50:54:00:00:00:05"
	vmAIP     = "10.10.0.5"
	vmBMAC    = "50:54:00:00:00:06"
	vmBIP     = "10.20.0.6"
	vmAPort   = "kv-net-a_default_vm-a_eth1"
	vmBPort   = "kv-net-b_default_vm-b_eth1"
	gwPort    = "kv-rtoe-router1"
	crPort    = "cr-kv-rtoe-router1"
)

// env is a real OVN with two gateway candidates (gw1, gw2) and two workers
// (hv1 with vm-a, hv2 with vm-b), and the manifests of deploy/examples in a
// directory the test may edit. After the test it checks that a second sync
// writes nothing and that the ovn-kubernetes-like rows seeded at the start
// are unchanged, then stops every daemon.
type env struct {
	traffic
	t         *testing.T
	l         sandbox.Deployment
	manifests string
	foreign   string
	// flags are extra flags of every sync the env runs.
	flags []string
}

// traffic sends frames into chassis ports and reads what ports sent, on
// any deployment's chassis (Local's or Zones').
type traffic struct {
	t *testing.T
	c sandbox.Chassis
}

// newOVN starts the deployment with vm-a and vm-b plugged in.
func newOVN(t *testing.T) *env {
	t.Helper()
	dir := t.TempDir()
	l, err := sandbox.Start(filepath.Join(dir, "ovn"))
	require.NoError(t, err)
	e := &env{traffic: traffic{t, l}, t: t, l: l}
	stopWhenDone(t, filepath.Join(dir, "ovn"), l)
	require.NoError(t, l.AddVMPort("hv1", "vm-a", vmAPort))
	require.NoError(t, l.AddVMPort("hv2", "vm-b", vmBPort))
	return e
}

// newEnv is newOVN with the examples to edit, ovn-kubernetes-like rows
// seeded, and the after-scenario checks.
func newEnv(t *testing.T) *env {
	t.Helper()
	e := newOVN(t)
	e.manifests = examples(t)
	e.seedForeign()
	t.Cleanup(e.checkInvariants)
	return e
}

// seedForeign writes rows the way ovn-kubernetes would, with its own
// external_ids, and remembers how they read.
func (e *env) seedForeign() { e.foreign = seedForeignRows(e.t, e.l) }

func (e *env) dumpForeign() string { return dumpForeignRows(e.t, e.l) }

// nbCtler runs ovn-nbctl against some NB: a Deployment or a Central.
type nbCtler interface {
	NBCtl(...string) (string, error)
}

// seedForeignRows writes rows the way ovn-kubernetes would, with its own
// external_ids, and returns how they read (dumpForeignRows), to be compared
// at the end of a test: they must be byte-identical.
func seedForeignRows(t *testing.T, c nbCtler) string {
	t.Helper()
	writeForeignRows(t, c)
	// northd writes into them too (a port's up column): let it finish, so
	// that what is remembered is what stays.
	nbctl(t, c, "--wait=sb", "sync")
	return dumpForeignRows(t, c)
}

// writeForeignRows writes the ovn-kubernetes-like rows (no northd needed).
func writeForeignRows(t *testing.T, c nbCtler) {
	t.Helper()
	ids := []string{"external_ids:k8s.ovn.org/owner-type=Node", "external_ids:k8s.ovn.org/name=node1"}
	cmds := [][]string{
		{"ls-add", "node1"},
		{"lsp-add", "node1", "default_pod1"},
		{"lsp-set-addresses", "default_pod1", "0a:58:0a:f4:00:05 10.244.0.5"},
		{"lr-add", "GR_node1"},
		{"lrp-add", "GR_node1", "rtoe-GR_node1", "0a:58:ac:10:00:02", "172.16.0.2/24"},
		{"lr-nat-add", "GR_node1", "snat", "172.16.0.2", "10.244.0.0/16"},
		{"lr-route-add", "GR_node1", "0.0.0.0/0", "172.16.0.1"},
	}
	for _, cmd := range cmds {
		nbctl(t, c, cmd...)
	}
	nat := strings.TrimSpace(nbctl(t, c, "--bare", "--columns=_uuid", "find", "NAT", `logical_ip="10.244.0.0/16"`))
	route := strings.TrimSpace(nbctl(t, c, "--bare", "--columns=_uuid", "find", "Logical_Router_Static_Route", `nexthop="172.16.0.1"`))
	require.NotEmpty(t, nat)
	require.NotEmpty(t, route)
	for _, row := range [][]string{
		{"Logical_Switch", "node1"}, {"Logical_Switch_Port", "default_pod1"}, {"Logical_Router", "GR_node1"},
		{"Logical_Router_Port", "rtoe-GR_node1"}, {"NAT", nat}, {"Logical_Router_Static_Route", route},
	} {
		nbctl(t, c, append([]string{"set", row[0], row[1]}, ids...)...)
	}
}

// keepForeign seeds ovn-kubernetes-like rows into c's NB and checks, when
// the test ends, that they read byte-identical.
func keepForeign(t *testing.T, c nbCtler) {
	t.Helper()
	foreign := seedForeignRows(t, c)
	t.Cleanup(func() {
		if !t.Failed() {
			assert.Equal(t, foreign, dumpForeignRows(t, c), "ovn-kubernetes-like rows must be identical")
		}
	})
}

func dumpForeignRows(t *testing.T, c nbCtler) string {
	t.Helper()
	var b strings.Builder
	for _, q := range [][]string{
		{"list", "Logical_Switch", "node1"},
		{"list", "Logical_Switch_Port", "default_pod1"},
		{"list", "Logical_Router", "GR_node1"},
		{"list", "Logical_Router_Port", "rtoe-GR_node1"},
		{"find", "NAT", "external_ids:k8s.ovn.org/name=node1"},
		{"find", "Logical_Router_Static_Route", "external_ids:k8s.ovn.org/name=node1"},
	} {
		b.WriteString(nbctl(t, c, q...))
	}
	return b.String()
}

// checkInvariants: scenario 12 (a second sync writes zero rows) and
// scenario 9's second half (foreign rows identical), after every scenario.
func (e *env) checkInvariants() {
	if e.t.Failed() {
		return
	}
	r := kubevirtOVN(e.t, e.syncArgs()...)
	assert.Equal(e.t, 0, r.code)
	assert.Equal(e.t, "no changes\n", r.stdout, "a second sync after the scenario must write nothing")
	assert.Equal(e.t, e.foreign, e.dumpForeign(), "ovn-kubernetes-like rows must be identical")
}

func (e *env) syncArgs(extra ...string) []string {
	args := append([]string{"sync", "--nb", e.l.NBEndpoint(), "--sb", e.l.SBEndpoint(), "--from-file", e.manifests}, e.flags...)
	return append(args, extra...)
}

// sync runs kubevirt-ovn sync and waits until every chassis has realized
// the result.
func (e *env) sync() string {
	e.t.Helper()
	r := kubevirtOVN(e.t, e.syncArgs()...)
	require.Equal(e.t, 0, r.code, "kubevirt-ovn sync failed:\n%s", r.stderr)
	nbctl(e.t, e.l, "--timeout=90", "--wait=hv", "sync")
	return r.stdout
}

// edit replaces old by new in one of the manifests.
func (e *env) edit(file, old, new string) {
	e.t.Helper()
	edit(e.t, filepath.Join(e.manifests, file), old, new)
}

// write replaces a manifest file.
func (e *env) write(file, content string) {
	e.t.Helper()
	require.NoError(e.t, os.WriteFile(filepath.Join(e.manifests, file), []byte(content), 0o644))
}

// ready waits until the VM ports are up and the gateway port is active on
// gw for every chassis that must reach it (the gateways and bfdWorkers).
func (e *env) ready(gw string, bfdWorkers ...string) {
	e.t.Helper()
	for _, p := range []string{vmAPort, vmBPort} {
		nbctl(e.t, e.l, "--timeout=90", "wait-until", "Logical_Switch_Port", p, "up=true")
	}
	require.NoError(e.t, sandbox.WaitGateway(e.l, crPort, gw, bfdWorkers...))
}

// wire is the capture of the external wire of gateway gw.
func (p traffic) wire(gw string) capture { return p.capture(gw, sandbox.ExternalPort) }

// vm is the capture of what a VM port receives (what OVS sends to the VM).
func (p traffic) vm(sim, port string) capture { return p.capture(sim, port) }

func (p traffic) capture(sim, port string) capture {
	return capture{name: sim + ":" + port, read: func() ([]seen, error) { return p.c.Capture(sim, port) }}
}

// send makes a VM (on sim, port) send UDP to the outside through its
// router.
func (p traffic) send(sim, port, srcMAC, srcIP string, sport, dport uint16) {
	p.t.Helper()
	f := frame{SrcMAC: srcMAC, DstMAC: routerMAC, SrcIP: srcIP, DstIP: remoteIP, TTL: 64, SPort: sport, DPort: dport}
	require.NoError(p.t, p.c.Inject(sim, port, frameBytes(p.t, f)))
}

// vmSends puts frame f on VM port port of chassis sim, as the VM sends it.
func (p traffic) vmSends(sim, port string, f frame) {
	p.t.Helper()
	require.NoError(p.t, p.c.Inject(sim, port, frameBytes(p.t, f)))
}

// inject puts a frame on gateway gw's external wire.
func (p traffic) inject(gw string, f frame) {
	p.t.Helper()
	require.NoError(p.t, p.c.Inject(gw, sandbox.ExternalPort, frameBytes(p.t, f)))
}

// replyTo is the remote's UDP reply to a packet seen leaving SNATed.
func replyTo(out seen, vlan uint16) frame {
	return frame{SrcMAC: peerMAC, DstMAC: gwPortMAC, VLAN: vlan, SrcIP: remoteIP, DstIP: snatIP, TTL: 64, SPort: out.DPort, DPort: out.SPort}
}

// snated matches a packet of the flow (dport) leaving SNATed.
func snated(dport uint16) func(seen) bool {
	return func(s seen) bool {
		return s.IsUDP && s.SrcIP == snatIP && s.DstIP == remoteIP && s.DPort == dport
	}
}

// fromVM matches a packet of the flow (dport) from a VM IP, whatever its
// source address became.
func flow(dport uint16) func(seen) bool {
	return func(s seen) bool { return s.IsUDP && s.DstIP == remoteIP && s.DPort == dport }
}

func readFile(t *testing.T, dir, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	require.NoError(t, err)
	return string(b)
}

// pollMACBinding waits until the SB has learned ip's MAC.
func pollMACBinding(e *env, ip, mac string) error {
	return sandbox.Poll(60*time.Second, "SB MAC_Binding "+ip+" "+mac, func() (bool, error) {
		out, err := e.l.SBCtl("--bare", "--columns=mac", "find", "MAC_Binding", "ip="+ip)
		return strings.Contains(out, mac), err
	})
}

// manyRouters writes n routers, each with SNAT, a peer with a MAC and
// its own internal network with one VM, on a shared FLAT external network:
// the shape of deploy/examples, n times.
func manyRouters(t *testing.T, n int) string {
	t.Helper()
	dir := t.TempDir()
	var nets, routers, vmis strings.Builder
	nets.WriteString(`apiVersion: k8s.cni.cncf.io/v1
kind: NetworkAttachmentDefinition
metadata: {name: public, namespace: default, annotations: {network-config: '{"type": "FLAT", "physicalNetworkName": "physnet1", "cidr": "172.16.0.0/16", "gatewayIp": "172.16.0.1"}'}}
`)
	for i := 0; i < n; i++ {
		fmt.Fprintf(&nets, `---
apiVersion: k8s.cni.cncf.io/v1
kind: NetworkAttachmentDefinition
metadata: {name: net-%03d, namespace: default, annotations: {network-config: '{"type": "GENEVE", "cidr": "10.%d.%d.0/24", "gatewayIp": "10.%d.%d.1"}'}}
`, i, 100+i/256, i%256, 100+i/256, i%256)
		fmt.Fprintf(&routers, `---
apiVersion: kubevirt.io/v1
kind: VirtualRouter
metadata: {name: rt-%03d}
spec:
  enableSnat: true
  internal: [net-%03d]
  external: {ip: %s, network: public}
  peerRouter: {ip: 172.16.0.1, mac: "00:00:00:00:ee:01"}
  gateway: gw1
`, i, i, manySNAT(i))
		fmt.Fprintf(&vmis, `---
apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata: {name: vm-%03d, namespace: default}
spec: {networks: [{name: eth1, multus: {networkName: net-%03d}}]}
status: {interfaces: [{name: eth1, mac: "50:54:00:00:%02x:%02x", ipAddress: 10.%d.%d.5}]}
`, i, i, i/256, i%256, 100+i/256, i%256)
	}
	for f, s := range map[string]string{"networks.yaml": nets.String(), "routers.yaml": routers.String(), "vmis.yaml": vmis.String()} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, f), []byte(s), 0o644))
	}
	return dir
}

// manySNAT is router i's SNAT IP.
func manySNAT(i int) string { return fmt.Sprintf("172.16.%d.%d", 1+i/250, 2+i%250) }

// EnvReport names a file measured numbers are appended to: `make test`
// prints it at the end (go test shows a passing test's output only with -v).
const EnvReport = "KUBEVIRT_OVN_REPORT"

// report logs a measurement and appends it to the EnvReport file.
func report(t *testing.T, msg string) {
	t.Helper()
	t.Log(msg)
	path := os.Getenv(EnvReport)
	if path == "" {
		return
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	require.NoError(t, err)
	defer f.Close()
	rel, _ := sandbox.CurrentRelease()
	_, err = fmt.Fprintf(f, "OVN %s: %s: %s\n", rel.Version, t.Name(), msg)
	require.NoError(t, err)
}

// stopWhenDone stops the sandbox in dir (its daemons: d) when the test
// ends, keeping a copy of dir when it failed, and checks that no daemon is
// left.
func stopWhenDone(t *testing.T, dir string, d interface {
	Pids() []int
	Logs() []string
	Stop() error
}) {
	t.Cleanup(func() {
		if t.Failed() {
			keep, _ := os.MkdirTemp("", "kubevirt-ovn-failed-")
			_ = exec.Command("cp", "-r", dir, keep).Run()
			t.Logf("OVN logs and captures kept in %s (logs: %s)", keep, strings.Join(d.Logs(), " "))
		}
		pids := d.Pids()
		stop := time.Now()
		assert.NoError(t, d.Stop())
		t.Logf("stopped %d daemons in %s", len(pids), time.Since(stop).Round(time.Millisecond))
		for _, pid := range pids {
			assert.False(t, sandbox.Alive(pid), "daemon pid %d left behind", pid)
		}
	})
}
