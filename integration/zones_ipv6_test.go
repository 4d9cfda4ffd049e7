package integration

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubevirt-ovn/kubevirt-ovn/integration/wire"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator"
)

// TestZonesDualStack: deploy/examples-dual-stack synced into every zone
// (router1 in zone gw1, vm-a in zone hv1, vm-b in zone hv2). vm-a's router
// solicitation is answered across zones; IPv6 is routed between vm-a and
// vm-b both ways through router1's zone; vm-a's IPv6 datagram leaves gw1
// routed from its own address and the remote's reply comes back to it;
// the IPv4 half leaves SNATed beside. An IPv6 remote-group rule admits a
// member of the remote group from another zone.
func TestZonesDualStack(t *testing.T) {
	e := newZoneEnv(t)
	useDualStack(t, e, "networks.yaml", "router.yaml")
	e.sync()
	e.ready("gw1")
	vmA6 := translator.SLAACAddress(netip.MustParsePrefix("fd00:10::/64"), vmAMAC).String()
	atA, atB := e.vm("hv1", "vm-a"), e.vm("hv2", "vm-b")

	skip := count(t, atA)
	e.vmSends("hv1", "vm-a", wire.RouterSolicitation(vmAMAC))
	ra := waitFor(t, atA, "router1's advertisement (zone gw1) to vm-a (zone hv1)", skip, func(s seen) bool { return s.RA != nil })
	assert.Equal(t, routerMAC, ra.SrcMAC)

	udp6 := func(src, dst string, dport uint16) func(seen) bool {
		return func(s seen) bool { return s.IsUDP && s.SrcIP == src && s.DstIP == dst && s.DPort == dport }
	}
	skip = count(t, atB)
	e.vmSends("hv1", "vm-a", frame{SrcMAC: vmAMAC, DstMAC: routerMAC, SrcIP: vmA6, DstIP: vmBIPv6, TTL: 64, SPort: 41000, DPort: 6701})
	got := waitFor(t, atB, "vm-a's IPv6 datagram (zone hv1) at vm-b (zone hv2)", skip, udp6(vmA6, vmBIPv6, 6701))
	assert.Equal(t, routerMAC, got.SrcMAC)
	assert.Equal(t, uint8(63), got.TTL)
	skip = count(t, atA)
	e.vmSends("hv2", "vm-b", frame{SrcMAC: vmBMAC, DstMAC: routerMAC, SrcIP: vmBIPv6, DstIP: vmA6, TTL: 64, SPort: 41000, DPort: 6702})
	waitFor(t, atA, "vm-b's IPv6 datagram (zone hv2) at vm-a (zone hv1)", skip, udp6(vmBIPv6, vmA6, 6702))

	e.vmSends("hv1", "vm-a", frame{SrcMAC: vmAMAC, DstMAC: routerMAC, SrcIP: vmA6, DstIP: remote6, TTL: 64, SPort: 41001, DPort: 6703})
	out := waitFor(t, e.wire("gw1"), "vm-a's IPv6 datagram leaving gw1 routed", 0, udp6(vmA6, remote6, 6703))
	assert.Equal(t, peerMAC, out.DstMAC)
	skip = count(t, atA)
	e.inject("gw1", frame{SrcMAC: peerMAC, DstMAC: gwPortMAC, SrcIP: remote6, DstIP: vmA6, TTL: 64, SPort: 6703, DPort: 41001})
	waitFor(t, atA, "the remote's IPv6 reply at vm-a (zone hv1)", skip, udp6(remote6, vmA6, 41001))

	e.send("hv1", "vm-a", vmAMAC, vmAIP, 41002, 6704)
	waitFor(t, e.wire("gw1"), "vm-a's IPv4 datagram leaving SNATed", 0, snated(6704))

	// Security groups across zones: vm-a in sg-web admits UDP 90 over
	// IPv6 from sg-client's members, vm-b (zone hv2) one. Zone hv1 holds no
	// port of sg-client, so the rule matches kubevirt-ovn's
	// kv_sgaddr_sg_client..._ip6 (every member's IPv6 addresses), not
	// OVN's per-zone $<pg>_ip6.
	e.write("vmis.yaml", dualStackSGVMIs(`["sg-web"]`, `["sg-client"]`))
	e.write("sg.yaml", sgWeb6)
	e.sync()
	e.ready("gw1")
	a6 := vmRef{"hv1", "vm-a", vmAMAC, vmA6}
	b6 := vmRef{"hv2", "vm-b", vmBMAC, vmBIPv6}
	skip = count(t, atA)
	e.vmSends("hv2", "vm-b", routed(b6, a6, 5030, 90))
	waitFor(t, atA, "vm-b (zone hv2, sg-client) -> vm-a (zone hv1) udp6/90", skip, arrives(b6, 5030, 90))
	skip = count(t, atB)
	e.vmSends("hv1", "vm-a", routed(a6, b6, 90, 5030))
	waitFor(t, atB, "vm-a's IPv6 reply into zone hv2", skip, arrives(a6, 90, 5030))
	skip = count(t, atA)
	e.vmSends("hv2", "vm-b", routed(b6, a6, 5031, 91))
	e.vmSends("hv2", "vm-b", routed(b6, a6, 5032, 90))
	waitFor(t, atA, "barrier: vm-b -> vm-a udp6/90", skip, arrives(b6, 5032, 90))
	requireNone(t, atA, "vm-b -> vm-a udp6/91 (no rule)", skip, arrives(b6, 5031, 91))
}

