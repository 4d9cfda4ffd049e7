// Package syncer is kubevirt-ovn's one-shot sync (`kubevirt-ovn sync`): it
// reads the manifests while it connects to the NB (and SB) of each target,
// plans every unit once, and commits each target's rows, surviving lost
// NB connections within its context. Input errors surface at once,
// whatever the databases do; nothing is written unless the whole input
// reads and every target answers. The CLI only parses flags and prints
// the Report.
package syncer

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/go-logr/logr"
	"github.com/ovn-kubernetes/libovsdb/client"

	"github.com/kubevirt-ovn/kubevirt-ovn/translator"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/chassiszone"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/controller"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/manifest"
	kvnb "github.com/kubevirt-ovn/kubevirt-ovn/translator/nb"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/ovn"
)

// Target is an NB kubevirt-ovn writes and the SB beside it: the central
// ones, or one zone's.
type Target struct {
	// Zone is the zone's name; "" for the central NB.
	Zone string
	// NB and SB are the databases' endpoints; without an SB address the
	// chassis are not read (every router must name spec.gateway).
	NB, SB ovn.Endpoint
}

// Label prefixes what is said about the target: "zone NAME: " or nothing.
func (t Target) Label() string {
	if t.Zone == "" {
		return ""
	}
	return "zone " + t.Zone + ": "
}

// Options are a sync's input, targets and policy.
type Options struct {
	// Paths are the manifest files and directories.
	Paths []string
	// Targets are the central NB (one target without a zone) or every
	// zone's, sorted by zone name.
	Targets  []Target
	Instance string
	// DryRun computes the changes and writes nothing.
	DryRun bool
	// AllowEmpty lets manifests that declare nothing delete every row we
	// own (see RefuseEmpty).
	AllowEmpty bool
	// MoveNudge finishes the gateway moves of a central sync (see
	// GatewayMoves and FinishMoves).
	MoveNudge bool
	// BatchOps bounds the operations of one transaction (0: the NB
	// layer's default).
	BatchOps int
	// NorthdWait bounds how long each zone's ovn-northd may take to
	// process the commit before its tunnel keys are compared.
	NorthdWait time.Duration
	// RejectEmptyLB: see translator.Snapshot.RejectEmptyLB.
	RejectEmptyLB bool
	// DefaultDeny: see translator.Snapshot.DefaultDeny.
	DefaultDeny bool
	// Log receives the connection events (an endpoint that does not
	// answer, a lost and regained NB).
	Log logr.Logger
	// Note receives what a user should know and is no failure: manifest
	// and plan notes, reconnections, gateway moves (one sentence each).
	Note func(string)
}

func (o *Options) note(format string, args ...any) {
	if o.Note != nil {
		o.Note(fmt.Sprintf(format, args...))
	}
}

// Result is what a sync did to one target.
type Result struct {
	Target Target
	*kvnb.SyncResult
}

// Report is what a sync did: one Result per target, in order, the
// failures (invalid input first, then every unit whose transaction
// failed, once), the tunnel key collisions ovn-northd made in the zones,
// and what could not be checked (Warnings).
type Report struct {
	Results    []Result
	Failures   []error
	Mismatches []translator.KeyMismatch
	Warnings   []error
}

// ErrNothingWritten marks the errors of a sync that stopped before it
// wrote anything.
var ErrNothingWritten = errors.New("nothing written")

// nothingWritten wraps err with ErrNothingWritten: "ERR (nothing written)".
func nothingWritten(err error) error {
	return fmt.Errorf("%w (%w)", err, ErrNothingWritten)
}

// Run syncs the manifests of opts.Paths into every target. The manifests
// are read while the targets connect: an input that cannot be read or
// parsed is an error at once, naming the file, whatever the databases do
// (and nothing is written). Run returns an error when it could not sync
// at all; a Report with Failures when some units were left as they were.
func Run(ctx context.Context, opts Options) (*Report, error) {
	if len(opts.Targets) == 0 {
		return nil, errors.New("no NB to sync")
	}
	targets := make([]*target, len(opts.Targets))
	for i, t := range opts.Targets {
		targets[i] = &target{Target: t}
	}
	defer func() {
		for _, t := range targets {
			t.close()
		}
	}()
	set, err := loadWhileConnecting(ctx, targets, opts)
	if err != nil {
		return nil, err
	}
	for _, n := range set.Notes {
		opts.note("%s", n)
	}
	snap := set.Objects.Snapshot()
	snap.RejectEmptyLB = opts.RejectEmptyLB
	snap.DefaultDeny = opts.DefaultDeny
	held, err := readDatabases(ctx, set, snap, targets, opts)
	if err != nil {
		return nil, err
	}
	plan := translator.Build(snap, opts.Instance)
	set = nil // the decoded manifests are not needed any more: let the GC have them
	for _, n := range plan.Notes {
		opts.note("%s", n)
	}
	return write(ctx, targets, plan, held, opts)
}

