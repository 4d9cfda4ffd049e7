package integration

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Load balancers (issue 22) on deploy/examples: load balancer web on net-a
// (router1's), VIP 10.10.0.100, members vm-a (10.10.0.5 on hv1) and vm-c
// (10.10.0.7 on hv2), UDP 8080, exposed through floating IP 172.16.0.160.

const (
	lbVIP     = "10.10.0.100"
	lbFIP     = "172.16.0.160"
	lbPort    = 8080
	vmLBCMAC  = "50:54:00:00:00:17"
	vmLBCIP   = "10.10.0.7"
	vmLBCPort = "kv-net-a_default_vm-c_eth1"
)

var vmLBC = vmRef{"hv2", "vm-c", vmLBCMAC, vmLBCIP}

// vmCManifest is VMI vm-c on net-a, on hv2; lbManifests are it, load
// balancer web and its floating IP.
const vmCManifest = `apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata:
  name: vm-c
  namespace: default
spec:
  networks:
    - name: eth1
      multus:
        networkName: net-a
status:
  nodeName: hv2
  interfaces:
    - name: eth1
      mac: "` + vmLBCMAC + `"
      ipAddress: ` + vmLBCIP + `
`

const lbManifests = vmCManifest + `---
apiVersion: kubevirt.io/v1
kind: LoadBalancer
metadata:
  name: web
spec:
  name: web
  networkId: net-a
  vip: ` + lbVIP + `
  members: [10.10.0.5, ` + vmLBCIP + `]
  rules:
  - {protocol: udp, portRangeMin: 8080, portRangeMax: 8080}
---
apiVersion: kubevirt.io/v1
kind: FloatingIp
metadata:
  name: fip-web
spec:
  id: fip-web
  routerName: router1
  networkName: public
  floatingIp: ` + lbFIP + `
  fixedIp: ` + lbVIP + `
`

// withLB plugs vm-c on hv2, writes manifests (lbManifests or a variant)
// as lb.yaml, syncs, and waits for the gateway on gw1 and vm-c's port; it
// returns what the sync printed.
func (e *env) withLB(manifests string) string {
	e.t.Helper()
	require.NoError(e.t, e.l.AddVMPort("hv2", "vm-c", vmLBCPort))
	e.write("lb.yaml", manifests)
	out := e.sync()
	e.ready("gw1", "hv1", "hv2")
	nbctl(e.t, e.l, "--timeout=90", "wait-until", "Logical_Switch_Port", vmLBCPort, "up=true")
	return out
}

// TestLoadBalancerFromOutside: flows from outside to the floating IP on
// the VIP spread over the members (each member sees some, DNATed to its
// own address, the VIP's port), a flow stays on its member, a member's
// reply leaves with the floating IP; the floating IP has no NAT row. Also
// on a router with enableSnat false, whose policies let the members'
// replies out.
func TestLoadBalancerFromOutside(t *testing.T) {
	for _, snat := range []bool{true, false} {
		t.Run(fmt.Sprintf("enableSnat=%v", snat), func(t *testing.T) { testLoadBalancerFromOutside(t, snat) })
	}
}

func testLoadBalancerFromOutside(t *testing.T, snat bool) {
	e := newEnv(t)
	if !snat {
		e.edit("router.yaml", "enableSnat: true", "enableSnat: false")
	}
	out := e.withLB(lbManifests)
	assert.Contains(t, out, "create Load_Balancer kv-lb-web_udp")
	assert.NotContains(t, out, "dnat_and_snat", "a floating IP on a VIP has no NAT row")
	e.neighbour()

	members := []vmRef{vmA, vmLBC}
	skips := map[string]int{}
	for _, m := range members {
		skips[m.port] = count(t, e.vm(m.chassis, m.port))
	}
	// Where flow sport landed: the member that received it.
	landed := func(sport uint16, skip map[string]int) vmRef {
		t.Helper()
		in := func(s seen) bool { return s.IsUDP && s.SrcIP == remoteIP && s.SPort == sport && s.DPort == lbPort }
		var got []vmRef
		// Each flow reaches one member: wait for it at either.
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
						assert.Equal(t, m.ip, p.DstIP, "DNATed to the member's own address")
					}
				}
				all = append(all, ps[skip[m.port]:]...)
			}
			return all, nil
		}}, fmt.Sprintf("flow %d at a member", sport), 0, in)
		require.Len(t, got, 1, "flow %d reached one member", sport)
		return got[0]
	}
	seenBy := map[string]int{}
	first := map[uint16]string{}
	for sport := uint16(7100); sport < 7116; sport++ {
		e.inject("gw1", frame{SrcMAC: peerMAC, DstMAC: gwPortMAC, SrcIP: remoteIP, DstIP: lbFIP, TTL: 64, SPort: sport, DPort: lbPort})
		m := landed(sport, skips)
		seenBy[m.port]++
		first[sport] = m.port
		for _, mm := range members {
			skips[mm.port] = count(t, e.vm(mm.chassis, mm.port))
		}
	}
	t.Logf("flows per member: %v", seenBy)
	assert.Len(t, seenBy, 2, "every member gets flows: %v", seenBy)

	// The same flow again: the same member.
	for _, sport := range []uint16{7100, 7101, 7102} {
		e.inject("gw1", frame{SrcMAC: peerMAC, DstMAC: gwPortMAC, SrcIP: remoteIP, DstIP: lbFIP, TTL: 64, SPort: sport, DPort: lbPort})
		assert.Equal(t, first[sport], landed(sport, skips).port, "flow %d stays on its member", sport)
		for _, mm := range members {
			skips[mm.port] = count(t, e.vm(mm.chassis, mm.port))
		}
	}

	// A member's reply leaves with the floating IP and the VIP's port.
	m := vmA
	if first[7100] == vmLBC.port {
		m = vmLBC
	}
	skip := count(t, e.wire("gw1"))
	f := frame{SrcMAC: m.mac, DstMAC: routerMAC, SrcIP: m.ip, DstIP: remoteIP, TTL: 64, SPort: lbPort, DPort: 7100}
	require.NoError(t, e.l.Inject(m.chassis, m.port, frameBytes(t, f)))
	got := waitFor(t, e.wire("gw1"), "the member's reply leaving", skip, func(s seen) bool {
		return s.IsUDP && s.DstIP == remoteIP && s.DPort == 7100
	})
	assert.Equal(t, lbFIP, got.SrcIP, "the reply leaves with the floating IP")
	assert.Equal(t, uint16(lbPort), got.SPort)
}

