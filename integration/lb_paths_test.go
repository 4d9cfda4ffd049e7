package integration

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// vmCaptures is a sandbox's VM port captures (env's, zoneEnv's).
type vmCaptures interface {
	vm(sim, port string) capture
}

// landing waits for the packet matching in at one of members (after skip,
// by VM port) and returns that member and the packet; it fails when more
// than one member got it.
func landing(t *testing.T, e vmCaptures, members []vmRef, skip map[string]int, what string, in func(seen) bool) (vmRef, seen) {
	t.Helper()
	var got []vmRef
	var pkt seen
	waitFor(t, capture{name: "a member", read: func() ([]seen, error) {
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
					pkt = p
				}
			}
			all = append(all, ps[skip[m.port]:]...)
		}
		return all, nil
	}}, what, 0, in)
	require.Len(t, got, 1, "%s reached one member", what)
	return got[0], pkt
}

func skips(t *testing.T, e vmCaptures, members []vmRef) map[string]int {
	out := map[string]int{}
	for _, m := range members {
		out[m.port] = count(t, e.vm(m.chassis, m.port))
	}
	return out
}

// TestLoadBalancerHairpin: a member (vm-a) reaching the VIP lands on a
// member, itself included. A flow that lands on vm-a itself arrives from
// the VIP (OVN's hairpin SNAT), so vm-a's reply goes back through the load
// balancer and reaches vm-a from the VIP's address and port; a flow that
// lands on vm-c arrives from vm-a's own address.
func TestLoadBalancerHairpin(t *testing.T) {
	e := newEnv(t)
	e.withLB(lbManifests)

	members := []vmRef{vmA, vmLBC}
	by := map[string]int{}
	for sport := uint16(7800); sport < 7816; sport++ {
		sk := skips(t, e, members)
		require.NoError(t, e.l.Inject(vmA.chassis, vmA.port, frameBytes(t, frame{SrcMAC: vmAMAC, DstMAC: routerMAC, SrcIP: vmAIP, DstIP: lbVIP, TTL: 64, SPort: sport, DPort: lbPort})))
		m, p := landing(t, e, members, sk, fmt.Sprintf("vm-a's flow %d to the VIP", sport), func(s seen) bool { return s.IsUDP && s.SPort == sport && s.DPort == lbPort })
		by[m.port]++
		if m == vmLBC {
			assert.Equal(t, vmAIP, p.SrcIP, "another member sees the client's address")
			continue
		}
		// Hairpin: vm-a gets its own flow from the VIP, and its reply
		// to the VIP comes back to it from the VIP's address and port.
		assert.Equal(t, lbVIP, p.SrcIP, "a hairpinned flow arrives from the VIP")
		assert.Equal(t, vmAIP, p.DstIP)
		skA := count(t, e.vm(vmA.chassis, vmA.port))
		require.NoError(t, e.l.Inject(vmA.chassis, vmA.port, frameBytes(t, frame{SrcMAC: vmAMAC, DstMAC: p.SrcMAC, SrcIP: vmAIP, DstIP: lbVIP, TTL: 64, SPort: lbPort, DPort: sport})))
		r := waitFor(t, e.vm(vmA.chassis, vmA.port), fmt.Sprintf("vm-a's reply to its own flow %d", sport), skA, func(s seen) bool { return s.IsUDP && s.SPort == lbPort && s.DPort == sport })
		assert.Equal(t, lbVIP, r.SrcIP, "the reply comes from the VIP")
		assert.Equal(t, vmAIP, r.DstIP)
	}
	t.Logf("flows per member: %v", by)
	assert.Len(t, by, 2, "vm-a's flows land on vm-c and on vm-a itself: %v", by)
}

