package ovn

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"strings"
	"sync"
	"weak"

	"github.com/ovn-kubernetes/libovsdb/cache"
	"github.com/ovn-kubernetes/libovsdb/client"
	"github.com/ovn-kubernetes/libovsdb/model"
	"github.com/ovn-kubernetes/libovsdb/ovsdb"

	"github.com/kubevirt-ovn/kubevirt-ovn/nbmodel/sbmodel"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/nb"
)

// The types of the SB Port_Bindings ConnectSB monitors. RedirectPortType:
// a gateway port's chassisredirect port (cr-<port>), bound where the port
// is active. RemotePortType: a logical switch port (and its binding) that
// stands for a port living in another interconnect zone.
const (
	RedirectPortType = "chassisredirect"
	RemotePortType   = "remote"
)

// BindRemotePorts binds, in a zone's SB, each remote port of want (logical
// port -> name of the chassis that hosts it, a remote Chassis row of this
// SB) to that chassis: it sets the Port_Binding's chassis, as the CMS must
// before OVN 23.09 (from 23.09 ovn-northd binds a remote port to its
// options:requested-chassis itself, and then this finds it bound and writes
// nothing). A normal port (a live migration's target zone has the
// migrating port bound to its source, a remote chassis, and to its
// target) is bound to its main chassis alike when that is a remote one,
// as ovn-northd does itself from OVN 24.03.6 / 24.09.3 / 25.03; a main
// chassis of this zone is left to its ovn-controller. It reads sb's cache (ConnectSB's monitor) and writes every
// binding in one transaction, none when all are bound already; it does not
// wait.
//
// A port is pending, and left as it is, while its binding cannot be
// written yet: no Port_Binding of type remote (northd has not created it,
// or the port is not remote in this zone's NB), no chassis of that name in
// the SB, a Port_Binding whose requested_chassis (northd's reading of the
// NB's options:requested-chassis) is another chassis, or a binding or
// chassis that changed between the read and the commit. Each update is
// conditioned on the Port_Binding being the one read (its _uuid, still
// type remote, still bound where it was), so a binding another writer
// changed meanwhile is not overwritten from a stale read; the transaction
// also waits on each chassis row being the one read, so no port is bound
// to a chassis row deleted meanwhile. WaitRemotePorts binds again when the
// cache changes until nothing is pending.
//
// pending is sorted; err is a cache read or transaction failure (errors.Is
// client.ErrNotConnected when the SB connection is down or was lost: call
// again once it is back).
func BindRemotePorts(ctx context.Context, sb client.Client, want map[string]string) (pending []string, err error) {
	why, err := bindRemotePorts(ctx, sb, want)
	return slices.Sorted(maps.Keys(why)), err
}

