package integration

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubevirt-ovn/kubevirt-ovn/integration/sandbox"
)

// Scenario 1: a VM on a worker sends UDP out; on the active gateway's
// external wire it leaves with the SNAT IP as source, a source port in
// 1025-65535, the peer router's MAC as destination and its TTL decremented.
func TestSNATOnGateway(t *testing.T) {
	e := newEnv(t)
	e.sync()
	e.ready("gw1", "hv1", "hv2")

	e.send("hv1", "vm-a", vmAMAC, vmAIP, 40001, 5001)
	got := waitFor(t, e.wire("gw1"), "vm-a's UDP leaving SNATed", 0, snated(5001))
	assert.Equal(t, gwPortMAC, got.SrcMAC, "source MAC: the gateway port")
	assert.Equal(t, peerMAC, got.DstMAC, "destination MAC: the peer router (static MAC binding)")
	assert.Equal(t, uint8(63), got.TTL, "TTL decremented once by the router")
	assert.GreaterOrEqual(t, got.SPort, uint16(1025))
	assert.Equal(t, -1, got.VLAN, "FLAT external network: untagged")

	// TCP too: a connection's SYN leaves SNATed.
	syn := frame{SrcMAC: vmAMAC, DstMAC: routerMAC, SrcIP: vmAIP, DstIP: remoteIP, TTL: 64, SPort: 40100, DPort: 443, TCP: true}
	require.NoError(t, e.l.Inject("hv1", "vm-a", frameBytes(t, syn)))
	tcp := waitFor(t, e.wire("gw1"), "vm-a's TCP SYN leaving SNATed", 0, func(s seen) bool {
		return s.IsTCP && s.SYN && s.SrcIP == snatIP && s.DstIP == remoteIP && s.DPort == 443
	})
	assert.Equal(t, peerMAC, tcp.DstMAC)
	assert.GreaterOrEqual(t, tcp.SPort, uint16(1025))

	requireNone(t, e.wire("gw2"), "standby gateway gw2 sends the VM's traffic", 0, func(s seen) bool {
		return (s.IsUDP || s.IsTCP) && s.DstIP == remoteIP
	})
}

// Scenario 2: two VMs on two workers use the same source port to the same
// destination: both leave SNATed, on distinct source ports.
func TestSNATTwoVMsSamePortGetDistinctPorts(t *testing.T) {
	e := newEnv(t)
	e.sync()
	e.ready("gw1", "hv1", "hv2")

	e.send("hv1", "vm-a", vmAMAC, vmAIP, 40002, 5002)
	a := waitFor(t, e.wire("gw1"), "vm-a's UDP SNATed", 0, snated(5002))
	e.send("hv2", "vm-b", vmBMAC, vmBIP, 40002, 5002)
	b := waitFor(t, e.wire("gw1"), "vm-b's UDP SNATed on another source port", 0, func(s seen) bool {
		return snated(5002)(s) && s.SPort != a.SPort
	})
	assert.NotEqual(t, a.SPort, b.SPort)
	assert.GreaterOrEqual(t, b.SPort, uint16(1025))
}

// Scenario 3: the reply from outside to the SNAT IP is un-SNATed on the
// gateway and delivered through the tunnel to the right VM, and to no other.
func TestReplyUnSNATedToTheRightVM(t *testing.T) {
	e := newEnv(t)
	e.sync()
	e.ready("gw1", "hv1", "hv2")

	e.send("hv1", "vm-a", vmAMAC, vmAIP, 40003, 53)
	out := waitFor(t, e.wire("gw1"), "vm-a's request SNATed", 0, snated(53))
	e.unSNATed("gw1", out, vmA, 40003, vmB)
}

// A VM of deploy/examples: where it is plugged and its addresses.
type vmRef struct{ chassis, port, mac, ip string }

var (
	vmA = vmRef{"hv1", "vm-a", vmAMAC, vmAIP}
	vmB = vmRef{"hv2", "vm-b", vmBMAC, vmBIP}
)

