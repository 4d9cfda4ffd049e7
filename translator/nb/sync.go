package nb

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ovn-kubernetes/libovsdb/client"
	"github.com/ovn-kubernetes/libovsdb/model"
	"github.com/ovn-kubernetes/libovsdb/ovsdb"

	"github.com/kubevirt-ovn/kubevirt-ovn/nbmodel"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator"
)

// MaxBatchOps bounds the operations of one transaction of a full sync: a
// sync that fits commits in one transaction. A unit is never split: a unit
// with more operations commits alone.
const MaxBatchOps = 100000

// SyncOptions tune Sync.
type SyncOptions struct {
	// Instance is the managed-by value of our rows.
	Instance string
	// DryRun computes the changes and writes nothing.
	DryRun bool
	// BatchOps bounds the operations of one transaction; MaxBatchOps when
	// zero.
	BatchOps int
	// Parents, when given, finds the row that holds a child row without
	// walking the parent table.
	Parents *ParentIndex
	// Memo, when given, remembers across syncs what big reference sets
	// held (RefMemo); its owner shows it every NB event.
	Memo *RefMemo
	// BumpNBCfg increments NB_Global.nb_cfg in every transaction that writes,
	// so that NB_Global.hv_cfg reaching SyncResult.NBCfg says the chassis
	// have realized it (what ovn-nbctl --wait=hv does).
	BumpNBCfg bool
	// OnCommit observes every NB transaction: its duration and error.
	OnCommit func(took time.Duration, err error)
	// Zone, in interconnect mode, is the zone whose NB this is: the
	// plan's rows of that zone are written there (ZoneRows).
	Zone string
	// CommitLock, when given, is held from the reading of a transaction's
	// guards to its reply: concurrent syncs of one client (a controller's
	// workers) commit in turn. A batch's one wait over a table's names
	// (bulkGuard) expects the names the cache holds when it is built, and
	// a commit of another worker in flight would add some.
	CommitLock sync.Locker
	// Registry is the tables diffed and written; Default when nil. The
	// client's model and monitor must hold them (ovn.ConnectNBWith).
	Registry *Registry
}

// UnitResult is what a sync did to one unit.
type UnitResult struct {
	Unit    translator.Unit
	Changes []Change
	// Notes say what another tool added to the unit's rows: kubevirt-ovn
	// leaves it alone and does not treat it as its own.
	Notes []string
	// Err is why the unit's rows were left as they were: invalid input or a
	// failed transaction.
	Err error
}

// SyncResult is the outcome of a sync.
type SyncResult struct {
	Units []UnitResult
	// Transactions and Operations count what was committed, TxTime how
	// long the NB took.
	Transactions int
	Operations   int
	TxTime       time.Duration
	// NBCfg is NB_Global.nb_cfg after the last transaction, with
	// BumpNBCfg; 0 when nothing was written.
	NBCfg int

	// clashed are the units not sent because they would create a root
	// named like a row that is not ours.
	clashed map[*UnitDiff]error
	// inserted are the names of the guarded roots this sync's committed
	// transactions inserted, by table: a later transaction's table-wide
	// wait expects them too. A one-shot sync's cache (ReadOwned, no
	// monitor) never sees its own writes: without them the wait of every
	// transaction after the first failed, and the sync split its batches
	// down to units (1,536 transactions, 174 s, at 10,000 routers).
	inserted map[string][]string
	// committed are the UUIDs of the rows this sync's committed
	// transactions inserted in the tables other rows hang from or refer
	// to, by key (Differ.committed): a later transaction names them by
	// UUID, not by a wait and a mutate whose where clause is the row's
	// name, which ovsdb-server (23.03) evaluates by scanning the table: a
	// scan per network at 10,000 routers was three quarters of the
	// server's work.
	committed map[rowKey]string
}

// Failed returns the error of every unit left as it was: invalid input or a
// failed transaction.
func (r *SyncResult) Failed() []error {
	var errs []error
	for _, u := range r.Units {
		if u.Err != nil {
			errs = append(errs, u.Err)
		}
	}
	return errs
}

// Changes counts created, updated and deleted rows per table.
func (r *SyncResult) Changes() map[string]map[string]int {
	out := map[string]map[string]int{}
	for _, u := range r.Units {
		for _, c := range u.Changes {
			if out[c.Table] == nil {
				out[c.Table] = map[string]int{}
			}
			out[c.Table][c.Action]++
		}
	}
	return out
}