// loadWhileConnecting reads the manifests of opts.Paths while the targets
// connect, one after the other. An input that cannot be read is its error
// at once (nothing written), the connecting given up; else the first
// target that could not connect fails it.
func loadWhileConnecting(ctx context.Context, targets []*target, opts Options) (*manifest.Set, error) {
	type loaded struct {
		set *manifest.Set
		err error
	}
	loading := make(chan loaded, 1)
	go func() {
		set, err := manifest.LoadPaths(opts.Paths)
		loading <- loaded{set, err}
	}()
	connectCtx, stopConnecting := context.WithCancel(ctx)
	defer stopConnecting()
	connected := make(chan error, 1)
	go func() {
		for _, t := range targets {
			if err := t.connect(connectCtx, opts.Instance, opts.Log); err != nil {
				connected <- err
				return
			}
		}
		connected <- nil
	}()
	l := <-loading
	if l.err != nil {
		stopConnecting()
		<-connected // the targets are ours to close again
		return nil, nothingWritten(l.err)
	}
	if err := <-connected; err != nil {
		return nil, err
	}
	return l.set, nil
}

// readDatabases completes snap, the snapshot of set, with what the targets hold: the
// chassis of their SBs, each zone's foreign tunnel keys, the claims of
// their NBs (also returned, one per target). A chassis of two zones, a
// zone under VXLAN or an empty input that would delete our rows
// (RefuseEmpty) fails it before anything is written.
func readDatabases(ctx context.Context, set *manifest.Set, snap *translator.Snapshot, targets []*target, opts Options) (translator.ZonesHeld, error) {
	snap.Interconnect = len(targets) > 1 || targets[0].Zone != ""
	var err error
	if snap.Chassis, snap.ChassisKnown, err = chassisOf(ctx, targets); err != nil {
		return nil, nothingWritten(err)
	}
	if err := readZoneKeys(ctx, snap, targets, opts.Instance); err != nil {
		return nil, err
	}
	if snap.OfflineMembers, err = offlineMembersOf(ctx, targets); err != nil {
		return nil, nothingWritten(err)
	}
	var held translator.ZonesHeld
	for _, t := range targets {
		// One OVN without multi-chassis binding (22.03) keeps every
		// migrating port on its source until its migration completed.
		snap.SingleChassis = snap.SingleChassis || !ovn.MultiChassis(t.nbc)
		if t.sbc != nil && snap.OVNRelease == "" {
			snap.OVNRelease = ovn.NorthdRelease(t.sbc)
		}
		if err := RefuseEmpty(ctx, set, t.nbc, opts.Instance, opts.AllowEmpty, opts.Paths); err != nil {
			return nil, nothingWritten(fmt.Errorf("%s%w", t.Label(), err))
		}
		claims, err := kvnb.HeldClaims(ctx, t.nbc, opts.Instance)
		if err != nil {
			return nil, fmt.Errorf("%s%w", t.Label(), err)
		}
		held = append(held, claims)
	}
	snap.Held = held
	if len(held) == 1 {
		snap.Held = held[0]
	}
	return held, nil
}

// readZoneKeys refuses, before anything is written, a zone under VXLAN,
// and records in snap the tunnel keys other tools' rows request in each
// zone: they are not ours to take.
func readZoneKeys(ctx context.Context, snap *translator.Snapshot, targets []*target, instance string) error {
	for _, t := range targets {
		if t.Zone == "" {
			continue
		}
		zk, err := ovn.ReadZoneKeys(ctx, t.nbc, instance)
		if err == nil {
			err = zk.CheckGeneve(t.Zone)
		} else {
			err = fmt.Errorf("%s%w", t.Label(), err)
		}
		if err != nil {
			return nothingWritten(err)
		}
		if snap.ForeignKeys == nil {
			snap.ForeignKeys = map[string][]translator.ForeignKey{}
		}
		snap.ForeignKeys[ovn.ZoneKeysSource(t.Zone)] = zk.Foreign
		t.foreign = zk.Foreign
	}
	return nil
}

