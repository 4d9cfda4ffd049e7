package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Floating IPs (issue 20) on deploy/examples: router1's gateway is gw1,
// vm-a (10.10.0.5, net-a) on hv1, vm-b (10.20.0.6, net-b) on hv2, and
// floating IP 172.16.0.150 on the external network public.

const (
	fipIP = "172.16.0.150"
	// extHostIP is a host on the external network itself (not the peer).
	extHostIP = "172.16.0.77"
)

// fipManifest is a floating IP of router1 as ONOS users declare it, bound
// to vm (fixed IP fixed) unless vm is "".
func fipManifest(kind, ip, fixed, vm string) string {
	s := fmt.Sprintf(`apiVersion: kubevirt.io/v1
kind: %s
metadata:
  name: fip-web
spec:
  id: fip-web
  routerName: router1
  networkName: public
  floatingIp: %s
`, kind, ip)
	if fixed != "" {
		s += "  fixedIp: " + fixed + "\n"
	}
	if vm != "" {
		s += "  vmName: " + vm + "\n"
	}
	return s
}

// toFIP is a UDP packet from the remote host, through the peer router, to
// the floating IP on gateway gw's wire.
func toFIP(sport, dport uint16) frame {
	return frame{SrcMAC: peerMAC, DstMAC: gwPortMAC, SrcIP: remoteIP, DstIP: fipIP, TTL: 64, SPort: sport, DPort: dport}
}

var arpForFIP = frame{SrcMAC: peerMAC, DstMAC: "ff:ff:ff:ff:ff:ff", ARPOp: 1,
	ARPSHA: peerMAC, ARPSPA: peerIP, ARPTHA: "00:00:00:00:00:00", ARPTPA: fipIP}

func isFIPARPReply(s seen) bool { return s.IsARP && s.ARPOp == 2 && s.ARPSPA == fipIP }

// fromFIP matches a packet of the flow (dport) leaving with the floating IP
// as its source.
func fromFIP(dport uint16) func(seen) bool {
	return func(s seen) bool { return s.IsUDP && s.SrcIP == fipIP && s.DstIP == remoteIP && s.DPort == dport }
}

// dnatToVM injects a packet from outside to the floating IP on gateway gw's
// wire and checks that it reaches vm with its fixed IP as destination, and
// not other.
func (p traffic) dnatToVM(gw string, vm, other vmRef, sport, dport uint16) {
	p.t.Helper()
	t := p.t
	skip, skipOther := count(t, p.vm(vm.chassis, vm.port)), count(t, p.vm(other.chassis, other.port))
	p.inject(gw, toFIP(sport, dport))
	in := func(s seen) bool { return s.IsUDP && s.SrcIP == remoteIP && s.SPort == sport && s.DPort == dport }
	got := waitFor(t, p.vm(vm.chassis, vm.port), "the packet to the floating IP at "+vm.port, skip, in)
	assert.Equal(t, vm.ip, got.DstIP, "destination DNATed to the fixed IP")
	assert.Equal(t, vm.mac, got.DstMAC)
	assert.Equal(t, routerMAC, got.SrcMAC, "routed by the router's internal port")
	requireNone(t, p.vm(other.chassis, other.port), "the packet to the floating IP reaches "+other.port, skipOther, in)
}

// leavesWithFIP makes vm send UDP out and checks it leaves gateway gw with
// the floating IP as source and its own source port.
func (p traffic) leavesWithFIP(gw string, vm vmRef, sport, dport uint16) {
	p.t.Helper()
	skip := count(p.t, p.wire(gw))
	p.send(vm.chassis, vm.port, vm.mac, vm.ip, sport, dport)
	got := waitFor(p.t, p.wire(gw), vm.port+"'s UDP leaving with the floating IP", skip, fromFIP(dport))
	assert.Equal(p.t, sport, got.SPort, "a floating IP keeps the VM's source port")
	assert.Equal(p.t, gwPortMAC, got.SrcMAC)
	assert.Equal(p.t, peerMAC, got.DstMAC)
}