// TestLoadBalancerFromInside: a VM on the load balancer's network that is
// no member (vm-a, with vm-c the only member) gets the router's MAC for the
// VIP by ARP and reaches the member through the VIP; the member sees vm-a's
// own address.
func TestLoadBalancerFromInside(t *testing.T) {
	e := newEnv(t)
	require.NoError(t, e.l.AddVMPort("hv2", "vm-c", vmLBCPort))
	e.write("lb.yaml", strings.Replace(lbManifests, "members: [10.10.0.5, "+vmLBCIP+"]", "members: ["+vmLBCIP+"]", 1))
	e.sync()
	e.ready("gw1", "hv1", "hv2")
	nbctl(t, e.l, "--timeout=90", "wait-until", "Logical_Switch_Port", vmLBCPort, "up=true")

	skip := count(t, e.vm("hv1", "vm-a"))
	arp := frame{SrcMAC: vmAMAC, DstMAC: "ff:ff:ff:ff:ff:ff", ARPOp: 1, ARPSHA: vmAMAC, ARPSPA: vmAIP, ARPTHA: "00:00:00:00:00:00", ARPTPA: lbVIP}
	require.NoError(t, e.l.Inject("hv1", "vm-a", frameBytes(t, arp)))
	reply := waitFor(t, e.vm("hv1", "vm-a"), "ARP reply for the VIP", skip, func(s seen) bool { return s.IsARP && s.ARPOp == 2 && s.ARPSPA == lbVIP })
	assert.Equal(t, routerMAC, reply.ARPSHA, "the router answers for the VIP")

	for sport := uint16(7200); sport < 7204; sport++ {
		skipC := count(t, e.vm("hv2", "vm-c"))
		f := frame{SrcMAC: vmAMAC, DstMAC: reply.ARPSHA, SrcIP: vmAIP, DstIP: lbVIP, TTL: 64, SPort: sport, DPort: lbPort}
		require.NoError(t, e.l.Inject("hv1", "vm-a", frameBytes(t, f)))
		got := waitFor(t, e.vm("hv2", "vm-c"), fmt.Sprintf("vm-a's flow %d to the VIP at vm-c", sport), skipC, func(s seen) bool {
			return s.IsUDP && s.SPort == sport && s.DPort == lbPort
		})
		assert.Equal(t, vmLBCIP, got.DstIP, "DNATed to the member")
		assert.Equal(t, vmAIP, got.SrcIP, "the member sees the client's address")
	}
}

