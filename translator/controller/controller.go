// Package controller runs the translator continuously, sample-controller
// style: events from the input source, from the rows we own in the NB and
// from the SB chassis enqueue the units (routers, networks, security
// groups) they affect on a rate-limited workqueue; a worker reconciles
// every unit queued (an event's units, or a batch of a start or a resync)
// from the current input, committed together as a sync commits (take).
// Level-triggered: a
// reconcile computes the unit's whole desired state, so restarts, missed
// events and drift heal.
//
// Networks come before routers: a router whose networks' switches are not in
// the NB yet is parked, not failed, and enqueued again once they are. When
// the context ends (SIGTERM, or the leader election Lease lost) no new
// reconcile starts: only transactions already in flight complete.
package controller

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/ovn-kubernetes/libovsdb/cache"
	"github.com/ovn-kubernetes/libovsdb/client"
	"github.com/ovn-kubernetes/libovsdb/model"
	"github.com/ovn-kubernetes/libovsdb/ovsdb"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/util/workqueue"

	"github.com/kubevirt-ovn/kubevirt-ovn/nbmodel"
	"github.com/kubevirt-ovn/kubevirt-ovn/nbmodel/sbmodel"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/nb"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/ovn"
)

// Source is the input: Kubernetes informers or manifests on disk. It keeps
// an indexed Input up to date, object by object, and enqueues the units each
// change affects (translator.Input.Set says which).
type Source interface {
	// Input is the current input. Objects being deleted are left out:
	// their rows go.
	Input() *translator.Input
	// HasSynced is true once the first complete input is known; before
	// that nothing is written (an empty input would delete everything).
	HasSynced() bool
}

// Status receives what reconciles did to routers. The Kubernetes source
// writes it to VirtualRouter status; a nil Status is fine.
type Status interface {
	// Prepare runs before a router present in the input is synced (the
	// Kubernetes source adds its finalizer there).
	Prepare(ctx context.Context, router string) error
	// Report records a router's state.
	Report(ctx context.Context, router string, st RouterStatus) error
	// Removed runs once the rows of a router no longer in the input are
	// gone (the Kubernetes source removes its finalizer there).
	Removed(ctx context.Context, router string) error
	// ReportFloatingIPs records the state of the floating IPs that name a
	// router, after its reconcile (also of a router that is invalid or not
	// declared).
	ReportFloatingIPs(ctx context.Context, sts []translator.FloatingIPStatus) error
	// ReportLoadBalancers records the state of the load balancers a
	// router's plan holds, after its reconcile.
	ReportLoadBalancers(ctx context.Context, sts []translator.LoadBalancerStatus) error
	// ReportSecurityGroup records the state of a security group and its
	// rules after the group's reconcile.
	ReportSecurityGroup(ctx context.Context, st SecurityGroupStatus) error
}

// SecurityGroupStatus is the outcome of a security group's last
// reconcile.
type SecurityGroupStatus struct {
	// ID is the group's spec.id, its unit's name.
	ID string
	// Generation is the metadata.generation of the group planned.
	Generation int64
	// Errs say why the group's input is invalid, each naming its object
	// (a SecurityGroup, or a SecurityGroupRule that does not read): its
	// rows are left as they are.
	Errs []error
	// RuleErrors are rules' own errors, each naming its rule: their ACLs
	// are left as they are, the group's other rows are written.
	RuleErrors []error
	// Notes say what was read but not applied (an IPv6 rule).
	Notes []string
	// Err: the group's rows failed to commit.
	Err error
}

// RouterStatus is the outcome of a router's last reconcile.
type RouterStatus struct {
	Generation int64
	// Err is why the router is not Ready: invalid input or a failed
	// transaction. Nil: its rows are committed to the NB.
	Err error
	// Realized: NB_Global.hv_cfg has reached the nb_cfg of our last
	// commit for this router, i.e. the chassis have it.
	Realized bool
	// Gateway is the elected chassis first, then the failover candidates.
	Gateway []string
	SNATIP  string
	// GatewayChanged is set when the primary gateway differs from the one
	// last reported (an event is worth emitting).
	GatewayChanged bool
	// Active is the chassis the gateway port is bound to in the SB now
	// (BFD may have moved it from the primary); "" when unbound or the SB
	// is not given.
	Active string
}

// Options configure a Controller.
type Options struct {
	Instance string
	Workers  int
	// Resync enqueues every unit this often, to catch what no event said.
	Resync time.Duration
	Log    logr.Logger
	// Metrics may be nil.
	Metrics *Metrics
	// SkipMoveNudge: after a gateway port moves away from a chassis that
	// still runs, do not nudge the chassis (ovn.FinishMoves).
	SkipMoveNudge bool
	// RejectEmptyLB: see translator.Input.SetRejectEmptyLB.
	RejectEmptyLB bool
	// DefaultDeny: see translator.Input.SetDefaultDeny.
	DefaultDeny bool
	// BatchUnits bounds the units of a batch (see BatchAbove); 512 when
	// zero. BatchOps bounds the operations of one of its transactions:
	// a batch that needs more commits in several, never splitting a
	// unit; nb.MaxBatchOps when zero.
	BatchUnits int
	BatchOps   int
	// KeysChanged, in interconnect mode with the zone's SB, is called
	// with every tunnel key mismatch of the zone (sorted by network,
	// switch, port) whenever that set changes; a zone agent publishes it
	// for the allocator. It must not block.
	KeysChanged func([]translator.KeyMismatch)
	// Activated, with the SB, is called when the SB shows a migrating VM
	// port of ours activated on its target (a zone agent publishes it for
	// the other zones' twins).
	Activated func()
}