// unSNATed puts the remote's reply to out, a packet vm sent from its port
// sport that left gateway gw SNATed, on gw's wire: it reaches vm
// un-SNATed (its IP and sport), routed by the router, and not other.
func (p traffic) unSNATed(gw string, out seen, vm vmRef, sport uint16, other vmRef) {
	p.t.Helper()
	t := p.t
	skip := count(t, p.vm(other.chassis, other.port))
	p.inject(gw, replyTo(out, 0))
	got := waitFor(t, p.vm(vm.chassis, vm.port), "the reply at "+vm.port+" on "+vm.chassis, 0, func(s seen) bool {
		return s.IsUDP && s.SrcIP == remoteIP && s.SPort == out.DPort
	})
	assert.Equal(t, vm.ip, got.DstIP, "destination un-SNATed to the VM's IP")
	assert.Equal(t, sport, got.DPort, "destination port restored")
	assert.Equal(t, vm.mac, got.DstMAC)
	assert.Equal(t, routerMAC, got.SrcMAC, "routed by the router's internal port")
	requireNone(t, p.vm(other.chassis, other.port), "the reply for "+vm.port+" reaches "+other.port, skip, func(s seen) bool {
		return s.IsUDP && s.SrcIP == remoteIP && s.SPort == out.DPort
	})
}

// Scenario 4: an ARP request for the SNAT IP on the external wire is
// answered by the active gateway with the gateway port's MAC; the standby
// gateway does not answer.
func TestARPForSNATIPAnsweredByActiveGatewayOnly(t *testing.T) {
	e := newEnv(t)
	e.sync()
	e.ready("gw1", "hv1", "hv2")

	e.arpForSNATIP("gw1", "gw2")
}

// arpForSNATIP puts an ARP request for the SNAT IP on the wires of
// gateways active and silent: active answers with the gateway port's MAC,
// silent does not.
func (p traffic) arpForSNATIP(active, silent string) {
	p.t.Helper()
	t := p.t
	skip := count(t, p.wire(silent))
	p.inject(silent, arpForSNATIP)
	p.inject(active, arpForSNATIP)
	got := waitFor(t, p.wire(active), "ARP reply for the SNAT IP from "+active, 0, isSNATIPReply)
	assert.Equal(t, gwPortMAC, got.ARPSHA)
	assert.Equal(t, gwPortMAC, got.SrcMAC)
	assert.Equal(t, peerMAC, got.DstMAC)
	requireNone(t, p.wire(silent), silent+" answers ARP for the SNAT IP", skip, isSNATIPReply)
}