// waitMonitor waits until the SB's service monitor of member ip says
// status.
func waitMonitor(t *testing.T, e *env, ip, status string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		out := strings.Fields(sbctl(t, e.l, "--bare", "--columns=status", "find", "Service_Monitor", `ip="`+ip+`"`))
		if len(out) > 0 && !slices.ContainsFunc(out, func(s string) bool { return s != status }) {
			return
		}
		if time.Now().After(deadline) {
			require.FailNowf(t, "service monitor", "member %s: status %v, want %s; Service_Monitor:\n%s", ip, out, status, sbctl(t, e.l, "list", "Service_Monitor"))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestLoadBalancerHealthCheck: with a TCP health check, a member that
// does not answer the probes is taken out (every new flow from outside
// through the floating IP lands on the other), and once it answers again
// it gets flows again.
func TestLoadBalancerHealthCheck(t *testing.T) {
	const src = "10.10.0.250"
	e := newEnv(t)
	require.NoError(t, e.l.AddVMPort("hv2", "vm-c", vmLBCPort))
	m := strings.Replace(lbManifests, "protocol: udp", "protocol: tcp", 1)
	m = strings.Replace(m, "  rules:\n", "  healthCheck: {sourceIp: "+src+", interval: 1, timeout: 1, successCount: 1, failureCount: 1}\n  rules:\n", 1)
	e.write("lb.yaml", m)
	hr := startProbeAnswerer(e.t, e.traffic, src, lbPort, vmA, vmLBC)
	hr.set(vmA, true)
	out := e.sync()
	assert.Contains(t, out, "create Load_Balancer_Health_Check")
	e.ready("gw1", "hv1", "hv2")
	nbctl(t, e.l, "--timeout=90", "wait-until", "Logical_Switch_Port", vmLBCPort, "up=true")
	e.neighbour()

	toFIP := func(sport uint16) frame {
		return frame{SrcMAC: peerMAC, DstMAC: gwPortMAC, SrcIP: remoteIP, DstIP: lbFIP, TTL: 64, SPort: sport, DPort: lbPort, TCP: true}
	}
	flowAt := func(sport uint16) func(seen) bool {
		return func(s seen) bool {
			return s.IsTCP && s.SYN && s.SrcIP == remoteIP && s.SPort == sport && s.DPort == lbPort
		}
	}

	// vm-c does not answer: out.
	waitMonitor(t, e, vmAIP, "online")
	waitMonitor(t, e, vmLBCIP, "offline")
	nbctl(t, e.l, "--timeout=90", "--wait=hv", "sync")
	skipC := count(t, e.vm(vmLBC.chassis, vmLBC.port))
	for sport := uint16(7300); sport < 7310; sport++ {
		skipA := count(t, e.vm(vmA.chassis, vmA.port))
		e.inject("gw1", toFIP(sport))
		waitFor(t, e.vm(vmA.chassis, vmA.port), fmt.Sprintf("flow %d at vm-a, the only member online", sport), skipA, flowAt(sport))
	}
	requireNone(t, e.vm(vmLBC.chassis, vmLBC.port), "a flow at vm-c, whose health check fails", skipC, func(s seen) bool {
		return s.IsTCP && s.SrcIP == remoteIP && s.DPort == lbPort
	})

	// vm-c answers again: back.
	hr.set(vmLBC, true)
	waitMonitor(t, e, vmLBCIP, "online")
	nbctl(t, e.l, "--timeout=90", "--wait=hv", "sync")
	seenC := false
	skipC = count(t, e.vm(vmLBC.chassis, vmLBC.port))
	for sport := uint16(7400); sport < 7432 && !seenC; sport++ {
		e.inject("gw1", toFIP(sport))
		waitFor(t, capture{name: "vm-a or vm-c", read: func() ([]seen, error) {
			a, err := e.vm(vmA.chassis, vmA.port).read()
			if err != nil {
				return nil, err
			}
			c, err := e.vm(vmLBC.chassis, vmLBC.port).read()
			if err != nil {
				return nil, err
			}
			if slices.ContainsFunc(c[skipC:], flowAt(sport)) {
				seenC = true
			}
			return append(a, c...), nil
		}}, fmt.Sprintf("flow %d at a member", sport), 0, flowAt(sport))
	}
	assert.True(t, seenC, "vm-c gets flows again once its health check passes")
}

// TestLoadBalancerEmpty: a load balancer without members drops what
// reaches its floating IP, as ONOS's empty group did; with
// --lb-reject-empty it answers a TCP SYN with a RST from the floating IP.
func TestLoadBalancerEmpty(t *testing.T) {
	for _, reject := range []bool{false, true} {
		t.Run(fmt.Sprintf("reject=%v", reject), func(t *testing.T) {
			e := newEnv(t)
			if reject {
				e.flags = []string{"--lb-reject-empty"}
			}
			m := strings.Replace(lbManifests, "members: [10.10.0.5, "+vmLBCIP+"]", "members: []", 1)
			e.write("lb.yaml", strings.Replace(m, "protocol: udp", "protocol: tcp", 1))
			out := e.sync()
			assert.Equal(t, reject, strings.Contains(out, "reject"), "options:reject only with the flag:\n%s", out)
			e.ready("gw1", "hv1", "hv2")

			skip := count(t, e.wire("gw1"))
			e.inject("gw1", frame{SrcMAC: peerMAC, DstMAC: gwPortMAC, SrcIP: remoteIP, DstIP: lbFIP, TTL: 64, SPort: 7500, DPort: lbPort, TCP: true})
			rst := func(s seen) bool {
				return s.IsTCP && s.RST && s.SrcIP == lbFIP && s.DstIP == remoteIP && s.DPort == 7500
			}
			if reject {
				waitFor(t, e.wire("gw1"), "a RST from the floating IP", skip, rst)
				return
			}
			// Barrier: vm-a's traffic leaves SNATed after the SYN went in.
			e.send("hv1", "vm-a", vmAMAC, vmAIP, 40300, 5300)
			waitFor(t, e.wire("gw1"), "vm-a leaving SNATed (barrier)", skip, snated(5300))
			requireNone(t, e.wire("gw1"), "an answer to a SYN to an empty load balancer", skip, func(s seen) bool {
				return s.IsTCP && s.SrcIP == lbFIP
			})
		})
	}
}
