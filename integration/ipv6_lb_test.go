package integration

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
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
	for _, f := range []string{"networks.yaml", "router.yaml"} {
		b, err := os.ReadFile(filepath.Join("..", "deploy", "examples-dual-stack", f))
		require.NoError(t, err)
		e.write(f, string(b))
	}
	e.edit("vmis.yaml", "      ipAddress: 10.20.0.6",
		"      ipAddress: 10.20.0.6\n      ipAddresses: [10.20.0.6, \""+vmBIPv6+"\", \""+vmBLinkLocal+"\"]")
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
	// landed is the member flow sport (from src) reached, each member's
	// capture read from skip.
	landed := func(src string, sport uint16) vmRef {
		t.Helper()
		skip := map[string]int{}
		for _, m := range members {
			skip[m.port] = count(t, e.vm(m.chassis, m.port))
		}
		return func(send func()) vmRef {
			send()
			in := func(s seen) bool { return s.IsUDP && s.SrcIP == src && s.SPort == sport && s.DPort == lbPort }
			var got []vmRef
			waitFor(t, capture{name: "vm-a or vm-c", read: func() ([]seen, error) {
				var all []seen
				got = got[:0]
				for _, m := range members {
					ps, err := e.vm(m.chassis, m.port).read()
					if err != nil {
						return nil, err
					}
					for _, p := range ps[skip[m.port]:] {
						if in(p) {
							got = append(got, m)
							assert.Equal(t, m.ip, p.DstIP, "DNATed to the member's own IPv6 address")
						}
					}
					all = append(all, ps[skip[m.port]:]...)
				}
				return all, nil
			}}, fmt.Sprintf("flow %d at a member", sport), 0, in)
			require.Len(t, got, 1, "flow %d reached one member", sport)
			return got[0]
		}(func() {
			if src == remote6 {
				e.inject("gw1", frame{SrcMAC: peerMAC, DstMAC: gwPortMAC, SrcIP: remote6, DstIP: fipLB6, TTL: 64, SPort: sport, DPort: lbPort})
			} else {
				require.NoError(t, e.l.Inject("hv2", "vm-b", frameBytes(t, frame{SrcMAC: vmBMAC, DstMAC: routerMAC, SrcIP: vmBIPv6, DstIP: vip6, TTL: 64, SPort: sport, DPort: lbPort})))
			}
		})
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
	skipA, skipC := count(t, e.vm("hv1", "vm-a")), count(t, e.vm("hv2", "vm-c"))
	e.inject("gw1", frame{SrcMAC: peerMAC, DstMAC: gwPortMAC, SrcIP: remoteIP, DstIP: lbFIP, TTL: 64, SPort: 7330, DPort: lbPort})
	waitFor(t, capture{name: "vm-a or vm-c", read: func() ([]seen, error) {
		a, err := e.vm("hv1", "vm-a").read()
		if err != nil {
			return nil, err
		}
		c, err := e.vm("hv2", "vm-c").read()
		if err != nil {
			return nil, err
		}
		return append(a[skipA:], c[skipC:]...), nil
	}}, "the IPv4 flow through "+lbFIP+" at a member", 0, func(s seen) bool { return s.IsUDP && s.SrcIP == remoteIP && s.SPort == 7330 })
}
