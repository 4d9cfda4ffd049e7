package integration

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubevirt-ovn/kubevirt-ovn/integration/sandbox"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator"
)

// The soak (issue 35): production's interleavings in minutes. A seeded
// random workload edits the input of two kubevirt-ovn instances writing
// one NB (a 3-member Raft cluster, with ovn-kubernetes-like rows beside):
// instance "files" reads manifest files (`run --from-file`, its NB
// connections through proxies the soak can cut), instance "kube" reads
// Kubernetes objects (`run --kubeconfig --instance kube`, leader-elected).
// Between edits, faults: NB members and the leader killed, the whole NB
// restarted, connections cut, the kube controller SIGTERMed, SIGKILLed or
// losing its Lease (and started again), a gateway chassis killed and back,
// ovn-kubernetes' start against the NB, rows of ours edited by hand. After
// each fault: the time until both instances' NB rows are what a fresh
// `sync --dry-run` of their input wants, no duplicate row, the foreign rows
// byte-identical, packets through SNAT, a floating IP and a load balancer,
// and the files controller's RSS, goroutines and open files.
//
// KUBEVIRT_OVN_SOAK is its length (default 90s: the short soak of `make
// test`; `make soak SOAK=30m`), KUBEVIRT_OVN_SOAK_SEED its seed (default:
// the clock; printed, and in the report), KUBEVIRT_OVN_SOAK_REPORT a file
// the report is written to, KUBEVIRT_OVN_SOAK_SLOW the convergence time
// above which the report describes one (default 10s).
const (
	EnvSoak       = "KUBEVIRT_OVN_SOAK"
	EnvSoakSeed   = "KUBEVIRT_OVN_SOAK_SEED"
	EnvSoakReport = "KUBEVIRT_OVN_SOAK_REPORT"
	EnvSoakSlow   = "KUBEVIRT_OVN_SOAK_SLOW"
)

// soakConverge is how long the NB may take to be what the input wants
// after a fault's recovery: far above what any fault takes (a few
// seconds), far below the controllers' resync (1h here), so that a unit a
// missed event left behind is found, not healed by the resync.
const soakConverge = 120 * time.Second

// soakSlowConvergence is the convergence time above which the report
// describes one (EnvSoakSlow).
func soakSlowConvergence() time.Duration {
	if d, err := time.ParseDuration(os.Getenv(EnvSoakSlow)); err == nil && d > 0 {
		return d
	}
	return 10 * time.Second
}

type soak struct {
	traffic
	t    *testing.T
	seed uint64
	// w draws the workload's edits, r the faults and what they hit: the
	// edits replay alike whatever the NB's timing made of the faults.
	w, r *rand.Rand
	l    *sandbox.Local     // central mode
	nc   *sandbox.NBCluster // central mode
	z    *sandbox.Zones     // interconnect mode
	k    *kubeAPI
	// dbs are the NBs (one, or one per zone); sync the flags that give
	// kubevirt-ovn all of them; filesInstance and kubeInstance the
	// instances of the two inputs.
	dbs                         []*soakDB
	sync                        []string
	filesInstance, kubeInstance string
	chassis                     interface {
		KillChassis(string) ([]int, error)
		RestartChassis(string) error
	}
	waitGW func() error
	// faults are the mode's fault classes; modeFault injects those not
	// common to both modes.
	faultList []string
	modeFault func(fault string) func()
	// agents are the zone agents (interconnect mode), by zone; b is the
	// kube instance's controller: the allocator in interconnect mode.
	agents map[string]*controllerProc
	dir    string // the files instance's manifests
	files  *soakWorld
	kube   *soakWorld
	kubeIn *soakKube
	a, b   *controllerProc
	bStart int // starts of the kube controller
	px     []*soakProxy

	ops    map[string]int
	faults map[string]int
	conv   map[string][]time.Duration
	// round is what the current round did, in order (its edits, its
	// fault's hand edits); slow says, of each convergence over
	// soakSlowConvergence, what its round did and what was still to
	// change then (the report prints them: a passing run keeps no log).
	round   []string
	slow    []string
	samples []soakSample
	probes  int
	port    uint16
	started time.Time
}

