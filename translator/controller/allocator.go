package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

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
	// KeyCollisions are the tunnel key collisions the zones' agents
	// found in their SBs (each marked with its zone).
	KeyCollisions() []translator.KeyMismatch
	// Units are the units that have an allocation.
	Units() []translator.Unit
	HasSynced() bool
}

// Allocator is kubevirt-ovn's leader in a cluster whose OVN has one NB per
// zone: it plans every unit over every zone, as a central controller
// would, but writes no NB. It records each unit's decisions (gateway
// order, tunnel keys) in an AllocationStore, from which every zone's agent
// (NewZoneAgent) writes its NB, and reports router status, with the
// tunnel key collisions the agents publish when status is a KeyStatus.
type Allocator struct {
	source Source
	input  *translator.Input
	store  AllocationStore
	status Status
	opts   Options
	queue  workqueue.TypedRateLimitingInterface[translator.Unit]
	// primaries say when a router's primary gateway changed.
	primaries primaries

	mu sync.Mutex
	// zoneKeys are the zones whose foreign keys the input has.
	zoneKeys map[string]bool
	// collisions are the zones' tunnel key collisions, by network;
	// attached are the networks each router's switch ports are on (from
	// its last plan); keysReported are the collisions last reported per
	// router (an entry, maybe empty, once reported by this process).
	collisions   map[string][]translator.KeyMismatch
	attached     map[string][]string
	keysReported map[string][]translator.KeyMismatch
}

