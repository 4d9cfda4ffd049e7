//go:build ofm

// Package ofm is kubevirt-ovn's packet suite on an ovn-fake-multinode
// cluster: `make test-ofm` (ofm.sh test) starts one and runs it; against a
// cluster started another way, `go test -tags ofm ./integration/ofm/`
// (integration/README.md). VMs are namespaces with real kernel stacks in
// the chassis containers; the external network's peer router is a host
// namespace; traffic is ping, nc, socat and arping, captured by tcpdump.
package ofm

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubevirt-ovn/kubevirt-ovn/integration/sandbox"
	"github.com/kubevirt-ovn/kubevirt-ovn/integration/wire"
)

// The scenario: deploy/examples' networks, router and VMIs, placed on
// ovn-fake-multinode's nodes.
const (
	snatIP    = "172.16.0.100"
	peerIP    = "172.16.0.1"
	peerMAC   = "00:00:00:00:ee:01"
	remoteIP  = "192.168.200.10"    // a host beyond the peer router
	routerMAC = "fa:16:3e:00:00:01" // its internal ports'
	crPort    = "cr-kv-rtoe-router1"
	gw1, gw2  = "ovn-gw-1", "ovn-gw-2"
	hv1, hv2  = "ovn-chassis-1", "ovn-chassis-2"
	tcpPort   = "8080"
	udpPort   = "5001"
)

var (
	vmA = vmSpec{name: "vma", vmi: "vm-a", network: "net-a", mac: "50:54:00:00:00:05", ip: "10.10.0.5", gw: "10.10.0.1"}
	vmB = vmSpec{name: "vmb", vmi: "vm-b", network: "net-b", mac: "50:54:00:00:00:06", ip: "10.20.0.6", gw: "10.20.0.1"}
)

type vmSpec struct{ name, vmi, network, mac, ip, gw string }

// gatewayMAC is router1's gateway port MAC, as the NB has it.
func gatewayMAC(t *testing.T) string {
	t.Helper()
	out, err := cluster.NBCtl("get", "Logical_Router_Port", "kv-rtoe-router1", "mac")
	require.NoError(t, err)
	return strings.Trim(strings.TrimSpace(out), `"`)
}

func (v vmSpec) lsp() string { return "kv-" + v.network + "_default_" + v.vmi + "_eth1" }

// input is what a test declares: the router's gateway, its internal
// networks, the external network's VLAN and where each VM runs.
type input struct {
	gateway  string
	internal []string
	vlan     int
	noRouter bool
	nodes    map[string]string // vmi -> node
	// migration is a VMI's status.migrationState lines (KubeVirt's
	// field names, indented under it), by VMI.
	migration map[string]string
}

func defaults() input {
	return input{gateway: gw1, internal: []string{"net-a", "net-b"}, nodes: map[string]string{"vm-a": hv1, "vm-b": hv2}}
}

func (in input) files() map[string]string {
	ext := `"type": "FLAT"`
	if in.vlan != 0 {
		ext = fmt.Sprintf(`"type": "VLAN", "segmentId": "%d"`, in.vlan)
	}
	nets := `apiVersion: k8s.cni.cncf.io/v1
kind: NetworkAttachmentDefinition
metadata:
  name: public
  namespace: default
  annotations:
    network-config: '{` + ext + `, "mtu": 1500, "physicalNetworkName": "public", "cidr": "172.16.0.0/24", "gatewayIp": "172.16.0.1"}'
spec:
  config: '{"cniVersion": "0.3.1", "type": "kubevirt-ovn", "name": "public"}'
---
apiVersion: k8s.cni.cncf.io/v1
kind: NetworkAttachmentDefinition
metadata:
  name: net-a
  namespace: default
  annotations:
    network-config: '{"type": "GENEVE", "mtu": 1400, "segmentId": "100", "cidr": "10.10.0.0/24", "gatewayIp": "10.10.0.1"}'
spec:
  config: '{"cniVersion": "0.3.1", "type": "kubevirt-ovn", "name": "net-a"}'
---
apiVersion: k8s.cni.cncf.io/v1
kind: NetworkAttachmentDefinition
metadata:
  name: net-b
  namespace: default
  annotations:
    network-config: '{"type": "GENEVE", "mtu": 1400, "segmentId": 200, "cidr": "10.20.0.0/24", "gatewayIp": "10.20.0.1"}'
spec:
  config: '{"cniVersion": "0.3.1", "type": "kubevirt-ovn", "name": "net-b"}'
`
	var vmis []string
	for _, v := range []vmSpec{vmA, vmB} {
		vmis = append(vmis, `apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata:
  name: `+v.vmi+`
  namespace: default
spec:
  networks:
    - name: eth1
      multus:
        networkName: `+v.network+`
status:
  nodeName: `+in.nodes[v.vmi]+`
  interfaces:
    - name: eth1
      mac: "`+v.mac+`"
      ipAddress: `+v.ip+`
`+in.migrationState(v.vmi))
	}
	out := map[string]string{"networks.yaml": nets, "vmis.yaml": strings.Join(vmis, "---\n")}
	if !in.noRouter {
		out["router.yaml"] = `apiVersion: kubevirt.io/v1
kind: VirtualRouter
metadata:
  name: router1
spec:
  name: router1
  mac: "` + routerMAC + `"
  enableSnat: true
  internal: [` + strings.Join(in.internal, ", ") + `]
  external:
    ip: ` + snatIP + `
    network: public
  peerRouter:
    ip: ` + peerIP + `
    mac: "` + peerMAC + `"
  gateway: ` + in.gateway + `
`
	}
	return out
}