// TestFloatingIPCreatedBound: a floating IP created already bound to vm-a
// works at once: from outside to the floating IP reaches vm-a with its
// fixed IP as destination, vm-a leaves with the floating IP and its own
// source port (not the router's SNAT IP), vm-b without one still leaves
// SNATed, and ARP for the floating IP is answered by the active gateway
// only, with the gateway port's MAC.
func TestFloatingIPCreatedBound(t *testing.T) {
	e := newEnv(t)
	e.write("fip.yaml", fipManifest("FloatingIp", fipIP, vmAIP, "vm-a"))
	out := e.sync()
	assert.Contains(t, out, "dnat_and_snat")
	e.ready("gw1", "hv1", "hv2")

	e.dnatToVM("gw1", vmA, vmB, 7001, 8001)
	e.leavesWithFIP("gw1", vmA, 40201, 5201)
	skip := count(t, e.wire("gw1"))
	e.send("hv2", "vm-b", vmBMAC, vmBIP, 40202, 5202)
	waitFor(t, e.wire("gw1"), "vm-b (no floating IP) leaving SNATed", skip, snated(5202))

	skip2 := count(t, e.wire("gw2"))
	e.inject("gw2", arpForFIP)
	e.inject("gw1", arpForFIP)
	got := waitFor(t, e.wire("gw1"), "ARP reply for the floating IP from gw1", skip, isFIPARPReply)
	assert.Equal(t, gwPortMAC, got.ARPSHA, "centralized floating IP: the gateway port's MAC (ONOS answered with the VM's)")
	requireNone(t, e.wire("gw2"), "standby gw2 answers ARP for the floating IP", skip2, isFIPARPReply)
}

// TestFloatingIPKindFloatingIP: the other spelling of the kind is read too.
func TestFloatingIPKindFloatingIP(t *testing.T) {
	e := newEnv(t)
	e.write("fip.yaml", fipManifest("FloatingIP", fipIP, vmBIP, "vm-b"))
	e.sync()
	e.ready("gw1", "hv1", "hv2")
	e.dnatToVM("gw1", vmB, vmA, 7002, 8002)
}

// TestFloatingIPMovedAndDeleted: moved from vm-a to vm-b in one edit, new
// traffic to it reaches vm-b and not vm-a, and vm-a leaves SNATed again;
// the NAT row is updated in place. Deleted, nothing answers for it and
// nothing reaches a VM through it.
func TestFloatingIPMovedAndDeleted(t *testing.T) {
	e := newEnv(t)
	e.write("fip.yaml", fipManifest("FloatingIp", fipIP, vmAIP, "vm-a"))
	e.sync()
	e.ready("gw1", "hv1", "hv2")
	e.dnatToVM("gw1", vmA, vmB, 7003, 8003)
	uuid := strings.TrimSpace(nbctl(t, e.l, "--bare", "--columns=_uuid", "find", "NAT", "external_ip="+fipIP))
	require.NotEmpty(t, uuid)

	e.write("fip.yaml", fipManifest("FloatingIp", fipIP, vmBIP, "vm-b"))
	out := e.sync()
	assert.NotContains(t, out, "delete NAT", "a move is an update of the row, not a delete and an insert")
	assert.Equal(t, uuid, strings.TrimSpace(nbctl(t, e.l, "--bare", "--columns=_uuid", "find", "NAT", "external_ip="+fipIP)), "the same NAT row")
	e.dnatToVM("gw1", vmB, vmA, 7004, 8004)
	e.leavesWithFIP("gw1", vmB, 40203, 5203)
	skip := count(t, e.wire("gw1"))
	e.send("hv1", "vm-a", vmAMAC, vmAIP, 40204, 5204)
	waitFor(t, e.wire("gw1"), "vm-a leaving SNATed after the move", skip, snated(5204))

	e.write("fip.yaml", "")
	out = e.sync()
	assert.Contains(t, out, "delete NAT")
	assert.Empty(t, strings.TrimSpace(nbctl(t, e.l, "--bare", "--columns=_uuid", "find", "NAT", "external_ip="+fipIP)))
	skip, skipA, skipB := count(t, e.wire("gw1")), count(t, e.vm("hv1", "vm-a")), count(t, e.vm("hv2", "vm-b"))
	e.inject("gw1", toFIP(7005, 8005))
	e.inject("gw1", arpForFIP)
	e.send("hv2", "vm-b", vmBMAC, vmBIP, 40205, 5205)
	// Barrier: vm-b's traffic leaves SNATed again.
	waitFor(t, e.wire("gw1"), "vm-b leaving SNATed after the deletion (barrier)", skip, snated(5205))
	toDeleted := func(s seen) bool { return s.IsUDP && s.SPort == 7005 && s.DPort == 8005 }
	requireNone(t, e.vm("hv1", "vm-a"), "traffic to the deleted floating IP reaches vm-a", skipA, toDeleted)
	requireNone(t, e.vm("hv2", "vm-b"), "traffic to the deleted floating IP reaches vm-b", skipB, toDeleted)
	requireNone(t, e.wire("gw1"), "gw1 answers ARP for the deleted floating IP", skip, isFIPARPReply)
}

