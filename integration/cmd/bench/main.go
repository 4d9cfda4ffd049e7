// Command bench measures the kubevirt-ovn binary, through its CLI only, on a
// private OVN (NB + SB ovsdb-server and ovn-northd from integration/sandbox):
// for each N routers (2 internal networks of 5 VMs each, DHCP on every
// network, SNAT, a peer router and a gateway chassis, on one shared FLAT
// external network; at the -fip-n sizes also with one floating IP per
// router, and at the -sg-n sizes with 5 security groups of 10 rules, every
// VM in two) it times a full
// `sync`, the time until northd has it (--wait=sb), a no-op `sync`, the same
// rows inserted as one raw OVSDB transaction (the floor) and built by batched
// ovn-nbctl, each on a fresh NB; at the -events-n sizes it runs `run` on the
// synced NB and measures event latency and controller CPU. It prints a
// markdown table and the raw numbers, and stops every daemon it started.
//
//	go run ./integration/cmd/bench -bin bin/kubevirt-ovn -n 10,100,1000,3000 -events 60
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/kubevirt-ovn/kubevirt-ovn/integration/sandbox"
)

type config struct {
	bin          string
	ns, eventsNs []int
	startNs      []int
	fipNs        []int // among ns: also measured with a floating IP per router
	fipEventsNs  []int // among fipNs: `run` events on that input
	fipNbctlMax  int
	sgNs         []int // among ns: also measured with security groups
	sgEventsNs   []int // among sgNs: `run` events on that input
	sgNbctlMax   int
	v6Ns         []int // among ns: also measured dual stack
	v6EventsNs   []int // among v6Ns: `run` events on that input
	v6NbctlMax   int
	events       int
	nbctlMax     int
	nbctlBatch   int
	timeout      time.Duration
	eventsBudget time.Duration
	budget       time.Duration
	deadline     time.Time // start + budget
	keepGoing    bool
	// migrationVMs: the VMs of the live migrations phase (0: none);
	// migrationPace the interval of its sustained activations.
	migrationVMs  int
	migrationPace time.Duration
	verbose       bool
	keep          bool
	// profile: save `run`'s CPU profile of its start (profileStart
	// long) and its allocs and heap profiles once idle, at each events N.
	profile      string
	profileStart time.Duration
	// memLimit: measure `run`'s warm start again under this GOMEMLIMIT.
	memLimit string
	// northdMax: above this N, no ovn-northd runs and wait=sb is not
	// measured (0: always).
	northdMax int
	// The zones bench (zones.go): zone counts, routers per zone, VM
	// events, and the kube-apiserver binary it runs.
	zones         []int
	zoneRouters   int
	zoneEvents    int
	kubeAPIServer string
}