// soakDB is one NB the soak checks: central mode's, or a zone's.
type soakDB struct {
	name  string  // the zone; "" in central mode
	ctl   nbCtler // ovn-nbctl on it
	nb    string  // its endpoint(s), for ovn-kubernetes' client
	sbctl func(...string) (string, error)
	ovnk  ovnkZone
	// foreign is how the ovn-kubernetes-like rows read at the start.
	foreign string
}

// soakSample is the files controller's resources at a checkpoint.
type soakSample struct {
	at                     time.Duration
	rss                    float64 // bytes
	goroutines, fds, units float64
}

func TestSoak(t *testing.T) { runSoak(t, startSoak) }

// TestSoakZones is the soak in interconnect mode: four zones (gw1, gw2,
// hv1, hv2, an NB, SB and northd each), the kube input through the cluster
// roles (the allocator and an agent per zone), the files input through
// `run --zone`.
func TestSoakZones(t *testing.T) { runSoak(t, startSoakZones) }

func runSoak(t *testing.T, start func(*testing.T, uint64) *soak) {
	length := 90 * time.Second
	if v := os.Getenv(EnvSoak); v != "" {
		d, err := time.ParseDuration(v)
		require.NoError(t, err, "%s=%q: a duration (10m, 30m)", EnvSoak, v)
		length = d
	}
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv(EnvSoakSeed); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		require.NoError(t, err, "%s=%q: a number", EnvSoakSeed, v)
		seed = n
	}
	t.Logf("soak of %s, seed %d (%s=%d reproduces it)", length, seed, EnvSoakSeed, seed)
	s := start(t, seed)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("soak FAILED: seed %d (%s=%d %s=%s -run %s reproduces it)", seed, EnvSoakSeed, seed, EnvSoak, length, t.Name())
		}
	})
	s.checkpoint("start")
	order := slices.Clone(s.faultList)
	for round := 0; time.Since(s.started) < length; round++ {
		if round%len(order) == 0 {
			s.r.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		}
		fault := order[round%len(order)]
		s.round = s.round[:0]
		half := 3 + s.w.IntN(6)
		if fault != "ovnk-start" {
			// ovn-kubernetes' start is checked against a quiet NB.
			s.work(half)
		}
		s.note("fault " + fault)
		recover := s.injectFault(fault)
		s.work(half)
		recover()
		s.faults[fault]++
		s.checkpoint(fault)
		if t.Failed() {
			return
		}
	}
	s.report()
}

// newSoak is what both modes share: the worlds, the seeded rand,
// deploy/examples with its floating IP and lb_test's load balancer (what
// the packets go through: the files instance's manifests withFiles, else
// Kubernetes objects), vm-a, vm-b and vm-c plugged in on ch, the API
// server.
func newSoak(t *testing.T, seed uint64, ch sandbox.Chassis, withFiles bool) *soak {
	for vm, lsp := range map[vmRef]string{vmA: vmAPort, vmB: vmBPort, vmLBC: vmLBCPort} {
		require.NoError(t, ch.AddVMPort(vm.chassis, vm.port, lsp))
	}
	s := &soak{traffic: traffic{t, ch}, t: t, seed: seed, w: rand.New(rand.NewPCG(seed, 1)), r: rand.New(rand.NewPCG(seed, 2)),
		ops: map[string]int{}, faults: map[string]int{}, conv: map[string][]time.Duration{}, started: time.Now(), port: 20000,
		agents: map[string]*controllerProc{}}
	s.k = startKubeAPI(t)
	s.kubeIn = &soakKube{k: s.k, have: map[string]soakObj{}}
	s.dir = examples(t)
	b, err := os.ReadFile(filepath.Join("..", "deploy", "examples", "floatingips.yaml"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(s.dir, "floatingips.yaml"), b, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(s.dir, "lb.yaml"), []byte(lbManifests), 0o644))
	s.kube = newSoakWorld("k", "k-pub", "172.17.0.", "172.17.0.1", 128)
	s.kube.publicNAD = ctrlNAD("k-pub", `{"type": "FLAT", "physicalNetworkName": "physnet1", "cidr": "172.17.0.0/24", "gatewayIp": "172.17.0.1"}`)
	if withFiles {
		s.files = newSoakWorld("f", "public", "172.16.0.", peerIP, 64)
	} else {
		// deploy/examples are Kubernetes objects too.
		for _, f := range []string{"networks.yaml", "router.yaml", "vmis.yaml", "floatingips.yaml", "lb.yaml"} {
			s.k.apply(t, filepath.Join(s.dir, f))
		}
	}
	for range 4 {
		if s.files != nil {
			s.files.routers = append(s.files.routers, s.files.newRouter(s.w))
		}
		s.kube.routers = append(s.kube.routers, s.kube.newRouter(s.w))
	}
	if s.files != nil {
		soakWriteFiles(t, s.dir, s.files.objects(), "f")
	}
	s.kubeIn.apply(t, s.kube.objects())
	return s
}