// Work is one unit to sync: its desired rows, or why its input is invalid
// (then its rows are left as they are).
type Work struct {
	Desired
	Err error
}

// WorkOf is what unit plan up asks of an NB: its rows, or the removal of
// its rows when the input has no such unit, or nothing when its input is
// invalid (the rows are left as they are). zone, in interconnect mode, is
// the NB's zone: its rows are the unit's rows of that zone, none when the
// unit has no rows there.
func WorkOf(up translator.UnitPlan, zone string) Work {
	w := Work{Desired: Desired{Unit: up.Unit}}
	var zr *translator.ZoneRows
	switch {
	case len(up.Errs) > 0:
		w.Err = errors.Join(up.Errs...)
	case zone != "" && up.Network != nil:
		zr = up.Network.Zones[zone]
	case zone != "" && up.Router != nil:
		zr = up.Router.Zones[zone]
	case zone != "" && up.SecurityGroup != nil:
		zr = up.SecurityGroup.Zones[zone]
	case up.Network != nil:
		w.Rows, w.Keep = up.Network.Rows(), up.Network.KeepPorts
	case up.Router != nil:
		w.Rows = up.Router.Rows()
	case up.SecurityGroup != nil:
		w.Rows, w.Keep = up.SecurityGroup.Rows(), up.SecurityGroup.KeepACLs
	}
	if zr != nil {
		w.Rows, w.Keep = zr.Rows, zr.Keep
	}
	return w
}

// PlanWork is the work of units in plan (see WorkOf): each unit's plan is
// read from plan, which has no plan for a unit not in the input.
func PlanWork(plan *translator.Plan, units []translator.Unit, zone string) []Work {
	networks := map[string]*translator.NetworkPlan{}
	for i := range plan.Networks {
		networks[plan.Networks[i].Name] = &plan.Networks[i]
	}
	routers := map[string]*translator.RouterPlan{}
	for i := range plan.Routers {
		routers[plan.Routers[i].Name] = &plan.Routers[i]
	}
	groups := map[string]*translator.SecurityGroupPlan{}
	for i := range plan.SecurityGroups {
		groups[plan.SecurityGroups[i].ID] = &plan.SecurityGroups[i]
	}
	out := make([]Work, 0, len(units))
	for _, u := range units {
		up := translator.UnitPlan{Unit: u, Errs: plan.Failed[u]}
		switch u.Kind {
		case translator.KindNetwork:
			up.Network = networks[u.Name]
		case translator.KindRouter:
			up.Router = routers[u.Name]
		case translator.KindSecurityGroup:
			up.SecurityGroup = groups[u.Name]
		}
		out = append(out, WorkOf(up, zone))
	}
	return out
}

// Sync brings every unit of plan to its desired rows and removes the rows of
// units no longer in the input. Units whose input is invalid keep their rows.
// Units commit in one transaction when they fit; when the NB refuses it,
// the units are split until the refused ones are alone, so that one unit's
// failure leaves the others synced.
func Sync(ctx context.Context, c client.Client, plan *translator.Plan, opts SyncOptions) (*SyncResult, error) {
	present, err := registryOf(opts).PresentUnits(ctx, c, instanceOf(opts))
	if err != nil {
		return nil, fmt.Errorf("reading owned NB rows: %w", err)
	}
	units := slices.Clone(present)
	for _, n := range plan.Networks {
		units = append(units, translator.Unit{Kind: translator.KindNetwork, Name: n.Name})
	}
	for _, r := range plan.Routers {
		units = append(units, translator.Unit{Kind: translator.KindRouter, Name: r.Name})
	}
	for _, g := range plan.SecurityGroups {
		units = append(units, translator.Unit{Kind: translator.KindSecurityGroup, Name: g.ID})
	}
	for u := range plan.Failed {
		units = append(units, u)
	}
	return SyncWork(ctx, c, PlanWork(plan, units, opts.Zone), opts)
}

// SyncUnits is Sync restricted to units (see PlanWork).
func SyncUnits(ctx context.Context, c client.Client, plan *translator.Plan, units []translator.Unit, opts SyncOptions) (*SyncResult, error) {
	return SyncWork(ctx, c, PlanWork(plan, units, opts.Zone), opts)
}