// write commits plan into every target in turn, surviving lost NB
// connections, and then checks it there (settle); its Report lists the
// input errors and then every unit whose transaction failed.
func write(ctx context.Context, targets []*target, plan *translator.Plan, held translator.ZonesHeld, opts Options) (*Report, error) {
	report := &Report{}
	for _, t := range targets {
		res, err := SurvivingReconnects(ctx, t.nbc, t.read, plan, kvnb.SyncOptions{Instance: opts.Instance, DryRun: opts.DryRun, BatchOps: opts.BatchOps, Zone: t.Zone}, opts.Note)
		if err != nil {
			return nil, fmt.Errorf("%s%w", t.Label(), err)
		}
		report.Results = append(report.Results, Result{Target: t.Target, SyncResult: res})
		if err := report.settle(ctx, t, plan, res, held, opts); err != nil {
			return nil, err
		}
	}
	report.Failures = plan.Errors
	failed := map[translator.Unit]bool{}
	for _, r := range report.Results {
		for _, u := range r.Units {
			// Every unit whose transaction failed, after every input error.
			if u.Err != nil && plan.Failed[u.Unit] == nil && !failed[u.Unit] {
				failed[u.Unit] = true
				report.Failures = append(report.Failures, fmt.Errorf("%s%w", r.Target.Label(), u.Err))
			}
		}
	}
	return report, nil
}

// settle follows t's commit res when it wrote and t has an SB: in a zone,
// it binds the remote ports and compares the tunnel keys ovn-northd gave
// with plan's (a mismatch or a check that could not be made goes into
// r); centrally, with opts.MoveNudge, it finishes the gateway moves from
// the orders held before the sync.
func (r *Report) settle(ctx context.Context, t *target, plan *translator.Plan, res *kvnb.SyncResult, held translator.ZonesHeld, opts Options) error {
	if opts.DryRun || t.sbc == nil {
		return nil
	}
	if t.Zone == "" {
		// Only an OVN whose old gateways may keep a moved port's flows
		// needs the nudge (translator.StaleGatewayBug).
		if opts.MoveNudge && translator.StaleGatewayBug(ovn.NorthdRelease(t.sbc)) {
			FinishMoves(ctx, t.nbc, t.sbc, GatewayMoves(ctx, t.sbc, plan, res, held[0].(translator.Claims).Gateways), opts.Note)
		}
		return nil
	}
	// OVN before 23.09: the SB binding of a remote port is ours to set (a
	// newer ovn-northd has set it: nothing to do).
	if err := ovn.WaitRemotePorts(ctx, t.sbc, translator.RemotePorts(plan, t.Zone)); err != nil {
		return fmt.Errorf("%s%w", t.Label(), err)
	}
	ms, err := checkZoneKeys(ctx, t, plan, res, opts.Instance, opts.NorthdWait, opts.Note)
	if err != nil {
		r.Warnings = append(r.Warnings, fmt.Errorf("%stunnel keys not checked: %w", t.Label(), err))
	}
	r.Mismatches = append(r.Mismatches, ms...)
	return nil
}

// RefuseEmpty fails when the manifests declare nothing while units own
// rows in the NB, unless allowed: a directory that vanished, a symlink
// not followed or a mistyped path would otherwise delete every row we own.
func RefuseEmpty(ctx context.Context, set *manifest.Set, nb client.Client, instance string, allowed bool, paths []string) error {
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
	return &controller.EmptyInputError{Paths: paths, Owned: len(owned)}
}

// MemoryLimit is the soft memory limit of a sync of the manifests in
// paths: its live heap peaks near 24 times their size (100 MiB for 1,000
// routers in 4.3 MB), so 30 times, and at least 128 MiB. A limit below the
// live heap would have the GC run without end.
func MemoryLimit(paths []string) int64 {
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

// offlineMembersOf reads, of every zone's SB, the load balancer members
// its own health checks find offline (ovn.OfflineMembers), by zone; nil
// for a central sync, where OVN itself takes them out.
func offlineMembersOf(ctx context.Context, targets []*target) (map[string][]translator.OfflineMember, error) {
	out := map[string][]translator.OfflineMember{}
	for _, t := range targets {
		if t.sbc == nil || t.Zone == "" {
			continue
		}
		down, err := ovn.OfflineMembers(ctx, t.sbc)
		if err != nil {
			return nil, fmt.Errorf("%s%w", t.Label(), err)
		}
		out[t.Zone] = down
	}
	return out, nil
}

// chassisOf reads the chassis of every target's SB: all of the central
// SB's, or each zone's own (not its remote entries), marked with the zone.
// A chassis local to two zones is an error naming it and both zones: its
// zone would be a guess (chassiszone.Check).
func chassisOf(ctx context.Context, targets []*target) ([]translator.Chassis, bool, error) {
	var all []translator.Chassis
	known := false
	for _, t := range targets {
		if t.sbc == nil {
			continue
		}
		known = true
		var chassis []translator.Chassis
		var err error
		if t.Zone == "" {
			chassis, err = ovn.GatewayChassis(ctx, t.sbc)
		} else {
			chassis, err = ovn.ZoneChassis(ctx, t.sbc, t.Zone)
		}
		if err != nil {
			return nil, false, fmt.Errorf("%s%w", t.Label(), err)
		}
		all = append(all, chassis...)
	}
	if err := chassiszone.Check(all); err != nil {
		return nil, false, err
	}
	return all, known, nil
}