// proxied starts a cutting proxy to each NB endpoint (host:port) and
// returns the proxies' endpoints.
func (s *soak) proxied(endpoints ...string) []string {
	var out []string
	for _, e := range endpoints {
		p := startSoakProxy(s.t, strings.TrimPrefix(e, "tcp:"))
		s.px = append(s.px, p)
		out = append(out, "tcp:"+p.addr())
	}
	return out
}

// startSoak is central mode: a Raft NB of 3, SB, northd, gw1 gw2 hv1 hv2;
// both instances' controllers on that NB, the files one through proxies.
func startSoak(t *testing.T, seed uint64) *soak {
	dir := t.TempDir()
	l, nc, err := sandbox.StartLocalOnNBCluster(filepath.Join(dir, "ovn"), sandbox.DefaultTopology(), 3)
	require.NoError(t, err)
	t.Cleanup(func() {
		pids := append(l.Pids(), nc.Pids()...)
		if t.Failed() {
			t.Logf("OVN logs: %s", strings.Join(append(l.Logs(), nc.Logs()...), " "))
		}
		assert.NoError(t, l.Stop())
		assert.NoError(t, nc.Stop())
		for _, pid := range pids {
			assert.False(t, sandbox.Alive(pid), "daemon pid %d left behind", pid)
		}
	})
	s := newSoak(t, seed, l, true)
	s.l, s.nc, s.chassis = l, nc, l
	s.dbs = []*soakDB{{ctl: l, nb: nc.NB, sbctl: l.SBCtl, ovnk: ovnkZone{Nodes: []string{"node1"}}, foreign: seedForeignRows(t, l)}}
	s.sync = []string{"--nb", nc.NB, "--sb", l.SBTCP}
	s.filesInstance, s.kubeInstance = translator.DefaultInstance, "kube"
	s.waitGW = func() error { return sandbox.WaitGateway(l, crPort, "gw1") }
	s.faultList = []string{"nb-follower-kill", "nb-leader-kill", "nb-restart", "conn-cut", "ctrl-sigterm", "ctrl-sigkill", "lease-loss",
		"gateway-kill", "ovnk-start", "hand-edit"}
	s.modeFault = s.centralFault
	s.a = startController(t, "soak-files", "--nb", strings.Join(s.proxied(nc.Members...), ","), "--sb", l.SBTCP, "--from-file", s.dir,
		"--workers", "2", "--resync", "1h")
	s.startKube()
	nbctl(t, l, "--timeout=90", "wait-until", "Logical_Switch_Port", vmAPort, "up=true")
	return s
}