// Controller reconciles units from a Source into the NB.
type Controller struct {
	nb      client.Client
	sb      client.Client // nil: gateways come from the routers' specs
	source  Source
	input   *translator.Input
	held    *nb.HeldIndex
	parents *nb.ParentIndex
	// refs remembers what our big reference sets (a security group's
	// ports) held, shown every NB event (onNB).
	refs   *nb.RefMemo
	status Status
	opts   Options
	queue  workqueue.TypedRateLimitingInterface[translator.Unit]
	// primaries say when a router's primary gateway changed.
	primaries primaries

	mu sync.Mutex
	// pending is the nb_cfg each router waits for hv_cfg to reach.
	pending map[string]int
	// parked are the routers waiting for a network's switch, by network.
	parked map[string]map[string]bool
	// switches are the UUIDs of our switches the NB cache showed, by
	// network (noteSwitch): hasSwitch asks it rather than libovsdb, whose
	// lookups copy the row, and a shared external network's switch
	// holds a port per router (160 kB per router reconcile at 10,000).
	switches notedRows
	// routerRows are, for a zone agent, the UUIDs of the routers and
	// switch ports of ours the NB cache showed, by the router owning them
	// (noteRouterRow): its home's router, or the remote twins of its
	// ports in another zone. elsewhere asks it.
	routerRows notedRows
	// watching is set once watchNB has noted the cache's switches.
	watching atomic.Bool
	// chassisMu makes one chassis refresh at a time (refreshChassis);
	// chassisDirty says a zone agent's refresh is due and not started
	// (ChassisChanged).
	chassisMu    sync.Mutex
	chassisDirty atomic.Bool
	// awaiting are the units waiting for a row of ours that another unit
	// creates (nb.MissingRowError), by the row's table and key; awaits
	// the row each waits for (one at a time: its diff's first missing).
	awaiting map[rowID]map[translator.Unit]bool
	awaits   map[translator.Unit]rowID
	// activatedAt are the migrating ports the SB showed activated on
	// their target whose collapse is not committed yet, by port.
	activatedAt map[string]activatedPort
	// dual are the VM ports committed bound on two chassis, by port;
	// vmNotes the migration notes said as Events, by network
	// (migration.go).
	dual    map[string]dualPort
	vmNotes map[string]map[translator.VMNote]bool
	// release is ovn-northd's OVN release as last read from the SB.
	release string
	// writing are the units whose rows are being written, with the rows
	// of theirs the NB announced as inserted, updated or deleted
	// meanwhile; echoes the rows their last write wrote that the NB has
	// yet to announce (see write and heldBack).
	writing map[translator.Unit][]rowID
	echoes  map[translator.Unit]map[rowID]int
	// moves are gateway ports moved to a new primary whose old one is
	// still a chassis, router -> new primary, for finishMoves.
	moves    map[string]string
	moveKick chan struct{}

	// Interconnect mode (zones.go; set once by the constructor, zoneRole):
	// the zone whose NB this controller writes, the zones it runs beside,
	// what planning reads as held (every zone's NB), and which unit each
	// remote port of this zone belongs to.
	zone     string
	group    *Zones
	planHeld translator.Held
	remote   map[string]translator.Unit
	// chassisFrom, for a zone agent, gives every zone's chassis, and
	// offlineFrom every zone's offline load balancer members,
	// activatedFrom every zone's migrating ports activated on their target.
	chassisFrom   func() []translator.Chassis
	offlineFrom   func() map[string][]translator.OfflineMember
	activatedFrom func() map[string][]translator.PortActivation
	// keys are the tunnel key checks of a zone's controller (keys.go).
	keys *keyChecks

	// takeMu makes workers take units from the queue in turn (take);
	// commitMu commit their transactions (nb.SyncOptions.CommitLock);
	// enqueueMu is held while a source enqueues one change's units
	// (EnqueueUnits), so that a worker woken by the first takes them all.
	takeMu    sync.Mutex
	commitMu  sync.Mutex
	enqueueMu sync.Mutex

	// onReconcile, for tests, sees every unit reconciled; active counts
	// the reconciles (of a unit or a batch) in progress.
	onReconcile func(translator.Unit)
	active      atomic.Int32
}

// withDefaults fills in what opts leaves out.
func (opts Options) withDefaults() Options {
	if opts.Instance == "" {
		opts.Instance = translator.DefaultInstance
	}
	if opts.Workers <= 0 {
		opts.Workers = 2
	}
	if opts.Resync <= 0 {
		opts.Resync = 5 * time.Minute
	}
	if opts.BatchUnits <= 0 {
		opts.BatchUnits = 512
	}
	return opts
}

// New returns a controller of one NB, the central one; Run starts it.
func New(nbc, sb client.Client, source Source, status Status, opts Options) *Controller {
	return newController(nbc, sb, source, status, opts, zoneRole{})
}

// zoneRole is what makes a controller one zone's in interconnect mode:
// set once, by the constructor of that role (NewZones, NewZoneAgent).
type zoneRole struct {
	// zone is the zone whose NB the controller writes; group the
	// controllers of the other zones beside it (NewZones).
	zone  string
	group *Zones
	// held is the controller's NB's claims, planHeld what planning reads
	// as held (every zone's NB, or the allocator's store and this NB);
	// nil: a new index of this NB, read alone.
	held     *nb.HeldIndex
	planHeld translator.Held
	// chassisFrom, for a zone agent, gives every zone's chassis, and
	// offlineFrom every zone's offline load balancer members,
	// activatedFrom every zone's migrating ports activated on their target.
	chassisFrom   func() []translator.Chassis
	offlineFrom   func() map[string][]translator.OfflineMember
	activatedFrom func() map[string][]translator.PortActivation
}

func newController(nbc, sb client.Client, source Source, status Status, opts Options, role zoneRole) *Controller {
	opts = opts.withDefaults()
	if role.held == nil {
		role.held = nb.NewHeldIndex(nbc, opts.Instance)
	}
	if role.planHeld == nil {
		role.planHeld = role.held
	}
	source.Input().SetRejectEmptyLB(opts.RejectEmptyLB)
	source.Input().SetDefaultDeny(opts.DefaultDeny)
	if !ovn.MultiChassis(nbc) {
		source.Input().SetSingleChassis(true)
	}
	c := &Controller{
		nb: nbc, sb: sb, source: source, status: status, opts: opts,
		input: source.Input(), held: role.held, parents: nb.NewParentIndex(nbc), refs: nb.NewRefMemo(nil, opts.Instance),
		zone: role.zone, group: role.group, planHeld: role.planHeld, chassisFrom: role.chassisFrom, offlineFrom: role.offlineFrom, activatedFrom: role.activatedFrom,
		queue:       newUnitQueue("units"),
		pending:     map[string]int{},
		parked:      map[string]map[string]bool{},
		switches:    notedRows{},
		routerRows:  notedRows{},
		awaiting:    map[rowID]map[translator.Unit]bool{},
		awaits:      map[translator.Unit]rowID{},
		activatedAt: map[string]activatedPort{},
		dual:        map[string]dualPort{},
		vmNotes:     map[string]map[translator.VMNote]bool{},
		moves:       map[string]string{},
		writing:     map[translator.Unit][]rowID{},
		echoes:      map[translator.Unit]map[rowID]int{},
		moveKick:    make(chan struct{}, 1),
		remote:      map[string]translator.Unit{},
	}
	if opts.Metrics != nil {
		opts.Metrics.watchQueue(c.queue)
	}
	return c
}

// Enqueue schedules a unit for reconciliation.
func (c *Controller) Enqueue(u translator.Unit) { c.queue.Add(u) }

// EnqueueAll schedules every unit in the input, in the order that keeps
// routers with their networks (translator.Input.ReconcileOrder: a network
// before the routers hanging from it), then every other unit owning rows,
// networks first.
func (c *Controller) EnqueueAll(ctx context.Context) {
	for _, u := range c.input.ReconcileOrder() {
		c.Enqueue(u)
	}
	present, err := nb.PresentUnits(ctx, c.nb, c.opts.Instance)
	if err != nil {
		return
	}
	networksFirst := func(u translator.Unit) bool { return u.Kind != translator.KindNetwork }
	slices.SortStableFunc(present, func(a, b translator.Unit) int {
		return cmpBool(networksFirst(a), networksFirst(b))
	})
	for _, u := range present {
		// The workqueue holds a unit once: those of the input are
		// queued already.
		c.Enqueue(u)
	}
}

// EnqueueUnits schedules units, networks first; a source calls it with
// what translator.Input.Set returned: one change's units, which a worker
// takes together (take).
func (c *Controller) EnqueueUnits(units []translator.Unit) {
	units = slices.DeleteFunc(slices.Clone(units), c.elsewhere)
	c.enqueueMu.Lock()
	defer c.enqueueMu.Unlock()
	for _, u := range units {
		c.Enqueue(u)
	}
}

