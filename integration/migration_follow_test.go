package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubevirt-ovn/kubevirt-ovn/integration/sandbox"
	"github.com/kubevirt-ovn/kubevirt-ovn/integration/wire"
)

// twoVMIs is vm-a on aNode and vm-b on bNode, each with the further status
// lines (a migrationState) given.
func twoVMIs(aNode, aMore, bNode, bMore string) string {
	return vmiDoc("vm-a", "net-a", aNode, vmAMAC, vmAIP, aMore) + "---\n" + vmiDoc("vm-b", "net-b", bNode, vmBMAC, vmBIP, bMore)
}

// vmiDoc is VMI name in namespace default, its interface eth1 on network
// with mac and ip, on node, with the further status lines more.
func vmiDoc(name, network, node, mac, ip, more string) string {
	return fmt.Sprintf(`apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata: {name: %s, namespace: default}
spec:
  networks: [{name: eth1, multus: {networkName: %s}}]
status:
  nodeName: %s
  interfaces: [{name: eth1, mac: "%s", ipAddress: %s}]
%s`, name, network, node, mac, ip, more)
}

// migrating is a migrationState from src to dst with the further lines.
func migrating(src, dst, uid, more string) string {
	return fmt.Sprintf("  migrationState:\n    sourceNode: %s\n    targetNode: %s\n    migrationUid: %s\n%s\n", src, dst, uid, more)
}

// portBinding is port's SB Port_Binding as chassis names (without the
// activated flag).
func (e *env) portBinding(port string) binding {
	e.t.Helper()
	b := sbBinding(e.t, e.l, port)
	b.activated = ""
	return b
}

// rowsBesideBindings is every row of ours but the VM ports' bindings (and
// their up column, which ovn-northd writes): what a migration must leave
// as it is.
func (e *env) rowsBesideBindings() string {
	e.t.Helper()
	var b strings.Builder
	for _, table := range []string{"NAT", "DHCP_Options", "ACL", "Port_Group", "Load_Balancer", "Logical_Router", "Logical_Router_Port",
		"Logical_Router_Static_Route", "Gateway_Chassis", "Logical_Switch"} {
		b.WriteString(nbctl(e.t, e.l, "--columns=_uuid,external_ids", "list", table))
	}
	b.WriteString(nbctl(e.t, e.l, "--columns=_uuid,name,addresses,port_security,dhcpv4_options,type,external_ids", "list", "Logical_Switch_Port"))
	return b.String()
}

// toVMB sends UDP from vm-a, on chassis sim's port, to vm-b.
func (p traffic) toVMB(sim, port string, dport uint16) {
	p.t.Helper()
	f := frame{SrcMAC: vmAMAC, DstMAC: routerMAC, SrcIP: vmAIP, DstIP: vmBIP, TTL: 64, SPort: 40701, DPort: dport}
	require.NoError(p.t, p.c.Inject(sim, port, frameBytes(p.t, f)))
}

func toVMBPort(dport uint16) func(seen) bool {
	return func(s seen) bool { return s.IsUDP && s.DstIP == vmBIP && s.DPort == dport }
}