func main() {
	var cfg config
	var zones string
	var ns, eventsNs, startNs, fipNs, fipEventsNs, sgNs, sgEventsNs, v6Ns, v6EventsNs string
	flag.StringVar(&cfg.bin, "bin", "bin/kubevirt-ovn", "the kubevirt-ovn binary to measure")
	flag.StringVar(&ns, "n", "10,100,1000,3000", "router counts, comma-separated")
	flag.StringVar(&eventsNs, "events-n", "10,1000", "router counts (among -n) at which `run` events are measured")
	flag.StringVar(&startNs, "start-n", "1000,3000", "router counts (among -n) at which `run`'s start is measured: cold (an empty NB) and warm (the synced NB)")
	flag.StringVar(&fipNs, "fip-n", "10,1000,3000", "router counts (among -n) measured a second time with one floating IP per router (rows \"N + FIP\"); empty: none")
	flag.StringVar(&fipEventsNs, "fip-events-n", "10,1000", "router counts (among -fip-n) at which `run` events are measured on the input with floating IPs")
	flag.StringVar(&sgNs, "sg-n", "10,1000", "router counts (among -n) measured a second time with 5 security groups of 10 rules, every VM in two of them (rows \"N + SG\"); empty: none")
	flag.StringVar(&sgEventsNs, "sg-events-n", "10,1000", "router counts (among -sg-n) at which `run` events are measured on the input with security groups")
	flag.StringVar(&v6Ns, "v6-n", "10,1000", "router counts (among -n) measured a second time dual stack: every network with an ipv6Cidr (SLAAC), every router with its external IPv6 address and an IPv6 default route, IPv6 routed (rows \"N + v6\"); empty: none")
	flag.StringVar(&v6EventsNs, "v6-events-n", "10,1000", "router counts (among -v6-n) at which `run` events are measured on the dual stack input")
	flag.IntVar(&cfg.v6NbctlMax, "v6-nbctl-max", 100, "build the dual stack topology with ovn-nbctl only up to this N")
	flag.IntVar(&cfg.events, "events", 60, "events per -events-n size (cycling VM added, SNAT IP changed, router removed, owned row deleted by hand, router re-added, with floating IPs a floating IP moved to another VM, and with security groups a rule edited and a VM moved to another group)")
	flag.IntVar(&cfg.nbctlMax, "nbctl-max", 1000, "build the topology with ovn-nbctl only up to this N")
	flag.IntVar(&cfg.fipNbctlMax, "fip-nbctl-max", 100, "build the topology with floating IPs with ovn-nbctl only up to this N")
	flag.IntVar(&cfg.sgNbctlMax, "sg-nbctl-max", 100, "build the topology with security groups with ovn-nbctl only up to this N")
	flag.IntVar(&cfg.nbctlBatch, "nbctl-batch", 500, "ovn-nbctl commands per invocation")
	flag.DurationVar(&cfg.timeout, "timeout", 5*time.Minute, "limit of one measurement (a sync, an event, run becoming idle)")
	flag.DurationVar(&cfg.eventsBudget, "events-budget", 4*time.Minute, "stop starting events at one N after this long")
	flag.DurationVar(&cfg.budget, "budget", 14*time.Minute, "start no new ovn-nbctl build, `run` phase or N after this long (a running measurement finishes)")
	flag.IntVar(&cfg.migrationVMs, "migrations-vms", 1000, "VMs of the live migrations phase (half migrate in a burst, half at -migrations-pace); 0: none")
	flag.DurationVar(&cfg.migrationPace, "migrations-pace", 20*time.Millisecond, "interval of the sustained activations of the live migrations phase")
	flag.IntVar(&cfg.northdMax, "northd-max", 0, "above this N, no ovn-northd runs: wait=sb is not measured, the syncs and `run` are measured without it (at N=10,000 ovn-northd reached 11 GB and the SB 16 GB, beyond this 23 GB machine) (0: always runs)")
	flag.StringVar(&cfg.profile, "profile", "", "a directory where `run`'s profiles are saved at each -events-n size: CPU of its start, then allocs and heap once idle (go tool pprof); in the zones bench, zone 0's agent's, at each zone count")
	flag.DurationVar(&cfg.profileStart, "profile-start", 60*time.Second, "length of the CPU profile of `run`'s start")
	flag.StringVar(&zones, "zones", "", "zone counts of the interconnect bench (zones.go: an NB and SB per zone, the allocator and an agent per zone, on a real kube-apiserver), comma-separated; empty: none")
	flag.IntVar(&cfg.zoneRouters, "zone-routers", 20, "routers per zone in the zones bench (20 at 50 zones: 1,000 routers, 10,000 VMs)")
	flag.IntVar(&cfg.zoneEvents, "zone-events", 20, "VMs added, then deleted, in the zones bench (two events each)")
	flag.StringVar(&cfg.kubeAPIServer, "kube-apiserver", "bin/kube-apiserver", "the kube-apiserver binary of the zones bench (built from integration/kube-apiserver)")
	flag.StringVar(&cfg.memLimit, "memlimit", "", "at each -start-n size, `run`'s warm start once more with this GOMEMLIMIT (e.g. 1900MiB; the Deployments set it from the container's memory limit); empty: not measured")
	flag.BoolVar(&cfg.keepGoing, "keep-going", false, "after a failed measurement, go on with the next and report it")
	flag.BoolVar(&cfg.verbose, "v", false, "print progress to stderr")
	flag.BoolVar(&cfg.keep, "keep", false, "keep the work directory (manifests, logs)")
	flag.Parse()
	var err error
	if cfg.ns, err = parseInts(ns); err != nil {
		fatal(fmt.Errorf("-n %q: %w", ns, err))
	}
	if cfg.eventsNs, err = parseInts(eventsNs); err != nil {
		fatal(fmt.Errorf("-events-n %q: %w", eventsNs, err))
	}
	if cfg.startNs, err = parseInts(startNs); err != nil {
		fatal(fmt.Errorf("-start-n %q: %w", startNs, err))
	}
	if cfg.fipNs, err = parseInts(fipNs); err != nil {
		fatal(fmt.Errorf("-fip-n %q: %w", fipNs, err))
	}
	if cfg.fipEventsNs, err = parseInts(fipEventsNs); err != nil {
		fatal(fmt.Errorf("-fip-events-n %q: %w", fipEventsNs, err))
	}
	if cfg.sgNs, err = parseInts(sgNs); err != nil {
		fatal(fmt.Errorf("-sg-n %q: %w", sgNs, err))
	}
	if cfg.sgEventsNs, err = parseInts(sgEventsNs); err != nil {
		fatal(fmt.Errorf("-sg-events-n %q: %w", sgEventsNs, err))
	}
	if cfg.v6Ns, err = parseInts(v6Ns); err != nil {
		fatal(fmt.Errorf("-v6-n %q: %w", v6Ns, err))
	}
	if cfg.v6EventsNs, err = parseInts(v6EventsNs); err != nil {
		fatal(fmt.Errorf("-v6-events-n %q: %w", v6EventsNs, err))
	}
	if cfg.profile != "" {
		if err := os.MkdirAll(cfg.profile, 0o755); err != nil {
			fatal(fmt.Errorf("-profile: %w", err))
		}
	}
	if cfg.zones, err = parseInts(zones); err != nil {
		fatal(fmt.Errorf("-zones %q: %w", zones, err))
	}
	slices.Sort(cfg.zones)
	cfg.zones = slices.Compact(cfg.zones)
	if len(cfg.zones) > 0 {
		if _, err := os.Stat(cfg.kubeAPIServer); err != nil {
			fatal(fmt.Errorf("the kube-apiserver of the zones bench: %w (make bench builds it)", err))
		}
	}
	if _, err := os.Stat(cfg.bin); err != nil {
		fatal(fmt.Errorf("the binary to measure: %w (run 'make build')", err))
	}
	if err := sandbox.Check(); err != nil {
		fatal(err)
	}
	os.Exit(run(&cfg))
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "bench:", err)
	os.Exit(2)
}