// elsewhere says, for a zone agent, that unit u has nothing to do in its
// zone: a network whose switch is not there (translator.Input.NetworkInZone)
// and of which the NB cache holds no switch either (none to delete); a
// router with no rows there (translator.Input.RouterInZone) and none in
// the NB cache. Every agent sees
// every VM's change, and every allocator decision: without this each one
// planned and diffed the network, for nothing, at each of them. A resync
// or a reconnection (EnqueueAll) still takes every unit.
func (c *Controller) elsewhere(u translator.Unit) bool {
	if !c.zoneAgent() || !c.watching.Load() {
		return false
	}
	switch u.Kind {
	case translator.KindNetwork:
		if c.input.NetworkInZone(u.Name, c.zone, c.planHeld) {
			return false
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		return !c.hasSwitch(context.Background(), u.Name)
	case translator.KindRouter:
		if c.input.RouterInZone(u.Name, c.zone, c.planHeld) {
			return false
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		return !c.hasRouterRows(u.Name)
	}
	return false
}

// cmpBool orders false before true.
func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

// refreshChassis reads the SB chassis into the input and enqueues the
// routers whose gateway candidates changed.
func (c *Controller) refreshChassis(ctx context.Context) {
	c.chassisMu.Lock()
	defer c.chassisMu.Unlock()
	c.refreshChassisLocked(ctx)
}

// refreshChassisLocked is refreshChassis; callers hold c.chassisMu.
func (c *Controller) refreshChassisLocked(ctx context.Context) {
	if c.group != nil {
		c.group.refreshChassis(ctx)
		return
	}
	if c.chassisFrom != nil {
		c.EnqueueUnits(c.input.SetChassis(c.chassisFrom(), true))
		if c.offlineFrom != nil {
			c.EnqueueUnits(c.input.SetAllOfflineMembers(c.offlineFrom()))
		}
		if c.activatedFrom != nil {
			c.EnqueueUnits(c.input.SetZoneActivations(c.activatedFrom()))
		}
		return
	}
	chassis, err := ovn.GatewayChassis(ctx, c.sb)
	if err != nil {
		c.opts.Log.Info("reading SB chassis", "error", err.Error())
		return
	}
	c.EnqueueUnits(c.input.SetChassis(chassis, true))
}

// Run reconciles until ctx ends. It waits for the source to sync, watches
// the NB rows we own (drift is repaired at once) and NB_Global (routers
// become Realized), and the SB chassis (gateway candidates).
//
// When ctx ends, Run returns once the reconciles in progress have returned,
// without draining the queue: the units still queued are not reconciled,
// and a reconcile in progress sends no transaction (see fenced), so at most
// one transaction per worker, already sent, commits after ctx ends, and
// nothing after Run returns.
func (c *Controller) Run(ctx context.Context) error {
	defer c.queue.ShutDown()
	if ctx.Err() != nil {
		return nil
	}
	log := c.opts.Log
	for !c.source.HasSynced() {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(50 * time.Millisecond):
		}
	}
	if c.checksKeys() {
		c.startKeyChecks(ctx)
	}
	c.watchNB()
	if c.sb != nil {
		c.sb.Cache().AddEventHandler(&cache.EventHandlerFuncs{
			AddFunc:    func(table string, m model.Model) { c.onSB(ctx, table, m) },
			UpdateFunc: func(table string, _, m model.Model) { c.onSB(ctx, table, m) },
			DeleteFunc: func(table string, m model.Model) {
				c.onSB(ctx, table, m)
				if pb, ok := m.(*sbmodel.PortBinding); ok {
					c.onActivation(pb, true)
				}
			},
		})
	}
	if c.sb != nil {
		c.refreshChassis(ctx)
		c.refreshRelease()
		if c.group != nil {
			c.group.refreshOfflineMembers(ctx, c)
		}
	}
	go c.watchReconnect(ctx, c.nbState())
	if c.sb != nil && !c.opts.SkipMoveNudge {
		go c.finishMoves(ctx)
	}
	c.EnqueueAll(ctx)
	log.Info("controller started", "workers", c.opts.Workers, "instance", c.opts.Instance)

	runWorkers(ctx, c.queue, c.opts, c.processNext, func() { c.EnqueueAll(ctx) })
	c.stopKeyChecks()
	log.Info("controller stopped", "dropped", c.queue.Len())
	return nil
}

// runWorkers runs opts.Workers workers calling next until it says stop,
// and resync every opts.Resync, until ctx ends. Then it shuts the queue
// down, without draining it (workers see ctx ended before their next
// item), and returns once the workers have.
func runWorkers(ctx context.Context, queue workqueue.TypedRateLimitingInterface[translator.Unit], opts Options, next func(context.Context) bool, resync func()) {
	var wg sync.WaitGroup
	for range opts.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next(ctx) {
			}
		}()
	}
	ticker := time.NewTicker(opts.Resync)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			queue.ShutDown()
			wg.Wait()
			return
		case <-ticker.C:
			resync()
		}
	}
}

// watchNB has the changes of the NB rows we own reach onNB, and every
// update and deletion the reference memo first: the units reconciled for
// an event must not read what it held of the row before.
func (c *Controller) watchNB() {
	c.nb.Cache().AddEventHandler(&cache.EventHandlerFuncs{
		AddFunc: func(table string, m model.Model) {
			c.noteSwitch(nil, m)
			c.noteRouterRow(table, nil, m)
			c.onNB(table, nil, m)
		},
		UpdateFunc: func(table string, old, m model.Model) {
			c.noteSwitch(old, m)
			c.noteRouterRow(table, old, m)
			c.refs.Observe(table, old, m)
			// Only a change its owner would write back: not a switch's
			// list of ports gaining a router's port (each router commit
			// on a shared external network would otherwise reconcile
			// that network, whose size grows with the routers).
			if nb.ManagedChanged(table, old, m) {
				c.onNB(table, old, m)
			}
		},
		DeleteFunc: func(table string, m model.Model) {
			c.noteSwitch(m, nil)
			c.noteRouterRow(table, m, nil)
			c.refs.Observe(table, m, nil)
			c.onNB(table, m, nil)
		},
	})
	// The rows the monitor brought before the handler was added; one
	// added since is noted twice, which a set does not mind.
	if tc := c.nb.Cache(); tc != nil {
		for _, m := range tc.Table(nbmodel.LogicalSwitchTable).RowsShallow() {
			c.noteSwitch(nil, m)
		}
		if c.zoneAgent() {
			for _, table := range []string{nbmodel.LogicalRouterTable, nbmodel.LogicalSwitchPortTable} {
				for _, m := range tc.Table(table).RowsShallow() {
					c.noteRouterRow(table, nil, m)
				}
			}
		}
	}
	c.watching.Store(true)
}

// zoneAgent says whether c is a zone agent (NewZoneAgent).
func (c *Controller) zoneAgent() bool { return c.chassisFrom != nil && c.zone != "" }

