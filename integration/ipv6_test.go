package integration

import (
	byteorder "encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/gopacket/layers"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubevirt-ovn/kubevirt-ovn/integration/sandbox"
	"github.com/kubevirt-ovn/kubevirt-ovn/integration/wire"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/trace"
)

// Dual stack internal networks (issue 33): deploy/examples with
// deploy/examples-dual-stack/networks.yaml, net-a fd00:10::/64 and net-b
// fd00:20::/64 beside their IPv4 CIDRs. vm-a has the SLAAC address of its
// MAC; vm-b's VMI reports a stable-privacy address (RFC 7217) and
// link-local address, as the guest agent does for a guest configured so.
const (
	vmBIPv6      = "fd00:20::a1b2:c3d4:e5f6:789"
	vmBLinkLocal = "fe80::1c2d:3e4f:5a6b:7c8d"
)

func dualStackEnv(t *testing.T) *env {
	t.Helper()
	e := newEnv(t)
	useDualStack(t, e, "networks.yaml")
	e.sync()
	e.ready("gw1", "hv1", "hv2")
	return e
}

// manifests are the examples a test edits: an env's or a zoneEnv's.
type manifests interface {
	write(file, content string)
	edit(file, old, new string)
}

// useDualStack puts deploy/examples-dual-stack's files (networks.yaml,
// router.yaml) in place of deploy/examples' and has vm-b's VMI report its
// IPv6 addresses (vmBIPv6, vmBLinkLocal).
func useDualStack(t *testing.T, m manifests, files ...string) {
	t.Helper()
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join("..", "deploy", "examples-dual-stack", f))
		require.NoError(t, err)
		m.write(f, string(b))
	}
	m.edit("vmis.yaml", "      ipAddress: 10.20.0.6",
		"      ipAddress: 10.20.0.6\n      ipAddresses: [10.20.0.6, \""+vmBIPv6+"\", \""+vmBLinkLocal+"\"]")
}

// ndOption is the data of the first option of type typ, nil without one.
func ndOption(opts layers.ICMPv6Options, typ layers.ICMPv6Opt) []byte {
	for _, o := range opts {
		if o.Type == typ {
			return o.Data
		}
	}
	return nil
}

// TestDualStackRouterAdvertisement: vm-a's router solicitation is answered
// by router1's port on net-a: from the router's link-local address and
// MAC, a default router, the /64 on-link and for SLAAC, the network's MTU
// and its IPv6 DNS server. The router answers neighbor solicitations for
// its IPv6 gateway address. It also advertises unsolicited, to all nodes.
func TestDualStackRouterAdvertisement(t *testing.T) {
	e := dualStackEnv(t)
	atA := e.vm("hv1", "vm-a")

	skip := count(t, atA)
	require.NoError(t, e.l.Inject("hv1", "vm-a", frameBytes(t, wire.RouterSolicitation(vmAMAC))))
	got := waitFor(t, atA, "router1's advertisement to vm-a", skip, func(s seen) bool { return s.RA != nil && s.DstIP != "ff02::1" })
	assert.Equal(t, routerMAC, got.SrcMAC)
	assert.Equal(t, wire.LinkLocal(routerMAC), got.SrcIP)
	assert.NotZero(t, got.RA.RouterLifetime, "a default router")
	assert.Zero(t, got.RA.Flags&0xc0, "neither managed nor other configuration: SLAAC alone")
	pi := ndOption(got.RA.Options, layers.ICMPv6OptPrefixInfo)
	require.Len(t, pi, 30, "a prefix information option")
	assert.Equal(t, uint8(64), pi[0], "a /64")
	assert.Equal(t, uint8(0xc0), pi[1]&0xc0, "on-link and autonomous (SLAAC)")
	assert.Equal(t, "fd00:10::", net.IP(pi[14:30]).String())
	mtu := ndOption(got.RA.Options, layers.ICMPv6OptMTU)
	require.Len(t, mtu, 6, "an MTU option")
	assert.Equal(t, uint32(1450), byteorder.BigEndian.Uint32(mtu[2:]))
	rdnss := ndOption(got.RA.Options, layers.ICMPv6Opt(25))
	require.Len(t, rdnss, 22, "one RDNSS server")
	assert.Equal(t, "2001:4860:4860::8888", net.IP(rdnss[6:22]).String())

	vmA6 := translator.SLAACAddress(netip.MustParsePrefix("fd00:10::/64"), vmAMAC).String()
	skip = count(t, atA)
	require.NoError(t, e.l.Inject("hv1", "vm-a", frameBytes(t, wire.NeighborSolicitation(vmAMAC, vmA6, "fd00:10::1"))))
	na := waitFor(t, atA, "router1's neighbor advertisement for fd00:10::1", skip, func(s seen) bool {
		return s.NA != nil && s.NA.TargetAddress.String() == "fd00:10::1"
	})
	assert.Equal(t, routerMAC, na.SrcMAC)
	assert.Equal(t, routerMAC, net.HardwareAddr(ndOption(na.NA.Options, layers.ICMPv6OptTargetAddress)).String())

	// Unsolicited: ovn-controller advertises to all nodes without a
	// solicitation (send_periodic), at most max_interval apart: the first
	// comes within RAInterval of the port's start (waited for last, after
	// the rest of the test, and for twice that).
	var periodic seen
	require.NoError(t, sandbox.Poll(2*translator.RAInterval*time.Second, "router1's periodic advertisement on net-a", func() (bool, error) {
		ps, err := atA.read()
		for _, s := range ps {
			if s.RA != nil && s.DstIP == "ff02::1" {
				periodic = s
				return true, nil
			}
		}
		return false, err
	}))
	assert.Equal(t, routerMAC, periodic.SrcMAC)
	assert.Equal(t, "33:33:00:00:00:01", periodic.DstMAC)
	assert.Equal(t, "fd00:10::", net.IP(ndOption(periodic.RA.Options, layers.ICMPv6OptPrefixInfo)[14:30]).String())
}