func parseInts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q is not a positive count", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// stoppers stops what is running when the bench ends or is interrupted.
type stoppers struct {
	mu   sync.Mutex
	list map[int]func()
	next int
}

// add registers f and returns what runs it now (once) and what forgets it.
func (s *stoppers) add(f func()) (stop, forget func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.list == nil {
		s.list = map[int]func(){}
	}
	id := s.next
	s.next++
	s.list[id] = f
	take := func() func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		g := s.list[id]
		delete(s.list, id)
		return g
	}
	stop = func() {
		if g := take(); g != nil {
			g()
		}
	}
	return stop, func() { take() }
}

func (s *stoppers) all() {
	s.mu.Lock()
	fs := s.list
	s.list = nil
	s.mu.Unlock()
	for _, f := range fs {
		f()
	}
}

var cleanup stoppers

// result is one N's measurements on one input; errs says why a cell is
// empty.
type result struct {
	n                int
	fips             bool // the input with a floating IP per router
	sgs              bool // the input with security groups
	v6               bool // the dual stack input
	rows             int
	full, noop       childRun
	fullTx, noopTx   string
	waitSB           time.Duration
	floor            time.Duration
	floorOps         int
	nbctl            time.Duration
	nbctlCmds        int
	nbctlCalls       int
	nbctlSkipped     map[string]int
	ev               *eventResult
	cold             *startResult
	errs             map[string]error
	nbctlNotMeasured string
	skipped          string // why this N was not measured at all
	eventsSkipped    string
	noopNote         string
}

func (r *result) fail(what string, err error) { r.errs[what] = err }

