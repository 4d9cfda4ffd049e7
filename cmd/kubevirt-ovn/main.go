// Command kubevirt-ovn translates KubeVirt virtual routers into OVN
// Northbound rows.
//
//	kubevirt-ovn sync --nb ADDR [--sb ADDR] --from-file PATH [--from-file PATH...] [--dry-run] [--allow-empty]
//	kubevirt-ovn run --nb ADDR [--sb ADDR] [--kubeconfig PATH | --from-file PATH...]
//	kubevirt-ovn status --nb ADDR --sb ADDR
//	kubevirt-ovn rebalance --nb ADDR --sb ADDR [--dry-run]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"maps"
	"os"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/stdr"
	"github.com/ovn-kubernetes/libovsdb/client"

	"github.com/kubevirt-ovn/kubevirt-ovn/translator"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/manifest"
	kvnb "github.com/kubevirt-ovn/kubevirt-ovn/translator/nb"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/ovn"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

const usage = `usage: kubevirt-ovn sync --nb ADDR [--sb ADDR] --from-file PATH [--from-file PATH...] [--dry-run] [--allow-empty]
       kubevirt-ovn run  --nb ADDR [--sb ADDR] [--kubeconfig PATH | --from-file PATH...]
       kubevirt-ovn status --nb ADDR --sb ADDR
       kubevirt-ovn rebalance --nb ADDR --sb ADDR [--dry-run]

Commands:
  sync   translate the manifests at PATH (files or directories of YAML/JSON)
         into the OVN Northbound database once, and print what changed
  run    keep the NB in sync with VirtualRouters, NetworkAttachmentDefinitions
         and VirtualMachineInstances of a cluster (or manifests on disk):
         a controller with leader election, status, metrics and health checks
  status     print each router's gateway chassis (NB) and where its gateway
             port is active now (SB), and the routers per gateway chassis
  rebalance  move routers between gateway chassis until the primaries are
             even (max - min <= 1), one router per transaction

sync exits 0 when every row is written, 1 when some could not be, 2 on a
usage error, and 3 when every row is written but, with --zone, a zone's
ovn-northd gave one of our switches or ports another tunnel key than the one
it requests (a collision: printed one per line).

Run 'kubevirt-ovn COMMAND -h' for a command's flags.
`

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "sync":
		return runSync(args[1:], stdout, stderr)
	case "run":
		return runRun(args[1:], stderr)
	case "status":
		return runStatus(args[1:], stdout, stderr)
	case "rebalance":
		return runRebalance(args[1:], stdout, stderr)
	}
	fmt.Fprintf(stderr, "kubevirt-ovn: unknown command %q\n\n%s", args[0], usage)
	return 2
}

// endpointFlags defines --nb and --sb with their TLS material; the SB's
// default to the NB's after parsing (see endpointsTLS).
func endpointFlags(fs *flag.FlagSet, nb, sb *ovn.Endpoint) {
	fs.StringVar(&nb.Address, "nb", "", "OVN Northbound endpoint: unix:PATH, tcp:IP:PORT or ssl:IP:PORT (comma-separated for a cluster)")
	fs.StringVar(&nb.Cert, "nb-cert", "", "client certificate for an ssl: NB")
	fs.StringVar(&nb.Key, "nb-key", "", "client private key for an ssl: NB")
	fs.StringVar(&nb.CA, "nb-ca", "", "CA certificate for an ssl: NB")
	fs.StringVar(&sb.Address, "sb", "", "OVN Southbound endpoint, read for gateway chassis; without it every router with an external network must name spec.gateway")
	fs.StringVar(&sb.Cert, "sb-cert", "", "client certificate for an ssl: SB (default: --nb-cert)")
	fs.StringVar(&sb.Key, "sb-key", "", "client private key for an ssl: SB (default: --nb-key)")
	fs.StringVar(&sb.CA, "sb-ca", "", "CA certificate for an ssl: SB (default: --nb-ca)")
	fs.Var(endpointTimeout{&nb.Timeout, &sb.Timeout}, "endpoint-timeout",
		fmt.Sprintf("how long one NB or SB endpoint may take to accept a connection and answer before the next one of the list is tried (default %s)", ovn.DefaultTimeout))
}