// migrationState is vmi's status.migrationState, "" without one.
func (in input) migrationState(vmi string) string {
	if in.migration[vmi] == "" {
		return ""
	}
	return "  migrationState:\n" + in.migration[vmi]
}

var (
	cluster *sandbox.OFM
	bin     string
	report  = os.Getenv("KUBEVIRT_OVN_REPORT")
)

func TestMain(m *testing.M) {
	os.Exit(func() int {
		dir, err := os.MkdirTemp("", "kubevirt-ovn-ofm-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		bin = filepath.Join(dir, "kubevirt-ovn")
		if out, err := exec.Command("go", "build", "-o", bin, "../../cmd/kubevirt-ovn").CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "build: %v\n%s", err, out)
			return 1
		}
		cluster, err = sandbox.AttachOFM(dir)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer func() {
			if err := cluster.Stop(); err != nil {
				fmt.Fprintln(os.Stderr, "ofm: cleaning up:", err)
			}
		}()
		return m.Run()
	}())
}

// env is one test's view: its manifests, its VMs and the external peer.
type env struct {
	t       *testing.T
	dir     string
	foreign string
}

// newEnv plugs vm-a and vm-b where in places them, makes the external
// peer (VLAN in.vlan) with the remote host behind it, starts the remote's
// TCP and UDP servers, seeds ovn-kubernetes-like rows, and syncs in. Its
// cleanup removes every row of ours (a sync of no router), the VMs and the
// foreign rows, and fails when a foreign row changed.
func newEnv(t *testing.T, in input) *env {
	e := &env{t: t, dir: t.TempDir()}
	require.NoError(t, cluster.External(peerMAC, peerIP+"/24", in.vlan, remoteIP+"/32"))
	removeForeign(t)
	e.foreign = seedForeign(t)
	// cleanups run last first
	t.Cleanup(func() {
		removeForeign(t)
		for _, v := range []vmSpec{vmA, vmB} {
			for _, n := range cluster.Workers() {
				_ = cluster.DelVM(n, v.name)
			}
		}
	})
	t.Cleanup(func() {
		if t.Failed() {
			e.dumpOnFailure()
		}
		e.writeInput(input{noRouter: true, nodes: in.nodes})
		e.sync("--allow-empty")
		assert.Equal(t, e.foreign, dumpForeign(t), "ovn-kubernetes-like rows changed")
	})
	e.servers()
	for _, v := range []vmSpec{vmA, vmB} {
		e.plug(v, in.nodes[v.vmi])
	}
	e.apply(in)
	for _, v := range []vmSpec{vmA, vmB} {
		require.NoError(t, cluster.WaitBound(in.nodes[v.vmi], v.lsp()))
	}
	return e
}

func (e *env) plug(v vmSpec, node string) {
	require.NoError(e.t, cluster.AddVM(node, sandbox.VM{Name: v.name, IfaceID: v.lsp(), MAC: v.mac, CIDR: v.ip + "/24", Gateway: v.gw}))
}

// servers are the remote host's: TCP and UDP answering each peer with the
// line it sent and the address and port it came from, as the remote saw
// them.
func (e *env) servers() {
	reply := `read l; echo "$l from $SOCAT_PEERADDR:$SOCAT_PEERPORT"`
	for _, args := range [][]string{
		{"socat", "TCP4-LISTEN:" + tcpPort + ",bind=" + remoteIP + ",fork,reuseaddr", "SYSTEM:" + reply},
		{"socat", "-T", "2", "UDP4-RECVFROM:" + udpPort + ",bind=" + remoteIP + ",fork", "SYSTEM:" + reply},
	} {
		stop, _, err := cluster.Background("", sandbox.OFMExternalNS, args...)
		require.NoError(e.t, err)
		e.t.Cleanup(stop)
	}
}