// TestDualStackRouting: router1 routes IPv6 between net-a and net-b both
// ways (vm-a from its SLAAC address, vm-b from the address its VMI
// reports), hop limit decremented and from the router's MAC, as it routes
// IPv4 between the same VMs; a source address that is not the port's is
// dropped.
func TestDualStackRouting(t *testing.T) {
	e := dualStackEnv(t)
	atA, atB := e.vm("hv1", "vm-a"), e.vm("hv2", "vm-b")
	vmA6 := translator.SLAACAddress(netip.MustParsePrefix("fd00:10::/64"), vmAMAC).String()

	to := func(src, dst string, dport uint16) func(seen) bool {
		return func(s seen) bool { return s.IsUDP && s.SrcIP == src && s.DstIP == dst && s.DPort == dport }
	}

	skip := count(t, atB)
	e.vmSends("hv1", "vm-a", frame{SrcMAC: vmAMAC, DstMAC: routerMAC, SrcIP: vmA6, DstIP: vmBIPv6, TTL: 64, SPort: 41000, DPort: 6601})
	got := waitFor(t, atB, "vm-a's IPv6 datagram at vm-b", skip, to(vmA6, vmBIPv6, 6601))
	assert.Equal(t, routerMAC, got.SrcMAC)
	assert.Equal(t, vmBMAC, got.DstMAC)
	assert.Equal(t, uint8(63), got.TTL, "hop limit decremented once")

	skip = count(t, atA)
	e.vmSends("hv2", "vm-b", frame{SrcMAC: vmBMAC, DstMAC: routerMAC, SrcIP: vmBIPv6, DstIP: vmA6, TTL: 64, SPort: 41000, DPort: 6602})
	waitFor(t, atA, "vm-b's IPv6 datagram, from the address its VMI reports, at vm-a", skip, to(vmBIPv6, vmA6, 6602))

	// kubevirt-ovn trace explains the same IPv6 path.
	p := e.trace("--from", "default/vm-a", "--to", vmBIPv6, "--protocol", "udp", "--port", "6601")
	t.Log(p.Text())
	assert.Equal(t, "udp ["+vmA6+"]:40000 > ["+vmBIPv6+"]:6601", p.Packet, "from vm-a's SLAAC address")
	assert.Equal(t, trace.Delivered, p.Verdict.Result)
	assert.Equal(t, "hv2", p.Verdict.Chassis)
	assert.Contains(t, p.Verdict.Detail, "delivered to VM default/vm-b eth1")
	assert.Equal(t, "fd00:20::/64", hop(t, p, trace.HopRoute).Refs["prefix"], "net-b's subnet, directly connected")

	// The IPv4 half, on the same VMs.
	skip = count(t, atB)
	e.vmSends("hv1", "vm-a", frame{SrcMAC: vmAMAC, DstMAC: routerMAC, SrcIP: vmAIP, DstIP: vmBIP, TTL: 64, SPort: 41000, DPort: 6603})
	waitFor(t, atB, "vm-a's IPv4 datagram at vm-b", skip, to(vmAIP, vmBIP, 6603))

	// Port security: another source address of the /64 is dropped.
	const spoofed = "fd00:10::bad"
	skip = count(t, atB)
	e.vmSends("hv1", "vm-a", frame{SrcMAC: vmAMAC, DstMAC: routerMAC, SrcIP: spoofed, DstIP: vmBIPv6, TTL: 64, SPort: 41000, DPort: 6604})
	e.vmSends("hv1", "vm-a", frame{SrcMAC: vmAMAC, DstMAC: routerMAC, SrcIP: vmA6, DstIP: vmBIPv6, TTL: 64, SPort: 41000, DPort: 6605})
	waitFor(t, atB, "vm-a's datagram after the spoofed one", skip, to(vmA6, vmBIPv6, 6605))
	requireNone(t, atB, "a datagram from an address that is not vm-a's", skip, func(s seen) bool { return s.IsUDP && s.SrcIP == spoofed })
}