func registryOf(opts SyncOptions) *Registry {
	if opts.Registry == nil {
		return Default
	}
	return opts.Registry
}

func instanceOf(opts SyncOptions) string {
	if opts.Instance == "" {
		return translator.DefaultInstance
	}
	return opts.Instance
}

// SyncWork diffs and commits work: networks before routers (a router's
// ports hang from network switches); among those, syncs before removals.
func SyncWork(ctx context.Context, c client.Client, work []Work, opts SyncOptions) (*SyncResult, error) {
	d := newDiffer(ctx, c, registryOf(opts), instanceOf(opts))
	d.parents = opts.Parents
	d.memo = opts.Memo
	res := &SyncResult{clashed: map[*UnitDiff]error{}}
	rank := func(w *Work) int {
		switch {
		case w.Unit.Kind == translator.KindNetwork && len(w.Rows) > 0:
			return 0
		case w.Unit.Kind != translator.KindNetwork && len(w.Rows) > 0:
			// Routers, and security groups (their Port_Groups refer
			// to VM ports).
			return 1
		case w.Unit.Kind == translator.KindRouter:
			return 2
		}
		return 3
	}
	work = slices.Clone(work)
	slices.SortStableFunc(work, func(a, b Work) int {
		if c := rank(&a) - rank(&b); c != 0 {
			return c
		}
		return translator.CompareUnits(a.Unit, b.Unit)
	})
	work = slices.CompactFunc(work, func(a, b Work) bool { return a.Unit == b.Unit })

	var diffs []*UnitDiff
	var results []UnitResult
	index := map[*UnitDiff]int{}
	for _, w := range work {
		if w.Err != nil {
			results = append(results, UnitResult{Unit: w.Unit, Err: w.Err})
			continue
		}
		ud, err := d.Unit(w.Desired)
		if err != nil {
			// This unit's rows cannot be read or built: it fails alone.
			results = append(results, UnitResult{Unit: w.Unit, Err: err})
			continue
		}
		index[ud] = len(results)
		results = append(results, UnitResult{Unit: w.Unit})
		diffs = append(diffs, ud)
	}
	// What depends on every unit: roots that others referred to, and
	// references to keys nobody has.
	if err := d.Settle(); err != nil {
		return nil, err
	}
	diffs = slices.DeleteFunc(diffs, func(ud *UnitDiff) bool {
		r := &results[index[ud]]
		r.Notes = ud.Notes
		if ud.err != nil {
			r.Err = ud.err
			return true
		}
		r.Changes = ud.Changes
		return ud.Empty()
	})
	if err := d.confirmOrphans(ctx, c, diffs); err != nil {
		diffs = slices.DeleteFunc(diffs, func(ud *UnitDiff) bool {
			if len(ud.orphans) == 0 {
				return false
			}
			results[index[ud]].Err, results[index[ud]].Changes = fmt.Errorf("%s: %w", ud.Unit, err), nil
			return true
		})
	}
	if !opts.DryRun {
		failed := func(batch []*UnitDiff, err error) {
			for _, ud := range batch {
				results[index[ud]].Err = err
				results[index[ud]].Changes = nil
			}
		}
		limit := opts.BatchOps
		if limit <= 0 {
			limit = MaxBatchOps
		}
		for start := 0; start < len(diffs); {
			end, n := start, 0
			for end < len(diffs) && (end == start || n+diffs[end].opCount() <= limit) {
				n += diffs[end].opCount()
				end++
			}
			res.commitSplitting(ctx, c, d, diffs[start:end], opts, failed)
			start = end
		}
		for ud, err := range res.clashed {
			failed([]*UnitDiff{ud}, err)
		}
	}
	for _, ud := range diffs {
		r := &results[index[ud]]
		for _, o := range ud.orphans {
			// A skipped one names another instance's port (every
			// instance's bindings look alike): not ours, not ours
			// to mention.
			if r.Err == nil && !o.skip {
				r.Changes = append(r.Changes, o.change)
			}
		}
	}
	for _, r := range results {
		if len(r.Changes) > 0 || r.Err != nil || len(r.Notes) > 0 {
			res.Units = append(res.Units, r)
		}
	}
	return res, nil
}