func (e *env) writeInput(in input) {
	for _, f := range []string{"router.yaml", "networks.yaml", "vmis.yaml"} {
		_ = os.Remove(filepath.Join(e.dir, f))
	}
	for name, content := range in.files() {
		require.NoError(e.t, os.WriteFile(filepath.Join(e.dir, name), []byte(content), 0o644))
	}
}

// apply writes in and syncs it, then waits for ovn-controllers to realize
// it and, with a router, for its gateway port on in.gateway with BFD up.
func (e *env) apply(in input) {
	e.writeInput(in)
	e.sync()
	if in.noRouter {
		return
	}
	// chassis with a VM on one of the router's networks hold BFD sessions
	// to the gateways; others none
	var bfd []string
	for _, v := range []vmSpec{vmA, vmB} {
		if slices.Contains(in.internal, v.network) && !slices.Contains(bfd, in.nodes[v.vmi]) {
			bfd = append(bfd, in.nodes[v.vmi])
		}
	}
	e.gatewayOn(in.gateway, bfd...)
}

func (e *env) sync(extra ...string) string {
	e.t.Helper()
	args := append([]string{"sync", "--nb", cluster.NBEndpoint(), "--sb", cluster.SBEndpoint(), "--from-file", e.dir}, extra...)
	out, err := exec.Command(bin, args...).CombinedOutput()
	require.NoError(e.t, err, "kubevirt-ovn %s:\n%s", strings.Join(args, " "), out)
	_, err = cluster.NBCtl("--wait=hv", "sync")
	require.NoError(e.t, err)
	return string(out)
}

// gatewayOn waits until router1's gateway port is active on gw and every
// BFD session of the gateways and of the chassis is up, with some on each
// of bfd.
func (e *env) gatewayOn(gw string, bfd ...string) {
	e.t.Helper()
	require.NoError(e.t, sandbox.WaitGateway(cluster, crPort, gw, bfd...))
}

// tcp connects from a VM to the remote with source port sport and returns
// the remote's answer: "<line> from <address>:<port>" as it saw the
// connection, or an error.
func tcp(node string, v vmSpec, sport int) (string, error) {
	return cluster.InVM(node, v.name, "bash", "-c", fmt.Sprintf("echo %s | nc -w 5 -p %d %s %s", v.vmi, sport, remoteIP, tcpPort))
}

// udp is tcp over UDP.
func udp(node string, v vmSpec, sport int) (string, error) {
	return cluster.InVM(node, v.name, "bash", "-c", fmt.Sprintf("echo %s | nc -u -w 2 -p %d %s %s", v.vmi, sport, remoteIP, udpPort))
}

// seenFrom parses the remote's answer to v: the source address and port
// the remote saw.
func seenFrom(t *testing.T, v vmSpec, answer string) (string, int) {
	t.Helper()
	answer = strings.TrimSpace(answer)
	prefix := v.vmi + " from "
	require.True(t, strings.HasPrefix(answer, prefix), "answer to %s: %q", v.vmi, answer)
	host, port, ok := strings.Cut(strings.TrimPrefix(answer, prefix), ":")
	require.True(t, ok, "answer to %s: %q", v.vmi, answer)
	p, err := strconv.Atoi(port)
	require.NoError(t, err, "answer to %s: %q", v.vmi, answer)
	return host, p
}

// capture is what a node's port sent (node "" port "": what the external
// peer received).
type capture struct{ node, port string }

func wireOf(node string) capture { return capture{node, sandbox.ExternalPort} }

var peer = capture{"", ""}

func (c capture) String() string {
	if c.node == "" {
		return "the external peer"
	}
	return c.node + "/" + c.port
}

func (c capture) read(t *testing.T) []wire.Seen {
	t.Helper()
	ps, err := cluster.Capture(c.node, c.port)
	require.NoError(t, err)
	return ps
}

// mark is how many packets c holds now: later checks look after it.
func (c capture) mark(t *testing.T) int { return len(c.read(t)) }