// startSoakZones is interconnect mode as ovn-kubernetes runs it: four
// zones of one chassis each, ovn-kubernetes-like rows in each, the
// cluster roles (the allocator and an agent per zone) over one input of
// Kubernetes objects: deploy/examples and the workload. (The files
// source, `run --zone`, is another instance: two instances allocating
// tunnel keys in the same zones each see the other's as foreign only
// once they read them, so a fresh sync of either may want a key the
// other took meanwhile; production runs one.) Zone hv1's agent, which
// no fault restarts, reaches its NB through a proxy the soak cuts; its
// resources are sampled.
func startSoakZones(t *testing.T, seed uint64) *soak {
	z := newZones(t)
	s := newSoak(t, seed, z, false)
	s.z, s.chassis = z, z
	for _, zdb := range z.List() {
		writeForeignRows(t, zdb)
		s.dbs = append(s.dbs, &soakDB{name: zdb.Name, ctl: zdb, nb: zdb.NBTCP, sbctl: zdb.SBCtl,
			ovnk: ovnkZone{Nodes: append(zdb.Chassis(), "node1"), Networks: []string{"tenant-blue"}}, foreign: dumpForeignRows(t, zdb)})
	}
	s.sync = z.ZoneFlags()
	s.kubeInstance = translator.DefaultInstance
	s.waitGW = func() error { return z.WaitGateway(crPort, "gw1") }
	s.faultList = []string{"zone-nb-restart", "conn-cut", "agent-sigterm", "agent-sigkill", "allocator-sigkill", "lease-loss",
		"gateway-kill", "ovnk-start", "hand-edit"}
	s.modeFault = s.zonesFault
	s.k.installCRDs(t, []string{filepath.Join("..", "deploy", "interconnect", "crd-interconnect.yaml")})
	s.startKube()
	for _, zdb := range z.List() {
		s.startAgent(zdb)
	}
	s.a = s.agents[soakSampledZone]
	return s
}

// soakSampledZone is the zone whose agent no fault restarts: its NB
// connection goes through a proxy, and its resources are sampled.
const soakSampledZone = "hv1"

// startKube starts the kube instance's controller, or in interconnect
// mode its allocator (again).
func (s *soak) startKube() {
	s.bStart++
	if s.z != nil {
		s.b = startController(s.t, fmt.Sprintf("soak-allocator-%d", s.bStart), "--interconnect", "--kubeconfig", s.k.kubeconfig,
			"--namespace", icNamespace, "--workers", "2", "--resync", "1h")
		return
	}
	s.b = startController(s.t, fmt.Sprintf("soak-kube-%d", s.bStart), "--nb", s.nc.NB, "--sb", s.l.SBTCP, "--kubeconfig", s.k.kubeconfig,
		"--instance", "kube", "--workers", "2", "--resync", "1h")
}

// startAgent starts zone zdb's agent (again).
func (s *soak) startAgent(zdb *sandbox.ZoneDB) {
	s.bStart++
	nb := zdb.NBTCP
	if zdb.Name == soakSampledZone {
		nb = s.proxied(nb)[0]
	}
	s.agents[zdb.Name] = startController(s.t, fmt.Sprintf("soak-agent-%s-%d", zdb.Name, s.bStart), "--zone-nb", nb,
		"--zone-sb", zdb.SBTCP, "--kubeconfig", s.k.kubeconfig, "--namespace", icNamespace, "--leader-elect=false", "--resync", "1h")
}

// work makes n random edits, each to one instance's input, paced as
// people and controllers make them.
func (s *soak) work(n int) {
	for range n {
		var what string
		if s.files != nil && s.w.IntN(2) == 0 {
			what = "files: " + s.files.edit(s.w)
			soakWriteFiles(s.t, s.dir, s.files.objects(), "f")
		} else {
			what = "kube: " + s.kube.edit(s.w)
			s.kubeIn.apply(s.t, s.kube.objects())
		}
		s.ops[what]++
		s.note(what)
		time.Sleep(time.Duration(20+s.w.IntN(200)) * time.Millisecond)
	}
}

// note logs what the round does now, and keeps it for the report.
func (s *soak) note(what string) {
	at := time.Now().Format("15:04:05.000")
	s.t.Logf("%s %s", at, what)
	s.round = append(s.round, at+" "+what)
}