// TestZonesDualStackNATAndLoadBalancer: across interconnect zones
// (router1 in zone gw1, vm-a in zone hv1, vm-b and vm-c in zone hv2),
// with enableIpv6Snat: vm-a's IPv6 datagram leaves gw1 NAT66ed to
// spec.external.ipv6 and the reply is un-NATed back into zone hv1;
// vm-b's IPv6 floating IP takes flows from outside into zone hv2 and
// vm-b's reply and new flow leave from it (not NAT66ed); load balancer
// web6's floating IP spreads flows from outside over vm-a (zone hv1) and
// vm-c (zone hv2), each flow staying on its member and DNATed to its
// address, and vm-b reaches the VIP from net-b. The IPv4 load balancer
// works beside it.
func TestZonesDualStackNATAndLoadBalancer(t *testing.T) {
	const remote6c = "2001:db8:99::9"
	e := newZoneEnv(t)
	useDualStack(t, e, "networks.yaml", "router.yaml")
	e.edit("router.yaml", "enableSnat: true", "enableSnat: true\n  enableIpv6Snat: true")
	require.NoError(t, e.z.AddVMPort("hv2", "vm-c", vmLBCPort))
	e.write("fips.yaml", fip6VMB)
	e.write("lb.yaml", lbManifests+web6Manifests("udp", ""))
	out := e.sync()
	assert.Contains(t, out, "create NAT snat fd00:10::/64")
	e.ready("gw1")
	nbctl(t, e.z.Zone("hv2"), "--timeout=90", "wait-until", "Logical_Switch_Port", vmLBCPort, "up=true")
	vmA6 := slaacA(vmAMAC)
	atA, atB, gw1 := e.vm("hv1", "vm-a"), e.vm("hv2", "vm-b"), e.wire("gw1")

	// NAT66 from zone hv1.
	e.vmSends("hv1", "vm-a", frame{SrcMAC: vmAMAC, DstMAC: routerMAC, SrcIP: vmA6, DstIP: remote6c, TTL: 64, SPort: 41002, DPort: 7003})
	nat := waitFor(t, gw1, "vm-a's IPv6 datagram (zone hv1) leaving gw1 NAT66ed to "+ext6, 0, func(s seen) bool {
		return s.IsUDP && s.SrcIP == ext6 && s.DstIP == remote6c && s.DPort == 7003
	})
	skip := count(t, atA)
	e.inject("gw1", frame{SrcMAC: peerMAC, DstMAC: gwPortMAC, SrcIP: remote6c, DstIP: ext6, TTL: 64, SPort: 7003, DPort: nat.SPort})
	back := waitFor(t, atA, "the reply to "+ext6+" un-NATed into zone hv1", skip, func(s seen) bool {
		return s.IsUDP && s.SrcIP == remote6c && s.DPort == 41002
	})
	assert.Equal(t, vmA6, back.DstIP)

	// vm-b's IPv6 floating IP, into zone hv2 and out of it.
	skip = count(t, atB)
	e.inject("gw1", frame{SrcMAC: peerMAC, DstMAC: gwPortMAC, SrcIP: remote6, DstIP: fip6, TTL: 64, SPort: 7100, DPort: 80})
	in := waitFor(t, atB, "outside -> "+fip6+" at vm-b (zone hv2)", skip, func(s seen) bool { return s.IsUDP && s.SrcIP == remote6 && s.DPort == 80 })
	assert.Equal(t, vmBIPv6, in.DstIP, "DNATed to vm-b's address")
	e.vmSends("hv2", "vm-b", frame{SrcMAC: vmBMAC, DstMAC: routerMAC, SrcIP: vmBIPv6, DstIP: remote6, TTL: 64, SPort: 80, DPort: 7100})
	reply := waitFor(t, gw1, "vm-b's reply leaving gw1", 0, func(s seen) bool { return s.IsUDP && s.SPort == 80 && s.DPort == 7100 })
	assert.Equal(t, fip6, reply.SrcIP, "from its floating IP")
	e.vmSends("hv2", "vm-b", frame{SrcMAC: vmBMAC, DstMAC: routerMAC, SrcIP: vmBIPv6, DstIP: remote6, TTL: 64, SPort: 41000, DPort: 7101})
	reply = waitFor(t, gw1, "vm-b's new IPv6 flow leaving gw1", 0, func(s seen) bool { return s.IsUDP && s.DPort == 7101 })
	assert.Equal(t, fip6, reply.SrcIP, "from its floating IP, not NAT66ed")

	// web6 over members in two zones.
	web6Spread(t, e.traffic, []vmRef{{"hv1", "vm-a", vmAMAC, vmA6}, {"hv2", "vm-c", vmLBCMAC, slaacA(vmLBCMAC)}})
	webLands(t, e.traffic, 7330)
}

// TestZonesIPv6OnlyNetwork: TestIPv6OnlyNetwork across interconnect
// zones: net-b IPv6-only, vm-b in zone hv2, vm-a in zone hv1, router1 in
// zone gw1. The advertisement reaches vm-b, IPv6 is routed between the
// VMs both ways and out of gw1 and back to vm-b.
func TestZonesIPv6OnlyNetwork(t *testing.T) {
	e := newZoneEnv(t)
	useDualStack(t, e, "networks.yaml", "router.yaml")
	ipv6OnlyNetB(e)
	e.sync()
	e.ready("gw1")
	atB := e.vm("hv2", "vm-b")
	skip := count(t, atB)
	e.vmSends("hv2", "vm-b", wire.RouterSolicitation(vmBMAC))
	waitFor(t, atB, "router1's advertisement (zone gw1) on IPv6-only net-b (zone hv2)", skip, func(s seen) bool { return s.RA != nil })
	ipv6OnlyPaths(t, e.traffic, 6920)
}