// TestFloatingIPGatewayMoveSendsGARP: when the router's gateway moves, the
// new gateway announces the floating IP and serves it.
func TestFloatingIPGatewayMoveSendsGARP(t *testing.T) {
	e := newEnv(t)
	e.write("fip.yaml", fipManifest("FloatingIp", fipIP, vmAIP, "vm-a"))
	e.sync()
	e.ready("gw1", "hv1", "hv2")
	e.dnatToVM("gw1", vmA, vmB, 7006, 8006)

	skip2 := count(t, e.wire("gw2"))
	e.edit("router.yaml", "gateway: gw1", "gateway: gw2")
	e.sync()
	e.ready("gw2", "hv1", "hv2")
	garp := waitFor(t, e.wire("gw2"), "GARP for the floating IP from the new gateway", skip2, func(s seen) bool {
		return s.IsARP && s.ARPSPA == fipIP && s.ARPTPA == fipIP
	})
	assert.Equal(t, gwPortMAC, garp.ARPSHA)
	e.dnatToVM("gw2", vmA, vmB, 7007, 8007)
	e.leavesWithFIP("gw2", vmA, 40206, 5206)
}

// TestFloatingIPWithSNATDisabled: enableSnat false on a router with a
// floating IP keeps its gateway for the floating IP only: vm-a (with the
// floating IP) is reached and leaves with it; vm-b's private traffic does
// not leave, neither to the outside nor to a host on the external network.
// (The gateway port keeps spec.external.ip as its address, which OVN
// answers ARP for: a router port needs one to reach the peer.)
func TestFloatingIPWithSNATDisabled(t *testing.T) {
	e := newEnv(t)
	e.edit("router.yaml", "enableSnat: true", "enableSnat: false")
	e.write("fip.yaml", fipManifest("FloatingIp", fipIP, vmAIP, "vm-a"))
	out := e.sync()
	assert.NotContains(t, out, "create NAT snat")
	e.ready("gw1", "hv1", "hv2")

	e.dnatToVM("gw1", vmA, vmB, 7008, 8008)
	skip1, skip2 := count(t, e.wire("gw1")), count(t, e.wire("gw2"))
	e.send("hv2", "vm-b", vmBMAC, vmBIP, 40207, 5207)
	onLink := frame{SrcMAC: vmBMAC, DstMAC: routerMAC, SrcIP: vmBIP, DstIP: extHostIP, TTL: 64, SPort: 40208, DPort: 5208}
	require.NoError(t, e.l.Inject("hv2", "vm-b", frameBytes(t, onLink)))
	// Barrier: vm-a, with the floating IP, still leaves.
	e.leavesWithFIP("gw1", vmA, 40209, 5209)
	leaked := func(s seen) bool {
		return (s.IsUDP && (s.DPort == 5207 || s.DPort == 5208)) || (s.IsARP && s.ARPTPA == extHostIP)
	}
	requireNone(t, e.wire("gw1"), "vm-b's private traffic leaves through gw1 with SNAT disabled", skip1, leaked)
	requireNone(t, e.wire("gw2"), "vm-b's private traffic leaves through gw2 with SNAT disabled", skip2, leaked)
}

