package syncer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ovn-kubernetes/libovsdb/client"

	"github.com/kubevirt-ovn/kubevirt-ovn/translator"
	kvnb "github.com/kubevirt-ovn/kubevirt-ovn/translator/nb"
)

// reconnectPoll is how often a sync that lost the NB looks whether the
// client has reconnected.
const reconnectPoll = 50 * time.Millisecond

// SurvivingReconnects syncs plan into nb and, when units failed because
// the NB connection was lost, waits for the reconnection (until ctx ends)
// and syncs again from what the NB holds (read reads it again); after a
// reconnection it syncs once more, so that whatever a transaction cut by
// the loss committed is seen and reconciled. The result merges every
// pass: each unit's changes of all passes and its last error. When ctx
// ends while the NB is away, the units not synced keep their error. note
// (may be nil) hears of the loss and the reconnection.
func SurvivingReconnects(ctx context.Context, nb client.Client, read func(context.Context) error, plan *translator.Plan, opts kvnb.SyncOptions, note func(string)) (*kvnb.SyncResult, error) {
	say := func(format string, args ...any) {
		if note != nil {
			note(fmt.Sprintf(format, args...))
		}
	}
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
		res, err := within(ctx, nb, plan, opts)
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
		say("lost the NB connection during pass %d with %d unit(s) not synced; waiting for it to come back", pass, lost)
		for !kvnb.Connected(nb) {
			select {
			case <-ctx.Done():
				say("the NB did not come back before --timeout")
				return merged, nil
			case <-time.After(reconnectPoll):
			}
		}
		say("reconnected to the NB at %s; syncing again from what it holds", nb.CurrentEndpoint())
		reconnected, settled = true, false
	}
}

// within is kvnb.Sync bounded by ctx: the diff reads libovsdb's cache,
// which blocks while the connection is down, without a deadline.
func within(ctx context.Context, nb client.Client, plan *translator.Plan, opts kvnb.SyncOptions) (*kvnb.SyncResult, error) {
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
		return nil, timeoutError(nb, ctx.Err())
	}
}

// timeoutError is a sync's error at its deadline (err): whether the NB
// was away, or connected and the sync itself took too long (a busy server
// or machine).
func timeoutError(nb client.Client, err error) error {
	if kvnb.Connected(nb) {
		return fmt.Errorf("not done before --timeout, the NB connection up: %w", err)
	}
	return fmt.Errorf("the NB connection did not come back before --timeout: %w", err)
}
