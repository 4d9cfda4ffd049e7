package main

import (
	"context"
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
	"github.com/spf13/cobra"

	kvnb "github.com/kubevirt-ovn/kubevirt-ovn/translator/nb"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/ovn"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/syncer"
)

type syncFlags struct {
	nb, sb     ovn.Endpoint
	zones      zoneFlags
	paths      []string
	allowEmpty bool
	dryRun     bool
	instance   string
	timeout    time.Duration
	batchOps   int
	moveNudge  bool
	northdWait time.Duration
	// rejectEmptyLB: see lbRejectEmptyFlag.
	rejectEmptyLB bool
	// defaultDeny: see defaultDenyFlag.
	defaultDeny bool
	verbose     bool
	cpuProfile  string
	memProfile  string
}

func newSyncCmd() *cobra.Command {
	var f syncFlags
	cmd := &cobra.Command{
		Use:     "sync (--nb ADDR [--sb ADDR] | --zone NAME=NB,SB...) --from-file PATH... [flags]",
		GroupID: "sync",
		Short:   "Write the routers and networks of manifests on disk into the OVN NB once",
		Long: `sync translates the manifests at PATH (files, or directories of *.yaml, *.yml and *.json,
recursively) into the OVN Northbound database once, and prints each row it created, updated
or deleted, per object, and a count per table ("no changes" when the NB is already right).

The manifests are read while the NB connects: a path that does not exist or a file that does
not parse fails the sync at once, before anything is written. Manifests that declare no
router and no network while the NB holds rows of ours are refused unless --allow-empty. An
object whose input is invalid is named with the field at fault and its rows are left as they
are, while the others sync. A lost NB connection is waited for within --timeout.

With --zone (OVN interconnect, one NB and SB per zone, as ovn-kubernetes runs it) every
zone's NB is written from one plan.

Exit status: 0 when every row is written, 1 when some could not be, 2 on a usage error, and
3 when every row is written but, with --zone, a zone's ovn-northd gave one of our switches
or ports another tunnel key than the one it requests (a collision: printed one per line).`,
		Example: `  # Sync the examples, reading gateway chassis from the SB
  kubevirt-ovn sync --nb tcp:192.0.2.10:6641 --sb tcp:192.0.2.10:6642 --from-file deploy/examples

  # Print what would change, write nothing
  kubevirt-ovn sync --nb unix:/var/run/ovn/ovnnb_db.sock --from-file routers/ --dry-run

  # Interconnect: every zone's NB and SB
  kubevirt-ovn sync --from-file routers/ \
      --zone gw1=unix:/run/ovn-gw1/ovnnb_db.sock,unix:/run/ovn-gw1/ovnsb_db.sock \
      --zone hv1=unix:/run/ovn-hv1/ovnnb_db.sock,unix:/run/ovn-hv1/ovnsb_db.sock`,
		Args: noArgs,
		RunE: runE(func(cmd *cobra.Command) error { return runSync(cmd, &f) }),
	}
	var g flagGroups
	db := g.group(groupDatabases)
	endpointFlags(db, &f.nb, &f.sb)
	zoneFlag(db, &f.zones, "interconnect mode, instead of --nb/--sb: a zone's NAME=NB,SB (one endpoint each, e.g. gw1=unix:/run/ovn-gw1/ovnnb_db.sock,unix:/run/ovn-gw1/ovnsb_db.sock); repeat for every zone")
	in := g.group(groupInput)
	fromFileFlag(in, &f.paths, "manifest file or directory `PATH` (repeatable)")
	in.BoolVar(&f.allowEmpty, "allow-empty", false, "let manifests that declare no router and no network delete every row this instance owns")
	s := g.group(groupSync)
	s.BoolVar(&f.dryRun, "dry-run", false, "print the planned changes and write nothing")
	instanceFlag(s, &f.instance)
	s.DurationVar(&f.timeout, "timeout", 60*time.Second, "give up after this long, also while waiting for a lost NB to come back")
	s.IntVar(&f.batchOps, "batch-ops", kvnb.MaxBatchOps, "most operations (`N`) in one NB transaction: a sync that needs more commits in several, never splitting a router or a network")
	moveNudgeFlag(s, &f.moveNudge)
	lbRejectEmptyFlag(s, &f.rejectEmptyLB)
	defaultDenyFlag(s, &f.defaultDeny)
	s.DurationVar(&f.northdWait, "northd-wait", 10*time.Second, "with --zone: how long to wait for each zone's ovn-northd to process the commit before comparing the tunnel keys it gave our switches and ports with the ones they request")
	d := g.group(groupDiag)
	d.BoolVarP(&f.verbose, "verbose", "v", false, "log OVSDB client activity to stderr")
	// -v and --v were the spelling of --verbose.
	d.BoolVar(&f.verbose, "v", false, "")
	_ = d.MarkHidden("v")
	d.StringVar(&f.cpuProfile, "cpuprofile", "", "write a CPU profile of the sync to `FILE` (go tool pprof reads it)")
	d.StringVar(&f.memProfile, "memprofile", "", "write a heap profile of the sync, once it has committed, to `FILE`")
	g.install(cmd)
	_ = cmd.MarkFlagFilename("from-file", "yaml", "yml", "json")
	return cmd
}

