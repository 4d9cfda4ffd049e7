package integration

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubevirt-ovn/kubevirt-ovn/integration/sandbox"
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
// the report is written to.
const (
	EnvSoak       = "KUBEVIRT_OVN_SOAK"
	EnvSoakSeed   = "KUBEVIRT_OVN_SOAK_SEED"
	EnvSoakReport = "KUBEVIRT_OVN_SOAK_REPORT"
)

// soakConverge is how long the NB may take to be what the input wants
// after a fault's recovery: far above what any fault takes (a few
// seconds), far below the controllers' resync (1h here), so that a unit a
// missed event left behind is found, not healed by the resync.
const soakConverge = 120 * time.Second

// soakFaults are the fault classes, each injected while the workload runs
// and recovered before the next checkpoint.
var soakFaults = []string{
	"nb-follower-kill", "nb-leader-kill", "nb-restart", "conn-cut",
	"ctrl-sigterm", "ctrl-sigkill", "lease-loss", "gateway-kill",
	"ovnk-start", "hand-edit",
}

type soak struct {
	traffic
	t    *testing.T
	seed uint64
	// w draws the workload's edits, r the faults and what they hit: the
	// edits replay alike whatever the NB's timing made of the faults.
	w, r   *rand.Rand
	l      *sandbox.Local
	nc     *sandbox.NBCluster
	k      *kubeAPI
	dir    string // the files instance's manifests
	files  *soakWorld
	kube   *soakWorld
	kubeIn *soakKube
	a, b   *controllerProc
	bStart int // starts of the kube controller
	px     []*soakProxy
	// foreign is how the ovn-kubernetes-like rows read at the start.
	foreign string

	ops     map[string]int
	faults  map[string]int
	conv    map[string][]time.Duration
	samples []soakSample
	probes  int
	port    uint16
	started time.Time
}

// soakSample is the files controller's resources at a checkpoint.
type soakSample struct {
	at                     time.Duration
	rss                    float64 // bytes
	goroutines, fds, units float64
}

func TestSoak(t *testing.T) {
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
	s := startSoak(t, seed)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("soak FAILED: seed %d (%s=%d %s=%s reproduces it)", seed, EnvSoakSeed, seed, EnvSoak, length)
		}
	})
	s.checkpoint("start")
	order := slices.Clone(soakFaults)
	for round := 0; time.Since(s.started) < length; round++ {
		if round%len(order) == 0 {
			s.r.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		}
		fault := order[round%len(order)]
		half := 3 + s.w.IntN(6)
		if fault != "ovnk-start" {
			// ovn-kubernetes' start is checked against a quiet NB.
			s.work(half)
		}
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

// startSoak starts the OVN (Raft NB of 3, SB, northd, gw1 gw2 hv1 hv2 with
// deploy/examples' VMs and vm-c plugged), the API server, both
// controllers, and seeds the foreign rows.
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
	for vm, lsp := range map[vmRef]string{vmA: vmAPort, vmB: vmBPort, vmLBC: vmLBCPort} {
		require.NoError(t, l.AddVMPort(vm.chassis, vm.port, lsp))
	}
	s := &soak{traffic: traffic{t, l}, t: t, seed: seed, w: rand.New(rand.NewPCG(seed, 1)), r: rand.New(rand.NewPCG(seed, 2)), l: l, nc: nc,
		ops: map[string]int{}, faults: map[string]int{}, conv: map[string][]time.Duration{}, started: time.Now(), port: 20000}
	s.foreign = seedForeignRows(t, l)
	s.k = startKubeAPI(t)
	s.kubeIn = &soakKube{k: s.k, have: map[string]soakObj{}}

	// The files instance: deploy/examples (its floating IP of vm-b) and
	// the load balancer of lb_test (vm-a and vm-c, UDP 8080, floating IP
	// 172.16.0.160): what the probes go through; the workload adds
	// routers of its own beside them, on the same external network.
	s.dir = examples(t)
	b, err := os.ReadFile(filepath.Join("..", "deploy", "examples", "floatingips.yaml"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(s.dir, "floatingips.yaml"), b, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(s.dir, "lb.yaml"), []byte(lbManifests), 0o644))
	s.files = newSoakWorld("f", "public", "172.16.0.", peerIP, 64)
	s.kube = newSoakWorld("k", "k-pub", "172.17.0.", "172.17.0.1", 128)
	s.kube.publicNAD = ctrlNAD("k-pub", `{"type": "FLAT", "physicalNetworkName": "physnet1", "cidr": "172.17.0.0/24", "gatewayIp": "172.17.0.1"}`)
	for range 4 {
		s.files.routers = append(s.files.routers, s.files.newRouter(s.w))
		s.kube.routers = append(s.kube.routers, s.kube.newRouter(s.w))
	}
	soakWriteFiles(t, s.dir, s.files.objects(), "f")
	s.kubeIn.apply(t, s.kube.objects())

	for _, m := range nc.Members {
		s.px = append(s.px, startSoakProxy(t, strings.TrimPrefix(m, "tcp:")))
	}
	var viaProxies []string
	for _, p := range s.px {
		viaProxies = append(viaProxies, "tcp:"+p.addr())
	}
	s.a = startController(t, "soak-files", "--nb", strings.Join(viaProxies, ","), "--sb", l.SBTCP, "--from-file", s.dir,
		"--workers", "2", "--resync", "1h")
	s.startKube()
	nbctl(t, l, "--timeout=90", "wait-until", "Logical_Switch_Port", vmAPort, "up=true")
	return s
}