// waitSeen waits until a packet after skip matches (captures are written
// as tcpdump sees packets, a moment after they pass).
func (c capture) waitSeen(t *testing.T, what string, skip int, match func(wire.Seen) bool) wire.Seen {
	t.Helper()
	var ps []wire.Seen
	err := sandbox.Poll(30*time.Second, what+" on "+c.String(), func() (bool, error) {
		ps = c.read(t)
		for i := skip; i < len(ps); i++ {
			if match(ps[i]) {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		require.FailNowf(t, "packet not seen", "%s: not seen on %s; packets there:\n%s", what, c, wire.Describe(ps[min(skip, len(ps)):]))
	}
	for i := skip; i < len(ps); i++ {
		if match(ps[i]) {
			return ps[i]
		}
	}
	panic("unreachable")
}

// none fails when a packet after skip matches. Call it after a barrier:
// the same exchange seen complete elsewhere, then a tcpdump flush.
func (c capture) none(t *testing.T, what string, skip int, match func(wire.Seen) bool) {
	t.Helper()
	// tcpdump -U writes each packet as it sees it; a short wait covers the
	// time between the barrier and the write.
	time.Sleep(500 * time.Millisecond)
	ps := c.read(t)
	for i := skip; i < len(ps); i++ {
		if match(ps[i]) {
			require.FailNowf(t, "unexpected packet", "%s: seen on %s: %s", what, c, ps[i])
		}
	}
}

func (e *env) dumpOnFailure() {
	for _, args := range [][]string{{"show"}, {"list", "NAT"}, {"list", "Gateway_Chassis"}} {
		out, _ := cluster.NBCtl(args...)
		e.t.Logf("ovn-nbctl %s:\n%s", strings.Join(args, " "), out)
	}
	out, _ := cluster.SBCtl("show")
	e.t.Logf("ovn-sbctl show:\n%s", out)
}

// reportf appends a measured line to KUBEVIRT_OVN_REPORT and logs it.
func reportf(t *testing.T, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	t.Log(msg)
	if report == "" {
		return
	}
	f, err := os.OpenFile(report, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err == nil {
		fmt.Fprintln(f, msg)
		f.Close()
	}
}

// Foreign rows: what ovn-kubernetes writes beside us on the same NB (a
// node switch with a pod port, its cluster router with a route and an SNAT,
// its join switch), none with our owner keys.
const foreignSeed = `-- ls-add ovnk-node1 -- set Logical_Switch ovnk-node1 other_config:subnet=10.244.1.0/24 external_ids:k8s.ovn.org/network=default
-- lsp-add ovnk-node1 ovnk-pod1 -- lsp-set-addresses ovnk-pod1 "0a:58:0a:f4:01:05 10.244.1.5" -- set Logical_Switch_Port ovnk-pod1 external_ids:pod=true
-- lr-add ovn_cluster_router -- set Logical_Router ovn_cluster_router external_ids:k8s-cluster-router=yes
-- lr-route-add ovn_cluster_router 10.244.0.0/16 100.64.0.2
-- lr-nat-add ovn_cluster_router snat 172.16.0.200 10.244.1.0/24
-- ls-add join`

func seedForeign(t *testing.T) string {
	t.Helper()
	var args []string
	for _, line := range strings.Split(foreignSeed, "\n") {
		args = append(args, splitArgs(line)...)
	}
	_, err := cluster.NBCtl(args...)
	require.NoError(t, err)
	return dumpForeign(t)
}

func removeForeign(t *testing.T) {
	_, err := cluster.NBCtl("--if-exists", "ls-del", "ovnk-node1", "--", "--if-exists", "lr-del", "ovn_cluster_router", "--", "--if-exists", "ls-del", "join")
	require.NoError(t, err)
}

func dumpForeign(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	for _, args := range [][]string{
		{"--columns=name,ports,other_config,external_ids", "find", "Logical_Switch", "name=ovnk-node1"},
		{"--columns=name,ports,other_config,external_ids", "find", "Logical_Switch", "name=join"},
		{"--columns=name,addresses,external_ids", "find", "Logical_Switch_Port", "name=ovnk-pod1"},
		{"--columns=name,static_routes,nat,external_ids", "find", "Logical_Router", "name=ovn_cluster_router"},
		{"--columns=type,external_ip,logical_ip,external_ids", "find", "NAT", "external_ip=172.16.0.200"},
		{"--columns=ip_prefix,nexthop", "find", "Logical_Router_Static_Route", "nexthop=100.64.0.2"},
	} {
		out, err := cluster.NBCtl(args...)
		require.NoError(t, err)
		b.WriteString(out)
	}
	return b.String()
}

// splitArgs splits a line at spaces, keeping "quoted" words whole.
func splitArgs(s string) []string {
	var out []string
	for i, part := range strings.Split(s, `"`) {
		if i%2 == 1 {
			out = append(out, part)
			continue
		}
		out = append(out, strings.Fields(part)...)
	}
	return out
}
