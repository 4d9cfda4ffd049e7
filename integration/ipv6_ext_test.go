package integration

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubevirt-ovn/kubevirt-ovn/integration/sandbox"
	"github.com/kubevirt-ovn/kubevirt-ovn/integration/wire"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator"
)

// The external side over IPv6 (issue 33): deploy/examples-dual-stack's
// networks and router. router1 has 2001:db8:ff::100 on public and its
// IPv6 default route through the peer's 2001:db8:ff::1 (MAC pinned, as
// its IPv4 one).
const (
	ext6    = "2001:db8:ff::100"
	peer6   = "2001:db8:ff::1"
	remote6 = "2001:db8:99::7"
)

// TestDualStackExternal: vm-a's IPv6 datagram to a remote host leaves the
// active gateway routed from vm-a's own address (no NAT66 unless asked),
// from the gateway port's MAC to the peer's, hop limit decremented, and
// the remote's reply reaches vm-a; gw2 (standby) sends nothing. A neighbor
// solicitation for the router's external IPv6 address is answered by the
// active gateway alone. With enableIpv6Snat the datagram leaves from
// 2001:db8:ff::100 and the reply is un-NATed back to vm-a. The IPv4 half
// leaves SNATed as ever, on the same VM. enableSnat false with a floating
// IP keeps IPv6 in, as the floating IP policies keep IPv4 in.
func TestDualStackExternal(t *testing.T) {
	e := newEnv(t)
	useDualStack(t, e, "networks.yaml", "router.yaml")
	e.sync()
	e.ready("gw1", "hv1", "hv2")
	vmA6 := translator.SLAACAddress(netip.MustParsePrefix("fd00:10::/64"), vmAMAC).String()
	atA, gw1, gw2 := e.vm("hv1", "vm-a"), e.wire("gw1"), e.wire("gw2")

	out6 := func(src string, sport, dport uint16) func(seen) bool {
		return func(s seen) bool { return s.IsUDP && s.SrcIP == src && s.DstIP == remote6 && s.DPort == dport }
	}
	send6 := func(sport, dport uint16) {
		t.Helper()
		require.NoError(t, e.l.Inject("hv1", "vm-a", frameBytes(t, frame{SrcMAC: vmAMAC, DstMAC: routerMAC, SrcIP: vmA6, DstIP: remote6, TTL: 64, SPort: sport, DPort: dport})))
	}

	// Routed: vm-a's own address leaves, and the reply comes back.
	skip2 := count(t, gw2)
	send6(41000, 7001)
	got := waitFor(t, gw1, "vm-a's IPv6 datagram leaving gw1 routed", 0, out6(vmA6, 41000, 7001))
	assert.Equal(t, gwPortMAC, got.SrcMAC, "from the gateway port")
	assert.Equal(t, peerMAC, got.DstMAC, "to the peer router (its MAC pinned for its IPv6 address too)")
	assert.Equal(t, uint8(63), got.TTL, "hop limit decremented once")
	skip := count(t, atA)
	e.inject("gw1", frame{SrcMAC: peerMAC, DstMAC: gwPortMAC, SrcIP: remote6, DstIP: vmA6, TTL: 64, SPort: 7001, DPort: 41000})
	back := waitFor(t, atA, "the remote's IPv6 reply at vm-a", skip, func(s seen) bool {
		return s.IsUDP && s.SrcIP == remote6 && s.DstIP == vmA6 && s.DPort == 41000
	})
	assert.Equal(t, routerMAC, back.SrcMAC)
	requireNone(t, gw2, "standby gw2 sends vm-a's IPv6 traffic", skip2, func(s seen) bool { return s.IsUDP && s.DstIP == remote6 })

	// ND for the router's external IPv6 address: the active gateway
	// answers, the standby does not.
	isNA := func(s seen) bool { return s.NA != nil && s.NA.TargetAddress.String() == ext6 }
	skip2 = count(t, gw2)
	ns := wire.NeighborSolicitation(peerMAC, peer6, ext6)
	e.inject("gw2", ns)
	e.inject("gw1", ns)
	na := waitFor(t, gw1, "gw1's neighbor advertisement for "+ext6, 0, isNA)
	assert.Equal(t, gwPortMAC, na.SrcMAC)
	requireNone(t, gw2, "standby gw2 answers ND for "+ext6, skip2, isNA)

	// The IPv4 half: SNATed as ever.
	e.send("hv1", "vm-a", vmAMAC, vmAIP, 41001, 7002)
	waitFor(t, gw1, "vm-a's IPv4 datagram leaving SNATed", 0, snated(7002))

	// NAT66 when asked.
	e.edit("router.yaml", "enableSnat: true", "enableSnat: true\n  enableIpv6Snat: true")
	assert.Contains(t, e.sync(), "create NAT snat fd00:10::/64")
	// To another remote host (no cached datapath flow of the routed
	// one: see the last step).
	const remote6c = "2001:db8:99::9"
	require.NoError(t, e.l.Inject("hv1", "vm-a", frameBytes(t, frame{SrcMAC: vmAMAC, DstMAC: routerMAC, SrcIP: vmA6, DstIP: remote6c, TTL: 64, SPort: 41002, DPort: 7003})))
	nat := waitFor(t, gw1, "vm-a's IPv6 datagram leaving SNATed to "+ext6, 0, func(s seen) bool {
		return s.IsUDP && s.SrcIP == ext6 && s.DstIP == remote6c && s.DPort == 7003
	})
	skip = count(t, atA)
	e.inject("gw1", frame{SrcMAC: peerMAC, DstMAC: gwPortMAC, SrcIP: remote6c, DstIP: ext6, TTL: 64, SPort: 7003, DPort: nat.SPort})
	back = waitFor(t, atA, "the remote's reply to "+ext6+" un-NATed at vm-a", skip, func(s seen) bool {
		return s.IsUDP && s.SrcIP == remote6c && s.DPort == 41002
	})
	assert.Equal(t, vmA6, back.DstIP)

	// enableSnat false with a floating IP (vm-b's): the external side
	// stays for the floating IP, and nothing else of the VMs leaves, IPv6
	// (routed) included.
	e.edit("router.yaml", "enableSnat: true\n  enableIpv6Snat: true", "enableSnat: false")
	e.write("fips.yaml", fipsManifest)
	e.sync()
	// To another remote host: ovs-vswitchd revalidates its datapath flow
	// cache after a flow table change asynchronously, and a datagram of a
	// flow just like the last one may still follow its cached megaflow
	// for a moment (seen once under load). A new destination has none.
	const remote6b = "2001:db8:99::8"
	require.NoError(t, e.l.Inject("hv1", "vm-a", frameBytes(t, frame{SrcMAC: vmAMAC, DstMAC: routerMAC, SrcIP: vmA6, DstIP: remote6b, TTL: 64, SPort: 41003, DPort: 7004})))
	e.send("hv2", "vm-b", vmBMAC, vmBIP, 41004, 7005)
	waitFor(t, gw1, "barrier: vm-b's IPv4 datagram leaving from its floating IP", 0, func(s seen) bool {
		return s.IsUDP && s.SrcIP == fipIP && s.DPort == 7005
	})
	requireNone(t, gw1, "vm-a's IPv6 datagram leaving with enableSnat false", 0, func(s seen) bool { return s.IsUDP && s.DPort == 7004 })
}

