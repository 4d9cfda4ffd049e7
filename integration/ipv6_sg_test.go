package integration

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kubevirt-ovn/kubevirt-ovn/integration/wire"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator"
)

// Security groups on dual stack networks (issue 33): etherType IPv6 rules
// are ip6 ACLs, beside the IPv4 ones, on the same VMs.

// dualStackSGVMIs are sgVMIs on the dual stack networks: vm-b's VMI
// reports its IPv6 addresses (useDualStack's).
func dualStackSGVMIs(groupsA, groupsB string) string {
	return sgVMIsWith(groupsA, groupsB, fmt.Sprintf(`, ipAddresses: [10.20.0.6, "%s", "%s"]`, vmBIPv6, vmBLinkLocal))
}

// sgWeb6 admits UDP 80 from anywhere in both families, ICMPv6 echo
// requests and TCP 80 over IPv6, and UDP 90 over IPv6 from the members of
// sg-client, which lets both families out.
const sgWeb6 = `apiVersion: kubevirt.io/v1
kind: SecurityGroup
metadata: {name: sg-web}
spec:
  id: sg-web
  rules:
    - {id: web-in4, direction: ingress, etherType: IPv4, protocol: udp, portRangeMin: 80, remoteIpPrefix: 0.0.0.0/0}
    - {id: web-in6, direction: ingress, etherType: IPv6, protocol: udp, portRangeMin: 80, remoteIpPrefix: "::/0"}
    - {id: web-ping6, direction: ingress, etherType: IPv6, protocol: icmp, portRangeMin: 128}
    - {id: web-tcp6, direction: ingress, etherType: IPv6, protocol: tcp, portRangeMin: 80, portRangeMax: 80}
    - {id: web-clients6, direction: ingress, etherType: IPv6, protocol: udp, portRangeMin: 90, remoteGroupId: sg-client}
---
apiVersion: kubevirt.io/v1
kind: SecurityGroup
metadata: {name: sg-client}
spec:
  id: sg-client
  rules:
    - {id: client-out4, direction: egress, etherType: IPv4}
    - {id: client-out6, direction: egress, etherType: IPv6}
`