// noteRouterRow keeps c.routerRows, for a zone agent, for a change of a
// row of table in the NB cache (old nil for an insert, cur nil for a
// deletion).
func (c *Controller) noteRouterRow(table string, old, cur model.Model) {
	if !c.zoneAgent() || (table != nbmodel.LogicalRouterTable && table != nbmodel.LogicalSwitchPortTable) {
		return
	}
	router := func(m model.Model) (name, uuid string) {
		var ids map[string]string
		switch r := m.(type) {
		case *nbmodel.LogicalRouter:
			ids, uuid = r.ExternalIDs, r.UUID
		case *nbmodel.LogicalSwitchPort:
			ids, uuid = r.ExternalIDs, r.UUID
		}
		if u, ok := translator.OwnerOf(ids, c.opts.Instance); ok && u.Kind == translator.KindRouter {
			return u.Name, uuid
		}
		return "", ""
	}
	was, wasUUID, now, nowUUID := "", "", "", ""
	if old != nil {
		was, wasUUID = router(old)
	}
	if cur != nil {
		now, nowUUID = router(cur)
	}
	if was == now && (was == "" || old != nil && cur != nil) {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.routerRows.move(was, wasUUID, now, nowUUID, table)
}

// hasRouterRows says whether the NB cache holds a router or switch port
// of router (c.routerRows, each checked in the cache without a copy, as
// hasSwitch does). The caller holds c.mu.
func (c *Controller) hasRouterRows(router string) bool {
	tc := c.nb.Cache()
	if tc == nil {
		return true
	}
	return c.routerRows.has(tc, router)
}

// noteSwitch keeps c.switches for a change of a row of the NB cache (old
// nil for an insert, cur nil for a deletion).
func (c *Controller) noteSwitch(old, cur model.Model) {
	network := func(m model.Model) string {
		ls, ok := m.(*nbmodel.LogicalSwitch)
		if !ok {
			return ""
		}
		if u, ok := translator.OwnerOf(ls.ExternalIDs, c.opts.Instance); ok && u.Kind == translator.KindNetwork {
			return u.Name
		}
		return ""
	}
	was, now := "", ""
	if old != nil {
		was = network(old)
	}
	if cur != nil {
		now = network(cur)
	}
	if was == now && (was == "" || old != nil && cur != nil) {
		return
	}
	wasUUID, nowUUID := "", ""
	if was != "" {
		wasUUID = old.(*nbmodel.LogicalSwitch).UUID
	}
	if now != "" {
		nowUUID = cur.(*nbmodel.LogicalSwitch).UUID
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.switches.move(was, wasUUID, now, nowUUID, nbmodel.LogicalSwitchTable)
}

// notedRows are rows of ours the NB cache showed: their UUIDs and tables,
// by the name of the unit owning them. Callers hold c.mu.
type notedRows map[string]map[string]string

// move notes a row that stopped being owner was's (UUID wasUUID) or
// became owner now's (UUID nowUUID, of table); "" for neither.
func (n notedRows) move(was, wasUUID, now, nowUUID, table string) {
	if was != "" {
		delete(n[was], wasUUID)
		if len(n[was]) == 0 {
			delete(n, was)
		}
	}
	if now != "" {
		if n[now] == nil {
			n[now] = map[string]string{}
		}
		n[now][nowUUID] = table
	}
}

// has says whether the cache tc holds a row noted for owner, each checked
// without a copy of the row. A reconnection refills the cache without
// deletion events: a row deleted meanwhile may still be noted, and is
// dropped (a refill under way notes it again).
func (n notedRows) has(tc *cache.TableCache, owner string) bool {
	for uuid, table := range n[owner] {
		if tc.Table(table).HasRow(uuid) {
			return true
		}
		delete(n[owner], uuid)
	}
	return false
}

// onSB refreshes the gateway candidates when a chassis changes, and
// enqueues the router whose gateway port's binding changed.
func (c *Controller) onSB(ctx context.Context, table string, m model.Model) {
	c.onSBKeys(ctx, table, m)
	switch table {
	case sbmodel.SBGlobalTable:
		c.refreshRelease()
	case sbmodel.ChassisTable:
		c.refreshChassis(ctx)
	case sbmodel.ServiceMonitorTable:
		// A health check's status in this zone: in interconnect mode the
		// other zones leave a member offline here out (lbhealth.go).
		if c.group != nil {
			c.group.refreshOfflineMembers(ctx, c)
		}
	case sbmodel.PortBindingTable:
		// A gateway port bound elsewhere (BFD failover, a move): its
		// router's status says where it is active. The monitor's other
		// bindings are remote ports (interconnect): one of ours that
		// northd created or someone rebound is bound again by its unit
		// (OVN before 23.09); others' reconcile nothing.
		pb := m.(*sbmodel.PortBinding)
		if pb.Type == "" {
			c.onActivation(pb, false)
			return
		}
		if pb.Type != ovn.RedirectPortType {
			if u, ok := c.remoteOwner(pb.LogicalPort); ok && pb.Type == ovn.RemotePortType {
				c.Enqueue(u)
			}
			return
		}
		if r, ok := ovn.RouterOfRedirectPort(pb.LogicalPort); ok {
			c.Enqueue(translator.Unit{Kind: translator.KindRouter, Name: r})
		}
	}
}

// onActivation tells the input where the SB shows a VM port of ours
// activated (a migrating VM's RARP seen on its target; none once deleted),
// and reconciles its network at once when that moves the port: the
// fastest signal that the VM runs on its target, ahead of the VMI.
func (c *Controller) onActivation(pb *sbmodel.PortBinding, deleted bool) {
	if pb.ExternalIDs[translator.KeyOwnerKind] != string(translator.KindNetwork) {
		return
	}
	var on []string
	if !deleted {
		on = ovn.Activated(pb)
	}
	units := c.input.SetActivated(pb.ExternalIDs[translator.KeyOwner], pb.LogicalPort, on)
	if len(units) > 0 {
		c.opts.Log.Info("migration activated on its target", "port", pb.LogicalPort, "chassis", on)
		if c.opts.Activated != nil {
			c.opts.Activated()
		}
		c.vmEvent(pb.ExternalIDs[translator.KeyVMI], corev1.EventTypeNormal, ReasonMigrationActivated, "port %s activated on %s: the VM's RARP was seen there", pb.LogicalPort, strings.Join(on, ","))
		c.mu.Lock()
		c.activatedAt[pb.LogicalPort] = activatedPort{network: pb.ExternalIDs[translator.KeyOwner], at: time.Now()}
		c.mu.Unlock()
		if c.group != nil {
			// Every zone's rows move: the other zones' twins follow.
			c.group.EnqueueUnits(units)
			return
		}
		c.EnqueueUnits(units)
	}
}

// activatedPort is a migrating port the SB showed activated on its
// target, at, whose collapse is not committed yet.
type activatedPort struct {
	network string
	at      time.Time
}

// collapsed records, for network plan np just committed, the ports
// activated on their target that it now binds to one chassis: the time
// from the activation to the commit, logged and measured.
func (c *Controller) collapsed(np *translator.NetworkPlan) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.activatedAt) == 0 {
		return
	}
	ports := make(map[string]bool, len(np.Ports))
	for _, p := range np.Ports {
		ports[p.Name] = true
	}
	for port, a := range c.activatedAt {
		if a.network == np.Name && !ports[port] {
			delete(c.activatedAt, port) // its VM is gone: nothing to collapse
		}
	}
	for _, p := range np.Ports {
		a, ok := c.activatedAt[p.Name]
		if !ok || a.network != np.Name || strings.Contains(p.Options["requested-chassis"], ",") {
			continue
		}
		delete(c.activatedAt, p.Name)
		took := time.Since(a.at)
		c.opts.Metrics.observeCollapse(took)
		c.opts.Log.Info("migration collapsed onto its target", "port", p.Name, "chassis", p.Options["requested-chassis"], "afterActivation", took.Round(time.Millisecond))
	}
}