// fip6 is vm-b's IPv6 floating IP in TestDualStackFloatingIP, fip6VMB
// its manifest.
const (
	fip6    = "2001:db8:ff::150"
	fip6VMB = `apiVersion: kubevirt.io/v1
kind: FloatingIp
metadata:
  name: fip6-vm-b
spec:
  id: fip6-vm-b
  routerName: router1
  networkName: public
  floatingIp: "` + fip6 + `"
  fixedIp: "` + vmBIPv6 + `"
  vmName: vm-b
`
)

// TestDualStackFloatingIP: an IPv6 floating IP bound to the address vm-b's
// VMI reports. A neighbor solicitation for it is answered by the active
// gateway alone; the outside reaches vm-b through it and vm-b's reply
// leaves from it; a new flow of vm-b's leaves from it too (not from its
// own address, as other VMs' IPv6 does); vm-b's IPv4 floating IP works
// beside it.
func TestDualStackFloatingIP(t *testing.T) {
	e := newEnv(t)
	useDualStack(t, e, "networks.yaml", "router.yaml")
	e.write("fips.yaml", fipsManifest+"---\n"+fip6VMB)
	e.sync()
	e.ready("gw1", "hv1", "hv2")
	atB, gw1, gw2 := e.vm("hv2", "vm-b"), e.wire("gw1"), e.wire("gw2")

	isNA := func(s seen) bool { return s.NA != nil && s.NA.TargetAddress.String() == fip6 }
	skip2 := count(t, gw2)
	ns := wire.NeighborSolicitation(peerMAC, peer6, fip6)
	e.inject("gw2", ns)
	e.inject("gw1", ns)
	na := waitFor(t, gw1, "gw1's neighbor advertisement for "+fip6, 0, isNA)
	assert.Equal(t, gwPortMAC, na.SrcMAC)
	requireNone(t, gw2, "standby gw2 answers ND for "+fip6, skip2, isNA)

	skip := count(t, atB)
	e.inject("gw1", frame{SrcMAC: peerMAC, DstMAC: gwPortMAC, SrcIP: remote6, DstIP: fip6, TTL: 64, SPort: 7100, DPort: 80})
	in := waitFor(t, atB, "outside -> "+fip6+" at vm-b", skip, func(s seen) bool { return s.IsUDP && s.SrcIP == remote6 && s.DPort == 80 })
	assert.Equal(t, vmBIPv6, in.DstIP, "DNATed to vm-b's address")
	require.NoError(t, e.l.Inject("hv2", "vm-b", frameBytes(t, frame{SrcMAC: vmBMAC, DstMAC: routerMAC, SrcIP: vmBIPv6, DstIP: remote6, TTL: 64, SPort: 80, DPort: 7100})))
	out := waitFor(t, gw1, "vm-b's reply leaving from "+fip6, 0, func(s seen) bool { return s.IsUDP && s.SPort == 80 && s.DPort == 7100 })
	assert.Equal(t, fip6, out.SrcIP)
	require.NoError(t, e.l.Inject("hv2", "vm-b", frameBytes(t, frame{SrcMAC: vmBMAC, DstMAC: routerMAC, SrcIP: vmBIPv6, DstIP: remote6, TTL: 64, SPort: 41000, DPort: 7101})))
	out = waitFor(t, gw1, "vm-b's new IPv6 flow leaving", 0, func(s seen) bool { return s.IsUDP && s.DPort == 7101 })
	assert.Equal(t, fip6, out.SrcIP, "from its floating IP")

	// The IPv4 floating IP beside it.
	skip = count(t, atB)
	e.inject("gw1", frame{SrcMAC: peerMAC, DstMAC: gwPortMAC, SrcIP: remoteIP, DstIP: fipIP, TTL: 64, SPort: 7102, DPort: 80})
	waitFor(t, atB, "outside -> "+fipIP+" at vm-b", skip, func(s seen) bool { return s.IsUDP && s.SrcIP == remoteIP && s.DstIP == vmBIP && s.DPort == 80 })
}