func runSync(cmd *cobra.Command, f *syncFlags) error {
	stdout, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
	if len(f.paths) == 0 || (f.nb.Address == "") == (len(f.zones) == 0) {
		return usageErrorf("--from-file and either --nb or --zone are required")
	}
	if len(f.zones) > 0 && f.sb.Address != "" {
		return usageErrorf("--sb goes with --nb; with --zone each zone names its SB")
	}
	if f.cpuProfile != "" {
		stop, err := startCPUProfile(f.cpuProfile)
		if err != nil {
			return usageErrorf("--cpuprofile: %v", err)
		}
		defer stop()
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		// A sync allocates its input, plan and operations in one go: let
		// the GC collect what each step leaves behind before the heap
		// doubles (GOMEMLIMIT overrides it), and within its
		// container's limit (applyContainerMemoryLimit).
		debug.SetMemoryLimit(min(syncer.MemoryLimit(f.paths), debug.SetMemoryLimit(-1)))
	}
	if err := endpointsTLS(&f.nb, &f.sb); err != nil {
		return err
	}
	// Connection events (an endpoint that does not answer, a lost and
	// regained NB) are always logged; --verbose adds libovsdb's own.
	logger := stdr.New(log.New(stderr, "", log.LstdFlags))
	if f.verbose {
		stdr.SetVerbosity(5)
	}
	targets := []syncer.Target{{NB: f.nb, SB: f.sb}}
	if len(f.zones) > 0 {
		targets = nil
		for _, z := range f.zones.sorted() {
			targets = append(targets, syncer.Target{Zone: z.name, NB: ovn.Endpoint{Address: z.nb}, SB: ovn.Endpoint{Address: z.sb}})
		}
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), f.timeout)
	defer cancel()
	report, err := syncer.Run(ctx, syncer.Options{
		Paths: f.paths, Targets: targets, Instance: f.instance,
		DryRun: f.dryRun, AllowEmpty: f.allowEmpty, MoveNudge: f.moveNudge,
		BatchOps: f.batchOps, NorthdWait: f.northdWait, RejectEmptyLB: f.rejectEmptyLB, DefaultDeny: f.defaultDeny,
		Log:  logger,
		Note: func(s string) { fmt.Fprintf(stderr, "note: %s\n", s) },
	})
	if err != nil {
		return err
	}
	if f.memProfile != "" {
		if err := writeHeapProfile(f.memProfile); err != nil {
			fmt.Fprintf(stderr, "%s: --memprofile: %v\n", cmd.CommandPath(), err)
		}
	}
	for _, r := range report.Results {
		if r.Target.Zone != "" {
			fmt.Fprintf(stdout, "zone %s:\n", r.Target.Zone)
		}
		printResult(stdout, r.SyncResult, f.dryRun)
		if r.Transactions > 0 {
			fmt.Fprintf(stderr, "%sNB: %d transactions, %d operations in %s\n", r.Target.Label(), r.Transactions, r.Operations, r.TxTime.Round(time.Millisecond))
		}
		for _, u := range r.Units {
			for _, n := range u.Notes {
				fmt.Fprintf(stderr, "note: %s%s\n", r.Target.Label(), n)
			}
		}
	}
	for _, w := range report.Warnings {
		fmt.Fprintf(stderr, "warning: %v\n", w)
	}
	for _, m := range report.Mismatches {
		fmt.Fprintf(stderr, "tunnel key collision: %s\n", m)
	}
	if len(report.Failures) > 0 {
		fmt.Fprintf(stderr, "%d failure(s); the rows of these objects were left as they were:\n", len(report.Failures))
		for _, e := range report.Failures {
			for _, line := range strings.Split(e.Error(), "\n") {
				fmt.Fprintf(stderr, "  %s\n", line)
			}
		}
		return &exitError{code: exitFailure}
	}
	if len(report.Mismatches) > 0 {
		fmt.Fprintf(stderr, "%d tunnel key collision(s): the rows are written, but ovn-northd gave these switches or ports other keys than the ones they request in every zone\n", len(report.Mismatches))
		return &exitError{code: exitKeyCollision}
	}
	return nil
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
	for _, table := range slices.Sorted(maps.Keys(counts)) {
		var parts []string
		for _, a := range []string{kvnb.Create, kvnb.Update, kvnb.Delete} {
			if n := counts[table][a]; n > 0 {
				parts = append(parts, fmt.Sprintf("%d %s", n, verb[a]))
			}
		}
		fmt.Fprintf(w, "  %-28s %s\n", table, strings.Join(parts, ", "))
	}
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