// onNB enqueues the units a change of a row of ours concerns (its owner,
// and the owners of the rows its references left or reach: nb.Affected),
// and the routers waiting for realization when NB_Global changes. old is
// nil for an insert, cur for a deletion.
func (c *Controller) onNB(table string, old, cur model.Model) {
	m := cur
	if m == nil {
		m = old
	}
	if g, ok := m.(*nbmodel.NBGlobal); ok {
		// Only the routers whose commit the chassis have now: every commit
		// bumps nb_cfg, and reconciling every waiting router on each bump
		// costs a reconcile per router per commit while many converge.
		c.mu.Lock()
		var waiting []string
		for r, want := range c.pending {
			if g.HvCfg >= want {
				waiting = append(waiting, r)
			}
		}
		c.mu.Unlock()
		for _, r := range waiting {
			c.Enqueue(translator.Unit{Kind: translator.KindRouter, Name: r})
		}
		return
	}
	if ls, ok := m.(*nbmodel.LogicalSwitch); ok {
		if u, ok := translator.OwnerOf(ls.ExternalIDs, c.opts.Instance); ok && u.Kind == translator.KindNetwork {
			// The cache holds the switch now: its parked routers can go.
			c.unpark(u.Name)
		}
	}
	action, row := nb.Update, cur
	switch {
	case old == nil:
		action = nb.Create
		if key, ok := nb.KeyOf(table, cur); ok {
			c.arrived(table, key)
		}
	case cur == nil:
		action, row = nb.Delete, old
	}
	for _, u := range nb.Affected(c.nb, table, old, cur, c.opts.Instance) {
		if c.heldBack(u, table, row, action) {
			continue
		}
		c.Enqueue(u)
	}
}

// rowID is what the NB announced of a row, by table and key (nb.KeyOf):
// its insertion, update or deletion (a Change action).
type rowID struct{ table, key, action string }

// heldBack says whether the NB's announcement of the insertion, update or
// deletion (action) of a row of unit u needs no reconcile of u now: while
// u's rows are being written it is held back for write to decide (most
// likely it is u's transaction's own); after, it is the echo of u's last
// write when that write inserted, updated or deleted a row of its table
// and key not announced yet. Each write of a row is announced once: a
// second announcement (another writer's) finds no echo left and
// reconciles u. Without this, a group's every write of its Port_Group
// re-planned and diffed the group once more for nothing.
func (c *Controller) heldBack(u translator.Unit, table string, row model.Model, action string) bool {
	key, ok := nb.KeyOf(table, row)
	if !ok {
		return false
	}
	id := rowID{table, key, action}
	c.mu.Lock()
	defer c.mu.Unlock()
	if held, ok := c.writing[u]; ok {
		c.writing[u] = append(held, id)
		return true
	}
	if c.echoes[u][id] > 0 {
		c.echoes[u][id]--
		if c.echoes[u][id] == 0 {
			delete(c.echoes[u], id)
		}
		if len(c.echoes[u]) == 0 {
			delete(c.echoes, u)
		}
		return true
	}
	return false
}

// settleEchoes ends the write of steps: the insertions announced while
// they were written are matched against the rows each unit's transaction
// inserted, updated or deleted (res: nil when the write failed); an
// unmatched one reconciles its unit again, and the writes not announced
// yet are awaited (heldBack).
func (c *Controller) settleEchoes(steps []*step, res *nb.SyncResult) {
	inserted := map[translator.Unit]map[rowID]int{}
	if res != nil {
		for _, r := range res.Units {
			if r.Err != nil {
				continue
			}
			for _, ch := range r.Changes {
				if ch.Action == nb.Update && strings.HasPrefix(ch.Detail, nb.MovedTo) {
					// The parent's containment changes, not the row.
					continue
				}
				if inserted[r.Unit] == nil {
					inserted[r.Unit] = map[rowID]int{}
				}
				inserted[r.Unit][rowID{ch.Table, ch.Name, ch.Action}]++
			}
		}
	}
	var again []translator.Unit
	c.mu.Lock()
	for _, s := range steps {
		u := s.up.Unit
		ours := inserted[u]
		foreign := false
		for _, id := range c.writing[u] {
			if ours[id] > 0 {
				ours[id]--
			} else {
				foreign = true
			}
		}
		delete(c.writing, u)
		for id, n := range ours {
			if n == 0 {
				delete(ours, id)
			}
		}
		if len(ours) > 0 {
			c.echoes[u] = ours
		}
		if foreign {
			again = append(again, u)
		}
	}
	c.mu.Unlock()
	for _, u := range again {
		c.Enqueue(u)
	}
}

// A worker takes every unit queued, up to Options.BatchUnits, and
// reconciles them together: planned one by one, diffed together and
// committed in as few transactions as Options.BatchOps allows, as a sync
// commits. An event's units (a router's, its networks', the security
// groups its VMs join) go in one transaction: the groups' Port_Groups
// refer to the ports the networks insert in it, and the NB (and
// ovn-northd after it) takes one transaction, not one per unit. A start,
// a reconnection, a resync or a zone appearing is worked through in
// batches.
//
// take hands a worker the next unit and the units queued after it, up to
// opts.BatchUnits. Workers take in turn (takeMu): the one waiting in Get
// holds it, so that the queue's length, once a unit arrives, is what the
// taker may take without waiting; a source still enqueueing the units of
// one change (enqueueMu) is waited for. quit: the queue is shut down and
// empty.
func (c *Controller) take() (units []translator.Unit, quit bool) {
	c.takeMu.Lock()
	defer c.takeMu.Unlock()
	u, quit := c.queue.Get()
	if quit {
		return nil, true
	}
	units = []translator.Unit{u}
	c.enqueueMu.Lock()
	defer c.enqueueMu.Unlock()
	for len(units) < c.opts.BatchUnits && c.queue.Len() > 0 {
		u, quit := c.queue.Get()
		if quit {
			break
		}
		units = append(units, u)
	}
	return units, false
}

func (c *Controller) processNext(ctx context.Context) bool {
	units, quit := c.take()
	if quit {
		return false
	}
	defer func() {
		for _, u := range units {
			c.queue.Done(u)
		}
	}()
	// After ShutDown, Get keeps handing out what is queued: a stopped
	// controller must not reconcile it.
	if ctx.Err() != nil {
		return false
	}
	start := time.Now()
	if c.onReconcile != nil {
		for _, u := range units {
			c.onReconcile(u)
		}
	}
	c.active.Add(1)
	errs := c.reconcile(ctx, units)
	c.active.Add(-1)
	if ctx.Err() != nil {
		// Stopped mid-reconcile: not a failure, and not retried.
		return false
	}
	took := time.Since(start)
	c.opts.Metrics.observeBatch(len(units))
	for i, u := range units {
		var w *awaitError
		if errors.As(errs[i], &w) {
			// Not a failure: reconciled again when the row appears
			// (onNB), and meanwhile with backoff, should its unit fail.
			c.opts.Metrics.observeReconcile(u, took, nil)
			c.opts.Log.V(1).Info("waiting for a row another unit creates", "kind", u.Kind, "name", u.Name, "table", w.Table, "key", w.Key)
			c.queue.AddRateLimited(u)
			continue
		}
		if c.chassisFrom != nil && waitingOnly(errs[i]) {
			// A zone agent's unit waiting for the allocator's
			// decisions: their arrival enqueues it (the store's
			// Notify), so it is not retried meanwhile. At an agent's
			// start that is every unit until the allocator has
			// written its allocations, and the retries went on, ten
			// a second, long after they had.
			c.opts.Metrics.observeReconcile(u, took, nil)
			c.opts.Log.V(1).Info("waiting for the allocator's decisions", "kind", u.Kind, "name", u.Name, "reason", errs[i].Error())
			c.queue.Forget(u)
			continue
		}
		c.opts.Metrics.observeReconcile(u, took, errs[i])
		retryOrForget(c.queue, c.opts.Log, "reconcile", u, errs[i])
	}
	return true
}