// endpointTimeout sets the per-endpoint timeout of the NB and the SB.
type endpointTimeout []*time.Duration

func (e endpointTimeout) String() string {
	if len(e) == 0 || *e[0] == 0 {
		return ""
	}
	return e[0].String()
}

func (e endpointTimeout) Set(v string) error {
	d, err := time.ParseDuration(v)
	if err != nil {
		return err
	}
	if d <= 0 {
		return errors.New("must be positive")
	}
	for _, p := range e {
		*p = d
	}
	return nil
}

// endpointsTLS gives the SB the NB's TLS material where it has none of its
// own, and checks that the files of every endpoint that uses ssl: can be
// read, naming the flag and the file when one cannot. The TLS flags of a
// tcp: or unix: endpoint are ignored: a Deployment passes them whether or
// not its Secret exists.
func endpointsTLS(nb, sb *ovn.Endpoint) error {
	sbFlag := func(own, fromNB string, v *string, nbv string) string {
		if *v == "" && nbv != "" {
			*v = nbv
			return fmt.Sprintf("%s (default: %s)", own, fromNB)
		}
		return own
	}
	sbNames := [3]string{
		sbFlag("--sb-cert", "--nb-cert", &sb.Cert, nb.Cert),
		sbFlag("--sb-key", "--nb-key", &sb.Key, nb.Key),
		sbFlag("--sb-ca", "--nb-ca", &sb.CA, nb.CA),
	}
	if err := checkTLSFiles("NB", *nb, [3]string{"--nb-cert", "--nb-key", "--nb-ca"}); err != nil {
		return err
	}
	return checkTLSFiles("SB", *sb, sbNames)
}

// checkTLSFiles checks, for an endpoint that uses ssl:, that its
// certificate, key and CA files (named by the flags in names) are given
// and readable.
func checkTLSFiles(db string, ep ovn.Endpoint, names [3]string) error {
	if !ep.UsesTLS() {
		return nil
	}
	for i, file := range []string{ep.Cert, ep.Key, ep.CA} {
		if file == "" {
			return fmt.Errorf("%s endpoint %s: ssl: needs a certificate, a key and a CA certificate, and %s is not set", db, ep.Address, names[i])
		}
		f, err := os.Open(file)
		if err != nil {
			return fmt.Errorf("%s %s, needed by the ssl: %s endpoint %s: %w", names[i], file, db, ep.Address, err)
		}
		f.Close()
	}
	return nil
}

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