// commitSplitting commits batch; when the NB refuses it, each half is
// committed on its own, down to the refused units alone.
func (r *SyncResult) commitSplitting(ctx context.Context, c client.Client, d *Differ, batch []*UnitDiff, opts SyncOptions, failed func([]*UnitDiff, error)) {
	err := ctx.Err()
	if err == nil {
		err = r.commitBatch(ctx, c, d, batch, opts)
	}
	switch {
	case err == nil:
	case ctx.Err() != nil || errors.Is(err, ErrNotConnected) || len(batch) == 1:
		// Stopped, or the NB is gone: the batch may or may not have
		// committed, and sending it again could write twice. The next
		// sync reads what the NB holds.
		failed(batch, err)
	default:
		// Units refused before anything was sent are not sent again.
		batch = slices.DeleteFunc(slices.Clone(batch), func(ud *UnitDiff) bool { return r.clashed[ud] != nil })
		if len(batch) == 0 {
			return
		}
		half := (len(batch) + 1) / 2
		r.commitSplitting(ctx, c, d, batch[:half], opts, failed)
		r.commitSplitting(ctx, c, d, batch[half:], opts, failed)
	}
}

func (r *SyncResult) commitBatch(ctx context.Context, c client.Client, d *Differ, batch []*UnitDiff, opts SyncOptions) error {
	if opts.CommitLock != nil {
		opts.CommitLock.Lock()
		defer opts.CommitLock.Unlock()
	}
	names := make([]string, 0, len(batch))
	for _, ud := range batch {
		names = append(names, ud.Unit.String())
	}
	what := strings.Join(names, ", ")
	if len(names) > 3 {
		what = fmt.Sprintf("%s, %s and %d other units", names[0], names[1], len(names)-2)
	}
	if !d.v.current(c) {
		// A reconnection refilled the cache since the diff read it: what
		// it computed may no longer hold. Computed again from the new one.
		return fmt.Errorf("%s: NB transaction not sent: the NB cache was refilled after a reconnection since its rows were read: %w", what, ErrNotConnected)
	}
	guards, batch, clashed, err := d.Guards(ctx, c, batch)
	if err != nil {
		return err
	}
	for t := range guards {
		guards[t] = append(guards[t], r.inserted[t]...)
	}
	for ud, err := range clashed {
		r.clashed[ud] = err
	}
	if len(batch) == 0 {
		return nil
	}
	d.committed = r.committed
	ops, err := d.Ops(batch, guards)
	if err != nil {
		return err
	}
	if len(ops) == 0 {
		return nil
	}
	var global *nbmodel.NBGlobal
	if opts.BumpNBCfg {
		var globals []*nbmodel.NBGlobal
		if err := c.List(ctx, &globals); err == nil && len(globals) == 1 {
			global = globals[0]
			bump, err := c.Where(global).Mutate(global, model.Mutation{Field: &global.NbCfg, Mutator: ovsdb.MutateOperationAdd, Value: 1})
			if err != nil {
				return err
			}
			ops = append(ops, bump...)
		}
	}
	results, took, err := commit(ctx, c, what, ops)
	r.TxTime += took
	if opts.OnCommit != nil {
		opts.OnCommit(took, err)
	}
	if err != nil {
		return err
	}
	r.Transactions++
	r.Operations += len(ops)
	if r.inserted == nil {
		r.inserted = map[string][]string{}
	}
	for _, ud := range batch {
		for _, ins := range ud.inserts {
			if ins.t.Guard {
				r.inserted[ins.t.Name] = append(r.inserted[ins.t.Name], ins.key)
			}
		}
	}
	r.remember(d, batch, ops, results)
	if global != nil {
		// The cache has our transaction's update once Transact returns.
		cur := &nbmodel.NBGlobal{UUID: global.UUID}
		if err := c.Get(ctx, cur); err == nil {
			r.NBCfg = cur.NbCfg
		}
	}
	return nil
}

// Commit is the one place kubevirt-ovn writes to the NB: it runs ops in one
// transaction, checks every operation's result, and returns how long the
// transaction took. Its error names what was being written. When the NB
// connection is down it fails at once instead of letting libovsdb hold the
// operations until a reconnection and then send them, computed from the old
// cache; that error, and a transaction cut by a lost connection, match
// errors.Is(err, ErrNotConnected).
func Commit(ctx context.Context, c client.Client, what string, ops []ovsdb.Operation) (time.Duration, error) {
	_, took, err := commit(ctx, c, what, ops)
	return took, err
}

