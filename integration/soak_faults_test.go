package integration

import (
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubevirt-ovn/kubevirt-ovn/integration/sandbox"
)

// injectFault starts fault and returns what ends it (a restart, a chassis
// back); the workload goes on in between.
func (s *soak) injectFault(fault string) (recover func()) {
	t := s.t
	t.Helper()
	none := func() {}
	switch fault {
	case "conn-cut":
		for _, p := range s.px {
			p.cut()
		}
		return none
	case "gateway-kill":
		_, err := s.chassis.KillChassis("gw2")
		require.NoError(t, err)
		return func() { require.NoError(t, s.chassis.RestartChassis("gw2")) }
	case "ovnk-start":
		// ovnkube-controller starting against each NB (every fact but
		// EgressQoS, whose QoS row would change the foreign rows): it
		// must leave every row of ours as it is. Rows of ours are only
		// compared while no controller writes: the fault comes at a
		// quiet moment (the loop makes no edit before it).
		for _, db := range s.dbs {
			d := ovnkRun(t, ovnkDB{db.nb, db.sbctl}, func(v *ovnkView, a *ovnkActs) {
				for _, f := range ovnkFacts {
					if f.name != "EgressQoS" {
						f.apply(v, db.ovnk, a)
					}
				}
			})
			assert.Equal(t, d.OursBefore, d.OursAfter, "rows of ours%s changed by ovn-kubernetes' start (it matched: %q)", db.where(), d.Matched)
			assert.Empty(t, d.Failed, "rows of ours%s would fail ovn-kubernetes' start", db.where())
		}
		return none
	case "hand-edit":
		for range 1 + s.r.IntN(3) {
			s.handEdit(s.dbs[s.r.IntN(len(s.dbs))])
		}
		return none
	case "lease-loss":
		s.stealLease()
		select {
		case <-s.b.done:
		case <-time.After(30 * time.Second):
			require.FailNow(t, "the leader still runs 30s after losing its Lease")
		}
		return s.startKube
	}
	return s.modeFault(fault)
}

// centralFault injects central mode's own faults: on the Raft NB and the
// kube instance's controller.
func (s *soak) centralFault(fault string) func() {
	t := s.t
	switch fault {
	case "nb-follower-kill", "nb-leader-kill":
		leader, err := s.nc.WaitLeader(30 * time.Second)
		require.NoError(t, err)
		victim := leader
		if fault == "nb-follower-kill" {
			victim = (leader + 1 + s.r.IntN(2)) % 3
		}
		_, err = s.nc.Kill(victim)
		require.NoError(t, err)
		return func() { require.NoError(t, s.nc.Restart(victim)) }
	case "nb-restart":
		for i := range s.nc.Members {
			_, err := s.nc.Kill(i)
			require.NoError(t, err)
		}
		return func() {
			for i := range s.nc.Members {
				require.NoError(t, s.nc.Restart(i))
			}
			_, err := s.nc.WaitLeader(60 * time.Second)
			require.NoError(t, err)
		}
	case "ctrl-sigterm":
		s.b.stop()
		assert.Equal(t, 0, ctrlExitCode(s.b), "SIGTERM is a clean stop")
		return s.startKube
	case "ctrl-sigkill":
		s.b.kill()
		return s.startKube
	}
	require.FailNow(t, "unknown fault "+fault)
	return nil
}

// zonesFault injects interconnect mode's own faults: on a zone's NB, a
// zone's agent, the allocator.
func (s *soak) zonesFault(fault string) func() {
	t := s.t
	zones := s.z.List()
	zdb := zones[s.r.IntN(len(zones))]
	if strings.HasPrefix(fault, "agent-") {
		// Not the sampled agent.
		zones = slices.DeleteFunc(zones, func(z *sandbox.ZoneDB) bool { return z.Name == soakSampledZone })
		zdb = zones[s.r.IntN(len(zones))]
	}
	switch fault {
	case "zone-nb-restart":
		_, err := zdb.KillNB()
		require.NoError(t, err)
		return func() { require.NoError(t, zdb.RestartNB()) }
	case "agent-sigterm":
		s.agents[zdb.Name].stop()
		assert.Equal(t, 0, ctrlExitCode(s.agents[zdb.Name]), "SIGTERM is a clean stop")
		return func() { s.startAgent(zdb) }
	case "agent-sigkill":
		s.agents[zdb.Name].kill()
		return func() { s.startAgent(zdb) }
	case "allocator-sigkill":
		s.b.kill()
		return s.startKube
	}
	require.FailNow(t, "unknown fault "+fault)
	return nil
}

