package translator

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/ovn-kubernetes/libovsdb/client"
	"github.com/ovn-kubernetes/libovsdb/model"
	"github.com/ovn-kubernetes/libovsdb/ovsdb"

	"github.com/kubevirt-ovn/kubevirt-ovn/nbmodel"
)

// MaxBatchOps bounds the operations of one batched transaction of a full
// sync. A unit is never split: a unit with more operations commits alone.
const MaxBatchOps = 2000

// SyncOptions tune Sync.
type SyncOptions struct {
	// Instance is the managed-by value of our rows.
	Instance string
	// DryRun computes the changes and writes nothing.
	DryRun bool
	// BumpNBCfg increments NB_Global.nb_cfg in every transaction that writes,
	// so that NB_Global.hv_cfg reaching SyncResult.NBCfg says the chassis
	// have realized it (what ovn-nbctl --wait=hv does).
	BumpNBCfg bool
	// OnCommit observes every NB transaction: its duration and error.
	OnCommit func(took time.Duration, err error)
}

// UnitResult is what a sync did to one unit.
type UnitResult struct {
	Unit    Unit
	Changes []Change
	// Notes say what another tool added to the unit's rows: kubevirt-ovn
	// leaves it alone and does not treat it as its own.
	Notes []string
	// Err is why the unit's rows were left as they were: invalid input or a
	// failed transaction.
	Err error
}