func runSync(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("sync", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var nb, sb ovn.Endpoint
	var paths multiFlag
	endpointFlags(fs, &nb, &sb)
	fs.Var(&paths, "from-file", "manifest file or directory (repeatable)")
	var zones zoneFlags
	fs.Var(&zones, "zone", "interconnect mode, instead of --nb/--sb: a zone's NAME=NB,SB (one endpoint each, e.g. gw1=unix:/run/ovn-gw1/ovnnb_db.sock,unix:/run/ovn-gw1/ovnsb_db.sock); repeat for every zone")
	dryRun := fs.Bool("dry-run", false, "print the planned changes and write nothing")
	allowEmpty := fs.Bool("allow-empty", false, "let manifests that declare no router and no network delete every row this instance owns")
	instance := fs.String("instance", translator.DefaultInstance, "managed-by value marking the rows this kubevirt-ovn owns")
	timeout := fs.Duration("timeout", 60*time.Second, "give up after this long")
	verbose := fs.Bool("v", false, "log OVSDB client activity to stderr")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the sync to this file (go tool pprof reads it)")
	memProfile := fs.String("memprofile", "", "write a heap profile of the sync, once it has committed, to this file")
	moveNudge := moveNudgeFlag(fs)
	northdWait := fs.Duration("northd-wait", 10*time.Second, "with --zone: how long to wait for each zone's ovn-northd to process the commit before comparing the tunnel keys it gave our switches and ports with the ones they request")
	batchOps := fs.Int("batch-ops", kvnb.MaxBatchOps, "most operations in one NB transaction: a sync that needs more commits in several, never splitting a router or a network")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *cpuProfile != "" {
		stop, err := startCPUProfile(*cpuProfile)
		if err != nil {
			fmt.Fprintf(stderr, "kubevirt-ovn sync: --cpuprofile: %v\n", err)
			return 2
		}
		defer stop()
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		// A sync allocates its input, plan and operations in one go: let
		// the GC collect what each step leaves behind before the heap
		// doubles (GOMEMLIMIT overrides it).
		debug.SetMemoryLimit(syncMemoryLimit(paths))
	}
	if len(paths) == 0 || (nb.Address == "") == (len(zones) == 0) {
		fmt.Fprintln(stderr, "kubevirt-ovn sync: --from-file and either --nb or --zone are required")
		return 2
	}
	if len(zones) > 0 && sb.Address != "" {
		fmt.Fprintln(stderr, "kubevirt-ovn sync: --sb goes with --nb; with --zone each zone names its SB")
		return 2
	}
	if err := endpointsTLS(&nb, &sb); err != nil {
		fmt.Fprintf(stderr, "kubevirt-ovn sync: %v\n", err)
		return 1
	}
	// Connection events (an endpoint that does not answer, a lost and
	// regained NB) are always logged; -v adds libovsdb's own.
	logger := stdr.New(log.New(stderr, "", log.LstdFlags))
	if *verbose {
		stdr.SetVerbosity(5)
	}

	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	// The manifests are decoded while the NBs connect and send our rows.
	type loaded struct {
		set *manifest.Set
		err error
	}
	loading := make(chan loaded, 1)
	go func() {
		set, err := manifest.LoadPaths(paths)
		loading <- loaded{set, err}
	}()
	targets := []*target{{nbEp: nb, sbEp: sb}}
	if len(zones) > 0 {
		targets = zones.targets()
	}
	for _, tg := range targets {
		defer tg.close()
		if err := tg.connect(ctx, *instance, logger); err != nil {
			fmt.Fprintf(stderr, "kubevirt-ovn sync: %v\n", err)
			return 1
		}
	}
	l := <-loading
	if l.err != nil {
		fmt.Fprintf(stderr, "kubevirt-ovn sync: %v (nothing written)\n", l.err)
		return 1
	}
	set := l.set
	for _, n := range set.Notes {
		fmt.Fprintf(stderr, "note: %s\n", n)
	}
	var err error
	set.Snapshot.Interconnect = len(zones) > 0
	if set.Snapshot.Chassis, set.Snapshot.ChassisKnown, err = chassisOf(ctx, targets); err != nil {
		fmt.Fprintf(stderr, "kubevirt-ovn sync: %v\n", err)
		return 1
	}
	// Interconnect: a zone under VXLAN is refused before anything is
	// written, and the keys other tools' rows request are not ours to take.
	for _, tg := range targets {
		if tg.zone == "" {
			continue
		}
		zk, err := ovn.ReadZoneKeys(ctx, tg.nbc, *instance)
		if err == nil {
			err = zk.CheckGeneve(tg.zone)
		} else {
			err = fmt.Errorf("%s%w", tg.label(), err)
		}
		if err != nil {
			fmt.Fprintf(stderr, "kubevirt-ovn sync: %v (nothing written)\n", err)
			return 1
		}
		if set.Snapshot.ForeignKeys == nil {
			set.Snapshot.ForeignKeys = map[string][]translator.ForeignKey{}
		}
		set.Snapshot.ForeignKeys[ovn.ZoneKeysSource(tg.zone)] = zk.Foreign
	}
	var held translator.ZonesHeld
	for _, tg := range targets {
		if err := refuseEmpty(ctx, set, tg.nbc, *instance, *allowEmpty, paths); err != nil {
			fmt.Fprintf(stderr, "kubevirt-ovn sync: %s%v (nothing written)\n", tg.label(), err)
			return 1
		}
		claims, err := kvnb.HeldClaims(ctx, tg.nbc, *instance)
		if err != nil {
			fmt.Fprintf(stderr, "kubevirt-ovn sync: %s%v\n", tg.label(), err)
			return 1
		}
		held = append(held, claims)
	}
	set.Snapshot.Held = held
	if len(held) == 1 {
		set.Snapshot.Held = held[0]
	}
	plan := translator.Build(&set.Snapshot, *instance)
	set = nil // the decoded manifests are not needed any more: let the GC have them
	for _, n := range plan.Notes {
		fmt.Fprintf(stderr, "note: %s\n", n)
	}

	var results []*kvnb.SyncResult
	var mismatches []translator.KeyMismatch
	for _, tg := range targets {
		res, err := syncSurvivingReconnects(ctx, tg.nbc, tg.read, plan, kvnb.SyncOptions{Instance: *instance, DryRun: *dryRun, BatchOps: *batchOps, Zone: tg.zone}, stderr)
		if err != nil {
			fmt.Fprintf(stderr, "kubevirt-ovn sync: %s%v\n", tg.label(), err)
			return 1
		}
		results = append(results, res)
		if *dryRun || tg.sbc == nil {
			continue
		}
		if tg.zone != "" {
			// OVN before 23.09: the SB binding of a remote port is ours to
			// set (a newer ovn-northd has set it: nothing to do).
			if err := ovn.WaitRemotePorts(ctx, tg.sbc, translator.RemotePorts(plan, tg.zone)); err != nil {
				fmt.Fprintf(stderr, "kubevirt-ovn sync: %s%v\n", tg.label(), err)
				return 1
			}
			ms, err := checkZoneKeys(ctx, tg, plan, res, *instance, *northdWait)
			if err != nil {
				fmt.Fprintf(stderr, "warning: %stunnel keys not checked: %v\n", tg.label(), err)
			}
			mismatches = append(mismatches, ms...)
		} else if *moveNudge {
			finishMoves(ctx, tg.nbc, tg.sbc, gatewayMoves(ctx, tg.sbc, plan, res, held[0].(translator.Claims).Gateways), stderr)
		}
	}
	if *memProfile != "" {
		if err := writeHeapProfile(*memProfile); err != nil {
			fmt.Fprintf(stderr, "kubevirt-ovn sync: --memprofile: %v\n", err)
		}
	}
	failed := map[translator.Unit]bool{}
	failures := plan.Errors
	for i, res := range results {
		tg := targets[i]
		if tg.zone != "" {
			fmt.Fprintf(stdout, "zone %s:\n", tg.zone)
		}
		printResult(stdout, res, *dryRun)
		if res.Transactions > 0 {
			fmt.Fprintf(stderr, "%sNB: %d transactions, %d operations in %s\n", tg.label(), res.Transactions, res.Operations, res.TxTime.Round(time.Millisecond))
		}
		for _, u := range res.Units {
			for _, n := range u.Notes {
				fmt.Fprintf(stderr, "note: %s%s\n", tg.label(), n)
			}
			// Every unit whose transaction failed, after every input error.
			if u.Err != nil && plan.Failed[u.Unit] == nil && !failed[u.Unit] {
				failed[u.Unit] = true
				failures = append(failures, fmt.Errorf("%s%w", tg.label(), u.Err))
			}
		}
	}
	for _, m := range mismatches {
		fmt.Fprintf(stderr, "tunnel key collision: %s\n", m)
	}
	if len(failures) > 0 {
		fmt.Fprintf(stderr, "%d failure(s); the rows of these objects were left as they were:\n", len(failures))
		for _, e := range failures {
			for _, line := range strings.Split(e.Error(), "\n") {
				fmt.Fprintf(stderr, "  %s\n", line)
			}
		}
		return 1
	}
	if len(mismatches) > 0 {
		fmt.Fprintf(stderr, "%d tunnel key collision(s): the rows are written, but ovn-northd gave these switches or ports other keys than the ones they request in every zone\n", len(mismatches))
		return exitKeyCollision
	}
	return 0
}

// exitKeyCollision is sync's exit status when every row is written but a
// zone's ovn-northd gave a switch or port of ours another tunnel key than
// the one it requests (1 is a failure, 2 a usage error).
const exitKeyCollision = 3

// moveNudgeFlag defines --move-nudge (see ovn.FinishMoves).
func moveNudgeFlag(fs *flag.FlagSet) *bool {
	return fs.Bool("move-nudge", true, "after moving gateway ports away from chassis that still run, wait until the SB binds each on its new chassis and rewrite NB_Global options:"+kvnb.BFDMultOption+
		" with the same value, so that the old gateways drop the ports' flows (works around an ovn-controller bug of OVN 23.03; see README); false: skip it")
}

// gatewayMoves are the routers whose gateway port res moved to another
// primary while the old one is still a chassis (it may keep the port's
// flows): router -> new primary.
func gatewayMoves(ctx context.Context, sb client.Client, plan *translator.Plan, res *kvnb.SyncResult, before map[string][]string) map[string]string {
	failed := map[translator.Unit]bool{}
	for _, u := range res.Units {
		if u.Err != nil {
			failed[u.Unit] = true
		}
	}
	moves := map[string]string{}
	for _, rp := range plan.Routers {
		old := before[rp.Name]
		if rp.Gateway == nil || len(rp.Gateway.Chassis) == 0 || len(old) == 0 || failed[translator.Unit{Kind: translator.KindRouter, Name: rp.Name}] {
			continue
		}
		if now := rp.Gateway.Chassis[0]; now != old[0] && ovn.IsChassis(ctx, sb, old[0]) {
			moves[rp.Name] = now
		}
	}
	return moves
}

// finishMoves waits for moved gateway ports to be bound on their new
// chassis and nudges the chassis (ovn.FinishMoves), saying so on stderr.
func finishMoves(ctx context.Context, nbc, sbc client.Client, moves map[string]string, stderr io.Writer) {
	if len(moves) == 0 {
		return
	}
	late, err := ovn.FinishMoves(ctx, nbc, sbc, moves)
	if len(late) > 0 {
		fmt.Fprintf(stderr, "note: %s\n", ovn.DescribeLate(late, moves))
	}
	if err != nil {
		fmt.Fprintf(stderr, "note: %v; an old gateway may keep answering for a moved port until its ovn-controller recomputes\n", err)
		return
	}
	fmt.Fprintf(stderr, "note: %d gateway ports moved and bound; NB_Global options:%s rewritten (same value) so that the old gateways drop their flows\n", len(moves), kvnb.BFDMultOption)
}

// refuseEmpty fails when the manifests declare nothing while units own rows
// in the NB, unless allowed: a directory that vanished, a symlink not
// followed or a mistyped path would otherwise delete every row we own.
func refuseEmpty(ctx context.Context, set *manifest.Set, nb client.Client, instance string, allowed bool, paths []string) error {
	if allowed || !set.Empty() {
		return nil
	}
	owned, err := kvnb.PresentUnits(ctx, nb, instance)
	if err != nil {
		return fmt.Errorf("reading owned NB rows: %w", err)
	}
	if len(owned) == 0 {
		return nil
	}
	return fmt.Errorf("the manifests in %s declare no router and no network, but %d routers and networks own rows in the NB: refusing to delete them all without --allow-empty", strings.Join(paths, ", "), len(owned))
}

// syncSurvivingReconnects syncs plan and, when units failed because the
// NB connection was lost, waits for the reconnection (until ctx ends) and
// syncs again from the re-synced cache; after a reconnection it syncs once
// more, so that whatever a transaction cut by the loss committed is seen and
// reconciled. The result merges every pass: each unit's changes of all
// passes and its last error.
func syncSurvivingReconnects(ctx context.Context, nb client.Client, read func(context.Context) error, plan *translator.Plan, opts kvnb.SyncOptions, stderr io.Writer) (*kvnb.SyncResult, error) {
	merged := &kvnb.SyncResult{}
	index := map[translator.Unit]int{}
	reconnected, settled := false, false
	disconnections := kvnb.Disconnections(nb)
	for pass := 1; ; pass++ {
		if pass > 1 {
			// Each pass reads what the NB holds now.
			if err := read(ctx); err != nil {
				return nil, fmt.Errorf("reading the NB again: %w", err)
			}
		}
		res, err := syncWithin(ctx, nb, plan, opts)
		if err != nil {
			return nil, err
		}
		seen := map[translator.Unit]bool{}
		lost := 0
		for _, u := range res.Units {
			seen[u.Unit] = true
			if errors.Is(u.Err, kvnb.ErrNotConnected) {
				lost++
			}
			i, ok := index[u.Unit]
			if !ok {
				index[u.Unit] = len(merged.Units)
				merged.Units = append(merged.Units, u)
				continue
			}
			merged.Units[i].Changes = append(merged.Units[i].Changes, u.Changes...)
			merged.Units[i].Err = u.Err
		}
		// Each pass covers every unit: one it does not list is synced.
		for i := range merged.Units {
			if !seen[merged.Units[i].Unit] {
				merged.Units[i].Err = nil
			}
		}
		merged.Transactions += res.Transactions
		merged.Operations += res.Operations
		merged.TxTime += res.TxTime
		if d := kvnb.Disconnections(nb); d != disconnections {
			// Lost and regained during the pass, maybe with nothing
			// failing: one more pass from the re-synced cache.
			disconnections, reconnected, settled = d, true, false
		}
		if ctx.Err() != nil {
			return merged, nil
		}
		if lost == 0 {
			if !reconnected || settled {
				return merged, nil
			}
			settled = true
			continue
		}
		fmt.Fprintf(stderr, "note: lost the NB connection during pass %d with %d unit(s) not synced; waiting for it to come back\n", pass, lost)
		for !kvnb.Connected(nb) {
			select {
			case <-ctx.Done():
				fmt.Fprintf(stderr, "note: the NB did not come back before --timeout\n")
				return merged, nil
			case <-time.After(50 * time.Millisecond):
			}
		}
		fmt.Fprintf(stderr, "note: reconnected to the NB at %s; syncing again from what it holds\n", nb.CurrentEndpoint())
		reconnected, settled = true, false
	}
}

// syncWithin is kvnb.Sync bounded by ctx: the diff reads libovsdb's
// cache, which blocks while the connection is down, without a deadline.
func syncWithin(ctx context.Context, nb client.Client, plan *translator.Plan, opts kvnb.SyncOptions) (*kvnb.SyncResult, error) {
	type outcome struct {
		res *kvnb.SyncResult
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := kvnb.Sync(ctx, nb, plan, opts)
		done <- outcome{res, err}
	}()
	select {
	case o := <-done:
		return o.res, o.err
	case <-ctx.Done():
		return nil, fmt.Errorf("the NB connection did not come back before --timeout: %w", ctx.Err())
	}
}

func printResult(w io.Writer, res *kvnb.SyncResult, dryRun bool) {
	if dryRun {
		fmt.Fprintln(w, "dry run: nothing is written")
	}
	for _, u := range res.Units {
		if len(u.Changes) == 0 {
			continue
		}
		fmt.Fprintf(w, "%s:\n", u.Unit)
		for _, c := range u.Changes {
			fmt.Fprintf(w, "  %s\n", c)
		}
	}
	counts := res.Changes()
	if len(counts) == 0 {
		fmt.Fprintln(w, "no changes")
		return
	}
	verb := map[string]string{kvnb.Create: "created", kvnb.Update: "updated", kvnb.Delete: "deleted"}
	if dryRun {
		verb = map[string]string{kvnb.Create: "to create", kvnb.Update: "to update", kvnb.Delete: "to delete"}
	}
	fmt.Fprintln(w, "changes per table:")
	for _, table := range sortedTables(counts) {
		var parts []string
		for _, a := range []string{kvnb.Create, kvnb.Update, kvnb.Delete} {
			if n := counts[table][a]; n > 0 {
				parts = append(parts, fmt.Sprintf("%d %s", n, verb[a]))
			}
		}
		fmt.Fprintf(w, "  %-28s %s\n", table, strings.Join(parts, ", "))
	}
}

func sortedTables(m map[string]map[string]int) []string {
	return slices.Sorted(maps.Keys(m))
}

// startCPUProfile profiles the process into path until the returned
// function is called.
func startCPUProfile(path string) (func(), error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}

// writeHeapProfile writes the heap profile to path.
func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return pprof.WriteHeapProfile(f)
}

// syncMemoryLimit is the soft memory limit of a sync of the manifests in
// paths: its live heap peaks near 24 times their size (100 MiB for 1,000
// routers in 4.3 MB), so 30 times, and at least 128 MiB. A limit below the
// live heap would have the GC run without end.
func syncMemoryLimit(paths []string) int64 {
	const least = 128 << 20
	files, err := manifest.Files(paths)
	if err != nil {
		return least
	}
	var size int64
	for _, f := range files {
		if st, err := os.Stat(f); err == nil {
			size += st.Size()
		}
	}
	return max(least, 30*size)
}