// Scenario 5: enableSnat false tears the router's external side down, as
// the seed does (no ARP responder for the SNAT IP, no upstream rules):
// nothing of the VMs leaves through the gateway, not even un-NATed, and the
// SNAT IP is not answered. True again brings both back.
func TestEnableSNATToggle(t *testing.T) {
	e := newEnv(t)
	e.sync()
	e.ready("gw1", "hv1", "hv2")

	e.edit("router.yaml", "enableSnat: true", "enableSnat: false")
	out := e.sync()
	assert.Contains(t, out, "delete NAT snat 10.10.0.0/24")
	assert.Contains(t, out, "delete Logical_Router_Port "+gwPort)
	for _, table := range []string{"NAT", "Logical_Router_Static_Route", "Gateway_Chassis"} {
		assert.Empty(t, strings.TrimSpace(nbctl(t, e.l, "--bare", "--columns=_uuid", "find", table, "external_ids:kubevirt-ovn/owner=router1")), table)
	}
	nbctl(t, e.l, "--timeout=90", "--wait=hv", "sync")

	arpForSNATIP := frame{SrcMAC: peerMAC, DstMAC: "ff:ff:ff:ff:ff:ff", ARPOp: 1,
		ARPSHA: peerMAC, ARPSPA: peerIP, ARPTHA: "00:00:00:00:00:00", ARPTPA: snatIP}
	snatIPAnswered := func(s seen) bool { return s.IsARP && s.ARPOp == 2 && s.ARPSPA == snatIP }
	skip1, skip2, skipVM := count(t, e.wire("gw1")), count(t, e.wire("gw2")), count(t, e.vm("hv1", "vm-a"))
	e.inject("gw1", arpForSNATIP)
	e.inject("gw2", arpForSNATIP)
	e.send("hv1", "vm-a", vmAMAC, vmAIP, 40005, 5005)
	// Barrier: the router is still there for its internal networks, and
	// answers vm-a's ARP for its gateway.
	arpForGateway := frame{SrcMAC: vmAMAC, DstMAC: "ff:ff:ff:ff:ff:ff", ARPOp: 1,
		ARPSHA: vmAMAC, ARPSPA: vmAIP, ARPTHA: "00:00:00:00:00:00", ARPTPA: "10.10.0.1"}
	require.NoError(t, e.l.Inject("hv1", "vm-a", frameBytes(t, arpForGateway)))
	waitFor(t, e.vm("hv1", "vm-a"), "the router answering vm-a's ARP for its gateway (barrier)", skipVM, func(s seen) bool {
		return s.IsARP && s.ARPOp == 2 && s.ARPSPA == "10.10.0.1" && s.ARPSHA == routerMAC
	})
	requireNone(t, e.wire("gw1"), "vm-a's UDP leaves through gw1 with SNAT disabled", skip1, flow(5005))
	requireNone(t, e.wire("gw2"), "vm-a's UDP leaves through gw2 with SNAT disabled", skip2, flow(5005))
	requireNone(t, e.wire("gw1"), "gw1 answers ARP for the SNAT IP with SNAT disabled", skip1, snatIPAnswered)
	requireNone(t, e.wire("gw2"), "gw2 answers ARP for the SNAT IP with SNAT disabled", skip2, snatIPAnswered)

	e.edit("router.yaml", "enableSnat: false", "enableSnat: true")
	e.sync()
	e.ready("gw1", "hv1", "hv2")
	skip1 = count(t, e.wire("gw1"))
	e.send("hv1", "vm-a", vmAMAC, vmAIP, 40006, 5006)
	waitFor(t, e.wire("gw1"), "vm-a's UDP SNATed again", skip1, snated(5006))
	e.inject("gw1", arpForSNATIP)
	waitFor(t, e.wire("gw1"), "gw1 answering ARP for the SNAT IP again", skip1, snatIPAnswered)
}

// Scenario 6: an internal network attached later gets SNAT; detached, its
// traffic no longer does.
func TestInternalNetworkAttachDetach(t *testing.T) {
	e := newEnv(t)
	e.edit("router.yaml", "    - net-b\n", "")
	e.sync()
	e.ready("gw1", "hv1")

	skip := count(t, e.wire("gw1"))
	e.send("hv2", "vm-b", vmBMAC, vmBIP, 40007, 5007)
	e.send("hv1", "vm-a", vmAMAC, vmAIP, 40007, 5107)
	waitFor(t, e.wire("gw1"), "vm-a's UDP (barrier)", skip, snated(5107))
	requireNone(t, e.wire("gw1"), "net-b, not attached, is routed out", skip, flow(5007))

	e.edit("router.yaml", "    - net-a\n", "    - net-a\n    - net-b\n")
	out := e.sync()
	assert.Contains(t, out, "create NAT snat 10.20.0.0/24")
	// hv2 now hosts a port of the router: wait for its BFD sessions.
	e.ready("gw1", "hv1", "hv2")
	e.send("hv2", "vm-b", vmBMAC, vmBIP, 40008, 5008)
	waitFor(t, e.wire("gw1"), "vm-b's UDP SNATed once net-b is attached", 0, snated(5008))

	e.edit("router.yaml", "    - net-b\n", "")
	out = e.sync()
	assert.Contains(t, out, "delete NAT snat 10.20.0.0/24")
	skip = count(t, e.wire("gw1"))
	e.send("hv2", "vm-b", vmBMAC, vmBIP, 40009, 5009)
	e.send("hv1", "vm-a", vmAMAC, vmAIP, 40009, 5109)
	waitFor(t, e.wire("gw1"), "vm-a's UDP (barrier)", skip, snated(5109))
	requireNone(t, e.wire("gw1"), "detached net-b still routed out", skip, flow(5009))
}

