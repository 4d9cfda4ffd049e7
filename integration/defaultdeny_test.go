package integration

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// --default-deny (issue 22, ONOS parity): every VM port drops IP traffic
// both ways except DHCP, ARP and ping to its network's gateway, unless a
// security group allows it.

const fipVMA = "172.16.0.151"

// fipsManifest gives vm-a and vm-b floating IPs (fipVMA, fipIP), so that
// both can be reached from outside (the router's ports are in no group:
// what the outside sends is judged by the VM port's ACLs alone).
const fipsManifest = `apiVersion: kubevirt.io/v1
kind: FloatingIp
metadata:
  name: fip-vm-b
spec:
  id: fip-vm-b
  routerName: router1
  networkName: public
  floatingIp: ` + fipIP + `
  fixedIp: ` + vmBIP + `
  vmName: vm-b
---
apiVersion: kubevirt.io/v1
kind: FloatingIp
metadata:
  name: fip-vm-a
spec:
  id: fip-vm-a
  routerName: router1
  networkName: public
  floatingIp: ` + fipVMA + `
  fixedIp: ` + vmAIP + `
  vmName: vm-a
`

// TestDefaultDeny: with --default-deny, vm-a (in no security group) gets
// nothing from outside through its floating IP and sends nothing out, but
// gets its DHCP answer, its gateway's MAC by ARP and its gateway's echo
// reply; vm-b, in sg-web, gets the UDP port sg-web allows from outside
// (and its reply goes back), not another. Without the flag the network's
// groups are gone and vm-a is open both ways.
func TestDefaultDeny(t *testing.T) {
	e := newEnv(t)
	e.flags = []string{"--default-deny"}
	e.write("vmis.yaml", sgVMIs("", `["sg-web"]`))
	e.write("sg.yaml", sgWeb(80))
	e.write("fips.yaml", fipsManifest)
	out := e.sync()
	assert.Contains(t, out, "create Port_Group kv_net_net_a.")
	assert.Contains(t, out, "create Port_Group kv_net_net_b.")
	e.ready("gw1", "hv1", "hv2")
	// ovn-kubernetes starting beside us leaves the networks' groups and
	// their ACLs as they are.
	e.neighbour()

	atA, atB, wire := e.vm("hv1", "vm-a"), e.vm("hv2", "vm-b"), e.wire("gw1")
	fromOutside := func(fip string, sport, dport uint16) {
		t.Helper()
		e.inject("gw1", frame{SrcMAC: peerMAC, DstMAC: gwPortMAC, SrcIP: remoteIP, DstIP: fip, TTL: 64, SPort: sport, DPort: dport})
	}
	inFrom := func(sport, dport uint16) func(seen) bool {
		return func(s seen) bool { return s.IsUDP && s.SrcIP == remoteIP && s.SPort == sport && s.DPort == dport }
	}
	// intoB is a flow from outside that sg-web lets into vm-b: the
	// barrier of the negative checks from outside.
	intoB := func(sport uint16, what string) {
		t.Helper()
		skip := count(t, atB)
		fromOutside(fipIP, sport, 80)
		waitFor(t, atB, what, skip, inFrom(sport, 80))
	}

	// vm-b: what its group allows passes (through the default deny of
	// net-b), and its reply leaves with its floating IP.
	intoB(7600, "outside -> vm-b udp/80 (allowed by sg-web)")
	skip := count(t, wire)
	require.NoError(t, e.l.Inject(vmB.chassis, vmB.port, frameBytes(t, frame{SrcMAC: vmB.mac, DstMAC: routerMAC, SrcIP: vmB.ip, DstIP: remoteIP, TTL: 64, SPort: 80, DPort: 7600})))
	waitFor(t, wire, "vm-b's reply leaving", skip, func(s seen) bool { return s.IsUDP && s.SrcIP == fipIP && s.DPort == 7600 })
	// Another port: dropped.
	skip = count(t, atB)
	fromOutside(fipIP, 7601, 81)
	intoB(7602, "barrier: outside -> vm-b udp/80")
	requireNone(t, atB, "outside -> vm-b udp/81 (no rule)", skip, inFrom(7601, 81))

	// vm-a, in no group: nothing in.
	skip = count(t, atA)
	fromOutside(fipVMA, 7603, 80)
	intoB(7604, "barrier: outside -> vm-b udp/80")
	requireNone(t, atA, "outside -> vm-a (default deny in)", skip, inFrom(7603, 80))

	// ARP for its gateway is answered (ARP is no IP).
	skip = count(t, atA)
	arp := frame{SrcMAC: vmAMAC, DstMAC: "ff:ff:ff:ff:ff:ff", ARPOp: 1, ARPSHA: vmAMAC, ARPSPA: vmAIP, ARPTHA: "00:00:00:00:00:00", ARPTPA: netAGateway}
	require.NoError(t, e.l.Inject("hv1", "vm-a", frameBytes(t, arp)))
	reply := waitFor(t, atA, "ARP reply of net-a's gateway", skip, func(s seen) bool { return s.IsARP && s.ARPOp == 2 && s.ARPSPA == netAGateway })
	assert.Equal(t, routerMAC, reply.ARPSHA)
	// DHCP is answered.
	e.exchange(vmA, "net-a", netAGateway, 0x6000)
	// Ping to its gateway is answered.
	ping := func(id uint16) func(seen) bool {
		require.NoError(t, e.l.Inject(vmA.chassis, vmA.port, frameBytes(t, frame{SrcMAC: vmA.mac, DstMAC: routerMAC, SrcIP: vmA.ip, DstIP: netAGateway, TTL: 64, SPort: id, DPort: 1, ICMPEcho: true})))
		return func(s seen) bool { return s.IsICMP && s.ICMPType == 0 && s.SrcIP == netAGateway && s.SPort == id }
	}
	skip = count(t, atA)
	waitFor(t, atA, "echo reply from net-a's gateway", skip, ping(0x61))

	// Nothing out: to the outside, and to vm-b's allowed port (so only
	// vm-a's own default deny can drop it). Barrier: a ping to the
	// gateway, injected after them on the same port.
	skipWire, skipB := count(t, wire), count(t, atB)
	require.NoError(t, e.l.Inject(vmA.chassis, vmA.port, frameBytes(t, frame{SrcMAC: vmA.mac, DstMAC: routerMAC, SrcIP: vmA.ip, DstIP: remoteIP, TTL: 64, SPort: 7605, DPort: 9000})))
	require.NoError(t, e.l.Inject(vmA.chassis, vmA.port, frameBytes(t, routed(vmA, vmB, 7606, 80))))
	skip = count(t, atA)
	waitFor(t, atA, "barrier: echo reply from net-a's gateway", skip, ping(0x62))
	requireNone(t, wire, "vm-a -> outside (default deny out)", skipWire, func(s seen) bool { return s.IsUDP && s.SPort == 7605 })
	requireNone(t, atB, "vm-a -> vm-b udp/80 (default deny out of vm-a)", skipB, arrives(vmA, 7606, 80))

	// Without the flag: the groups go, vm-a is open both ways.
	e.flags = nil
	out = e.sync()
	assert.Contains(t, out, "delete Port_Group kv_net_net_a.")
	assert.Contains(t, out, "delete Port_Group kv_net_net_b.")
	assert.NotContains(t, nbctl(t, e.l, "--bare", "--columns=name", "list", "Port_Group"), "kv_net_")
	skip = count(t, atA)
	fromOutside(fipVMA, 7607, 80)
	waitFor(t, atA, "outside -> vm-a without --default-deny", skip, inFrom(7607, 80))
	skip = count(t, wire)
	require.NoError(t, e.l.Inject(vmA.chassis, vmA.port, frameBytes(t, frame{SrcMAC: vmA.mac, DstMAC: routerMAC, SrcIP: vmA.ip, DstIP: remoteIP, TTL: 64, SPort: 7608, DPort: 9000})))
	got := waitFor(t, wire, "vm-a -> outside without --default-deny", skip, func(s seen) bool { return s.IsUDP && s.SPort == 7608 })
	assert.Equal(t, fipVMA, got.SrcIP)
}