// TestDualStackFailover: the primary gateway dies and BFD moves router1's
// gateway port to the backup. OVN announces a moved gateway port by GARP
// for its IPv4 addresses only (pinctrl sends no unsolicited neighbor
// advertisement), and none is needed: the port keeps its MAC, so the
// upstream's neighbor entry for spec.external.ipv6 stays right, and the
// GARP (from that MAC) moves the MAC on the physical network for both
// families. After the move, vm-a's IPv6 leaves the backup routed, the
// remote's reply through the backup reaches it, and the backup answers ND
// for the router's external IPv6 address.
func TestDualStackFailover(t *testing.T) {
	e := newEnv(t)
	useDualStack(t, e, "networks.yaml", "router.yaml")
	e.sync()
	order := gatewayOrders(t, e.l)["router1"]
	require.Len(t, order, 2)
	primary, backup := order[0], order[1]
	e.ready(primary, "hv1", "hv2")
	vmA6 := translator.SLAACAddress(netip.MustParsePrefix("fd00:10::/64"), vmAMAC).String()
	send6 := func(sport, dport uint16) {
		t.Helper()
		require.NoError(t, e.l.Inject("hv1", "vm-a", frameBytes(t, frame{SrcMAC: vmAMAC, DstMAC: routerMAC, SrcIP: vmA6, DstIP: remote6, TTL: 64, SPort: sport, DPort: dport})))
	}
	send6(42000, 7400)
	waitFor(t, e.wire(primary), "vm-a's IPv6 leaving the primary "+primary, 0, func(s seen) bool { return s.IsUDP && s.SrcIP == vmA6 && s.DPort == 7400 })

	skip := count(t, e.wire(backup))
	_, err := e.l.KillChassis(primary)
	require.NoError(t, err)
	require.NoError(t, sandbox.Poll(120*time.Second, "router1's gateway port on the backup "+backup, func() (bool, error) {
		return boundChassis(t, e.l, crPort) == backup, nil
	}))
	garp := waitFor(t, e.wire(backup), "GARP for the SNAT IP from the backup", skip, func(s seen) bool {
		return s.IsARP && s.ARPSPA == snatIP && s.ARPTPA == snatIP
	})
	assert.Equal(t, gwPortMAC, garp.SrcMAC, "the gateway port's MAC, the one the upstream has for "+ext6)

	var out seen
	require.NoError(t, sandbox.Poll(60*time.Second, "vm-a's IPv6 leaving the backup", func() (bool, error) {
		n := count(t, e.wire(backup))
		send6(42001, 7401)
		ps, err := e.wire(backup).read()
		if err != nil {
			return false, err
		}
		for _, s := range ps[min(n, len(ps)):] {
			if s.IsUDP && s.SrcIP == vmA6 && s.DPort == 7401 {
				out = s
				return true, nil
			}
		}
		return false, nil
	}))
	assert.Equal(t, gwPortMAC, out.SrcMAC)
	skipA := count(t, e.vm("hv1", "vm-a"))
	e.inject(backup, frame{SrcMAC: peerMAC, DstMAC: gwPortMAC, SrcIP: remote6, DstIP: vmA6, TTL: 64, SPort: 7401, DPort: 42001})
	waitFor(t, e.vm("hv1", "vm-a"), "the remote's IPv6 reply through the backup at vm-a", skipA, func(s seen) bool {
		return s.IsUDP && s.SrcIP == remote6 && s.DPort == 42001
	})
	e.inject(backup, wire.NeighborSolicitation(peerMAC, peer6, ext6))
	na := waitFor(t, e.wire(backup), "the backup's neighbor advertisement for "+ext6, skip, func(s seen) bool {
		return s.NA != nil && s.NA.TargetAddress.String() == ext6
	})
	assert.Equal(t, gwPortMAC, na.SrcMAC)
	ps, err := e.wire(backup).read()
	require.NoError(t, err)
	unsolicited := 0
	for _, s := range ps[skip:] {
		if s.NA != nil && s.DstIP != peer6 {
			unsolicited++
		}
	}
	report(t, fmt.Sprintf("dual stack failover to %s: %d unsolicited neighbor advertisements seen (OVN announces the moved port by GARP)", backup, unsolicited))
}
