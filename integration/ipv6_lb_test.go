package integration

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubevirt-ovn/kubevirt-ovn/translator"
)

const vip6, fipLB6 = "fd00:10::100", "2001:db8:ff::160"

// slaacA is the SLAAC address of MAC mac on net-a's ipv6Cidr.
func slaacA(mac string) string {
	return translator.SLAACAddress(netip.MustParsePrefix("fd00:10::/64"), mac).String()
}

// web6Manifests are load balancer web6 (VIP vip6, members vm-a's and
// vm-c's SLAAC addresses, proto port 8080, healthCheck the YAML of its
// spec.healthCheck unless "") and its floating IP fipLB6.
func web6Manifests(proto, healthCheck string) string {
	if healthCheck != "" {
		healthCheck = "  healthCheck: " + healthCheck + "\n"
	}
	return `---
apiVersion: kubevirt.io/v1
kind: LoadBalancer
metadata:
  name: web6
spec:
  name: web6
  networkId: net-a
  vip: "` + vip6 + `"
  members: ["` + slaacA(vmAMAC) + `", "` + slaacA(vmLBCMAC) + `"]
` + healthCheck + `  rules:
  - {protocol: ` + proto + `, portRangeMin: 8080}
---
apiVersion: kubevirt.io/v1
kind: FloatingIp
metadata:
  name: fip-web6
spec:
  id: fip-web6
  routerName: router1
  networkName: public
  floatingIp: "` + fipLB6 + `"
  fixedIp: "` + vip6 + `"
`
}

// web6Spread checks web6 (members on tr's chassis): sixteen flows from
// outside through fipLB6 spread over every member, each DNATed to its
// member's own IPv6 address, and the first three stay on their member
// when sent again; vm-b's flow to the VIP from net-b reaches a member. It
// returns the member of the first flow (UDP 7300 -> lbPort).
func web6Spread(t *testing.T, tr traffic, members []vmRef) vmRef {
	t.Helper()
	landed := func(src string, sport uint16) vmRef {
		t.Helper()
		skip := map[string]int{}
		for _, m := range members {
			skip[m.port] = count(t, tr.vm(m.chassis, m.port))
		}
		if src == remote6 {
			tr.inject("gw1", frame{SrcMAC: peerMAC, DstMAC: gwPortMAC, SrcIP: remote6, DstIP: fipLB6, TTL: 64, SPort: sport, DPort: lbPort})
		} else {
			require.NoError(t, tr.c.Inject("hv2", "vm-b", frameBytes(t, frame{SrcMAC: vmBMAC, DstMAC: routerMAC, SrcIP: vmBIPv6, DstIP: vip6, TTL: 64, SPort: sport, DPort: lbPort})))
		}
		m, p := landing(t, tr, members, skip, fmt.Sprintf("IPv6 flow %d at a member", sport), func(s seen) bool {
			return s.IsUDP && s.SrcIP == src && s.SPort == sport && s.DPort == lbPort
		})
		assert.Equal(t, m.ip, p.DstIP, "DNATed to the member's own IPv6 address")
		return m
	}
	seenBy := map[string]int{}
	first := map[uint16]vmRef{}
	for sport := uint16(7300); sport < 7316; sport++ {
		m := landed(remote6, sport)
		seenBy[m.port]++
		first[sport] = m
	}
	t.Logf("IPv6 flows per member: %v", seenBy)
	assert.Len(t, seenBy, len(members), "every member gets flows: %v", seenBy)
	for _, sport := range []uint16{7300, 7301, 7302} {
		assert.Equal(t, first[sport].port, landed(remote6, sport).port, "flow %d stays on its member", sport)
	}
	landed(vmBIPv6, 7320)
	return first[7300]
}

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
	require.NoError(t, e.l.AddVMPort("hv2", "vm-c", vmLBCPort))
	e.write("lb.yaml", lbManifests+web6Manifests("udp", ""))
	out := e.sync()
	assert.Contains(t, out, "create Load_Balancer kv-lb-web6_udp")
	e.ready("gw1", "hv1", "hv2")
	nbctl(t, e.l, "--timeout=90", "wait-until", "Logical_Switch_Port", vmLBCPort, "up=true")

	members := []vmRef{{"hv1", "vm-a", vmAMAC, slaacA(vmAMAC)}, {"hv2", "vm-c", vmLBCMAC, slaacA(vmLBCMAC)}}
	m := web6Spread(t, e.traffic, members)

	// A member's reply leaves from the floating IP and the VIP's port.
	skip := count(t, e.wire("gw1"))
	require.NoError(t, e.l.Inject(m.chassis, m.port, frameBytes(t, frame{SrcMAC: m.mac, DstMAC: routerMAC, SrcIP: m.ip, DstIP: remote6, TTL: 64, SPort: lbPort, DPort: 7300})))
	got := waitFor(t, e.wire("gw1"), "the member's IPv6 reply leaving", skip, func(s seen) bool {
		return s.IsUDP && s.DstIP == remote6 && s.DPort == 7300
	})
	assert.Equal(t, fipLB6, got.SrcIP, "the reply leaves from the floating IP")
	assert.Equal(t, uint16(lbPort), got.SPort)

	webLands(t, e.traffic, 7330)
}