// TestLoadBalancerFromOtherNetwork: a VM on another internal network of
// the load balancer's router (vm-b on net-b, on hv2 while the gateway is
// gw1) reaches the VIP: its flows spread over the members, each member
// sees vm-b's own address, and a member's reply reaches vm-b from the
// VIP. (Without net-b's own row, the router on hv2 does not balance and
// ARPs for the VIP on net-a, unanswered.)
func TestLoadBalancerFromOtherNetwork(t *testing.T) {
	e := newEnv(t)
	assert.Contains(t, e.withLB(lbManifests), "create Load_Balancer kv-lb-web_udp_from_net-b")

	members := []vmRef{vmA, vmLBC}
	by := map[string]int{}
	for sport := uint16(7900); sport < 7916; sport++ {
		sk := skips(t, e, members)
		require.NoError(t, e.l.Inject(vmB.chassis, vmB.port, frameBytes(t, frame{SrcMAC: vmBMAC, DstMAC: routerMAC, SrcIP: vmBIP, DstIP: lbVIP, TTL: 64, SPort: sport, DPort: lbPort})))
		m, p := landing(t, e, members, sk, fmt.Sprintf("vm-b's flow %d to the VIP", sport), func(s seen) bool { return s.IsUDP && s.SPort == sport && s.DPort == lbPort })
		by[m.port]++
		assert.Equal(t, vmBIP, p.SrcIP, "the member sees the client's address")
		assert.Equal(t, m.ip, p.DstIP, "DNATed to the member")
		if sport%4 != 0 {
			continue
		}
		skB := count(t, e.vm(vmB.chassis, vmB.port))
		require.NoError(t, e.l.Inject(m.chassis, m.port, frameBytes(t, frame{SrcMAC: m.mac, DstMAC: routerMAC, SrcIP: m.ip, DstIP: vmBIP, TTL: 64, SPort: lbPort, DPort: sport})))
		r := waitFor(t, e.vm(vmB.chassis, vmB.port), fmt.Sprintf("%s's reply to flow %d at vm-b", m.port, sport), skB, func(s seen) bool { return s.IsUDP && s.DPort == sport })
		assert.Equal(t, lbVIP, r.SrcIP, "the reply comes from the VIP")
		assert.Equal(t, uint16(lbPort), r.SPort)
	}
	t.Logf("flows per member: %v", by)
	assert.Len(t, by, 2, "every member gets flows: %v", by)
}

// TestLoadBalancerMembersLive: members edited while flows come in from
// outside through the floating IP: with vm-a alone every flow lands on
// vm-a; vm-c added, new flows spread over both; vm-a removed, no new flow
// reaches it, every one lands on vm-c.
func TestLoadBalancerMembersLive(t *testing.T) {
	e := newEnv(t)
	require.NoError(t, e.l.AddVMPort("hv2", "vm-c", vmLBCPort))
	withMembers := func(ms string) string {
		return strings.Replace(lbManifests, "members: [10.10.0.5, "+vmLBCIP+"]", "members: ["+ms+"]", 1)
	}
	e.write("lb.yaml", withMembers(vmAIP))
	e.sync()
	e.ready("gw1", "hv1", "hv2")
	nbctl(t, e.l, "--timeout=90", "wait-until", "Logical_Switch_Port", vmLBCPort, "up=true")

	members := []vmRef{vmA, vmLBC}
	// spread sends 16 new flows from outside and counts where they land.
	spread := func(from uint16) map[string]int {
		t.Helper()
		by := map[string]int{}
		for sport := from; sport < from+16; sport++ {
			sk := skips(t, e, members)
			e.inject("gw1", frame{SrcMAC: peerMAC, DstMAC: gwPortMAC, SrcIP: remoteIP, DstIP: lbFIP, TTL: 64, SPort: sport, DPort: lbPort})
			m, _ := landing(t, e, members, sk, fmt.Sprintf("flow %d", sport), func(s seen) bool {
				return s.IsUDP && s.SrcIP == remoteIP && s.SPort == sport && s.DPort == lbPort
			})
			by[m.port]++
		}
		return by
	}
	assert.Equal(t, map[string]int{"vm-a": 16}, spread(8000), "vm-a alone")

	e.write("lb.yaml", withMembers(vmAIP+", "+vmLBCIP))
	assert.Contains(t, e.sync(), "update Load_Balancer kv-lb-web_udp ")
	by := spread(8100)
	assert.Len(t, by, 2, "vm-c added: flows spread over both: %v", by)

	e.write("lb.yaml", withMembers(vmLBCIP))
	e.sync()
	assert.Equal(t, map[string]int{"vm-c": 16}, spread(8200), "vm-a removed: no new flow reaches it")
}