// NewAllocator returns an allocator; Run starts it. status may be nil.
func NewAllocator(source Source, store AllocationStore, status Status, opts Options) *Allocator {
	opts = opts.withDefaults()
	return &Allocator{source: source, input: source.Input(), store: store, status: status, opts: opts,
		queue:      newUnitQueue("allocations"),
		zoneKeys:   map[string]bool{},
		collisions: map[string][]translator.KeyMismatch{}, attached: map[string][]string{}, keysReported: map[string][]translator.KeyMismatch{}}
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
// changes; and the zones' tunnel key collisions, enqueueing the routers
// attached to a network whose collisions changed.
func (a *Allocator) ChassisChanged() {
	a.EnqueueUnits(a.input.SetChassis(a.store.Chassis(), true))
	a.collisionsChanged()
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

// collisionsChanged reads the zones' tunnel key collisions and enqueues
// the routers attached to a network whose collisions changed.
func (a *Allocator) collisionsChanged() {
	byNetwork := map[string][]translator.KeyMismatch{}
	for _, m := range a.store.KeyCollisions() {
		byNetwork[m.Network] = append(byNetwork[m.Network], m)
	}
	a.mu.Lock()
	changed := map[string]bool{}
	for n, ms := range byNetwork {
		if !slices.Equal(ms, a.collisions[n]) {
			changed[n] = true
		}
	}
	for n := range a.collisions {
		if _, ok := byNetwork[n]; !ok {
			changed[n] = true
		}
	}
	a.collisions = byNetwork
	var routers []translator.Unit
	for r, networks := range a.attached {
		if slices.ContainsFunc(networks, func(n string) bool { return changed[n] }) {
			routers = append(routers, translator.Unit{Kind: translator.KindRouter, Name: r})
		}
	}
	a.mu.Unlock()
	a.EnqueueUnits(routers)
}

// reportKeys shows on router (KeyStatus: its TunnelKeys condition and an
// Event per new collision) the tunnel key collisions the zones' agents
// published on the networks its switch ports are on (rp's; the last
// planned ones when rp is nil), writing only when they changed since the
// last report. A router's first report in this process is always written,
// so that a condition a previous leader left is cleared.
func (a *Allocator) reportKeys(ctx context.Context, router string, rp *translator.RouterPlan) error {
	ks, ok := a.status.(KeyStatus)
	if !ok {
		return nil
	}
	a.mu.Lock()
	if rp != nil {
		var networks []string
		for _, sp := range rp.SwitchPorts {
			if !slices.Contains(networks, sp.Network) {
				networks = append(networks, sp.Network)
			}
		}
		slices.Sort(networks)
		a.attached[router] = networks
	}
	var ms []translator.KeyMismatch
	for _, n := range a.attached[router] {
		ms = append(ms, a.collisions[n]...)
	}
	slices.SortStableFunc(ms, func(x, y translator.KeyMismatch) int { return strings.Compare(x.Zone, y.Zone) })
	last, reported := a.keysReported[router]
	a.mu.Unlock()
	if reported && slices.Equal(ms, last) {
		return nil
	}
	// One reporter for every zone: the collisions carry their zones.
	if err := ks.TunnelKeys(ctx, router, "", ms); err != nil {
		return fmt.Errorf("VirtualRouter %s: reporting tunnel key collisions: %w", router, err)
	}
	a.mu.Lock()
	a.keysReported[router] = ms
	a.mu.Unlock()
	return nil
}

// forgetKeys forgets a router that is gone.
func (a *Allocator) forgetKeys(ctx context.Context, router string) {
	a.mu.Lock()
	_, reported := a.keysReported[router]
	delete(a.attached, router)
	delete(a.keysReported, router)
	a.mu.Unlock()
	if ks, ok := a.status.(KeyStatus); ok && reported {
		_ = ks.TunnelKeys(ctx, router, "", nil) // the router is gone: nothing to write
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
	a.EnqueueUnits(up.Affected)
	if up.Network != nil {
		for _, n := range up.Network.KeyNotes {
			a.opts.Log.Info("tunnel key moved", "kind", u.Kind, "name", u.Name, "note", n)
		}
	}
	if !up.InInput {
		if err := a.store.Apply(ctx, u, nil); err != nil {
			return err
		}
		if a.status != nil && len(up.FloatingIPs) > 0 {
			if err := a.status.ReportFloatingIPs(ctx, up.FloatingIPs); err != nil {
				return err
			}
		}
		a.primaries.forget(u.Name)
		if u.Kind == translator.KindRouter {
			a.forgetKeys(ctx, u.Name)
		}
		return nil
	}
	var err error
	if alloc := up.Allocation(); alloc != nil {
		err = a.store.Apply(ctx, u, alloc)
	}
	if u.Kind == translator.KindSecurityGroup && a.status != nil {
		if rerr := a.status.ReportSecurityGroup(ctx, securityGroupStatus(up, err)); rerr != nil {
			return rerr
		}
		return err
	}
	if u.Kind == translator.KindNetwork && a.status != nil && len(up.LoadBalancers) > 0 {
		// The load balancers of a network that no router has.
		if rerr := a.status.ReportLoadBalancers(ctx, loadBalancerStatus(up.LoadBalancers, err)); rerr != nil {
			return rerr
		}
	}
	if u.Kind != translator.KindRouter || a.status == nil {
		return err
	}
	st := statusOf(up, err)
	a.primaries.note(u.Name, &st)
	if rerr := a.status.Report(ctx, u.Name, st); rerr != nil {
		return rerr
	}
	if rerr := a.status.ReportFloatingIPs(ctx, floatingIPStatus(up.FloatingIPs, "", err)); rerr != nil {
		return rerr
	}
	if rerr := a.status.ReportLoadBalancers(ctx, loadBalancerStatus(up.LoadBalancers, err)); rerr != nil {
		return rerr
	}
	if kerr := a.reportKeys(ctx, u.Name, up.Router); kerr != nil {
		return kerr
	}
	return st.Err
}

// ChassisChanged reads the chassis again (from where the controller takes
// them) and enqueues the units that changes, soon after: a burst of
// changes is read once. A zone agent hears of every zone's change (its
// OVNZone), and at its start the informer lists every zone's at once:
// one refresh each, of every unit, was a square in the cluster's zones.
func (c *Controller) ChassisChanged(ctx context.Context) {
	if !c.chassisDirty.CompareAndSwap(false, true) {
		return // the refresh due reads this change as well
	}
	go func() {
		c.chassisMu.Lock()
		defer c.chassisMu.Unlock()
		// A change from here on is read by another refresh.
		c.chassisDirty.Store(false)
		c.refreshChassisLocked(ctx)
	}()
}