// TestLiveMigrationEverythingFollows: vm-a, with a floating IP, migrates
// from hv1 to hv2 while two numbered streams reach it, one from vm-b, one
// from outside through its floating IP: nothing reaches hv2 before the VM's
// RARP there, nothing hv1 once the port is on hv2 alone, the gap of each
// is reported. Then vm-a and vm-b migrate at once, vm-a back to hv1, vm-b
// to hv1. After each step a second sync writes nothing, and no row but the
// ports' bindings changed: the floating IP, DHCP, the security groups, the
// load balancer (vm-a is its member, reached through its VIP after the
// moves), the router and its routes follow the VM without a write.
func TestLiveMigrationEverythingFollows(t *testing.T) {
	e := newEnv(t)
	e.write("fip.yaml", fipManifest("FloatingIp", fipIP, vmAIP, "vm-a"))
	// vm-a a load balancer's member; the examples' security groups.
	e.write("lb.yaml", `apiVersion: kubevirt.io/v1
kind: LoadBalancer
metadata: {name: web}
spec:
  name: web
  networkId: net-a
  vip: `+lbVIP+`
  members: [`+vmAIP+`]
  rules: [{protocol: udp, portRangeMin: 8080, portRangeMax: 8080}]
`)
	sgs, err := os.ReadFile(filepath.Join("..", "deploy", "examples", "securitygroups.yaml"))
	require.NoError(t, err)
	e.write("securitygroups.yaml", string(sgs))
	require.NoError(t, e.l.AddVMPort("hv2", vmADst, vmAPort))
	step := func(what, vmis string) string {
		t.Helper()
		e.write("vmis.yaml", vmis)
		out := e.sync()
		assert.Equal(t, "no changes\n", e.sync(), "a second sync after %s", what)
		return out
	}
	step("the start", twoVMIs("hv1", "", "hv2", ""))
	e.ready("gw1", "hv1", "hv2")
	rows := e.rowsBesideBindings()
	dstA, srcA := e.vm("hv2", vmADst), e.vm("hv1", "vm-a")

	// vm-a to hv2, under two streams.
	inside, outside := e.startStream(10000), e.startFIPStream(20000)
	waitFor(t, srcA, "vm-b's stream at vm-a on hv1", 0, func(s seen) bool { return s.IsUDP && s.SPort == inside.sport })
	waitFor(t, srcA, "the stream through the floating IP at vm-a on hv1", 0, func(s seen) bool { return s.IsUDP && s.SPort == outside.sport })
	out := step("the migration's start", twoVMIs("hv1", migrating("hv1", "hv2", "uid-1", "    mode: PreCopy"), "hv2", ""))
	assert.Contains(t, out, "update Logical_Switch_Port "+vmAPort)
	e.waitBinding("hv2 bound as vm-a's additional chassis", binding{chassis: "hv1", additional: "hv2"})
	// OVN blocks the port on its target once the target's claim is in
	// the SB (physical.c reads additional_chassis there), not at the
	// claim: frames sent in between reach the target (seen here: one or
	// two, within about 20 ms of the claim). Every chassis caught up, the
	// target receives nothing more until the RARP (a frame sent just
	// before the RARP may still be queued in the datapath and delivered
	// once the VM runs there: right, not checked).
	nbctl(t, e.l, "--timeout=90", "--wait=hv", "sync")
	var claimed [2]map[int]bool
	for k, s := range []*stream{inside, outside} {
		claimed[k] = s.seqs(t, dstA)
	}
	for k, s := range []*stream{inside, outside} {
		at := s.sentCount()
		waitFor(t, srcA, "a stream at vm-a on hv1 during the migration", 0, func(x seen) bool {
			return x.IsUDP && x.SPort == s.sport && int(x.DPort-s.base) > at
		})
		require.Equal(t, claimed[k], s.seqs(t, dstA), "frames of a stream at the target, after it was blocked there, before the VM's RARP")
	}
	e.announce()
	for _, s := range []*stream{inside, outside} {
		at := s.sentCount()
		waitFor(t, dstA, "a stream at vm-a on hv2 after its RARP", 0, func(x seen) bool {
			return x.IsUDP && x.SPort == s.sport && int(x.DPort-s.base) > at
		})
	}
	step("the migration's completion", twoVMIs("hv2", migrating("hv1", "hv2", "uid-1", "    completed: true"), "hv2", ""))
	e.waitBinding("vm-a on hv2 alone", binding{chassis: "hv2"})
	afterCollapse := [2]int{inside.sentCount(), outside.sentCount()}
	for _, s := range []*stream{inside, outside} {
		at := s.sentCount()
		waitFor(t, dstA, "a stream at vm-a on hv2 after the collapse", 0, func(x seen) bool {
			return x.IsUDP && x.SPort == s.sport && int(x.DPort-s.base) > at+3
		})
	}
	for k, s := range []*stream{inside, outside} {
		name := []string{"from vm-b", "from outside through the floating IP"}[k]
		sent := s.end()
		atSrc, atDst := s.seqs(t, srcA), s.seqs(t, dstA)
		for i := afterCollapse[k] + 1; i < len(sent); i++ {
			assert.False(t, atSrc[i], "stream %s: frame %d, sent after the collapse, reached the source", name, i)
		}
		lost, gap, dups := streamReport(sent, atSrc, atDst)
		report(t, fmt.Sprintf("central, sync: vm-a's migration, a stream %s of %d frames every %s: %d lost (the longest gap %s), %d received twice, %d of them at the target at its claim, before OVN blocked it there",
			name, len(sent), streamInterval, lost, gap.Round(time.Millisecond), dups, len(claimed[k])))
	}
	assert.Equal(t, rows, e.rowsBesideBindings(), "rows beside the ports' bindings after vm-a's migration")

	// Both at once: vm-a back to hv1 (its old interface there is still
	// plugged), vm-b to hv1.
	const vmBDst = "vm-b-dst"
	require.NoError(t, e.l.AddVMPort("hv1", vmBDst, vmBPort))
	srcB, dstB := e.vm("hv2", "vm-b"), e.vm("hv1", vmBDst)
	step("two migrations' start", twoVMIs("hv2", migrating("hv2", "hv1", "uid-2", "    mode: PreCopy"), "hv2", migrating("hv2", "hv1", "uid-3", "    mode: PreCopy")))
	e.waitBinding("hv1 bound as vm-a's additional chassis", binding{chassis: "hv2", additional: "hv1"})
	require.NoError(t, pollBinding(e, vmBPort, binding{chassis: "hv2", additional: "hv1"}))
	skip, skipDst := count(t, srcB), count(t, dstB)
	e.toVMB("hv2", vmADst, 5731)
	waitFor(t, srcB, "vm-b's traffic at hv2 during its migration", skip, toVMBPort(5731))
	requireNone(t, dstB, "vm-b's traffic at hv1 before its RARP there", skipDst, toVMBPort(5731))
	require.NoError(t, e.l.Inject("hv1", "vm-a", frameBytes(t, wire.RARP(vmAMAC))))
	require.NoError(t, e.l.Inject("hv1", vmBDst, frameBytes(t, wire.RARP(vmBMAC))))
	step("two migrations' completion", twoVMIs("hv1", migrating("hv2", "hv1", "uid-2", "    completed: true"), "hv1", migrating("hv2", "hv1", "uid-3", "    completed: true")))
	e.waitBinding("vm-a back on hv1 alone", binding{chassis: "hv1"})
	require.NoError(t, pollBinding(e, vmBPort, binding{chassis: "hv1"}))
	skip, skipDst = count(t, srcB), count(t, dstB)
	e.toVMB("hv1", "vm-a", 5732)
	waitFor(t, dstB, "vm-b's traffic at hv1 after its migration", skipDst, toVMBPort(5732))
	requireNone(t, srcB, "vm-b's traffic at hv2 after its migration", skip, toVMBPort(5732))
	e.dnatToVM("gw1", vmA, vmRef{"hv2", vmADst, vmAMAC, vmAIP}, 40950, 5733)
	// The load balancer's VIP, from vm-b (now on hv1), reaches vm-a on
	// hv1.
	skip, skipDst = count(t, e.vm("hv1", "vm-a")), count(t, dstA)
	toVIP := frame{SrcMAC: vmBMAC, DstMAC: routerMAC, SrcIP: vmBIP, DstIP: lbVIP, TTL: 64, SPort: 40960, DPort: lbPort}
	require.NoError(t, e.l.Inject("hv1", vmBDst, frameBytes(t, toVIP)))
	atVIP := func(s seen) bool { return s.IsUDP && s.SPort == 40960 && s.DPort == lbPort && s.DstIP == vmAIP }
	waitFor(t, e.vm("hv1", "vm-a"), "vm-b's flow to the VIP at vm-a on hv1", skip, atVIP)
	requireNone(t, dstA, "vm-b's flow to the VIP at vm-a's old chassis", skipDst, atVIP)
	assert.Equal(t, rows, e.rowsBesideBindings(), "rows beside the ports' bindings after both migrations")
}