// TestDualStackSecurityGroups: vm-a in sg-web on dual stack net-a. Over
// IPv6, vm-b's UDP and TCP to port 80 and its ICMPv6 echo request reach
// vm-a, vm-a's reply goes back (stateful); UDP and TCP to port 81 and a
// new flow from vm-a are dropped; the IPv4 half does the same on the same
// VMs. On the default-deny port, neighbor discovery and router
// solicitation still work and vm-a pings its network's IPv6 gateway, not
// another. UDP 90 over IPv6 is admitted from sg-client's members only
// (OVN's $<pg>_ip6 of vm-b's reported address).
func TestDualStackSecurityGroups(t *testing.T) {
	e := newEnv(t)
	useDualStack(t, e, "networks.yaml")
	e.write("vmis.yaml", dualStackSGVMIs(`["sg-web"]`, ""))
	e.write("sg.yaml", sgWeb6)
	e.sync()
	e.ready("gw1", "hv1", "hv2")
	e.neighbour()

	vmA6 := translator.SLAACAddress(netip.MustParsePrefix("fd00:10::/64"), vmAMAC).String()
	a6 := vmRef{"hv1", "vm-a", vmAMAC, vmA6}
	b6 := vmRef{"hv2", "vm-b", vmBMAC, vmBIPv6}
	atA, atB := e.vm("hv1", "vm-a"), e.vm("hv2", "vm-b")

	send := func(from vmRef, f frame) {
		t.Helper()
		require.NoError(t, e.l.Inject(from.chassis, from.port, frameBytes(t, f)))
	}
	pass := func(from, to vmRef, at capture, sport, dport uint16, what string) {
		t.Helper()
		flowPasses(t, e, from, to, at, sport, dport, what)
	}
	blocked := func(from, to vmRef, at capture, sport, dport uint16, what string, barrier func()) {
		t.Helper()
		flowBlocked(t, e, from, to, at, sport, dport, what, barrier)
	}

	// UDP over IPv6: allowed in, the reply out; port 81 and a new flow
	// from vm-a dropped.
	pass(b6, a6, atA, 5000, 80, "vm-b -> vm-a udp6/80 (web-in6)")
	pass(a6, b6, atB, 80, 5000, "vm-a's IPv6 reply to vm-b")
	blocked(b6, a6, atA, 5001, 81, "vm-b -> vm-a udp6/81 (no rule)", func() {
		pass(b6, a6, atA, 5002, 80, "barrier: vm-b -> vm-a udp6/80")
	})
	blocked(a6, b6, atB, 6000, 7000, "vm-a -> vm-b new IPv6 flow (no egress rule)", func() {
		pass(a6, b6, atB, 80, 5002, "barrier: vm-a's IPv6 reply")
	})
	// The IPv4 half, on the same VMs.
	pass(vmB, vmA, atA, 5010, 80, "vm-b -> vm-a udp/80 (web-in4)")
	pass(vmA, vmB, atB, 80, 5010, "vm-a's IPv4 reply to vm-b")
	blocked(vmB, vmA, atA, 5011, 81, "vm-b -> vm-a udp/81 (no rule)", func() {
		pass(vmB, vmA, atA, 5012, 80, "barrier: vm-b -> vm-a udp/80")
	})

	// TCP over IPv6: a SYN to 80 in, to 81 not.
	syn := func(sport, dport uint16) func(seen) bool {
		return func(s seen) bool {
			return s.IsTCP && s.SYN && s.SrcIP == vmBIPv6 && s.SPort == sport && s.DPort == dport
		}
	}
	seg := func(sport, dport uint16) frame {
		f := routed(b6, a6, sport, dport)
		f.TCP = true
		return f
	}
	skip := count(t, atA)
	send(b6, seg(7700, 81))
	send(b6, seg(7701, 80))
	waitFor(t, atA, "vm-b's IPv6 SYN to vm-a:80 (web-tcp6)", skip, syn(7701, 80))
	requireNone(t, atA, "vm-b's IPv6 SYN to vm-a:81 (no rule)", skip, syn(7700, 81))

	// ICMPv6 echo request in (web-ping6).
	skip = count(t, atA)
	send(b6, frame{SrcMAC: vmBMAC, DstMAC: routerMAC, SrcIP: vmBIPv6, DstIP: vmA6, TTL: 64, SPort: 0x61, DPort: 1, ICMPEcho: true})
	waitFor(t, atA, "vm-b's ICMPv6 echo request at vm-a", skip, func(s seen) bool {
		return s.IsICMPv6 && s.ICMPv6Type == 128 && s.SrcIP == vmBIPv6 && s.SPort == 0x61
	})

	// Neighbor discovery and router solicitation on the default-deny
	// port (ovn-northd allows them ahead of the ACLs).
	skip = count(t, atA)
	send(a6, wire.NeighborSolicitation(vmAMAC, vmA6, "fd00:10::1"))
	waitFor(t, atA, "router1's neighbor advertisement to vm-a in sg-web", skip, func(s seen) bool {
		return s.NA != nil && s.NA.TargetAddress.String() == "fd00:10::1"
	})
	skip = count(t, atA)
	send(a6, wire.RouterSolicitation(vmAMAC))
	waitFor(t, atA, "router1's advertisement to vm-a in sg-web", skip, func(s seen) bool { return s.RA != nil })

	// Ping to its network's IPv6 gateway passes (base/ping-gateway), to
	// net-b's does not.
	ping := func(dst string, id uint16) func(seen) bool {
		send(a6, frame{SrcMAC: vmAMAC, DstMAC: routerMAC, SrcIP: vmA6, DstIP: dst, TTL: 64, SPort: id, DPort: 1, ICMPEcho: true})
		return func(s seen) bool { return s.IsICMPv6 && s.ICMPv6Type == 129 && s.SrcIP == dst && s.SPort == id }
	}
	skip = count(t, atA)
	waitFor(t, atA, "ICMPv6 echo reply from net-a's gateway", skip, ping("fd00:10::1", 0x71))
	skip = count(t, atA)
	other := ping("fd00:20::1", 0x72)
	waitFor(t, atA, "barrier: ICMPv6 echo reply from net-a's gateway", skip, ping("fd00:10::1", 0x73))
	requireNone(t, atA, "ICMPv6 echo reply from net-b's gateway (not vm-a's network's)", skip, other)

	// Remote group over IPv6: UDP 90 from sg-client's members only.
	blocked(b6, a6, atA, 5020, 90, "vm-b -> vm-a udp6/90, vm-b not in sg-client", func() {
		pass(b6, a6, atA, 5021, 80, "barrier: vm-b -> vm-a udp6/80")
	})
	e.write("vmis.yaml", dualStackSGVMIs(`["sg-web"]`, `["sg-client"]`))
	e.sync()
	e.neighbour()
	pass(b6, a6, atA, 5022, 90, "vm-b -> vm-a udp6/90, vm-b in sg-client")
	pass(a6, b6, atB, 90, 5022, "vm-a's IPv6 reply into sg-client's vm-b")
	pass(vmB, vmA, atA, 5023, 80, "vm-b in sg-client -> vm-a udp/80 (IPv4, client-out4)")
}