// webLands checks the IPv4 load balancer web beside web6: a UDP flow
// (sport) from outside through lbFIP reaches vm-a or vm-c.
func webLands(t *testing.T, tr traffic, sport uint16) {
	t.Helper()
	members := []vmRef{vmA, vmLBC}
	skip := map[string]int{}
	for _, m := range members {
		skip[m.port] = count(t, tr.vm(m.chassis, m.port))
	}
	tr.inject("gw1", frame{SrcMAC: peerMAC, DstMAC: gwPortMAC, SrcIP: remoteIP, DstIP: lbFIP, TTL: 64, SPort: sport, DPort: lbPort})
	landing(t, tr, members, skip, "the IPv4 flow through "+lbFIP+" at a member", func(s seen) bool { return s.IsUDP && s.SrcIP == remoteIP && s.SPort == sport })
}

// TestDualStackLoadBalancerHealthCheck: web6 and web over TCP, each with
// a health check (source fd00:10::fa and 10.10.0.250); vm-a answers the
// probes of both families and vm-c answers none. OVN probes the IPv6
// members (ip_port_mappings in brackets) as it does the IPv4 ones: vm-c
// is offline in both, and every new flow from outside through either
// floating IP lands on vm-a; once vm-c answers IPv6 probes it gets IPv6
// flows again, while its IPv4 twin stays out.
func TestDualStackLoadBalancerHealthCheck(t *testing.T) {
	const src6, src4 = "fd00:10::fa", "10.10.0.250"
	e := newEnv(t)
	useDualStack(t, e, "networks.yaml", "router.yaml")
	require.NoError(t, e.l.AddVMPort("hv2", "vm-c", vmLBCPort))
	hc := "{sourceIp: %s, interval: 1, timeout: 1, successCount: 1, failureCount: 1}"
	m4 := strings.Replace(lbManifests, "protocol: udp", "protocol: tcp", 1)
	m4 = strings.Replace(m4, "  rules:\n", "  healthCheck: "+fmt.Sprintf(hc, src4)+"\n  rules:\n", 1)
	e.write("lb.yaml", m4+web6Manifests("tcp", fmt.Sprintf(hc, `"`+src6+`"`)))
	a6, c6 := vmRef{"hv1", "vm-a", vmAMAC, slaacA(vmAMAC)}, vmRef{"hv2", "vm-c", vmLBCMAC, slaacA(vmLBCMAC)}
	probes6 := startProbeAnswerer(e.t, e.traffic, src6, lbPort, a6, c6)
	probes6.set(a6, true)
	probes4 := startProbeAnswerer(e.t, e.traffic, src4, lbPort, vmA, vmLBC)
	probes4.set(vmA, true)
	out := e.sync()
	assert.Contains(t, out, "create Load_Balancer_Health_Check")
	e.ready("gw1", "hv1", "hv2")
	nbctl(t, e.l, "--timeout=90", "wait-until", "Logical_Switch_Port", vmLBCPort, "up=true")
	e.neighbour()

	type family struct {
		name, remote, fip string
		a, c              vmRef
		sport             uint16
	}
	v6 := family{"IPv6", remote6, fipLB6, a6, c6, 7300}
	v4 := family{"IPv4", remoteIP, lbFIP, vmA, vmLBC, 7500}
	flowAt := func(f family, sport uint16) func(seen) bool {
		return func(s seen) bool {
			return s.IsTCP && s.SYN && !s.ACK && s.SrcIP == f.remote && s.SPort == sport && s.DPort == lbPort
		}
	}
	inject := func(f family, sport uint16) {
		e.inject("gw1", frame{SrcMAC: peerMAC, DstMAC: gwPortMAC, SrcIP: f.remote, DstIP: f.fip, TTL: 64, SPort: sport, DPort: lbPort, TCP: true})
	}
	// onlyA: ten new flows of f from outside all land on vm-a.
	onlyA := func(f family, what string) {
		t.Helper()
		skipC := count(t, e.vm(f.c.chassis, f.c.port))
		for sport := f.sport; sport < f.sport+10; sport++ {
			skipA := count(t, e.vm(f.a.chassis, f.a.port))
			inject(f, sport)
			waitFor(t, e.vm(f.a.chassis, f.a.port), fmt.Sprintf("%s flow %d at vm-a, %s", f.name, sport, what), skipA, flowAt(f, sport))
		}
		requireNone(t, e.vm(f.c.chassis, f.c.port), f.name+" flow at vm-c, "+what, skipC, func(s seen) bool {
			return s.IsTCP && s.SrcIP == f.remote && s.DPort == lbPort
		})
	}

	for _, m := range []struct {
		ip, status string
	}{{a6.ip, "online"}, {c6.ip, "offline"}, {vmAIP, "online"}, {vmLBCIP, "offline"}} {
		waitMonitor(t, e, m.ip, m.status)
	}
	nbctl(t, e.l, "--timeout=90", "--wait=hv", "sync")
	onlyA(v6, "the only IPv6 member online")
	onlyA(v4, "the only IPv4 member online")

	// vm-c answers IPv6 probes: back in web6, still out of web.
	probes6.set(c6, true)
	waitMonitor(t, e, c6.ip, "online")
	nbctl(t, e.l, "--timeout=90", "--wait=hv", "sync")
	seenC := false
	for sport := uint16(7400); sport < 7432 && !seenC; sport++ {
		skip := map[string]int{a6.port: count(t, e.vm(a6.chassis, a6.port)), c6.port: count(t, e.vm(c6.chassis, c6.port))}
		inject(v6, sport)
		got, _ := landing(t, e, []vmRef{a6, c6}, skip, fmt.Sprintf("IPv6 flow %d at a member", sport), flowAt(v6, sport))
		seenC = got.port == c6.port
	}
	assert.True(t, seenC, "an IPv6 flow reaches vm-c once it answers its probes")
	v4.sport = 7600
	onlyA(v4, "still not answering IPv4 probes")
}
