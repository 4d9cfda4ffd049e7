package integration

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kubevirt-ovn/kubevirt-ovn/translator/kube"
)

// probeAnswerer answers the TCP health probes (SYN from src to port) that
// reach the members it is told to answer for with a SYN-ACK, from a
// goroutine polling their captures, on any sandbox (traffic).
type probeAnswerer struct {
	p       traffic
	src     string
	port    uint16
	mu      sync.Mutex
	answers map[string]bool // by member port
	done    map[string]int  // packets of each member's capture handled
}

func startProbeAnswerer(t *testing.T, p traffic, src string, port uint16, members ...vmRef) *probeAnswerer {
	a := &probeAnswerer{p: p, src: src, port: port, answers: map[string]bool{}, done: map[string]int{}}
	stop, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			for _, m := range members {
				a.answer(m)
			}
		}
	}()
	t.Cleanup(func() { close(stop); <-finished })
	return a
}

func (a *probeAnswerer) set(m vmRef, answer bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.answers[m.port] = answer
}

func (a *probeAnswerer) answer(m vmRef) {
	ps, err := a.p.vm(m.chassis, m.port).read()
	if err != nil {
		return
	}
	a.mu.Lock()
	from, on := a.done[m.port], a.answers[m.port]
	a.done[m.port] = len(ps)
	a.mu.Unlock()
	for _, s := range ps[from:] {
		if !on || !s.IsTCP || !s.SYN || s.ACK || s.SrcIP != a.src || s.DPort != a.port {
			continue
		}
		f := frame{SrcMAC: m.mac, DstMAC: s.SrcMAC, SrcIP: m.ip, DstIP: a.src, TTL: 64, SPort: a.port, DPort: s.SPort,
			TCP: true, SYNACK: true, Ack: s.Seq + 1}
		if b, err := f.Bytes(); err == nil {
			_ = a.p.c.Inject(m.chassis, m.port, b)
		}
	}
}

// TestZonesLoadBalancerHealthCheck: a health-checked member is probed
// only in its own zone (a remote twin's Service_Monitor has no status:
// OVN would keep it in rotation everywhere else), so run --zone carries
// each zone's offline members to the other zones' rows (zonesHealth).
func TestZonesLoadBalancerHealthCheck(t *testing.T) {
	e := newZoneEnv(t)
	probes := zonesHealthSetup(t, e)
	startController(t, "zones", append([]string{"--from-file", e.manifests}, e.z.ZoneFlags()...)...)
	e.converged()
	zonesHealth(t, e, probes, v4Health, func() {})
}

// TestInterconnectClusterLoadBalancerHealthCheck: zonesHealth with the
// cluster roles (allocator and one agent per zone, a real API server):
// zone hv2's agent publishes vm-c offline in its OVNZone, and zone gw1's
// agent leaves it out of the router's rows.
func TestInterconnectClusterLoadBalancerHealthCheck(t *testing.T) {
	e := newZoneEnv(t)
	probes := zonesHealthSetup(t, e)
	k := startKubeAPI(t)
	startInterconnect(t, e, k)
	for _, f := range []string{"networks.yaml", "vmis.yaml", "router.yaml", "lb.yaml"} {
		k.apply(t, filepath.Join(e.manifests, f))
	}
	e.converged()
	zonesHealth(t, e, probes, v4Health, func() {
		var last any
		require.NoError(t, pollUntil(60*time.Second, func() bool {
			u, err := k.dyn.Resource(kube.ZoneGVR).Namespace(icNamespace).Get(context.Background(), "zone-hv2", metav1.GetOptions{})
			if err != nil {
				return false
			}
			members, _, _ := unstructured.NestedSlice(u.Object, "spec", "offlineMembers")
			last = members
			for _, m := range members {
				if mm, ok := m.(map[string]any); ok && mm["ip"] == vmLBCIP && mm["port"] == vmLBCPort {
					return true
				}
			}
			return false
		}), "zone hv2's OVNZone lists vm-c offline; spec.offlineMembers: %v", last)
	})
}

// zonesHealthSetup adds vm-c (zone hv2) and web with a TCP health check
// to e's manifests, and answers both members' probes.
func zonesHealthSetup(t *testing.T, e *zoneEnv) *probeAnswerer {
	const src = "10.10.0.250"
	require.NoError(t, e.z.AddVMPort("hv2", "vm-c", vmLBCPort))
	m := strings.Replace(lbManifests, "protocol: udp", "protocol: tcp", 1)
	m = strings.Replace(m, "  rules:\n", "  healthCheck: {sourceIp: "+src+", interval: 1, timeout: 1, successCount: 1, failureCount: 1}\n  rules:\n", 1)
	e.write("lb.yaml", m)
	probes := startProbeAnswerer(t, e.traffic, src, lbPort, vmA, vmLBC)
	probes.set(vmA, true)
	probes.set(vmLBC, true)
	return probes
}