// Scenario 7 (VLAN): packets on the wire carry the segment's 802.1Q tag; a
// tagged ARP request for the SNAT IP gets a tagged reply. (FLAT: untagged,
// checked in TestSNATOnGateway.)
func TestVLANExternalNetworkTagsTheWire(t *testing.T) {
	e := newEnv(t)
	e.edit("networks.yaml", `"type": "FLAT"`, `"type": "VLAN", "segmentId": "100"`)
	e.sync()
	e.ready("gw1", "hv1", "hv2")

	e.send("hv1", "vm-a", vmAMAC, vmAIP, 40010, 5010)
	got := waitFor(t, e.wire("gw1"), "vm-a's UDP SNATed on VLAN 100", 0, snated(5010))
	assert.Equal(t, 100, got.VLAN)

	e.inject("gw1", frame{SrcMAC: peerMAC, DstMAC: "ff:ff:ff:ff:ff:ff", VLAN: 100, ARPOp: 1,
		ARPSHA: peerMAC, ARPSPA: peerIP, ARPTHA: "00:00:00:00:00:00", ARPTPA: snatIP})
	reply := waitFor(t, e.wire("gw1"), "tagged ARP reply for the SNAT IP", 0, func(s seen) bool {
		return s.IsARP && s.ARPOp == 2 && s.ARPSPA == snatIP && s.ARPTPA == peerIP
	})
	assert.Equal(t, 100, reply.VLAN)

	e.inject("gw1", replyTo(got, 100))
	back := waitFor(t, e.vm("hv1", "vm-a"), "the tagged reply reaches vm-a untagged", 0, func(s seen) bool {
		return s.IsUDP && s.SrcIP == remoteIP && s.DPort == 40010
	})
	assert.Equal(t, -1, back.VLAN)
}

// Scenario 8: the router's gateway changes to the other candidate: traffic
// leaves through the new gateway, which announces the SNAT IP by GARP.
func TestGatewayChangeMovesTrafficAndSendsGARP(t *testing.T) {
	e := newEnv(t)
	e.sync()
	e.ready("gw1", "hv1", "hv2")
	e.send("hv1", "vm-a", vmAMAC, vmAIP, 40011, 5011)
	waitFor(t, e.wire("gw1"), "vm-a's UDP via gw1", 0, snated(5011))

	skip2 := count(t, e.wire("gw2"))
	e.edit("router.yaml", "gateway: gw1", "gateway: gw2")
	out := e.sync()
	assert.Contains(t, out, "update Gateway_Chassis kv-rtoe-router1_gw2 (priority: 1 -> 2)")
	e.ready("gw2", "hv1", "hv2")
	garp := waitFor(t, e.wire("gw2"), "GARP for the SNAT IP from the new gateway", skip2, func(s seen) bool {
		return s.IsARP && s.ARPSPA == snatIP && s.ARPTPA == snatIP
	})
	assert.Equal(t, gwPortMAC, garp.ARPSHA)
	assert.Equal(t, "ff:ff:ff:ff:ff:ff", garp.DstMAC)

	skip1 := count(t, e.wire("gw1"))
	e.send("hv1", "vm-a", vmAMAC, vmAIP, 40012, 5012)
	waitFor(t, e.wire("gw2"), "vm-a's UDP via the new gateway gw2", skip2, snated(5012))
	requireNone(t, e.wire("gw1"), "old gateway gw1 still sends the VM's traffic", skip1, flow(5012))
}

// Scenario 9: the router removed: every row it owned is gone (the
// ovn-kubernetes-like rows are checked after every scenario by env).
func TestRouterRemovedLeavesNoRows(t *testing.T) {
	e := newEnv(t)
	e.sync()
	e.ready("gw1", "hv1", "hv2")

	e.write("router.yaml", "")
	e.sync()
	for _, table := range []string{"Logical_Router", "Logical_Router_Port", "NAT", "Logical_Router_Static_Route", "Gateway_Chassis"} {
		assert.Empty(t, strings.TrimSpace(nbctl(t, e.l, "--bare", "--columns=_uuid", "find", table, "external_ids:kubevirt-ovn/owner=router1")), table)
	}
	assert.Empty(t, strings.TrimSpace(nbctl(t, e.l, "--bare", "--columns=_uuid", "find", "Static_MAC_Binding", "logical_port="+gwPort)))
	assert.Empty(t, strings.TrimSpace(nbctl(t, e.l, "--bare", "--columns=name", "find", "Logical_Switch_Port", "external_ids:kubevirt-ovn/owner=router1")))
	assert.NotContains(t, nbctl(t, e.l, "show"), "router1")

	// Networks and VMs without a router: no more SNATed traffic.
	skip := count(t, e.wire("gw1"))
	e.send("hv1", "vm-a", vmAMAC, vmAIP, 40013, 5013)
	requireNone(t, e.wire("gw1"), "traffic of a removed router leaves", skip, flow(5013))
}

