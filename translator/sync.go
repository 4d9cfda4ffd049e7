package translator

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ovn-kubernetes/libovsdb/client"
	"github.com/ovn-kubernetes/libovsdb/ovsdb"
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
}

// UnitResult is what a sync did to one unit.
type UnitResult struct {
	Unit    Unit
	Changes []Change
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
	if opts.Instance == "" {
		opts.Instance = DefaultInstance
	}
	d := NewDiffer(c, opts.Instance)
	res := &SyncResult{}

	present, err := d.PresentUnits()
	if err != nil {
		return nil, fmt.Errorf("reading owned NB rows: %w", err)
	}
	planned := map[Unit]bool{}
	for _, n := range plan.Networks {
		planned[Unit{Kind: KindNetwork, Name: n.Name}] = true
	}
	for _, r := range plan.Routers {
		planned[Unit{Kind: KindRouter, Name: r.Name}] = true
	}

	// Networks before routers (a router's ports hang from network
	// switches), router removals before network removals.
	var work []*UnitOps
	addWork := func(u *UnitOps, err error) error {
		if err != nil {
			return err
		}
		work = append(work, u)
		return nil
	}
	for i := range plan.Networks {
		if err := addWork(d.Network(&plan.Networks[i])); err != nil {
			return nil, err
		}
	}
	for i := range plan.Routers {
		if err := addWork(d.Router(&plan.Routers[i])); err != nil {
			return nil, err
		}
	}
	for _, kind := range []OwnerKind{KindRouter, KindNetwork} {
		for _, u := range present {
			if u.Kind != kind || planned[u] || plan.Failed[u] != nil {
				continue
			}
			var err error
			if kind == KindRouter {
				err = addWork(d.DeleteRouter(u.Name))
			} else {
				err = addWork(d.DeleteNetwork(u.Name))
			}
			if err != nil {
				return nil, err
			}
		}
	}

	failed := slices.Collect(func(yield func(Unit) bool) {
		for u := range plan.Failed {
			if !yield(u) {
				return
			}
		}
	})
	slices.SortFunc(failed, compareUnits)
	for _, u := range failed {
		res.Units = append(res.Units, UnitResult{Unit: u, Err: errors.Join(plan.Failed[u]...)})
	}

	results := make([]UnitResult, len(work))
	for i, w := range work {
		results[i] = UnitResult{Unit: w.Unit, Changes: w.Changes}
	}
	if !opts.DryRun {
		for start := 0; start < len(work); {
			end, n := start, 0
			for end < len(work) && (end == start || n+len(work[end].Ops) <= MaxBatchOps) {
				n += len(work[end].Ops)
				end++
			}
			batch := work[start:end]
			if err := res.commitBatch(ctx, c, batch); err != nil {
				// Isolate the failure: each unit alone.
				for i, w := range batch {
					if err := res.commitBatch(ctx, c, []*UnitOps{w}); err != nil {
						results[start+i].Err = err
						results[start+i].Changes = nil
					}
				}
			}
			start = end
		}
	}
	for _, r := range results {
		if len(r.Changes) > 0 || r.Err != nil {
			res.Units = append(res.Units, r)
		}
	}
	return res, nil
}

func (r *SyncResult) commitBatch(ctx context.Context, c client.Client, batch []*UnitOps) error {
	var ops []ovsdb.Operation
	var names []string
	for _, w := range batch {
		ops = append(ops, w.Ops...)
		names = append(names, w.Unit.String())
	}
	if len(ops) == 0 {
		return nil
	}
	d, err := Commit(ctx, c, strings.Join(names, ", "), ops)
	r.TxTime += d
	if err == nil {
		r.Transactions++
	}
	return err
}

// Commit is the one place kubevirt-ovn writes to the NB: it runs ops in one
// transaction, checks every operation's result, and returns how long the
// transaction took. Its error names what was being written.
func Commit(ctx context.Context, c client.Client, what string, ops []ovsdb.Operation) (time.Duration, error) {
	start := time.Now()
	results, err := c.Transact(ctx, ops...)
	if err == nil {
		_, err = ovsdb.CheckOperationResults(results, ops)
	}
	took := time.Since(start)
	if err != nil {
		return took, fmt.Errorf("%s: NB transaction failed: %w", what, err)
	}
	return took, nil
}