// TestDualStackDeclaredIPv6: vm-a's IPv6 address declared in ONOS's
// interfaces annotation (kubevirt-ovn's ipv6Address) is its port's: a
// datagram from it reaches vm-b, and one from vm-a's SLAAC address (no
// longer its port's) is dropped.
func TestDualStackDeclaredIPv6(t *testing.T) {
	const declared = "fd00:10::5a"
	e := newEnv(t)
	useDualStack(t, e, "networks.yaml")
	e.edit("vmis.yaml", "  name: vm-a\n  namespace: default\n",
		"  name: vm-a\n  namespace: default\n  annotations:\n    interfaces: '[{\"network\": \"net-a\", \"ipAddress\": \"10.10.0.5\", \"ipv6Address\": \""+declared+"\"}]'\n")
	e.sync()
	e.ready("gw1", "hv1", "hv2")
	atB := e.vm("hv2", "vm-b")
	slaac := translator.SLAACAddress(netip.MustParsePrefix("fd00:10::/64"), vmAMAC).String()
	to := func(src string, dport uint16) func(seen) bool {
		return func(s seen) bool { return s.IsUDP && s.SrcIP == src && s.DstIP == vmBIPv6 && s.DPort == dport }
	}
	skip := count(t, atB)
	require.NoError(t, e.l.Inject("hv1", "vm-a", frameBytes(t, frame{SrcMAC: vmAMAC, DstMAC: routerMAC, SrcIP: slaac, DstIP: vmBIPv6, TTL: 64, SPort: 41000, DPort: 6801})))
	require.NoError(t, e.l.Inject("hv1", "vm-a", frameBytes(t, frame{SrcMAC: vmAMAC, DstMAC: routerMAC, SrcIP: declared, DstIP: vmBIPv6, TTL: 64, SPort: 41000, DPort: 6802})))
	waitFor(t, atB, "vm-a's datagram from its declared address", skip, to(declared, 6802))
	requireNone(t, atB, "vm-a's datagram from its SLAAC address (not its port's)", skip, to(slaac, 6801))
}

// ipv6OnlyNetB makes useDualStack's net-b IPv6-only: its network-config
// without cidr and gatewayIp, and vm-b reporting no IPv4 address.
func ipv6OnlyNetB(m manifests) {
	m.edit("networks.yaml", `"cidr": "10.20.0.0/24", "gatewayIp": "10.20.0.1", `, "")
	m.edit("vmis.yaml", "      ipAddress: 10.20.0.6\n      ipAddresses: [10.20.0.6, ", "      ipAddresses: [")
}