// handEdit changes one random row of ours with ovn-nbctl, as an operator
// might: a VM's port or a router deleted, a router port's MAC changed, a
// router's NATs deleted.
func (s *soak) handEdit(db *soakDB) {
	t := s.t
	pick := func(table, prefix string) string {
		var names []string
		for _, n := range strings.Fields(nbctl(t, db.ctl, "--bare", "--columns=name", "list", table)) {
			if strings.HasPrefix(n, prefix) {
				names = append(names, n)
			}
		}
		if len(names) == 0 {
			return ""
		}
		slices.Sort(names)
		return names[s.r.IntN(len(names))]
	}
	switch s.r.IntN(4) {
	case 0:
		if p := pick("Logical_Switch_Port", "kv-"+[]string{"f", "k"}[s.r.IntN(2)]+"-n"); p != "" {
			nbctl(t, db.ctl, "lsp-del", p)
			s.handEdited("VM port deleted", p, db)
		}
	case 1:
		// The router and its ports go; its Static_MAC_Binding stays,
		// naming a port that is gone.
		if r := pick("Logical_Router", "kv-"); r != "" {
			nbctl(t, db.ctl, "lr-del", r)
			s.handEdited("router deleted", r, db)
		}
	case 2:
		if p := pick("Logical_Router_Port", "kv-"); p != "" {
			nbctl(t, db.ctl, "set", "Logical_Router_Port", p, "mac=\"02:00:00:00:00:99\"")
			s.handEdited("router port MAC changed", p, db)
		}
	case 3:
		if r := pick("Logical_Router", "kv-"); r != "" {
			nbctl(t, db.ctl, "lr-nat-del", r)
			s.handEdited("router's NATs deleted", r, db)
		}
	}
}

// handEdited counts a hand edit of row in db, and notes it in the round.
func (s *soak) handEdited(what, row string, db *soakDB) {
	s.ops["hand: "+what]++
	s.note("hand: " + what + ": " + row + db.where())
}

// stealLease takes the leader's Lease (the kube controller's, the
// allocator's) for another identity, as a replica would after a
// partition, once the leader holds it: a leader started again may still
// stand by (in interconnect mode the NB converges without the allocator,
// from its decisions), and would lose nothing. The thief's Lease lasts
// longer than the leader's renew deadline (3s): one that expired first
// would be taken back by the leader's next renewal.
func (s *soak) stealLease() {
	s.k.takeLease(s.t, 60*time.Second, s.b.name, "soak-thief", 6, nil)
}

// soakProxy forwards TCP connections to an NB member; cut closes every
// connection it carries, as a network blip or a load balancer would.
type soakProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	conns  []net.Conn
}

func startSoakProxy(t *testing.T, target string) *soakProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &soakProxy{ln: ln, target: target}
	t.Cleanup(func() { ln.Close(); p.cut() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.serve(c)
		}
	}()
	return p
}

func (p *soakProxy) addr() string { return p.ln.Addr().String() }

func (p *soakProxy) serve(c net.Conn) {
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	p.conns = append(p.conns, c, up)
	p.mu.Unlock()
	go func() { _, _ = io.Copy(up, c); up.Close(); c.Close() }()
	_, _ = io.Copy(c, up)
	c.Close()
	up.Close()
}