// commit is Commit returning the operations' results as well.
func commit(ctx context.Context, c client.Client, what string, ops []ovsdb.Operation) ([]ovsdb.OperationResult, time.Duration, error) {
	if !Connected(c) {
		return nil, 0, fmt.Errorf("%s: NB transaction not sent: %w", what, ErrNotConnected)
	}
	start := time.Now()
	results, err := c.Transact(ctx, ops...)
	took := time.Since(start)
	if err != nil && ctx.Err() == nil && ConnectionLost(err) {
		return nil, took, fmt.Errorf("%s: NB transaction cut by a lost connection (%v), it may or may not have been committed: %w", what, err, ErrNotConnected)
	}
	if err == nil {
		err = operationErrors(results, ops)
	}
	if err != nil {
		return nil, took, fmt.Errorf("%s: NB transaction failed: %w", what, err)
	}
	return results, took, nil
}

// remember records the UUIDs the server gave the rows batch inserted in
// the tables a row hangs from or refers to (r.committed), from the
// results of its committed operations ops: an insert's result holds the
// UUID of the row its named UUID stood for.
func (r *SyncResult) remember(d *Differ, batch []*UnitDiff, ops []ovsdb.Operation, results []ovsdb.OperationResult) {
	real := map[string]string{}
	for i, op := range ops {
		if op.Op == ovsdb.OperationInsert && op.UUIDName != "" && i < len(results) && results[i].UUID.GoUUID != "" {
			real[op.UUIDName] = results[i].UUID.GoUUID
		}
	}
	for _, ud := range batch {
		for _, ins := range ud.inserts {
			if len(d.reg.children[ins.t]) == 0 && len(d.reg.referrers[ins.t]) == 0 {
				continue
			}
			if u, ok := real[uuidOf(ins.m)]; ok {
				if r.committed == nil {
					r.committed = map[rowKey]string{}
				}
				r.committed[rowKey{ins.t.Name, ins.key}] = u
			}
		}
	}
}

// operationErrors checks a transaction's results. Each failed operation is
// named by its table and row, and a clash with a row of the same name that
// is not ours says so, rather than "1 ovsdb operations failed".
func operationErrors(results []ovsdb.OperationResult, ops []ovsdb.Operation) error {
	_, err := ovsdb.CheckOperationResults(results, ops)
	if err == nil {
		return nil
	}
	var errs []error
	for i, r := range results {
		if r.Error == "" {
			continue
		}
		if i >= len(ops) {
			// The commit itself failed: a name index refuses a row.
			if m := indexClash.FindStringSubmatch(r.Details); m != nil {
				errs = append(errs, fmt.Errorf("%s %s %s", m[1], m[2], notOurs))
			} else {
				errs = append(errs, fmt.Errorf("commit: %s: %s", r.Error, r.Details))
			}
			continue
		}
		op := ops[i]
		row := op.Table
		if name := opRowName(&op); name != "" {
			row += " " + name
		}
		clash := (op.Op == ovsdb.OperationInsert && r.Error == "constraint violation") ||
			(op.Op == ovsdb.OperationWait && op.Until == string(ovsdb.WaitConditionNotEqual))
		if clash {
			errs = append(errs, fmt.Errorf("%s %s", row, notOurs))
			continue
		}
		errs = append(errs, fmt.Errorf("%s: %s failed: %s: %s", row, op.Op, r.Error, r.Details))
	}
	if len(errs) == 0 {
		return err
	}
	return errors.Join(errs...)
}

const notOurs = "already exists in the NB and is not this kubevirt-ovn instance's row (no owner keys of ours): rename or remove that row"

// indexClash reads ovsdb-server's constraint violation of a unique index,
// e.g. `Transaction causes multiple rows in "Logical_Switch_Port" table to
// have identical values (kv-stor-net-a_router1) for index on column "name".`
var indexClash = regexp.MustCompile(`rows in "([^"]+)" table to have identical values \((.*?)\) for index on column "name"`)

// opRowName is the name of the row an operation inserts or selects.
func opRowName(op *ovsdb.Operation) string {
	if name, ok := op.Row["name"].(string); ok {
		return name
	}
	for _, r := range op.Rows {
		if name, ok := r["name"].(string); ok {
			return name
		}
	}
	for _, c := range op.Where {
		if name, ok := c.Value.(string); ok && c.Column == "name" {
			return name
		}
	}
	return ""
}