// pollBinding waits until port's Port_Binding is want.
func pollBinding(e *env, port string, want binding) error {
	var last binding
	err := sandbox.Poll(60*time.Second, "the binding of "+port, func() (bool, error) {
		last = e.portBinding(port)
		return last.is(want), nil
	})
	if err != nil {
		return fmt.Errorf("%w; last seen %+v", err, last)
	}
	return nil
}

// TestLiveMigrationOntoTheGateway: vm-a, with a floating IP, migrates from
// hv1 onto gw1, router1's active gateway chassis: the gateway port stays
// active on gw1 throughout (BFD and the binding undisturbed), and on gw1
// vm-a is reached through its floating IP and leaves with it.
func TestLiveMigrationOntoTheGateway(t *testing.T) {
	e := newEnv(t)
	e.write("fip.yaml", fipManifest("FloatingIp", fipIP, vmAIP, "vm-a"))
	const onGW = "vm-a-gw"
	require.NoError(t, e.l.AddVMPort("gw1", onGW, vmAPort))
	// step syncs vmis; the gateway port stays active on gw1, with BFD up
	// from the chassis that have a VM on router1's networks (bfd).
	step := func(what, vmis string, bfd ...string) {
		t.Helper()
		e.write("vmis.yaml", vmis)
		e.sync()
		assert.Equal(t, "no changes\n", e.sync(), "a second sync after %s", what)
		e.ready("gw1", bfd...)
	}
	step("the start", twoVMIs("hv1", "", "hv2", ""), "hv1", "hv2")
	gwVM, src := vmRef{"gw1", onGW, vmAMAC, vmAIP}, vmRef{"hv1", "vm-a", vmAMAC, vmAIP}
	e.dnatToVM("gw1", src, gwVM, 40970, 5751)

	step("the migration's start", twoVMIs("hv1", migrating("hv1", "gw1", "uid-g", "    mode: PreCopy"), "hv2", ""), "hv1", "hv2")
	e.waitBinding("gw1 bound as vm-a's additional chassis", binding{chassis: "hv1", additional: "gw1"})
	e.dnatToVM("gw1", src, gwVM, 40971, 5752)
	rarp := frameBytes(t, wire.RARP(vmAMAC))
	for range 5 {
		require.NoError(t, e.l.Inject("gw1", onGW, rarp))
	}
	e.waitBinding("gw1 activated", binding{chassis: "hv1", additional: "gw1", activated: "gw1"})
	step("the migration's completion", twoVMIs("gw1", migrating("hv1", "gw1", "uid-g", "    completed: true"), "hv2", ""), "hv2")
	e.waitBinding("vm-a on gw1 alone", binding{chassis: "gw1"})
	e.dnatToVM("gw1", gwVM, src, 40972, 5753)
	e.leavesWithFIP("gw1", gwVM, 40973, 5754)
}