// awaitTries is how many reconciles in a row a unit waits for a missing
// row before it fails for it (and says so in its status): with the
// workqueue's backoff from 5 ms, about 1.3 s.
const awaitTries = 8

// awaitError is a unit's reconcile that refers to a row of ours no unit
// has created yet (nb.MissingRowError): a security group's new member
// port while its network's unit commits it, the two reconciled at once by
// two workers. The unit waits for the row, its status unchanged.
type awaitError struct{ *nb.MissingRowError }

func (e *awaitError) Unwrap() error { return e.MissingRowError }

// await has unit u reconciled again when the NB announces row key of
// table (onNB), and no longer for the row it waited for before.
func (c *Controller) await(u translator.Unit, table, key string) {
	id := rowID{table: table, key: key, action: nb.Create}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stopAwaitingLocked(u)
	if c.awaiting[id] == nil {
		c.awaiting[id] = map[translator.Unit]bool{}
	}
	c.awaiting[id][u] = true
	c.awaits[u] = id
}

// stopAwaiting forgets the row unit u waited for: its reconcile no longer
// needs it (a row that never comes, a VM gone before its port, leaves
// nothing behind).
func (c *Controller) stopAwaiting(u translator.Unit) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stopAwaitingLocked(u)
}

func (c *Controller) stopAwaitingLocked(u translator.Unit) {
	id, ok := c.awaits[u]
	if !ok {
		return
	}
	delete(c.awaits, u)
	delete(c.awaiting[id], u)
	if len(c.awaiting[id]) == 0 {
		delete(c.awaiting, id)
	}
}

// arrived enqueues the units waiting for row key of table, now in the NB.
func (c *Controller) arrived(table, key string) {
	id := rowID{table: table, key: key, action: nb.Create}
	c.mu.Lock()
	units := c.awaiting[id]
	delete(c.awaiting, id)
	for u := range units {
		delete(c.awaits, u)
	}
	c.mu.Unlock()
	for u := range units {
		c.Enqueue(u)
	}
}

// waitingOnly says whether err is nothing but decisions an allocator has
// not made yet (translator.ReasonWaiting).
func waitingOnly(err error) bool {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs := j.Unwrap()
		return len(errs) > 0 && !slices.ContainsFunc(errs, func(e error) bool { return !waitingOnly(e) })
	}
	var ie *translator.InputError
	return errors.As(err, &ie) && ie.Reason == translator.ReasonWaiting
}

// retryOrForget ends unit u's turn in queue: after an error it comes back
// with backoff, otherwise its backoff is forgotten.
func retryOrForget(queue workqueue.TypedRateLimitingInterface[translator.Unit], log logr.Logger, what string, u translator.Unit, err error) {
	if err != nil {
		log.Info(what+" failed; retrying with backoff", "kind", u.Kind, "name", u.Name, "error", err.Error())
		queue.AddRateLimited(u)
		return
	}
	queue.Forget(u)
}

// step is one unit's way through a reconcile: planned, written with the
// other units of its batch (unless parked or failed before), then reported.
type step struct {
	log  logr.Logger
	up   translator.UnitPlan
	work nb.Work
	// rp is a router's plan, nil when its input is invalid.
	rp *translator.RouterPlan
	// before is a router's gateway order in the NB before the write.
	before []string
	// parked: a router waiting for its networks' switches.
	parked bool
	// err, once set before the write, ends the unit's reconcile.
	err error
	// What the write did: the nb_cfg of the unit's commit (0 when nothing
	// was written) and why its rows were left as they were.
	nbCfg   int
	unitErr error
}

// reconcile brings units to their desired rows and reports routers' status:
// plan each unit, write their rows together (a router whose networks'
// switches are neither in the NB nor in this batch waits for them), then
// say what came of each. It returns each unit's error, in order.
func (c *Controller) reconcile(ctx context.Context, units []translator.Unit) []error {
	steps := make([]*step, len(units))
	// The switches this batch writes: a router hanging from one is
	// written with it, in the same transaction, not parked.
	batched := map[string]bool{}
	for i, u := range units {
		steps[i] = c.plan(u)
		if w := steps[i].work; u.Kind == translator.KindNetwork && w.Err == nil && len(w.Rows) > 0 {
			batched[u.Name] = true
		}
	}
	var writing []*step
	for _, s := range steps {
		c.prepare(ctx, s, batched)
		if dropDeletion != nil && !s.up.InInput && dropDeletion(s.up.Unit) {
			// The deliberate bug of a soakbug build: the unit's
			// deletion is skipped as if it were written.
			s.parked = true
		}
		if !s.parked && s.err == nil {
			writing = append(writing, s)
		}
	}
	if err := c.write(ctx, writing); err != nil {
		for _, s := range writing {
			s.err = err
		}
	}
	errs := make([]error, len(steps))
	for i, s := range steps {
		if s.err == nil && !s.parked {
			s.err = c.finish(ctx, s)
		}
		errs[i] = s.err
	}
	return errs
}

// dropDeletion is nil but in a build with the soakbug tag
// (soakbug.go): a deliberate bug for the soak to catch (issue 35). It says
// whether to skip the deletion of unit u.
var dropDeletion func(u translator.Unit) bool

// plan is unit u's desired rows, from the current input.
func (c *Controller) plan(u translator.Unit) *step {
	s := &step{log: c.opts.Log.WithValues("kind", u.Kind, "name", u.Name)}
	if c.zone != "" {
		s.log = s.log.WithValues("zone", c.zone)
	}
	s.up = c.input.Plan(u, c.opts.Instance, c.planHeld)
	if len(s.up.Affected) > 0 {
		// The router moved its home zone: its networks follow, in
		// every zone.
		if c.group != nil {
			c.group.EnqueueUnits(s.up.Affected)
		} else {
			c.EnqueueUnits(s.up.Affected)
		}
	}
	if s.up.Network != nil {
		for _, n := range s.up.Network.KeyNotes {
			s.log.Info("tunnel key moved", "note", n)
		}
		for _, n := range s.up.Network.VMNotes {
			s.log.Info("migration not followed", "note", n.Text)
		}
	}
	s.work = c.work(s.up)
	if len(s.up.Errs) == 0 {
		s.rp = s.up.Router
	}
	return s
}