// bindRemotePorts is BindRemotePorts, with why each pending port is.
func bindRemotePorts(ctx context.Context, sb client.Client, want map[string]string) (map[string]string, error) {
	pending := map[string]string{}
	var ops []ovsdb.Operation
	// opPort[i] is the port ops[i] binds, "" for a wait on a chassis.
	var opPort []string
	waited := map[string]bool{}
	for _, port := range slices.Sorted(maps.Keys(want)) {
		name := want[port]
		pb := &sbmodel.PortBinding{LogicalPort: port}
		if err := sb.Get(ctx, pb); errors.Is(err, client.ErrNotFound) {
			pending[port] = "no Port_Binding of type remote yet (northd has not created it, or the port is not remote in this zone's NB)"
			continue
		} else if err != nil {
			return nil, fmt.Errorf("reading the SB Port_Binding of %s: %w", port, err)
		}
		if pb.Type != RemotePortType && pb.Type != "" {
			pending[port] = fmt.Sprintf("its Port_Binding is of type %q, not %s", pb.Type, RemotePortType)
			continue
		}
		ch := &sbmodel.Chassis{Name: name}
		if err := sb.Get(ctx, ch); errors.Is(err, client.ErrNotFound) {
			pending[port] = fmt.Sprintf("no chassis named %s in the SB", name)
			continue
		} else if err != nil {
			return nil, fmt.Errorf("reading the SB chassis %s: %w", name, err)
		}
		if pb.Type == "" && ch.OtherConfig["is-remote"] != "true" {
			// A port bound to two chassis whose main one is this
			// zone's: its ovn-controller binds it.
			continue
		}
		if pb.RequestedChassis != nil && *pb.RequestedChassis != ch.UUID {
			pending[port] = fmt.Sprintf("its Port_Binding requests another chassis (%s), not %s", chassisName(ctx, sb, *pb.RequestedChassis), name)
			continue
		}
		if pb.Chassis != nil && *pb.Chassis == ch.UUID {
			continue
		}
		if !waited[ch.UUID] {
			waited[ch.UUID] = true
			ops = append(ops, sameChassis(ch))
			opPort = append(opPort, "")
		}
		ops = append(ops, bindOp(pb, ch.UUID))
		opPort = append(opPort, port)
	}
	if len(ops) == 0 {
		return pending, nil
	}
	results, err := transactSB(ctx, sb, ops)
	if err != nil {
		return nil, fmt.Errorf("binding %d remote ports in the SB: %w", len(ops)-len(waited), err)
	}
	for i, r := range results {
		if i < len(ops) && opPort[i] == "" && r.Error == "timed out" {
			// A chassis row is gone or renamed: nothing was committed.
			for _, p := range opPort {
				if p != "" && want[p] == chassisOfWait(ops[i]) {
					pending[p] = fmt.Sprintf("not bound: chassis %s changed in the SB meanwhile", want[p])
				} else if p != "" {
					pending[p] = fmt.Sprintf("not bound: the transaction failed on chassis %s, which changed in the SB meanwhile", chassisOfWait(ops[i]))
				}
			}
			return pending, nil
		}
	}
	if errs, err := ovsdb.CheckOperationResults(results, ops); err != nil {
		for _, e := range errs {
			err = fmt.Errorf("%w; %s on %s", err, e.Error(), e.Operation().Table)
		}
		return nil, fmt.Errorf("binding %d remote ports in the SB: %w", len(ops)-len(waited), err)
	}
	for i, r := range results[:len(ops)] {
		if opPort[i] != "" && r.Count == 0 {
			pending[opPort[i]] = "not bound: its Port_Binding changed in the SB meanwhile"
		}
	}
	return pending, nil
}

// sameChassis is a wait, which fails the transaction unless ch's row is
// still there under its name.
func sameChassis(ch *sbmodel.Chassis) ovsdb.Operation {
	zero := 0
	return ovsdb.Operation{
		Op: ovsdb.OperationWait, Table: sbmodel.ChassisTable, Timeout: &zero,
		Where:   []ovsdb.Condition{{Column: "_uuid", Function: ovsdb.ConditionEqual, Value: ovsdb.UUID{GoUUID: ch.UUID}}},
		Columns: []string{"name"}, Until: string(ovsdb.WaitConditionEqual), Rows: []ovsdb.Row{{"name": ch.Name}},
	}
}

func chassisOfWait(op ovsdb.Operation) string {
	if len(op.Rows) == 1 {
		if n, ok := op.Rows[0]["name"].(string); ok {
			return n
		}
	}
	return "?"
}

// bindOp binds pb to the chassis row chassis, if pb is still the row read:
// the same _uuid, type and binding.
func bindOp(pb *sbmodel.PortBinding, chassis string) ovsdb.Operation {
	was := ovsdb.OvsSet{GoSet: []any{}}
	if pb.Chassis != nil {
		was = ovsdb.OvsSet{GoSet: []any{ovsdb.UUID{GoUUID: *pb.Chassis}}}
	}
	return ovsdb.Operation{
		Op: ovsdb.OperationUpdate, Table: sbmodel.PortBindingTable,
		Where: []ovsdb.Condition{
			{Column: "_uuid", Function: ovsdb.ConditionEqual, Value: ovsdb.UUID{GoUUID: pb.UUID}},
			{Column: "type", Function: ovsdb.ConditionEqual, Value: pb.Type},
			{Column: "chassis", Function: ovsdb.ConditionEqual, Value: was},
		},
		Row: ovsdb.Row{"chassis": ovsdb.OvsSet{GoSet: []any{ovsdb.UUID{GoUUID: chassis}}}},
	}
}

// chassisName is the name of the chassis row uuid in sb's cache, or uuid.
func chassisName(ctx context.Context, sb client.Client, uuid string) string {
	ch := &sbmodel.Chassis{UUID: uuid}
	if err := sb.Get(ctx, ch); err != nil {
		return uuid
	}
	return ch.Name
}