// Scenario 10: a VM removed: its port is gone, the other VM unaffected.
func TestVMRemovedOthersUnaffected(t *testing.T) {
	e := newEnv(t)
	e.sync()
	e.ready("gw1", "hv1", "hv2")

	vmis := readFile(t, e.manifests, "vmis.yaml")
	i := strings.Index(vmis, "---\napiVersion: kubevirt.io/v1\nkind: VirtualMachineInstance\nmetadata:\n  name: vm-b")
	require.Positive(t, i)
	e.write("vmis.yaml", vmis[:i])
	out := e.sync()
	assert.Contains(t, out, "delete Logical_Switch_Port "+vmBPort)
	assert.NotContains(t, nbctl(t, e.l, "show"), vmBPort)

	e.send("hv1", "vm-a", vmAMAC, vmAIP, 40014, 5014)
	waitFor(t, e.wire("gw1"), "vm-a still SNATed", 0, snated(5014))
	skip := count(t, e.wire("gw1"))
	e.send("hv2", "vm-b", vmBMAC, vmBIP, 40015, 5015)
	e.send("hv1", "vm-a", vmAMAC, vmAIP, 40015, 5115)
	waitFor(t, e.wire("gw1"), "vm-a's UDP (barrier)", skip, snated(5115))
	requireNone(t, e.wire("gw1"), "the removed VM's traffic leaves", skip, flow(5015))
}

// Scenario 11: no peer MAC in the spec: the router ARPs for the peer, learns
// its MAC from the reply on the wire, and traffic flows to it.
func TestPeerMACLearnedByARP(t *testing.T) {
	e := newEnv(t)
	e.edit("router.yaml", "    mac: \"00:00:00:00:ee:01\"\n", "")
	out := e.sync()
	assert.NotContains(t, out, "Static_MAC_Binding")
	e.ready("gw1", "hv1", "hv2")

	e.send("hv1", "vm-a", vmAMAC, vmAIP, 40016, 5016)
	waitFor(t, e.wire("gw1"), "the router's ARP request for the peer", 0, func(s seen) bool {
		return s.IsARP && s.ARPOp == 1 && s.ARPTPA == peerIP && s.ARPSPA == snatIP
	})
	learned := "00:00:00:00:ee:42"
	e.inject("gw1", frame{SrcMAC: learned, DstMAC: gwPortMAC, ARPOp: 2,
		ARPSHA: learned, ARPSPA: peerIP, ARPTHA: gwPortMAC, ARPTPA: snatIP})
	err := pollMACBinding(e, peerIP, learned)
	require.NoError(t, err)

	// The SB has the binding; gw1's ovn-controller installs it a moment
	// later (nothing in OVN says when), and a packet routed before that
	// makes the router ask again. A new packet every second until one
	// leaves: it must leave to the learned MAC, without a second answer.
	var got seen
	require.NoError(t, sandbox.Poll(60*time.Second, "vm-a's UDP SNATed to the learned MAC", func() (bool, error) {
		skip := count(t, e.wire("gw1"))
		e.send("hv1", "vm-a", vmAMAC, vmAIP, 40017, 5017)
		deadline := time.Now().Add(time.Second)
		for time.Now().Before(deadline) {
			ps, err := e.wire("gw1").read()
			if err != nil {
				return false, err
			}
			for _, p := range ps[min(skip, len(ps)):] {
				if snated(5017)(p) {
					got = p
					return true, nil
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
		return false, nil
	}))
	assert.Equal(t, learned, got.DstMAC)
}