// prepare readies a router's write: parked while a switch of its networks
// is neither in the NB nor in batched, its finalizer added, its gateway
// order before the write noted.
func (c *Controller) prepare(ctx context.Context, s *step, batched map[string]bool) {
	u, rp := s.up.Unit, s.rp
	if u.Kind != translator.KindRouter {
		return
	}
	if rp != nil {
		waitFor := slices.DeleteFunc(c.switchNetworks(rp, s.work.Rows), func(n string) bool { return batched[n] })
		if c.parkUntilSwitches(ctx, rp.Name, waitFor) {
			s.log.V(2).Info("waiting for the switches of its networks")
			c.opts.Metrics.observeParked()
			s.parked = true
			return
		}
	}
	if s.up.InInput && c.status != nil {
		if err := c.status.Prepare(ctx, u.Name); err != nil {
			s.err = err
			return
		}
	}
	if rp != nil && rp.Gateway != nil {
		s.before = c.held.HeldGateways(u.Name)
	}
}

// finish says what came of a written unit: its tunnel keys checked, a
// network's parked routers woken, a router's status reported. It returns
// the unit's error.
func (c *Controller) finish(ctx context.Context, s *step) error {
	u, rp := s.up.Unit, s.rp
	if missing := (*nb.MissingRowError)(nil); errors.As(s.unitErr, &missing) {
		// The row's arrival reconciles it again, also once it has waited
		// long enough to fail: its backoff has grown with every wait (in
		// a zone a member port can wait for the allocator's keys for as
		// long as the allocator is away), and the next retry could come
		// long after the row.
		c.await(u, missing.Table, missing.Key)
		if c.queue.NumRequeues(u) < awaitTries {
			return &awaitError{missing}
		}
	} else {
		c.stopAwaiting(u)
	}
	if u.Kind == translator.KindNetwork {
		c.checkKeys(u.Name)
	} else if rp != nil {
		c.checkKeys(c.switchNetworks(rp, s.work.Rows)...)
	}
	if u.Kind != translator.KindRouter {
		// A VM interface with bad input leaves only its port as it is; say
		// why, since no unit fails for it.
		if s.up.Network != nil {
			for _, e := range s.up.Network.VMErrors {
				s.log.Info("VM interface left as it is", "error", e.Error())
			}
		}
		// Likewise a security group rule with bad input leaves only its
		// ACL as it is; a rule read but not applied (IPv6) is a note.
		if sp := s.up.SecurityGroup; sp != nil {
			for _, e := range sp.RuleErrors {
				s.log.Info("security group rule left as it is", "error", e.Error())
			}
			for _, n := range sp.Notes {
				s.log.Info("security group rule not applied", "note", n)
			}
		}
		if rp := s.up.Router; rp != nil {
			for _, n := range rp.Notes {
				s.log.Info("router declaration ignored in part", "note", n)
			}
		}
		if s.unitErr == nil && u.Kind == translator.KindNetwork {
			c.unpark(u.Name)
		}
		// The load balancers of a network that no router has: its unit
		// reports them.
		for _, st := range s.up.LoadBalancers {
			if !st.Ready {
				s.log.Info("load balancer left out", "loadBalancer", st.Name, "reason", st.Reason)
			}
		}
		if len(s.up.LoadBalancers) > 0 && c.status != nil && c.zone == "" {
			if err := c.status.ReportLoadBalancers(ctx, loadBalancerStatus(s.up.LoadBalancers, s.unitErr)); err != nil {
				return errors.Join(s.unitErr, fmt.Errorf("writing load balancer status: %w", err))
			}
		}
		if u.Kind == translator.KindSecurityGroup && c.status != nil && c.zone == "" {
			if err := c.status.ReportSecurityGroup(ctx, securityGroupStatus(s.up, s.unitErr)); err != nil {
				return errors.Join(s.unitErr, fmt.Errorf("writing security group status: %w", err))
			}
		}
		return s.unitErr
	}
	// A floating IP that is not bound has no row; say why (its bad input,
	// or what it waits for: its VM, its router), since its router does not
	// fail for it and files have no status to say it in.
	for _, st := range s.up.FloatingIPs {
		if !st.Ready {
			s.log.Info("floating IP not bound", "floatingIP", st.Name, "reason", st.Reason)
		}
	}
	// Likewise a load balancer left out (its status says it too).
	for _, st := range s.up.LoadBalancers {
		switch {
		case !st.Ready:
			s.log.Info("load balancer not planned", "loadBalancer", st.Name, "reason", st.Reason)
		case st.Reason != "":
			s.log.Info("load balancer planned with a note", "loadBalancer", st.Name, "note", st.Reason)
		}
	}
	return c.reportRouter(ctx, s.up, s.work, s.before, s.nbCfg, s.unitErr)
}

// write commits the work of steps together (and, in a zone, binds their
// remote ports), logging each unit's changes and notes, and records what
// came of each unit in its step. It returns a failure to write at all (a
// stopped controller, a lost NB).
func (c *Controller) write(ctx context.Context, steps []*step) error {
	if len(steps) == 0 {
		return nil
	}
	if err := ctx.Err(); err != nil {
		// Stopped while planning: write nothing.
		return err
	}
	works := make([]nb.Work, len(steps))
	c.mu.Lock()
	for i, s := range steps {
		works[i] = s.work
		// Echoes still awaited from an earlier write are forgotten: a
		// late one reconciles the unit once more, which is harmless.
		delete(c.echoes, s.up.Unit)
		c.writing[s.up.Unit] = nil
	}
	c.mu.Unlock()
	var res *nb.SyncResult
	var err error
	defer func() { c.settleEchoes(steps, res) }()
	res, err = nb.SyncWork(ctx, fenced{c.nb}, works, nb.SyncOptions{
		Parents:    c.parents,
		Memo:       c.refs,
		Instance:   c.opts.Instance,
		BumpNBCfg:  true,
		BatchOps:   c.opts.BatchOps,
		CommitLock: &c.commitMu,
		OnCommit:   c.opts.Metrics.observeCommit,
	})
	if err != nil {
		return err
	}
	results := make(map[translator.Unit]*nb.UnitResult, len(res.Units))
	for i := range res.Units {
		results[res.Units[i].Unit] = &res.Units[i]
	}
	for _, s := range steps {
		u := s.up.Unit
		r := results[u]
		if r != nil {
			s.unitErr = r.Err
			if len(r.Changes) > 0 {
				// The last transaction's: the chassis having it have
				// this unit's, which came no later.
				s.nbCfg = res.NBCfg
				s.log.Info("synced", "changes", len(r.Changes), "nbCfg", res.NBCfg)
			}
		}
		if c.zone != "" && s.unitErr == nil {
			s.unitErr = c.bindRemotePorts(ctx, u, s.work.Rows)
		}
		if s.unitErr == nil && s.up.Network != nil {
			c.collapsed(s.up.Network)
			c.migrationEvents(s.up.Network)
		}
		if r != nil {
			for _, n := range r.Notes {
				s.log.Info("note", "note", n)
			}
		}
	}
	return nil
}