// healthCase is what zonesHealth checks: the router's row of a
// health-checked TCP load balancer, its floating IP, the remote host
// flows come from, and its members vm-a and vm-c.
type healthCase struct {
	row, fip, remote string
	a, c             vmRef
}

// v4Health is zonesHealthSetup's IPv4 load balancer web.
var v4Health = healthCase{"kv-lb-web_tcp", lbFIP, remoteIP, vmA, vmLBC}

// zonesHealth: router1 lives in zone gw1, where no member is local; vm-a
// is in zone hv1, vm-c in hv2. Flows from outside through the floating IP
// (balanced in gw1) reach both members; vm-c stops answering its probes:
// zone hv2's monitor goes offline (then published() holds) and new flows
// from outside all go to vm-a; vm-c answers again: flows reach it again.
// With neither answering, gw1's VIP has no backends, and a sync reading
// the zones' SBs writes what the controllers wrote.
func zonesHealth(t *testing.T, e *zoneEnv, probes *probeAnswerer, hc healthCase, published func()) {
	e.ready("gw1")
	nbctl(t, e.z.Zone("hv2"), "--timeout=90", "wait-until", "Logical_Switch_Port", vmLBCPort, "up=true")
	vmA, vmLBC, vmAIP, vmLBCIP := hc.a, hc.c, hc.a.ip, hc.c.ip
	hostPort := func(ip string) string { return net.JoinHostPort(ip, strconv.Itoa(lbPort)) }
	status := func(zone, ip string) []string {
		return strings.Fields(sbctl(t, e.z.Zone(zone), "--bare", "--columns=status", "find", "Service_Monitor", `ip="`+ip+`"`))
	}
	waitStatus := func(zone, ip, want string) {
		t.Helper()
		require.NoError(t, pollUntil(60*time.Second, func() bool {
			s := status(zone, ip)
			return len(s) > 0 && !slices.ContainsFunc(s, func(x string) bool { return x != want })
		}), "zone %s: member %s %s; Service_Monitor:\n%s", zone, ip, want, sbctl(t, e.z.Zone(zone), "list", "Service_Monitor"))
	}
	// gw1's router row: its VIP's (the floating IP's) backends.
	backends := func() string {
		return nbctl(t, e.z.Zone("gw1"), "get", "Load_Balancer", hc.row, fmt.Sprintf("vips:\"%s\"", hostPort(hc.fip)))
	}
	waitBackends := func(want string) {
		t.Helper()
		var last string
		require.NoError(t, pollUntil(60*time.Second, func() bool {
			last = backends()
			return strings.Trim(strings.TrimSpace(last), `"`) == want
		}), "zone gw1: the floating IP's backends %s, want %q", last, want)
		e.realized()
	}
	both := hostPort(vmAIP) + "," + hostPort(vmLBCIP)
	if netip.MustParseAddr(vmLBCIP).Less(netip.MustParseAddr(vmAIP)) {
		both = hostPort(vmLBCIP) + "," + hostPort(vmAIP)
	}
	onlyA := hostPort(vmAIP)

	members := []vmRef{vmA, vmLBC}
	toFIP := func(sport uint16) frame {
		return frame{SrcMAC: peerMAC, DstMAC: gwPortMAC, SrcIP: hc.remote, DstIP: hc.fip, TTL: 64, SPort: sport, DPort: lbPort, TCP: true}
	}
	flowAt := func(sport uint16) func(seen) bool {
		return func(s seen) bool {
			return s.IsTCP && s.SYN && s.SrcIP == hc.remote && s.SPort == sport && s.DPort == lbPort
		}
	}
	// flows sends flows from outside until want has seen one (at most
	// n), each waited for at a member; it returns the members seen.
	flows := func(first uint16, n int, want string) map[string]int {
		t.Helper()
		seenBy := map[string]int{}
		for sport := first; sport < first+uint16(n) && seenBy[want] == 0; sport++ {
			skips := map[string]int{}
			for _, mm := range members {
				skips[mm.port] = count(t, e.vm(mm.chassis, mm.port))
			}
			e.inject("gw1", toFIP(sport))
			var at string
			waitFor(t, capture{name: "vm-a or vm-c", read: func() ([]seen, error) {
				var all []seen
				for _, mm := range members {
					ps, err := e.vm(mm.chassis, mm.port).read()
					if err != nil {
						return nil, err
					}
					if slices.ContainsFunc(ps[skips[mm.port]:], flowAt(sport)) {
						at = mm.port
					}
					all = append(all, ps[skips[mm.port]:]...)
				}
				return all, nil
			}}, fmt.Sprintf("flow %d at a member", sport), 0, flowAt(sport))
			seenBy[at]++
		}
		return seenBy
	}

	// Both answer: flows from outside reach both.
	waitStatus("hv1", vmAIP, "online")
	waitStatus("hv2", vmLBCIP, "online")
	waitBackends(both)
	seenBy := flows(7500, 32, vmLBC.port)
	assert.Positive(t, seenBy[vmLBC.port], "vm-c gets flows from outside: %v", seenBy)
	assert.Positive(t, flows(7540, 32, vmA.port)[vmA.port], "vm-a gets flows from outside")

	// vm-c (zone hv2) stops answering: offline in hv2, out of gw1's VIP.
	// gw1's own monitor of vm-c (its remote twin) never says so.
	probes.set(vmLBC, false)
	waitStatus("hv2", vmLBCIP, "offline")
	published()
	waitBackends(onlyA)
	skipC := count(t, e.vm(vmLBC.chassis, vmLBC.port))
	for sport := uint16(7600); sport < 7610; sport++ {
		skipA := count(t, e.vm(vmA.chassis, vmA.port))
		e.inject("gw1", toFIP(sport))
		waitFor(t, e.vm(vmA.chassis, vmA.port), fmt.Sprintf("flow %d at vm-a, the only member online", sport), skipA, flowAt(sport))
	}
	requireNone(t, e.vm(vmLBC.chassis, vmLBC.port), "a flow from outside at vm-c, offline in its zone", skipC, func(s seen) bool {
		return s.IsTCP && s.SrcIP == hc.remote && s.DPort == lbPort
	})
	// Zone hv1's switch rows leave it out too; hv2's own keep it (OVN
	// takes it out there).
	assert.NotContains(t, nbctl(t, e.z.Zone("hv1"), "get", "Load_Balancer", hc.row+"_switch", "vips"), vmLBCIP)
	assert.Contains(t, nbctl(t, e.z.Zone("hv2"), "get", "Load_Balancer", hc.row+"_switch", "vips"), vmLBCIP)

	// vm-c answers again: back.
	probes.set(vmLBC, true)
	waitStatus("hv2", vmLBCIP, "online")
	waitBackends(both)
	seenBy = flows(7700, 32, vmLBC.port)
	assert.Positive(t, seenBy[vmLBC.port], "vm-c gets flows again once its health check passes: %v", seenBy)

	// Neither answers: gw1's VIP has no backends (drops, as OVN's own
	// would). The end's sync, reading the zones' SBs, writes nothing.
	probes.set(vmA, false)
	probes.set(vmLBC, false)
	waitStatus("hv1", vmAIP, "offline")
	waitStatus("hv2", vmLBCIP, "offline")
	waitBackends("")
	e.converged()
}