// label names the row of r's N and input in the tables.
func (r *result) label() string {
	switch {
	case r.fips:
		return fmt.Sprintf("%d + FIP", r.n)
	case r.sgs:
		return fmt.Sprintf("%d + SG", r.n)
	case r.v6:
		return fmt.Sprintf("%d + v6", r.n)
	}
	return strconv.Itoa(r.n)
}

// rawLabel names r's N and input in the raw numbers: "1000", "1000+fip".
func (r *result) rawLabel() string {
	switch {
	case r.fips:
		return fmt.Sprintf("%d+fip", r.n)
	case r.sgs:
		return fmt.Sprintf("%d+sg", r.n)
	case r.v6:
		return fmt.Sprintf("%d+v6", r.n)
	}
	return fmt.Sprint(r.n)
}

// key names r's N and input in the raw numbers and the work directory.
func (r *result) key() string {
	switch {
	case r.fips:
		return fmt.Sprintf("n%d-fip", r.n)
	case r.sgs:
		return fmt.Sprintf("n%d-sg", r.n)
	case r.v6:
		return fmt.Sprintf("n%d-v6", r.n)
	}
	return fmt.Sprintf("n%d", r.n)
}

// variants are the inputs measured at N: the plain one, with a floating
// IP per router at the -fip-n sizes, with security groups at the -sg-n
// sizes.
func (cfg *config) variants(n int) []variant {
	out := []variant{{}}
	if slices.Contains(cfg.fipNs, n) {
		out = append(out, variant{fips: true})
	}
	if slices.Contains(cfg.sgNs, n) {
		out = append(out, variant{sgs: true})
	}
	if slices.Contains(cfg.v6Ns, n) {
		out = append(out, variant{v6: true})
	}
	return out
}

func run(cfg *config) int {
	work, err := os.MkdirTemp("", "kubevirt-ovn-bench-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sig
		fmt.Fprintln(os.Stderr, "bench: interrupted; stopping everything it started")
		cleanup.all()
		if !cfg.keep {
			os.RemoveAll(work)
		}
		os.Exit(130)
	}()
	defer func() {
		cleanup.all()
		if cfg.keep {
			fmt.Fprintln(os.Stderr, "bench: work directory kept:", work)
		} else {
			os.RemoveAll(work)
		}
	}()

	began := time.Now()
	cfg.deadline = began.Add(cfg.budget)
	var results []*result
	failed := false
measuring:
	for _, n := range cfg.ns {
		for _, v := range cfg.variants(n) {
			r := &result{n: n, fips: v.fips, sgs: v.sgs, v6: v.v6, errs: map[string]error{}}
			results = append(results, r)
			if time.Now().After(cfg.deadline) {
				r.skipped = fmt.Sprintf("not measured: the -budget of %s ran out", cfg.budget)
				continue
			}
			measure(cfg, filepath.Join(work, r.key()), r)
			if len(r.errs) > 0 {
				failed = true
				for what, err := range r.errs {
					fmt.Fprintf(os.Stderr, "bench: N=%s %s: %v\n", r.label(), what, err)
				}
				if !cfg.keepGoing {
					break measuring
				}
			}
		}
	}
	report(os.Stdout, cfg, results, time.Since(began))
	if cfg.migrationVMs > 0 && (!failed || cfg.keepGoing) {
		cfg.progress("live migrations at %d VMs", cfg.migrationVMs)
		dir := filepath.Join(work, "migrations")
		m, err := runMigrations(cfg, dir, cfg.migrationVMs)
		reportMigrations(os.Stdout, m, err)
		if err != nil {
			failed = true
		}
	}
	var zoneResults []*zonesResult
	for _, z := range cfg.zones {
		if failed && !cfg.keepGoing {
			break
		}
		r := runZones(cfg, filepath.Join(work, fmt.Sprintf("zones-%d", z)), z)
		zoneResults = append(zoneResults, r)
		failed = failed || len(r.errs) > 0
	}
	reportZones(os.Stdout, zoneResults)
	if failed {
		return 1
	}
	return 0
}

// withoutNorthd says whether N's measurements run without ovn-northd
// (-northd-max).
func (cfg *config) withoutNorthd(n int) bool { return cfg.northdMax > 0 && n > cfg.northdMax }