// SyncResult is the outcome of a full sync.
type SyncResult struct {
	Units []UnitResult
	// Transactions and TxTime count the NB transactions committed.
	Transactions int
	TxTime       time.Duration
	// NBCfg is NB_Global.nb_cfg after the last transaction, with
	// BumpNBCfg; 0 when nothing was written.
	NBCfg int
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

// Sync brings every unit of plan to its desired rows and removes the rows of
// units no longer in the input. Units whose input is invalid keep their rows.
// Units are batched into few transactions; when a batch fails, its units are
// committed one by one so that one unit's failure leaves the others synced.
func Sync(ctx context.Context, c client.Client, plan *Plan, opts SyncOptions) (*SyncResult, error) {
	d := NewDiffer(ctx, c, instanceOf(opts))
	present, err := d.PresentUnits()
	if err != nil {
		return nil, fmt.Errorf("reading owned NB rows: %w", err)
	}
	units := slices.Clone(present)
	for _, n := range plan.Networks {
		units = append(units, Unit{Kind: KindNetwork, Name: n.Name})
	}
	for _, r := range plan.Routers {
		units = append(units, Unit{Kind: KindRouter, Name: r.Name})
	}
	for u := range plan.Failed {
		units = append(units, u)
	}
	return syncUnits(ctx, c, d, plan, units, opts)
}

// SyncUnits is Sync restricted to units: each is synced to plan, or has its
// rows removed when plan has no such unit, or is left as it is when plan
// says its input is invalid. A controller reconciles one unit this way.
func SyncUnits(ctx context.Context, c client.Client, plan *Plan, units []Unit, opts SyncOptions) (*SyncResult, error) {
	return syncUnits(ctx, c, NewDiffer(ctx, c, instanceOf(opts)), plan, units, opts)
}

func instanceOf(opts SyncOptions) string {
	if opts.Instance == "" {
		return DefaultInstance
	}
	return opts.Instance
}

func syncUnits(ctx context.Context, c client.Client, d *Differ, plan *Plan, units []Unit, opts SyncOptions) (*SyncResult, error) {
	res := &SyncResult{}
	units = slices.Clone(units)
	// Networks before routers (a router's ports hang from network
	// switches); among those, syncs before removals.
	networks := map[string]*NetworkPlan{}
	for i := range plan.Networks {
		networks[plan.Networks[i].Name] = &plan.Networks[i]
	}
	routers := map[string]*RouterPlan{}
	for i := range plan.Routers {
		routers[plan.Routers[i].Name] = &plan.Routers[i]
	}
	rank := func(u Unit) int {
		switch {
		case u.Kind == KindNetwork && networks[u.Name] != nil:
			return 0
		case u.Kind == KindRouter && routers[u.Name] != nil:
			return 1
		case u.Kind == KindRouter:
			return 2
		}
		return 3
	}
	slices.SortFunc(units, func(a, b Unit) int {
		if c := rank(a) - rank(b); c != 0 {
			return c
		}
		return compareUnits(a, b)
	})
	units = slices.Compact(units)

	var work []*UnitOps
	for _, u := range units {
		if errs := plan.Failed[u]; errs != nil {
			res.Units = append(res.Units, UnitResult{Unit: u, Err: errors.Join(errs...)})
			continue
		}
		var w *UnitOps
		var err error
		switch {
		case u.Kind == KindNetwork && networks[u.Name] != nil:
			w, err = d.Network(networks[u.Name])
		case u.Kind == KindRouter && routers[u.Name] != nil:
			w, err = d.Router(routers[u.Name])
		case u.Kind == KindRouter:
			w, err = d.DeleteRouter(u.Name)
		default:
			w, err = d.DeleteNetwork(u.Name)
		}
		if err != nil {
			return nil, err
		}
		work = append(work, w)
	}

	results := make([]UnitResult, len(work))
	for i, w := range work {
		results[i] = UnitResult{Unit: w.Unit, Changes: w.Changes, Notes: w.Notes}
	}
	if !opts.DryRun {
		for start := 0; start < len(work); {
			end, n := start, 0
			for end < len(work) && (end == start || n+len(work[end].Ops) <= MaxBatchOps) {
				n += len(work[end].Ops)
				end++
			}
			batch := work[start:end]
			err := ctx.Err()
			if err == nil {
				err = res.commitBatch(ctx, c, batch, opts)
			}
			switch {
			case err == nil:
			case ctx.Err() != nil || errors.Is(err, ErrNotConnected) || len(batch) == 1:
				// Stopped, or the NB is gone: the batch may or may not have
				// committed, and sending it again unit by unit could write
				// twice. The next sync reads what the NB holds.
				for i := range batch {
					results[start+i].Err = err
					results[start+i].Changes = nil
				}
			default:
				// The NB refused the batch: isolate the failure, each unit
				// alone.
				for i, w := range batch {
					if err := res.commitBatch(ctx, c, []*UnitOps{w}, opts); err != nil {
						results[start+i].Err = err
						results[start+i].Changes = nil
					}
				}
			}
			start = end
		}
	}
	for _, r := range results {
		if len(r.Changes) > 0 || r.Err != nil || len(r.Notes) > 0 {
			res.Units = append(res.Units, r)
		}
	}
	return res, nil
}

func (r *SyncResult) commitBatch(ctx context.Context, c client.Client, batch []*UnitOps, opts SyncOptions) error {
	var ops []ovsdb.Operation
	var names []string
	for _, w := range batch {
		ops = append(ops, w.Ops...)
		names = append(names, w.Unit.String())
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
	d, err := Commit(ctx, c, strings.Join(names, ", "), ops)
	r.TxTime += d
	if opts.OnCommit != nil {
		opts.OnCommit(d, err)
	}
	if err != nil {
		return err
	}
	r.Transactions++
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
	if !Connected(c) {
		return 0, fmt.Errorf("%s: NB transaction not sent: %w", what, ErrNotConnected)
	}
	start := time.Now()
	results, err := c.Transact(ctx, ops...)
	took := time.Since(start)
	if err != nil && ctx.Err() == nil && connectionLost(err) {
		return took, fmt.Errorf("%s: NB transaction cut by a lost connection (%v), it may or may not have been committed: %w", what, err, ErrNotConnected)
	}
	if err == nil {
		err = operationErrors(results, ops)
	}
	if err != nil {
		return took, fmt.Errorf("%s: NB transaction failed: %w", what, err)
	}
	return took, nil
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