// TestZonesLoadBalancerHealthCheckIPv6: zonesHealth on the dual stack
// example's IPv6 load balancer web6 (members vm-a's and vm-c's SLAAC
// addresses, source fd00:10::fa): zone hv2's monitor of an IPv6 member
// takes it out of gw1's rows, as an IPv4 one.
func TestZonesLoadBalancerHealthCheckIPv6(t *testing.T) {
	const src6 = "fd00:10::fa"
	e := newZoneEnv(t)
	useDualStack(t, e, "networks.yaml", "router.yaml")
	require.NoError(t, e.z.AddVMPort("hv2", "vm-c", vmLBCPort))
	e.write("lb.yaml", lbManifests+web6Manifests("tcp", `{sourceIp: "`+src6+`", interval: 1, timeout: 1, successCount: 1, failureCount: 1}`))
	hc := healthCase{"kv-lb-web6_tcp", fipLB6, remote6, vmRef{"hv1", "vm-a", vmAMAC, slaacA(vmAMAC)}, vmRef{"hv2", "vm-c", vmLBCMAC, slaacA(vmLBCMAC)}}
	probes := startProbeAnswerer(t, e.traffic, src6, lbPort, hc.a, hc.c)
	probes.set(hc.a, true)
	probes.set(hc.c, true)
	startController(t, "zones", append([]string{"--from-file", e.manifests}, e.z.ZoneFlags()...)...)
	e.converged()
	zonesHealth(t, e, probes, hc, func() {})
}