func (cfg *config) progress(format string, args ...any) {
	if cfg.verbose {
		fmt.Fprintf(os.Stderr, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
	}
}

// measure runs every measurement of r's N and input into r; a failed one
// is recorded, and without -keep-going ends this N.
func measure(cfg *config, dir string, r *result) {
	n, label := r.n, r.label()
	stopHere := func(what string, err error) bool {
		if err == nil {
			return false
		}
		r.fail(what, err)
		return !cfg.keepGoing
	}
	// What the rest depends on ends this N when it fails, -keep-going or not.
	in, err := generate(dir, n, variant{fips: r.fips, sgs: r.sgs, v6: r.v6})
	if err != nil {
		r.fail("input", err)
		return
	}
	cfg.progress("N=%s: starting NB, SB and northd", label)
	lean := cfg.withoutNorthd(n)
	startOVN := sandbox.StartCentral
	if lean {
		startOVN = sandbox.StartDatabases
	}
	c, err := startOVN(filepath.Join(dir, "central"))
	if err != nil {
		r.fail("central", err)
		return
	}
	stopCentral, _ := cleanup.add(func() { _ = c.Stop() })
	defer stopCentral()

	syncArgs := []string{"sync", "--nb", c.NB, "--from-file", in.dir, "--timeout", cfg.timeout.String()}
	cfg.progress("N=%s: full sync", label)
	r.full, err = runChild(cfg.timeout+10*time.Second, nil, cfg.bin, syncArgs...)
	r.fullTx = txnsOps(r.full)
	if stopHere("full sync", err) {
		return
	}
	cfg.progress("N=%s: full sync %s; waiting for northd", label, r.full.wall)
	var wsb childRun
	if !lean {
		wsb, err = runChild(cfg.timeout, ovsEnv(dir), "ovn-nbctl", "--db="+c.NB, fmt.Sprintf("--timeout=%d", int(cfg.timeout.Seconds())), "--wait=sb", "sync")
	}
	r.waitSB = wsb.wall
	if stopHere("wait=sb", err) {
		return
	}
	cfg.progress("N=%s: no-op sync", label)
	r.noop, err = runChild(cfg.timeout+10*time.Second, nil, cfg.bin, syncArgs...)
	r.noopTx = txnsOps(r.noop)
	if stopHere("no-op sync", err) {
		return
	}
	if err == nil && !strings.Contains(r.noop.stdout, "no changes") {
		r.noopNote = "the no-op sync did not print \"no changes\": " + firstLine(lastLines(r.noop.stdout, 3))
	}

	cfg.progress("N=%s: dumping the NB", label)
	raw, err := dialRaw(c.NB)
	if err != nil {
		r.fail("dump", err)
		return
	}
	tables, err := raw.dump("OVN_Northbound", "NB_Global")
	raw.Close()
	if err != nil {
		r.fail("dump", err)
		return
	}
	for _, t := range tables {
		r.rows += len(t.rows)
	}

	cfg.progress("N=%s: floor (%d rows in one transaction)", label, r.rows)
	r.floor, r.floorOps, err = measureFloor(cfg, filepath.Join(dir, "floor"), tables)
	if stopHere("floor", err) {
		return
	}

	nbctlMax, nbctlFlag := cfg.nbctlMax, "-nbctl-max"
	switch {
	case r.fips:
		nbctlMax, nbctlFlag = cfg.fipNbctlMax, "-fip-nbctl-max"
	case r.sgs:
		nbctlMax, nbctlFlag = cfg.sgNbctlMax, "-sg-nbctl-max"
	case r.v6:
		nbctlMax, nbctlFlag = cfg.v6NbctlMax, "-v6-nbctl-max"
	}
	if time.Now().After(cfg.deadline) {
		r.nbctlNotMeasured = fmt.Sprintf("the -budget of %s ran out", cfg.budget)
	} else if n <= nbctlMax {
		cfg.progress("N=%s: batched ovn-nbctl", label)
		err = measureNbctl(cfg, filepath.Join(dir, "nbctl"), tables, r)
		if stopHere("nbctl", err) {
			return
		}
	} else {
		r.nbctlNotMeasured = fmt.Sprintf("N > %s %d", nbctlFlag, nbctlMax)
	}

	events := slices.Contains(cfg.eventsNs, n) && cfg.events > 0
	starts := slices.Contains(cfg.startNs, n)
	switch {
	case r.fips:
		events, starts = slices.Contains(cfg.fipEventsNs, n) && cfg.events > 0, false
	case r.sgs:
		events, starts = slices.Contains(cfg.sgEventsNs, n) && cfg.events > 0, false
	case r.v6:
		events, starts = slices.Contains(cfg.v6EventsNs, n) && cfg.events > 0, false
	}
	switch {
	case !events && !starts:
	case events && n < 2:
		r.fail("run events", fmt.Errorf("events need at least 2 routers (one is removed while another's row is deleted)"))
	case time.Now().After(cfg.deadline):
		r.eventsSkipped = fmt.Sprintf("`run` not measured: the -budget of %s ran out", cfg.budget)
	default:
		if starts {
			cfg.progress("N=%s: run on an empty NB (cold start)", label)
			cold, err := coldStart(cfg, dir, in, r.rows)
			r.cold = &cold
			if stopHere("run cold start", err) {
				return
			}
		}
		count := 0
		if events {
			count = cfg.events
		}
		cfg.progress("N=%s: run on the synced NB and %d events", label, count)
		r.ev, err = runEvents(cfg, dir, c.NB, in, count)
		if stopHere("run events", err) {
			return
		}
		if cfg.memLimit != "" && starts {
			cfg.progress("N=%s: run on the synced NB under GOMEMLIMIT=%s", label, cfg.memLimit)
			r.ev.limited, err = runLimited(cfg, dir, c.NB, in, cfg.memLimit)
			if stopHere("run under GOMEMLIMIT", err) {
				return
			}
		}
	}
}

// ovsEnv keeps OVS/OVN tools' run and log files in dir.
func ovsEnv(dir string) []string {
	var env []string
	for _, v := range []string{"OVS_RUNDIR", "OVS_LOGDIR", "OVS_DBDIR", "OVS_SYSCONFDIR", "OVN_RUNDIR", "OVN_LOGDIR", "OVN_DBDIR", "OVN_SYSCONFDIR"} {
		env = append(env, v+"="+dir)
	}
	return env
}

// measureFloor inserts the dumped rows into a fresh NB as one transaction
// over a raw JSON-RPC connection, and times the transact call.
func measureFloor(cfg *config, dir string, tables []dumpTable) (time.Duration, int, error) {
	db, err := sandbox.StartDB(dir, sandbox.NBSchema)
	if err != nil {
		return 0, 0, err
	}
	stop, _ := cleanup.add(func() { _ = db.Stop() })
	defer stop()
	ops, n := floorOps("OVN_Northbound", tables)
	raw, err := dialRaw(db.Unix)
	if err != nil {
		return 0, 0, err
	}
	defer raw.Close()
	d, err := raw.transact(ops, cfg.timeout)
	if err != nil {
		return 0, 0, fmt.Errorf("the floor transaction of %d inserts: %w", n, err)
	}
	// Check that the copy is whole: garbage collection drops a row whose
	// parent was not rebuilt.
	got, err := raw.dump("OVN_Northbound", "NB_Global")
	if err != nil {
		return 0, 0, err
	}
	if a, b := countRows(got), countRows(tables); a != b {
		return 0, 0, fmt.Errorf("the floor NB holds %d rows after the transaction, the dump %d", a, b)
	}
	if a, b := refTotal(got, "Port_Group", "ports"), refTotal(tables, "Port_Group", "ports"); a != b {
		return 0, 0, fmt.Errorf("the floor NB's port groups hold %d ports after the transaction, the dump's %d", a, b)
	}
	return d, n, nil
}

func countRows(tables []dumpTable) int {
	n := 0
	for _, t := range tables {
		n += len(t.rows)
	}
	return n
}

// measureNbctl builds the dumped topology on a fresh NB with ovn-nbctl,
// -nbctl-batch commands per invocation, and times all invocations.
func measureNbctl(cfg *config, dir string, tables []dumpTable, r *result) error {
	db, err := sandbox.StartDB(dir, sandbox.NBSchema)
	if err != nil {
		return err
	}
	stop, _ := cleanup.add(func() { _ = db.Stop() })
	defer stop()
	nbctl := func(args ...string) (childRun, error) {
		return runChild(cfg.timeout, ovsEnv(dir), "ovn-nbctl", append([]string{"--db=" + db.Unix, "--timeout=" + strconv.Itoa(int(cfg.timeout.Seconds()))}, args...)...)
	}
	if _, err := nbctl("init"); err != nil {
		return err
	}
	plan := nbctlCommands(tables)
	r.nbctlSkipped = plan.skipped
	deadline := time.Now().Add(cfg.timeout)
	runAll := func(cmds [][]string) error {
		calls := batches(cmds, cfg.nbctlBatch)
		r.nbctlCmds += len(cmds)
		r.nbctlCalls += len(calls)
		for _, args := range calls {
			if time.Now().After(deadline) {
				return fmt.Errorf("ovn-nbctl did not finish within %s", cfg.timeout)
			}
			if _, err := nbctl(args...); err != nil {
				return err
			}
		}
		return nil
	}
	start := time.Now()
	// The DHCP options first, then their UUIDs read back for the commands
	// that name them.
	if err := runAll(plan.create); err != nil {
		return err
	}
	cmds := plan.cmds
	if len(plan.create) > 0 {
		list, err := nbctl("--format=json", "--columns=_uuid,cidr,external_ids", "list", "DHCP_Options")
		if err != nil {
			return err
		}
		r.nbctlCalls++
		created, err := dhcpCreated(list.stdout)
		if err != nil {
			return err
		}
		if cmds, err = plan.resolve(created); err != nil {
			return err
		}
	}
	if err := runAll(cmds); err != nil {
		return err
	}
	r.nbctl = time.Since(start)
	// The same number of rows as the dump, skipped tables aside.
	raw, err := dialRaw(db.Unix)
	if err != nil {
		return err
	}
	defer raw.Close()
	got, err := raw.dump("OVN_Northbound", "NB_Global")
	if err != nil {
		return err
	}
	want := countRows(tables)
	for _, k := range plan.skipped {
		want -= k
	}
	if have := countRows(got); have != want {
		return fmt.Errorf("ovn-nbctl built %d rows, the dump has %d (outside skipped tables)", have, want)
	}
	if have, want := refCount(got, "Logical_Switch_Port", "dhcpv4_options"), refCount(tables, "Logical_Switch_Port", "dhcpv4_options"); have != want {
		return fmt.Errorf("ovn-nbctl built %d switch ports with DHCP options, the dump has %d", have, want)
	}
	for _, col := range []string{"ports", "acls"} {
		if have, want := refTotal(got, "Port_Group", col), refTotal(tables, "Port_Group", col); have != want {
			return fmt.Errorf("ovn-nbctl built port groups with %d %s in all, the dump's have %d", have, col, want)
		}
	}
	return nil
}

// refCount is how many rows of table refer to a row in column.
func refCount(tables []dumpTable, table, column string) int {
	n := 0
	for _, t := range tables {
		if t.name != table {
			continue
		}
		for _, r := range t.rows {
			if len(uuids(r[column])) > 0 {
				n++
			}
		}
	}
	return n
}

// refTotal is how many references the rows of table hold in column.
func refTotal(tables []dumpTable, table, column string) int {
	n := 0
	for _, t := range tables {
		if t.name == table {
			for _, r := range t.rows {
				n += len(uuids(r[column]))
			}
		}
	}
	return n
}

// machine describes where the numbers come from.
func machine() string {
	var parts []string
	parts = append(parts, fmt.Sprintf("nproc %d", runtime.NumCPU()))
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "model name"); ok {
				parts = append(parts, strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":")))
				break
			}
		}
	}
	if out, err := exec.Command("ovn-nbctl", "--version").Output(); err == nil {
		parts = append(parts, strings.SplitN(strings.TrimSpace(string(out)), "\n", 2)[0])
	}
	if out, err := exec.Command("ovsdb-server", "--version").Output(); err == nil {
		parts = append(parts, strings.SplitN(strings.TrimSpace(string(out)), "\n", 2)[0])
	}
	parts = append(parts, runtime.Version())
	return strings.Join(parts, ", ")
}