// ipv6OnlyPaths: with net-b IPv6-only (ipv6OnlyNetB), IPv6 is routed
// between vm-b and vm-a both ways, and vm-b's datagram leaves gw1 routed
// to the peer and the remote's reply reaches vm-b (flows to ports base
// and base+1).
func ipv6OnlyPaths(t *testing.T, tr traffic, base uint16) {
	t.Helper()
	atA, atB := tr.vm("hv1", "vm-a"), tr.vm("hv2", "vm-b")
	a6, b6 := vmRef{"hv1", "vm-a", vmAMAC, slaacA(vmAMAC)}, vmRef{"hv2", "vm-b", vmBMAC, vmBIPv6}
	skip := count(t, atA)
	tr.vmSends("hv2", "vm-b", routed(b6, a6, 5100, base))
	waitFor(t, atA, "vm-b (IPv6-only net-b) -> vm-a", skip, arrives(b6, 5100, base))
	skip = count(t, atB)
	tr.vmSends("hv1", "vm-a", routed(a6, b6, base, 5100))
	waitFor(t, atB, "vm-a -> vm-b (IPv6-only net-b)", skip, arrives(a6, base, 5100))

	tr.vmSends("hv2", "vm-b", frame{SrcMAC: vmBMAC, DstMAC: routerMAC, SrcIP: vmBIPv6, DstIP: remote6, TTL: 64, SPort: 41000, DPort: base + 1})
	got := waitFor(t, tr.wire("gw1"), "vm-b's IPv6 datagram leaving gw1 routed", 0, func(s seen) bool {
		return s.IsUDP && s.SrcIP == vmBIPv6 && s.DstIP == remote6 && s.DPort == base+1
	})
	assert.Equal(t, peerMAC, got.DstMAC)
	skip = count(t, atB)
	tr.inject("gw1", frame{SrcMAC: peerMAC, DstMAC: gwPortMAC, SrcIP: remote6, DstIP: vmBIPv6, TTL: 64, SPort: base + 1, DPort: 41000})
	waitFor(t, atB, "the remote's reply at vm-b", skip, func(s seen) bool { return s.IsUDP && s.SrcIP == remote6 && s.DPort == 41000 })
}

// TestIPv6OnlyNetwork: deploy/examples-dual-stack with net-b made
// IPv6-only (its network-config without cidr and gatewayIp) and vm-b
// reporting no IPv4 address. vm-b's router solicitation gets net-b's
// prefix; IPv6 is routed between vm-b and vm-a (dual stack net-a) both
// ways, and out of gw1 and back; vm-b's IPv4 datagram is dropped (its port
// has no IPv4 address), while vm-a's IPv4 still leaves SNATed.
func TestIPv6OnlyNetwork(t *testing.T) {
	e := newEnv(t)
	useDualStack(t, e, "networks.yaml", "router.yaml")
	ipv6OnlyNetB(e)
	out := e.sync()
	assert.NotContains(t, out, "10.20.0.")
	e.ready("gw1", "hv1", "hv2")
	nbctl(t, e.l, "--timeout=90", "wait-until", "Logical_Switch_Port", "kv-net-b_default_vm-b_eth1", "up=true")
	atB := e.vm("hv2", "vm-b")
	skip := count(t, atB)
	e.vmSends("hv2", "vm-b", wire.RouterSolicitation(vmBMAC))
	ra := waitFor(t, atB, "router1's advertisement on IPv6-only net-b", skip, func(s seen) bool { return s.RA != nil })
	var prefixes []string
	for _, o := range ra.RA.Options {
		if o.Type == layers.ICMPv6OptPrefixInfo && len(o.Data) == 30 {
			prefixes = append(prefixes, fmt.Sprintf("%s/%d", net.IP(o.Data[14:30]), o.Data[0]))
		}
	}
	assert.Equal(t, []string{"fd00:20::/64"}, prefixes)

	ipv6OnlyPaths(t, e.traffic, 6900)

	// IPv4: vm-b has none; vm-a's leaves SNATed as ever (the barrier).
	e.send("hv2", "vm-b", vmBMAC, "10.20.0.6", 41001, 6911)
	e.send("hv1", "vm-a", vmAMAC, vmAIP, 41002, 6912)
	waitFor(t, e.wire("gw1"), "vm-a's IPv4 datagram leaving SNATed", 0, snated(6912))
	requireNone(t, e.wire("gw1"), "vm-b's IPv4 datagram leaving", 0, func(s seen) bool { return s.IsUDP && s.DPort == 6911 })
}