// TestFloatingIPHairpin: vm-b, behind the router's SNAT, reaches vm-a
// through vm-a's floating IP on the same router; vm-a sees vm-b's traffic
// from the SNAT IP.
func TestFloatingIPHairpin(t *testing.T) {
	e := newEnv(t)
	e.write("fip.yaml", fipManifest("FloatingIp", fipIP, vmAIP, "vm-a"))
	e.sync()
	e.ready("gw1", "hv1", "hv2")

	skip := count(t, e.vm("hv1", "vm-a"))
	f := frame{SrcMAC: vmBMAC, DstMAC: routerMAC, SrcIP: vmBIP, DstIP: fipIP, TTL: 64, SPort: 40210, DPort: 5210}
	require.NoError(t, e.l.Inject("hv2", "vm-b", frameBytes(t, f)))
	got := waitFor(t, e.vm("hv1", "vm-a"), "vm-b's UDP to vm-a's floating IP at vm-a", skip, func(s seen) bool {
		return s.IsUDP && s.DstIP == vmAIP && s.DPort == 5210
	})
	assert.Equal(t, snatIP, got.SrcIP, "the receiver sees the caller's SNAT address")
}

// TestZonesFloatingIP: on interconnect OVN the floating IP's NAT lives with
// router1 in its home zone gw1, while vm-a is in zone hv1: from outside to
// the floating IP reaches vm-a across zones, vm-a leaves with it, gw1 alone
// answers ARP for it, and vm-b in zone hv2 reaches vm-a through it.
func TestZonesFloatingIP(t *testing.T) {
	e := newZoneEnv(t)
	require.NoError(t, os.WriteFile(filepath.Join(e.manifests, "fip.yaml"), []byte(fipManifest("FloatingIp", fipIP, vmAIP, "vm-a")), 0o644))
	e.sync()
	e.ready("gw1")
	for _, zdb := range e.z.List() {
		nat := strings.TrimSpace(nbctl(t, zdb, "--bare", "--columns=_uuid", "find", "NAT", "external_ip="+fipIP))
		if zdb.Name == "gw1" {
			assert.NotEmpty(t, nat, "the floating IP's NAT in the router's home zone")
		} else {
			assert.Empty(t, nat, "zone %s holds the floating IP's NAT", zdb.Name)
		}
	}

	e.dnatToVM("gw1", vmA, vmB, 7011, 8011)
	e.leavesWithFIP("gw1", vmA, 40211, 5211)

	// ARP for it: gw1 answers; gw2's zone has no router and stays silent.
	skip1, skip2 := count(t, e.wire("gw1")), count(t, e.wire("gw2"))
	e.inject("gw2", arpForFIP)
	e.inject("gw1", arpForFIP)
	got := waitFor(t, e.wire("gw1"), "ARP reply for the floating IP from gw1", skip1, isFIPARPReply)
	assert.Equal(t, gwPortMAC, got.ARPSHA)
	requireNone(t, e.wire("gw2"), "gw2 answers ARP for the floating IP", skip2, isFIPARPReply)

	// Hairpin across zones: vm-b (zone hv2, behind SNAT) reaches vm-a
	// (zone hv1) through its floating IP, from the SNAT IP.
	skip := count(t, e.vm("hv1", "vm-a"))
	f := frame{SrcMAC: vmBMAC, DstMAC: routerMAC, SrcIP: vmBIP, DstIP: fipIP, TTL: 64, SPort: 40212, DPort: 5212}
	require.NoError(t, e.z.Inject("hv2", "vm-b", frameBytes(t, f)))
	in := waitFor(t, e.vm("hv1", "vm-a"), "vm-b's UDP to vm-a's floating IP at vm-a", skip, func(s seen) bool {
		return s.IsUDP && s.DstIP == vmAIP && s.DPort == 5212
	})
	assert.Equal(t, snatIP, in.SrcIP)
}
