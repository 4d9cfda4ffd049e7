package integration

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubevirt-ovn/kubevirt-ovn/translator"
)

// TestDualStackLoadBalancer: deploy/examples-dual-stack with vm-c on net-a
// and load balancer web's twin web6: VIP fd00:10::100, members vm-a's and
// vm-c's SLAAC addresses, UDP 8080, exposed through IPv6 floating IP
// 2001:db8:ff::160. Flows from outside to the floating IP spread over
// both members, DNATed to each member's own address, a flow stays on its
// member, and a member's reply leaves from the floating IP; vm-b's flow to
// the VIP from another network reaches a member. web (IPv4) works beside
// it through its floating IP.
func TestDualStackLoadBalancer(t *testing.T) {
	e := newEnv(t)
	useDualStack(t, e, "networks.yaml", "router.yaml")
	slaac := func(mac string) string {
		return translator.SLAACAddress(netip.MustParsePrefix("fd00:10::/64"), mac).String()
	}
	const vip6, fipLB6 = "fd00:10::100", "2001:db8:ff::160"
	require.NoError(t, e.l.AddVMPort("hv2", "vm-c", vmLBCPort))
	e.write("lb.yaml", lbManifests+`---
apiVersion: kubevirt.io/v1
kind: LoadBalancer
metadata:
  name: web6
spec:
  name: web6
  networkId: net-a
  vip: "`+vip6+`"
  members: ["`+slaac(vmAMAC)+`", "`+slaac(vmLBCMAC)+`"]
  rules:
  - {protocol: udp, portRangeMin: 8080}
---
apiVersion: kubevirt.io/v1
kind: FloatingIp
metadata:
  name: fip-web6
spec:
  id: fip-web6
  routerName: router1
  networkName: public
  floatingIp: "`+fipLB6+`"
  fixedIp: "`+vip6+`"
`)
	out := e.sync()
	assert.Contains(t, out, "create Load_Balancer kv-lb-web6_udp")
	e.ready("gw1", "hv1", "hv2")
	nbctl(t, e.l, "--timeout=90", "wait-until", "Logical_Switch_Port", vmLBCPort, "up=true")

	members := []vmRef{{"hv1", "vm-a", vmAMAC, slaac(vmAMAC)}, {"hv2", "vm-c", vmLBCMAC, slaac(vmLBCMAC)}}
	// landed is the member flow sport (from src) reached, DNATed to its
	// own address.
	landed := func(src string, sport uint16) vmRef {
		t.Helper()
		skip := map[string]int{}
		for _, m := range members {
			skip[m.port] = count(t, e.vm(m.chassis, m.port))
		}
		if src == remote6 {
			e.inject("gw1", frame{SrcMAC: peerMAC, DstMAC: gwPortMAC, SrcIP: remote6, DstIP: fipLB6, TTL: 64, SPort: sport, DPort: lbPort})
		} else {
			require.NoError(t, e.l.Inject("hv2", "vm-b", frameBytes(t, frame{SrcMAC: vmBMAC, DstMAC: routerMAC, SrcIP: vmBIPv6, DstIP: vip6, TTL: 64, SPort: sport, DPort: lbPort})))
		}
		m, p := landing(t, e, members, skip, fmt.Sprintf("flow %d at a member", sport), func(s seen) bool {
			return s.IsUDP && s.SrcIP == src && s.SPort == sport && s.DPort == lbPort
		})
		assert.Equal(t, m.ip, p.DstIP, "DNATed to the member's own IPv6 address")
		return m
	}

	seenBy := map[string]int{}
	first := map[uint16]string{}
	for sport := uint16(7300); sport < 7316; sport++ {
		m := landed(remote6, sport)
		seenBy[m.port]++
		first[sport] = m.port
	}
	t.Logf("IPv6 flows per member: %v", seenBy)
	assert.Len(t, seenBy, 2, "every member gets flows: %v", seenBy)
	for _, sport := range []uint16{7300, 7301, 7302} {
		assert.Equal(t, first[sport], landed(remote6, sport).port, "flow %d stays on its member", sport)
	}

	// A member's reply leaves from the floating IP and the VIP's port.
	m := members[0]
	if first[7300] == members[1].port {
		m = members[1]
	}
	skip := count(t, e.wire("gw1"))
	require.NoError(t, e.l.Inject(m.chassis, m.port, frameBytes(t, frame{SrcMAC: m.mac, DstMAC: routerMAC, SrcIP: m.ip, DstIP: remote6, TTL: 64, SPort: lbPort, DPort: 7300})))
	got := waitFor(t, e.wire("gw1"), "the member's IPv6 reply leaving", skip, func(s seen) bool {
		return s.IsUDP && s.DstIP == remote6 && s.DPort == 7300
	})
	assert.Equal(t, fipLB6, got.SrcIP, "the reply leaves from the floating IP")
	assert.Equal(t, uint16(lbPort), got.SPort)

	// From inside, another network: vm-b to the VIP.
	landed(vmBIPv6, 7320)

	// The IPv4 load balancer beside it, through its floating IP.
	members4 := []vmRef{vmA, vmLBC}
	skip4 := map[string]int{}
	for _, m := range members4 {
		skip4[m.port] = count(t, e.vm(m.chassis, m.port))
	}
	e.inject("gw1", frame{SrcMAC: peerMAC, DstMAC: gwPortMAC, SrcIP: remoteIP, DstIP: lbFIP, TTL: 64, SPort: 7330, DPort: lbPort})
	landing(t, e, members4, skip4, "the IPv4 flow through "+lbFIP+" at a member", func(s seen) bool { return s.IsUDP && s.SrcIP == remoteIP && s.SPort == 7330 })
}