// checkpoint waits until both instances' rows are what their input wants,
// records how long that took after the fault's recovery, and checks the
// invariants, the packets and the resources.
func (s *soak) checkpoint(fault string) {
	t := s.t
	t.Helper()
	start := time.Now()
	kubeDir := t.TempDir()
	soakWriteFiles(t, kubeDir, s.kube.objects(), "k")
	if s.files == nil {
		// deploy/examples are the kube input's too.
		for _, f := range []string{"networks.yaml", "router.yaml", "vmis.yaml", "floatingips.yaml", "lb.yaml"} {
			b, err := os.ReadFile(filepath.Join(s.dir, f))
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(filepath.Join(kubeDir, f), b, 0o644))
		}
	}
	var last [2]string
	var wanted string // what the dry runs still wanted once the convergence was slow
	slow := soakSlowConvergence()
	clean := func(out string) bool { return strings.Contains(out, "no changes\n") && !soakChanges.MatchString(out) }
	err := sandbox.Poll(soakConverge, "both instances' NB rows are what their input wants", func() (bool, error) {
		last[0] = "no changes\n"
		if s.files != nil {
			last[0] = s.dryRun(s.dir, s.filesInstance)
		}
		last[1] = s.dryRun(kubeDir, s.kubeInstance)
		done := clean(last[0]) && clean(last[1])
		if !done && wanted == "" && time.Since(start) > slow {
			wanted = soakChangeLines("files", last[0]) + soakChangeLines("kube", last[1])
		}
		return done, nil
	})
	took := time.Since(start)
	if err == nil && took > slow {
		d := fmt.Sprintf("%s: converged %s after recovery, at %s\n", fault, took.Round(time.Millisecond), time.Now().Format("15:04:05"))
		if len(s.round) > 0 {
			d += "  its round:\n    " + strings.Join(s.round, "\n    ") + "\n"
		}
		d += fmt.Sprintf("  still to change after %s:\n%s", slow, wanted)
		s.slow = append(s.slow, d)
		// Also now: a run that fails later writes no report.
		t.Logf("slow convergence: %s", d)
	}
	if err != nil {
		keep, _ := os.MkdirTemp("", "kubevirt-ovn-soak-input-")
		_ = exec.Command("cp", "-r", s.dir, kubeDir, keep).Run()
		t.Logf("the inputs (files, kube) are kept in %s", keep)
	}
	if !assert.NoError(t, err, "after %s (seed %d): files instance's dry run:\n%s\nkube instance's dry run:\n%s", fault, s.seed, last[0], last[1]) {
		return
	}
	s.conv[fault] = append(s.conv[fault], took)
	t.Logf("%s: converged %s after recovery", fault, took.Round(time.Millisecond))

	for _, db := range s.dbs {
		for _, table := range []string{"Logical_Switch", "Logical_Router", "Logical_Switch_Port", "Logical_Router_Port", "Load_Balancer", "Port_Group"} {
			seen := map[string]bool{}
			for _, name := range strings.Fields(nbctl(t, db.ctl, "--bare", "--columns=name", "list", table)) {
				assert.False(t, seen[name], "after %s: two %s rows named %s%s", fault, table, name, db.where())
				seen[name] = true
			}
		}
		assert.Equal(t, db.foreign, dumpForeignRows(t, db.ctl), "after %s: the ovn-kubernetes-like rows%s must be byte-identical", fault, db.where())
	}
	s.probe(fault)
	s.sample()
}

// soakChanges is a dry run's change (a dry run says "to create").
var soakChanges = regexp.MustCompile(`(create|update|delete)`)

// soakChangeLines are the changes a dry run's output names, each with its
// instance, zone and unit, indented; the first 20 of them.
func soakChangeLines(instance, out string) string {
	var b strings.Builder
	zone, unit, n := "", "", 0
	for line := range strings.Lines(out) {
		line = strings.TrimRight(line, "\n")
		switch {
		case strings.HasPrefix(line, "zone ") && strings.HasSuffix(line, ":"):
			zone = strings.TrimSuffix(line, ":") + ", "
		case line == "changes per table:":
			unit = ""
		case !strings.HasPrefix(line, " ") && strings.HasSuffix(line, ":"):
			unit = strings.TrimSuffix(line, ":")
		case strings.HasPrefix(line, "  ") && unit != "" && soakChanges.MatchString(line):
			if n++; n <= 20 {
				fmt.Fprintf(&b, "    %s: %s%s: %s\n", instance, zone, unit, strings.TrimSpace(line))
			}
		}
	}
	if n > 20 {
		fmt.Fprintf(&b, "    %s: and %d more\n", instance, n-20)
	}
	return b.String()
}

func (db *soakDB) where() string {
	if db.name == "" {
		return ""
	}
	return " in zone " + db.name
}