// startKube starts the kube instance's controller (again).
func (s *soak) startKube() {
	s.bStart++
	s.b = startController(s.t, fmt.Sprintf("soak-kube-%d", s.bStart), "--nb", s.nc.NB, "--sb", s.l.SBTCP, "--kubeconfig", s.k.kubeconfig,
		"--instance", "kube", "--workers", "2", "--resync", "1h")
}

// work makes n random edits, each to one instance's input, paced as
// people and controllers make them.
func (s *soak) work(n int) {
	for range n {
		if s.w.IntN(2) == 0 {
			s.ops["files: "+s.files.edit(s.w)]++
			soakWriteFiles(s.t, s.dir, s.files.objects(), "f")
		} else {
			s.ops["kube: "+s.kube.edit(s.w)]++
			s.kubeIn.apply(s.t, s.kube.objects())
		}
		time.Sleep(time.Duration(20+s.w.IntN(200)) * time.Millisecond)
	}
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
	var last [2]string
	err := sandbox.Poll(soakConverge, "both instances' NB rows are what their input wants", func() (bool, error) {
		last[0] = s.dryRun(s.dir, "")
		last[1] = s.dryRun(kubeDir, "kube")
		return strings.HasSuffix(last[0], "\nno changes\n") && strings.HasSuffix(last[1], "\nno changes\n"), nil
	})
	took := time.Since(start)
	if !assert.NoError(t, err, "after %s (seed %d): files instance's dry run:\n%s\nkube instance's dry run:\n%s", fault, s.seed, last[0], last[1]) {
		return
	}
	s.conv[fault] = append(s.conv[fault], took)
	t.Logf("%s: converged %s after recovery", fault, took.Round(time.Millisecond))

	for _, table := range []string{"Logical_Switch", "Logical_Router", "Logical_Switch_Port", "Logical_Router_Port", "Load_Balancer", "Port_Group"} {
		seen := map[string]bool{}
		for _, name := range strings.Fields(nbctl(t, s.l, "--bare", "--columns=name", "list", table)) {
			assert.False(t, seen[name], "after %s: two %s rows named %s", fault, table, name)
			seen[name] = true
		}
	}
	assert.Equal(t, s.foreign, dumpForeignRows(t, s.l), "after %s: the ovn-kubernetes-like rows must be byte-identical", fault)
	s.probe(fault)
	s.sample()
}

// dryRun is `sync --dry-run` of an instance's input against the NB.
func (s *soak) dryRun(dir, instance string) string {
	args := []string{"sync", "--nb", s.nc.NB, "--sb", s.l.SBTCP, "--from-file", dir, "--dry-run"}
	if instance != "" {
		args = append(args, "--instance", instance)
	}
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
// SNATed, a packet to vm-b's floating IP reaches vm-b, and one to the load
// balancer's floating IP reaches a member.
func (s *soak) probe(fault string) {
	t := s.t
	t.Helper()
	require.NoError(t, sandbox.WaitGateway(s.l, crPort, "gw1"), "after %s: router1's gateway port active on gw1", fault)
	s.port++
	skip := count(t, s.wire("gw1"))
	s.send("hv1", "vm-a", vmAMAC, vmAIP, s.port, 30000+s.port%1000)
	waitFor(t, s.wire("gw1"), fmt.Sprintf("after %s: vm-a leaving SNATed", fault), skip, snated(30000+s.port%1000))

	s.port++
	s.dnatToVM("gw1", vmB, vmA, s.port, 31000+s.port%1000)

	s.port++
	sport := s.port
	skips := map[string]int{vmA.port: count(t, s.vm(vmA.chassis, vmA.port)), vmLBC.port: count(t, s.vm(vmLBC.chassis, vmLBC.port))}
	s.inject("gw1", frame{SrcMAC: peerMAC, DstMAC: gwPortMAC, SrcIP: remoteIP, DstIP: lbFIP, TTL: 64, SPort: sport, DPort: lbPort})
	in := func(x seen) bool { return x.IsUDP && x.SrcIP == remoteIP && x.SPort == sport && x.DPort == lbPort }
	waitFor(t, capture{name: "vm-a or vm-c", read: func() ([]seen, error) {
		var all []seen
		for _, m := range []vmRef{vmA, vmLBC} {
			ps, err := s.vm(m.chassis, m.port).read()
			if err != nil {
				return nil, err
			}
			all = append(all, ps[min(skips[m.port], len(ps)):]...)
		}
		return all, nil
	}}, fmt.Sprintf("after %s: the load balancer's floating IP reaching a member", fault), 0, in)
	s.probes++
}

// sample records the files controller's resources (its metrics: the
// standard process and Go runtime ones) and how many units it holds.
func (s *soak) sample() {
	m := s.a.metrics("process_resident_memory_bytes", "go_goroutines", "process_open_fds", "kubevirt_ovn_owned_rows")
	s.samples = append(s.samples, soakSample{at: time.Since(s.started), rss: m[0], goroutines: m[1], fds: m[2], units: m[3]})
}
