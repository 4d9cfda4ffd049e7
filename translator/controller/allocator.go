package controller

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/ovn-kubernetes/libovsdb/client"
	"k8s.io/client-go/util/workqueue"

	"github.com/kubevirt-ovn/kubevirt-ovn/translator"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/ovn"
)

// AllocationStore is where an allocator records its decisions and reads
// the zones' chassis (the Kubernetes API: kube.Store). As a Held it says
// what was decided before, which the allocator adopts (also after a
// restart or a change of leader).
type AllocationStore interface {
	translator.Held
	// Apply records unit u's allocation; nil removes it.
	Apply(ctx context.Context, u translator.Unit, a *translator.Allocation) error
	// Chassis are every zone's chassis, marked with their zone.
	Chassis() []translator.Chassis
	// ForeignKeys are the datapath keys rows not ours request in each
	// zone's NB (as its agent reads them), by zone.
	ForeignKeys() map[string][]translator.ForeignKey
	// Units are the units that have an allocation.
	Units() []translator.Unit
	HasSynced() bool
}

// Allocator is kubevirt-ovn's leader in a cluster whose OVN has one NB per
// zone: it plans every unit over every zone, as a central controller
// would, but writes no NB. It records each unit's decisions (gateway
// order, tunnel keys) in an AllocationStore, from which every zone's agent
// (NewZoneAgent) writes its NB, and reports router status.
type Allocator struct {
	source Source
	input  *translator.Input
	store  AllocationStore
	status Status
	opts   Options
	queue  workqueue.TypedRateLimitingInterface[translator.Unit]

	mu      sync.Mutex
	primary map[string]string // last primary reported per router
	// zoneKeys are the zones whose foreign keys the input has.
	zoneKeys map[string]bool
}

// NewAllocator returns an allocator; Run starts it. status may be nil.
func NewAllocator(source Source, store AllocationStore, status Status, opts Options) *Allocator {
	opts = opts.withDefaults()
	return &Allocator{source: source, input: source.Input(), store: store, status: status, opts: opts,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[translator.Unit](),
			workqueue.TypedRateLimitingQueueConfig[translator.Unit]{Name: "allocations"}),
		primary: map[string]string{}, zoneKeys: map[string]bool{}}
}

// EnqueueUnits schedules units; a source calls it with what
// translator.Input.Set returned, the store with a unit whose allocation
// changed.
func (a *Allocator) EnqueueUnits(units []translator.Unit) {
	for _, u := range units {
		a.queue.Add(u)
	}
}

// ChassisChanged reads the zones' chassis, and the keys other tools' rows
// request in their NBs, into the input and enqueues the units that
// changes.
func (a *Allocator) ChassisChanged() {
	a.EnqueueUnits(a.input.SetChassis(a.store.Chassis(), true))
	a.mu.Lock()
	defer a.mu.Unlock()
	keys := a.store.ForeignKeys()
	for zone := range a.zoneKeys {
		if _, ok := keys[zone]; !ok {
			a.EnqueueUnits(a.input.SetForeignKeys(ovn.ZoneKeysSource(zone), nil))
			delete(a.zoneKeys, zone)
		}
	}
	for zone, k := range keys {
		a.EnqueueUnits(a.input.SetForeignKeys(ovn.ZoneKeysSource(zone), k))
		a.zoneKeys[zone] = true
	}
}

// Run allocates until ctx ends, once the source and the store have
// synced. Like Controller.Run, it returns once the reconciles in progress
// have returned.
func (a *Allocator) Run(ctx context.Context) error {
	defer a.queue.ShutDown()
	for !a.source.HasSynced() || !a.store.HasSynced() {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(50 * time.Millisecond):
		}
	}
	a.ChassisChanged()
	all := func() {
		a.EnqueueUnits(a.input.Units())
		a.EnqueueUnits(a.store.Units())
	}
	all()
	a.opts.Log.Info("allocator started", "workers", a.opts.Workers)
	runWorkers(ctx, a.queue, a.opts, a.processNext, all)
	return nil
}

func (a *Allocator) processNext(ctx context.Context) bool {
	u, quit := a.queue.Get()
	if quit {
		return false
	}
	defer a.queue.Done(u)
	if ctx.Err() != nil {
		return false
	}
	err := a.reconcile(ctx, u)
	if ctx.Err() != nil {
		return false
	}
	retryOrForget(a.queue, a.opts.Log, "allocation", u, err)
	return true
}

// reconcile records unit u's allocation and reports a router's status. A
// unit whose input is invalid keeps its allocation, as its rows stay.
func (a *Allocator) reconcile(ctx context.Context, u translator.Unit) error {
	up := a.input.Plan(u, a.opts.Instance, a.store)
	if up.Network != nil {
		for _, n := range up.Network.KeyNotes {
			a.opts.Log.Info("tunnel key moved", "kind", u.Kind, "name", u.Name, "note", n)
		}
	}
	if !up.InInput {
		if err := a.store.Apply(ctx, u, nil); err != nil {
			return err
		}
		a.mu.Lock()
		delete(a.primary, u.Name)
		a.mu.Unlock()
		return nil
	}
	var err error
	if alloc := up.Allocation(); alloc != nil {
		err = a.store.Apply(ctx, u, alloc)
	}
	if u.Kind != translator.KindRouter || a.status == nil {
		return err
	}
	st := RouterStatus{Generation: up.Generation}
	if len(up.Errs) > 0 {
		st.Err = errors.Join(up.Errs...)
	} else {
		st.Err = err
	}
	if rp := up.Router; rp != nil {
		st.SNATIP = rp.SNATIP
		if rp.Gateway != nil {
			st.Gateway = slices.Clone(rp.Gateway.Chassis)
		}
	}
	if len(st.Gateway) > 0 {
		a.mu.Lock()
		prev, ok := a.primary[u.Name]
		st.GatewayChanged = ok && prev != st.Gateway[0]
		a.primary[u.Name] = st.Gateway[0]
		a.mu.Unlock()
	}
	if rerr := a.status.Report(ctx, u.Name, st); rerr != nil {
		return rerr
	}
	return st.Err
}

// NewZoneAgent returns the controller of one zone in a cluster whose OVN
// has one NB per zone: it writes zone's NB (nbc) and binds remote ports in
// its SB (sbc), following the allocator's decisions in store (gateway
// orders, tunnel keys) and taking every zone's chassis from it. It reports
// no status: the allocator does.
func NewZoneAgent(nbc, sbc client.Client, zone string, source Source, store interface {
	translator.Held
	Chassis() []translator.Chassis
}, opts Options) *Controller {
	source.Input().SetFollower(true)
	c := New(nbc, sbc, source, nil, opts)
	c.zone = zone
	c.planHeld = translator.ZonesHeld{store, c.held}
	c.chassisFrom = store.Chassis
	return c
}

// ChassisChanged reads the chassis again (from where the controller takes
// them) and enqueues the units that changes.
func (c *Controller) ChassisChanged(ctx context.Context) { c.refreshChassis(ctx) }