// reportRouter says what came of a router's reconcile: its status (Ready,
// gateway, Realized), its removal once its rows are gone, a gateway move
// to finish. before is its gateway order in the NB before the write.
func (c *Controller) reportRouter(ctx context.Context, up translator.UnitPlan, work nb.Work, before []string, nbCfg int, unitErr error) error {
	name := up.Unit.Name
	if !up.InInput {
		c.forget(name)
		if c.status == nil {
			return unitErr
		}
		if err := c.status.ReportFloatingIPs(ctx, floatingIPStatus(up.FloatingIPs, "", unitErr)); err != nil {
			return errors.Join(unitErr, fmt.Errorf("writing floating IP status: %w", err))
		}
		if unitErr == nil {
			return c.status.Removed(ctx, name)
		}
		return unitErr
	}
	st := statusOf(up, unitErr)
	if len(st.Gateway) > 0 {
		st.Active = ovn.ActiveGateway(ctx, c.sb, name)
	}
	home := c.zone == "" || c.isHome(work.Rows)
	if !home && unitErr == nil {
		// Another zone's controller reports this router.
		return nil
	}
	if !c.opts.SkipMoveNudge && home && unitErr == nil && len(before) > 0 && len(st.Gateway) > 0 && before[0] != st.Gateway[0] && c.staleGateways() && ovn.IsChassis(ctx, c.sb, before[0]) {
		c.moved(name, st.Gateway[0])
	}
	st.Realized = c.realized(ctx, name, nbCfg, unitErr == nil)
	c.primaries.note(name, &st)
	c.opts.Metrics.setRouterState(name, st)
	if c.status != nil {
		if err := c.status.Report(ctx, name, st); err != nil {
			return errors.Join(unitErr, fmt.Errorf("writing status: %w", err))
		}
		if err := c.status.ReportFloatingIPs(ctx, floatingIPStatus(up.FloatingIPs, st.Active, unitErr)); err != nil {
			return errors.Join(unitErr, fmt.Errorf("writing floating IP status: %w", err))
		}
		if err := c.status.ReportLoadBalancers(ctx, loadBalancerStatus(up.LoadBalancers, unitErr)); err != nil {
			return errors.Join(unitErr, fmt.Errorf("writing load balancer status: %w", err))
		}
	}
	return unitErr
}

// realized records the nb_cfg a router's commit waits for and says whether
// the chassis have reached it.
func (c *Controller) realized(ctx context.Context, router string, nbCfg int, ok bool) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if nbCfg > 0 {
		c.pending[router] = nbCfg
	}
	want, waiting := c.pending[router]
	if !waiting {
		return ok
	}
	var globals []*nbmodel.NBGlobal
	if err := c.nb.List(ctx, &globals); err != nil || len(globals) != 1 {
		return false
	}
	if globals[0].HvCfg >= want {
		delete(c.pending, router)
		return ok
	}
	return false
}

func (c *Controller) forget(router string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.pending, router)
	c.primaries.forget(router)
	c.opts.Metrics.forgetRouter(router)
}

// parkUntilSwitches parks rp's router when a switch of its networks is not
// in the NB cache yet, and says whether it did. A parked router is not
// failed and not retried with backoff: unpark enqueues it once the switch is
// there (its network's reconcile succeeded, or the monitor brought the row).
// The check and the parking hold c.mu, as unpark does after the switch is in
// the cache, so that a router cannot be parked after its wake-up call.
func (c *Controller) parkUntilSwitches(ctx context.Context, router string, networks []string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	parked := false
	for _, n := range networks {
		if c.hasSwitch(ctx, n) {
			continue
		}
		if c.parked[n] == nil {
			c.parked[n] = map[string]bool{}
			// Level-triggered: whatever became of the network's last
			// reconcile, it is reconciled again.
			c.Enqueue(translator.Unit{Kind: translator.KindNetwork, Name: n})
		}
		c.parked[n][router] = true
		parked = true
	}
	return parked
}

// hasSwitch says whether the NB cache holds the switch of network. The
// caller holds c.mu. A switch noted (c.switches) is checked in the cache
// without a copy of the row: a reconnection refills the cache without
// deletion events, so a switch deleted meanwhile may still be noted (it
// is dropped; a refill under way notes it again). One not noted is looked
// up in the cache: the events that note it come after the cache has it.
func (c *Controller) hasSwitch(ctx context.Context, network string) bool {
	tc := c.nb.Cache()
	if tc == nil {
		// Let the sync find out.
		return true
	}
	if c.switches.has(tc, network) {
		return true
	}
	u := translator.Unit{Kind: translator.KindNetwork, Name: network}
	// Through the client index on the owner key (nb.Registry.ClientIndexes),
	// not a scan of every switch.
	probe := &nbmodel.LogicalSwitch{ExternalIDs: map[string]string{translator.KeyOwner: network}}
	var rows []*nbmodel.LogicalSwitch
	if err := c.nb.Where(probe).List(ctx, &rows); err != nil {
		return true
	}
	return slices.ContainsFunc(rows, func(r *nbmodel.LogicalSwitch) bool { return translator.OwnedBy(r.ExternalIDs, c.opts.Instance, u) })
}

// unpark enqueues the routers parked on network.
func (c *Controller) unpark(network string) {
	c.mu.Lock()
	routers := c.parked[network]
	delete(c.parked, network)
	c.mu.Unlock()
	for r := range routers {
		c.Enqueue(translator.Unit{Kind: translator.KindRouter, Name: r})
	}
}

// staleGateways says whether the OVN of c's SB may keep a moved gateway
// port's flows on its old chassis (translator.StaleGatewayBug): only then
// is a move finished with a nudge.
func (c *Controller) staleGateways() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return translator.StaleGatewayBug(c.release)
}

// moved records a gateway port moved away from a live chassis.
func (c *Controller) moved(router, to string) {
	c.mu.Lock()
	c.moves[router] = to
	c.mu.Unlock()
	select {
	case c.moveKick <- struct{}{}:
	default:
	}
}

// finishMoves completes the recorded gateway moves (ovn.FinishMoves: wait
// until bound on the new chassis, then one nudge of the chassis for all the
// moves of a burst) until ctx ends.
func (c *Controller) finishMoves(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.moveKick:
		}
		c.mu.Lock()
		moves := c.moves
		c.moves = map[string]string{}
		c.mu.Unlock()
		if len(moves) == 0 {
			continue
		}
		late, err := ovn.FinishMoves(ctx, fenced{c.nb}, c.sb, moves)
		if ctx.Err() != nil {
			return
		}
		if len(late) > 0 {
			c.opts.Log.Info("gateway move", "warning", ovn.DescribeLate(late, moves))
		}
		if err != nil {
			c.opts.Log.Info("gateway move: an old gateway may keep answering for a moved port until its ovn-controller recomputes", "error", err.Error())
			continue
		}
		c.opts.Log.Info("gateway ports moved and bound; chassis nudged to drop stale flows", "moves", len(moves), "option", "NB_Global options:"+nb.BFDMultOption)
	}
}

// fenced is the NB client of a reconcile: it sends no transaction once the
// context has ended. libovsdb's Transact sends even with an ended context;
// and when a transaction in flight is abandoned because the context ended
// (it may still commit), SyncWork retries its unit alone, which must not
// reach the NB either.
type fenced struct{ client.Client }

// A stop by signal reaches the context through two goroutines of the Go
// runtime (os/signal's loop, then signal.NotifyContext's), which on a
// busy machine wait for a processor while the workers, already running,
// go on: each could send one more transaction before the context ends.
// Yielding once before each transaction lets goroutines that were readied
// earlier run first (the scheduler's global queue is first in, first
// out), so a signal already delivered is almost always seen; it costs a
// microsecond per transaction. What remains is a window no Go program can
// close: a transaction sent before the runtime has seen the signal.
func (f fenced) Transact(ctx context.Context, ops ...ovsdb.Operation) ([]ovsdb.OperationResult, error) {
	runtime.Gosched()
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("not sent, the controller is stopping: %w", err)
	}
	return f.Client.Transact(ctx, ops...)
}