// dryRun is `sync --dry-run` of an instance's input against the NB(s).
func (s *soak) dryRun(dir, instance string) string {
	args := append(append([]string{"sync"}, s.sync...), "--from-file", dir, "--dry-run", "--instance", instance)
	// Not kubevirtOVN: its log of every run would fill a long soak's
	// memory with dry runs.
	cmd := exec.Command(binary, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	// Bad objects fail their own units (exit 1) and change nothing.
	if ee, ok := err.(*exec.ExitError); err != nil && (!ok || ee.ExitCode() != 1) {
		return fmt.Sprintf("%v:\n%s%s", err, out.String(), errb.String())
	}
	return out.String()
}

// probe sends packets through router1 of deploy/examples: vm-a leaves
// SNATed, a packet to vm-b's floating IP reaches vm-b DNATed, and one to
// the load balancer's floating IP reaches a member. The NB is what the
// input wants; the chassis may still be installing it (a fault just
// restarted them, or their databases): each probe sends a new flow every
// half second until one crosses, for up to a minute.
func (s *soak) probe(fault string) {
	t := s.t
	t.Helper()
	require.NoError(t, s.waitGW(), "after %s: router1's gateway port active on gw1", fault)
	s.probeFlows(fmt.Sprintf("after %s: vm-a leaving SNATed on gw1", fault), []capture{s.wire("gw1")},
		func(sport uint16) { s.send("hv1", "vm-a", vmAMAC, vmAIP, sport, sport) },
		func(x seen, sport uint16) bool { return snated(sport)(x) })
	s.probeFlows(fmt.Sprintf("after %s: a packet to vm-b's floating IP reaching vm-b", fault), []capture{s.vm(vmB.chassis, vmB.port)},
		func(sport uint16) { s.inject("gw1", toFIP(sport, sport)) },
		func(x seen, sport uint16) bool {
			return x.IsUDP && x.SrcIP == remoteIP && x.SPort == sport && x.DstIP == vmBIP && x.DstMAC == vmBMAC
		})
	s.probeFlows(fmt.Sprintf("after %s: the load balancer's floating IP reaching a member", fault), []capture{s.vm(vmA.chassis, vmA.port), s.vm(vmLBC.chassis, vmLBC.port)},
		func(sport uint16) {
			s.inject("gw1", frame{SrcMAC: peerMAC, DstMAC: gwPortMAC, SrcIP: remoteIP, DstIP: lbFIP, TTL: 64, SPort: sport, DPort: lbPort})
		},
		func(x seen, sport uint16) bool {
			return x.IsUDP && x.SrcIP == remoteIP && x.SPort == sport && x.DPort == lbPort
		})
	s.probes++
}

// probeFlows sends flows (send, each with a new source port) until one
// is seen on one of captures (match), and fails naming what after a
// minute.
func (s *soak) probeFlows(what string, captures []capture, send func(sport uint16), match func(seen, uint16) bool) {
	t := s.t
	t.Helper()
	skips := make([]int, len(captures))
	for i, c := range captures {
		skips[i] = count(t, c)
	}
	first := s.port + 1
	var last time.Time
	err := sandbox.Poll(60*time.Second, what, func() (bool, error) {
		if time.Since(last) >= 500*time.Millisecond {
			s.port++
			send(s.port)
			last = time.Now()
		}
		for i, c := range captures {
			ps, err := c.read()
			if err != nil {
				return false, err
			}
			for _, x := range ps[min(skips[i], len(ps)):] {
				for sport := first; sport <= s.port; sport++ {
					if match(x, sport) {
						return true, nil
					}
				}
			}
		}
		return false, nil
	})
	require.NoError(t, err)
}

// sample records the files controller's resources (its metrics: the
// standard process and Go runtime ones) and how many units it holds.
func (s *soak) sample() {
	m := s.a.metrics("process_resident_memory_bytes", "go_goroutines", "process_open_fds", "kubevirt_ovn_owned_rows")
	s.samples = append(s.samples, soakSample{at: time.Since(s.started), rss: m[0], goroutines: m[1], fds: m[2], units: m[3]})
}