func (p *soakProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// report prints what the soak did and measured, checks that the files
// controller (never restarted) did not grow, and writes the report to
// KUBEVIRT_OVN_SOAK_REPORT when set.
func (s *soak) report() {
	t := s.t
	var b strings.Builder
	rel, _ := sandbox.CurrentRelease()
	mode := "central (Raft NB of 3)"
	if s.z != nil {
		mode = fmt.Sprintf("interconnect (%d zones)", len(s.dbs))
	}
	fmt.Fprintf(&b, "soak %s: %s, %s on OVN %s, seed %d (%s=%d reproduces it)\n", t.Name(), mode, time.Since(s.started).Round(time.Second), rel.Version, s.seed, EnvSoakSeed, s.seed)
	total := 0
	var kinds []string
	for k, n := range s.ops {
		total += n
		kinds = append(kinds, fmt.Sprintf("%s %d", k, n))
	}
	slices.Sort(kinds)
	fmt.Fprintf(&b, "operations: %d (%s)\n", total, strings.Join(kinds, ", "))
	fmt.Fprintf(&b, "probes: %d rounds of SNAT, floating IP and load balancer packets, all delivered\n", s.probes)
	fmt.Fprintf(&b, "%-18s %6s %9s %9s %9s\n", "fault", "count", "p50", "p99", "max")
	for _, f := range append([]string{"start"}, s.faultList...) {
		d := slices.Clone(s.conv[f])
		if len(d) == 0 {
			fmt.Fprintf(&b, "%-18s %6d\n", f, 0)
			continue
		}
		slices.Sort(d)
		q := func(p float64) time.Duration { return d[int(math.Ceil(p*float64(len(d))))-1] }
		fmt.Fprintf(&b, "%-18s %6d %9s %9s %9s\n", f, len(d), q(0.5).Round(time.Millisecond), q(0.99).Round(time.Millisecond), d[len(d)-1].Round(time.Millisecond))
	}
	sampled := "files controller"
	if s.z != nil {
		sampled = "zone " + soakSampledZone + "'s agent"
	}
	if len(s.slow) > 0 {
		fmt.Fprintf(&b, "convergences over %s:\n", soakSlowConvergence())
		for _, d := range s.slow {
			fmt.Fprintf(&b, "  %s", d)
		}
	}
	fmt.Fprintf(&b, "%s (never restarted), at %d checkpoints:\n", sampled, len(s.samples))
	for _, m := range []struct {
		name  string
		unit  float64
		label string
		get   func(soakSample) float64
	}{
		{"RSS", 1 << 20, "MiB", func(x soakSample) float64 { return x.rss }},
		{"goroutines", 1, "", func(x soakSample) float64 { return x.goroutines }},
		{"open files", 1, "", func(x soakSample) float64 { return x.fds }},
		{"rows owned", 1, "", func(x soakSample) float64 { return x.units }},
	} {
		first, last := m.get(s.samples[0])/m.unit, m.get(s.samples[len(s.samples)-1])/m.unit
		fmt.Fprintf(&b, "  %-11s first %.1f%s, last %.1f%s, slope %+.2f%s/h\n", m.name, first, m.label, last, m.label, soakSlope(s.samples, m.get)/m.unit, m.label)
	}
	t.Log("\n" + b.String())
	if path := os.Getenv(EnvSoakReport); path != "" {
		// Appended: make soak runs both modes.
		f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		require.NoError(t, err)
		_, err = f.WriteString(b.String() + "\n")
		require.NoError(t, errors.Join(err, f.Close()))
	}
	report(t, fmt.Sprintf("soak, %s, %s, seed %d: %d operations, %d faults, all converged", mode, time.Since(s.started).Round(time.Second), s.seed, total, len(s.conv)-1))

	// No leak: goroutines and open files at the last checkpoint (a quiet
	// moment, as every checkpoint) within what the first half of the run
	// saw, with a margin for what the input's size needs (a watch, a
	// connection: none grows with the input).
	half := s.samples[:max(1, len(s.samples)/2)]
	peak := func(get func(soakSample) float64) float64 {
		m := 0.0
		for _, x := range half {
			m = max(m, get(x))
		}
		return m
	}
	lastS := s.samples[len(s.samples)-1]
	assert.LessOrEqual(t, lastS.goroutines, peak(func(x soakSample) float64 { return x.goroutines })+50, "goroutines grew over the run")
	assert.LessOrEqual(t, lastS.fds, peak(func(x soakSample) float64 { return x.fds })+10, "open files grew over the run")
}

// soakSlope is the least-squares slope of get over the samples, per hour.
func soakSlope(samples []soakSample, get func(soakSample) float64) float64 {
	if len(samples) < 2 {
		return 0
	}
	var sx, sy, sxx, sxy float64
	n := float64(len(samples))
	for _, x := range samples {
		h := x.at.Hours()
		y := get(x)
		sx, sy, sxx, sxy = sx+h, sy+y, sxx+h*h, sxy+h*y
	}
	den := n*sxx - sx*sx
	if den == 0 {
		return 0
	}
	return (n*sxy - sx*sy) / den
}