// transactSB sends ops to the SB in one transaction. Like nb.Commit, it
// sends nothing when ctx has ended or the SB is disconnected (the ops come
// from a cache a reconnection replaces), and marks a transaction cut by a
// lost connection with client.ErrNotConnected; the results are returned
// for the caller to check (a conditional update may match no row).
func transactSB(ctx context.Context, sb client.Client, ops []ovsdb.Operation) ([]ovsdb.OperationResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("SB transaction not sent: %w", err)
	}
	if !nb.Connected(sb) {
		return nil, fmt.Errorf("SB transaction not sent: %w", client.ErrNotConnected)
	}
	results, err := sb.Transact(ctx, ops...)
	if err != nil && ctx.Err() == nil && nb.ConnectionLost(err) {
		return nil, fmt.Errorf("SB transaction cut by a lost connection (%v), it may or may not have been committed: %w", err, client.ErrNotConnected)
	}
	if err != nil {
		return nil, fmt.Errorf("SB transaction failed: %w", err)
	}
	return results, nil
}

// WaitRemotePorts binds want's remote ports as BindRemotePorts does, again
// each time sb's cache changes (a Port_Binding created by northd, a chassis
// added, a reconnection re-filling the cache), until none is pending or ctx
// ends. Its error on ctx's end names each pending port and why; a failure
// other than a lost SB connection is returned at once.
func WaitRemotePorts(ctx context.Context, sb client.Client, want map[string]string) error {
	return waitRemotePorts(ctx, sb, want, nil)
}

// waitRemotePorts is WaitRemotePorts; onPass, when not nil, is called
// with the pending ports after each pass that leaves some.
func waitRemotePorts(ctx context.Context, sb client.Client, want map[string]string, onPass func(map[string]string)) error {
	changed, stop := watchCache(sb.Cache())
	defer stop()
	var pending map[string]string
	var lost error
	for {
		why, err := bindRemotePorts(ctx, sb, want)
		if err == nil && len(why) > 0 && onPass != nil {
			onPass(why)
		}
		switch {
		case err == nil && len(why) == 0:
			return nil
		case err == nil:
			pending, lost = why, nil
		case ctx.Err() != nil:
			return waitError(ctx, want, pending, err)
		case errors.Is(err, client.ErrNotConnected):
			// The reconnection re-fills the cache: bind again then.
			lost = err
		default:
			return err
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return waitError(ctx, want, pending, lost)
		}
	}
}

func waitError(ctx context.Context, want, pending map[string]string, lost error) error {
	msg := "remote ports not bound to their chassis in the SB"
	if len(pending) > 0 {
		var parts []string
		for _, p := range slices.Sorted(maps.Keys(pending)) {
			parts = append(parts, fmt.Sprintf("%s -> %s: %s", p, want[p], pending[p]))
		}
		msg = fmt.Sprintf("%d %s (%s)", len(pending), msg, strings.Join(parts, "; "))
	}
	if lost != nil {
		msg += ", the last try failed: " + lost.Error()
	}
	return fmt.Errorf("%s: %w", msg, context.Cause(ctx))
}

// cacheWatchers fans a cache's events out to the waiters subscribed now.
// libovsdb cannot remove an event handler: each cache gets one handler,
// registered on the first watch, and waiters come and go.
type cacheWatchers struct {
	mu   sync.Mutex
	subs map[chan struct{}]struct{}
}

func (w *cacheWatchers) notify() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for ch := range w.subs {
		select {
		case ch <- struct{}{}:
		default: // a change is pending already: it will read the cache anew.
		}
	}
}

// watchers holds the cacheWatchers of each cache, weakly: a closed client's
// cache is collected and its entry deleted.
var watchers sync.Map // weak.Pointer[cache.TableCache] -> *cacheWatchers

// watchCache returns a channel that receives (coalesced) after each event
// of c from now on, and the function that stops it.
func watchCache(c *cache.TableCache) (<-chan struct{}, func()) {
	key := weak.Make(c)
	v, loaded := watchers.LoadOrStore(key, &cacheWatchers{subs: map[chan struct{}]struct{}{}})
	w := v.(*cacheWatchers)
	if !loaded {
		c.AddEventHandler(&cache.EventHandlerFuncs{
			AddFunc:    func(string, model.Model) { w.notify() },
			UpdateFunc: func(string, model.Model, model.Model) { w.notify() },
			DeleteFunc: func(string, model.Model) { w.notify() },
		})
		runtime.AddCleanup(c, func(k weak.Pointer[cache.TableCache]) { watchers.Delete(k) }, key)
	}
	ch := make(chan struct{}, 1)
	w.mu.Lock()
	w.subs[ch] = struct{}{}
	w.mu.Unlock()
	return ch, func() {
		w.mu.Lock()
		delete(w.subs, ch)
		w.mu.Unlock()
	}
}
