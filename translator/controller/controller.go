// Package controller runs the translator continuously, sample-controller
// style: events from the input source, from the rows we own in the NB and
// from the SB chassis enqueue the units (routers and networks) they affect on
// a rate-limited workqueue; workers reconcile one unit each from the current
// input. Level-triggered: a reconcile computes the unit's whole desired state,
// so restarts, missed events and drift heal.
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
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/ovn-kubernetes/libovsdb/cache"
	"github.com/ovn-kubernetes/libovsdb/client"
	"github.com/ovn-kubernetes/libovsdb/model"
	"github.com/ovn-kubernetes/libovsdb/ovsdb"
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
	// KeysChanged, in interconnect mode with the zone's SB, is called
	// with every tunnel key mismatch of the zone (sorted by network,
	// switch, port) whenever that set changes; a zone agent publishes it
	// for the allocator. It must not block.
	KeysChanged func([]translator.KeyMismatch)
}

// Controller reconciles units from a Source into the NB.
type Controller struct {
	nb      client.Client
	sb      client.Client // nil: gateways come from the routers' specs
	source  Source
	input   *translator.Input
	held    *nb.HeldIndex
	parents *nb.ParentIndex
	status  Status
	opts    Options
	queue   workqueue.TypedRateLimitingInterface[translator.Unit]
	// primaries say when a router's primary gateway changed.
	primaries primaries

	mu sync.Mutex
	// pending is the nb_cfg each router waits for hv_cfg to reach.
	pending map[string]int
	// parked are the routers waiting for a network's switch, by network.
	parked map[string]map[string]bool
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
	// chassisFrom, for a zone agent, gives every zone's chassis.
	chassisFrom func() []translator.Chassis
	// keys are the tunnel key checks of a zone's controller (keys.go).
	keys *keyChecks

	// onReconcile, for tests, sees every unit reconciled; active counts
	// the reconciles in progress.
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
	// chassisFrom, for a zone agent, gives every zone's chassis.
	chassisFrom func() []translator.Chassis
}

func newController(nbc, sb client.Client, source Source, status Status, opts Options, role zoneRole) *Controller {
	opts = opts.withDefaults()
	if role.held == nil {
		role.held = nb.NewHeldIndex(nbc, opts.Instance)
	}
	if role.planHeld == nil {
		role.planHeld = role.held
	}
	c := &Controller{
		nb: nbc, sb: sb, source: source, status: status, opts: opts,
		input: source.Input(), held: role.held, parents: nb.NewParentIndex(nbc),
		zone: role.zone, group: role.group, planHeld: role.planHeld, chassisFrom: role.chassisFrom,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.DefaultTypedControllerRateLimiter[translator.Unit](),
			workqueue.TypedRateLimitingQueueConfig[translator.Unit]{Name: "units"}),
		pending:  map[string]int{},
		parked:   map[string]map[string]bool{},
		moves:    map[string]string{},
		moveKick: make(chan struct{}, 1),
		remote:   map[string]translator.Unit{},
	}
	if opts.Metrics != nil {
		opts.Metrics.watchQueue(c.queue)
	}
	return c
}

// Enqueue schedules a unit for reconciliation.
func (c *Controller) Enqueue(u translator.Unit) { c.queue.Add(u) }

// EnqueueAll schedules every unit in the input and every unit owning rows,
// networks first: routers hang from their switches.
func (c *Controller) EnqueueAll(ctx context.Context) {
	units := c.input.Units()
	if present, err := nb.PresentUnits(ctx, c.nb, c.opts.Instance); err == nil {
		units = append(units, present...)
	}
	networksFirst := func(u translator.Unit) bool { return u.Kind != translator.KindNetwork }
	slices.SortStableFunc(units, func(a, b translator.Unit) int {
		return cmpBool(networksFirst(a), networksFirst(b))
	})
	for _, u := range units {
		c.Enqueue(u)
	}
}

// EnqueueUnits schedules units, networks first; a source calls it with
// what translator.Input.Set returned.
func (c *Controller) EnqueueUnits(units []translator.Unit) {
	for _, u := range units {
		c.Enqueue(u)
	}
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
	if c.group != nil {
		c.group.refreshChassis(ctx)
		return
	}
	if c.chassisFrom != nil {
		c.EnqueueUnits(c.input.SetChassis(c.chassisFrom(), true))
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
	c.nb.Cache().AddEventHandler(&cache.EventHandlerFuncs{
		AddFunc: func(table string, m model.Model) { c.onNB(table, nil, m) },
		UpdateFunc: func(table string, old, m model.Model) {
			// Only a change its owner would write back: not a switch's
			// list of ports gaining a router's port (each router commit
			// on a shared external network would otherwise reconcile
			// that network, whose size grows with the routers).
			if nb.ManagedChanged(table, old, m) {
				c.onNB(table, old, m)
			}
		},
		DeleteFunc: func(table string, m model.Model) { c.onNB(table, m, nil) },
	})
	if c.sb != nil {
		c.sb.Cache().AddEventHandler(&cache.EventHandlerFuncs{
			AddFunc:    func(table string, m model.Model) { c.onSB(ctx, table, m) },
			UpdateFunc: func(table string, _, m model.Model) { c.onSB(ctx, table, m) },
			DeleteFunc: func(table string, m model.Model) { c.onSB(ctx, table, m) },
		})
	}
	if c.sb != nil {
		c.refreshChassis(ctx)
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

// onSB refreshes the gateway candidates when a chassis changes, and
// enqueues the router whose gateway port's binding changed.
func (c *Controller) onSB(ctx context.Context, table string, m model.Model) {
	c.onSBKeys(ctx, table, m)
	switch table {
	case sbmodel.ChassisTable:
		c.refreshChassis(ctx)
	case sbmodel.PortBindingTable:
		// A gateway port bound elsewhere (BFD failover, a move): its
		// router's status says where it is active. The monitor's other
		// bindings are remote ports (interconnect): one of ours that
		// northd created or someone rebound is bound again by its unit
		// (OVN before 23.09); others' reconcile nothing.
		pb := m.(*sbmodel.PortBinding)
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
	for _, u := range nb.Affected(c.nb, table, old, cur, c.opts.Instance) {
		c.Enqueue(u)
	}
}

func (c *Controller) processNext(ctx context.Context) bool {
	u, quit := c.queue.Get()
	if quit {
		return false
	}
	defer c.queue.Done(u)
	// After ShutDown, Get keeps handing out what is queued: a stopped
	// controller must not reconcile it.
	if ctx.Err() != nil {
		return false
	}
	start := time.Now()
	if c.onReconcile != nil {
		c.onReconcile(u)
	}
	c.active.Add(1)
	err := c.reconcile(ctx, u)
	c.active.Add(-1)
	if ctx.Err() != nil {
		// Stopped mid-reconcile: not a failure, and not retried.
		return false
	}
	c.opts.Metrics.observeReconcile(u, time.Since(start), err)
	retryOrForget(c.queue, c.opts.Log, "reconcile", u, err)
	return true
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

// reconcile brings one unit to its desired rows and reports a router's
// status: plan the unit, write its rows (unless a router waits for its
// networks' switches), then say what came of it.
func (c *Controller) reconcile(ctx context.Context, u translator.Unit) error {
	log := c.opts.Log.WithValues("kind", u.Kind, "name", u.Name)
	if c.zone != "" {
		log = log.WithValues("zone", c.zone)
	}
	up := c.input.Plan(u, c.opts.Instance, c.planHeld)
	if up.Network != nil {
		for _, n := range up.Network.KeyNotes {
			log.Info("tunnel key moved", "note", n)
		}
	}
	work := c.work(up)
	rp := up.Router
	if len(up.Errs) > 0 {
		rp = nil
	}
	if u.Kind == translator.KindRouter {
		if rp != nil && c.parkUntilSwitches(ctx, rp.Name, c.switchNetworks(rp, work.Rows)) {
			log.V(2).Info("waiting for the switches of its networks")
			c.opts.Metrics.observeParked()
			return nil
		}
		if up.InInput && c.status != nil {
			if err := c.status.Prepare(ctx, u.Name); err != nil {
				return err
			}
		}
	}
	var before []string
	if rp != nil && rp.Gateway != nil {
		before = c.held.HeldGateways(u.Name)
	}
	nbCfg, unitErr, err := c.write(ctx, log, work)
	if err != nil {
		return err
	}
	if u.Kind == translator.KindNetwork {
		c.checkKeys(u.Name)
	} else if rp != nil {
		c.checkKeys(c.switchNetworks(rp, work.Rows)...)
	}
	if u.Kind != translator.KindRouter {
		// A VM interface with bad input leaves only its port as it is; say
		// why, since no unit fails for it.
		if up.Network != nil {
			for _, e := range up.Network.VMErrors {
				log.Info("VM interface left as it is", "error", e.Error())
			}
		}
		if unitErr == nil && u.Kind == translator.KindNetwork {
			c.unpark(u.Name)
		}
		return unitErr
	}
	return c.reportRouter(ctx, up, work, before, nbCfg, unitErr)
}

// write commits one unit's work (and, in a zone, binds its remote ports),
// logging its changes and notes. unitErr is the unit's failure; err a
// failure to write at all (a stopped controller, a lost NB).
func (c *Controller) write(ctx context.Context, log logr.Logger, work nb.Work) (nbCfg int, unitErr, err error) {
	if err := ctx.Err(); err != nil {
		// Stopped while planning: write nothing.
		return 0, nil, err
	}
	u := work.Unit
	res, err := nb.SyncWork(ctx, fenced{c.nb}, []nb.Work{work}, nb.SyncOptions{
		Parents:   c.parents,
		Instance:  c.opts.Instance,
		BumpNBCfg: true,
		OnCommit:  c.opts.Metrics.observeCommit,
	})
	if err != nil {
		return 0, nil, err
	}
	changes := 0
	for _, r := range res.Units {
		if r.Unit == u {
			unitErr = r.Err
			changes += len(r.Changes)
		}
	}
	if changes > 0 {
		log.Info("synced", "changes", changes, "nbCfg", res.NBCfg)
	}
	if c.zone != "" && unitErr == nil {
		unitErr = c.bindRemotePorts(ctx, u, work.Rows)
	}
	for _, r := range res.Units {
		for _, n := range r.Notes {
			log.Info("note", "note", n)
		}
	}
	return res.NBCfg, unitErr, nil
}

// reportRouter says what came of a router's reconcile: its status (Ready,
// gateway, Realized), its removal once its rows are gone, a gateway move
// to finish. before is its gateway order in the NB before the write.
func (c *Controller) reportRouter(ctx context.Context, up translator.UnitPlan, work nb.Work, before []string, nbCfg int, unitErr error) error {
	name := up.Unit.Name
	if !up.InInput {
		c.forget(name)
		if unitErr == nil && c.status != nil {
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
	if !c.opts.SkipMoveNudge && home && unitErr == nil && len(before) > 0 && len(st.Gateway) > 0 && before[0] != st.Gateway[0] && ovn.IsChassis(ctx, c.sb, before[0]) {
		c.moved(name, st.Gateway[0])
	}
	st.Realized = c.realized(ctx, name, nbCfg, unitErr == nil)
	c.primaries.note(name, &st)
	c.opts.Metrics.setRouterState(name, st)
	if c.status != nil {
		if err := c.status.Report(ctx, name, st); err != nil {
			return errors.Join(unitErr, fmt.Errorf("writing status: %w", err))
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

// hasSwitch says whether the NB cache holds the switch of network.
func (c *Controller) hasSwitch(ctx context.Context, network string) bool {
	u := translator.Unit{Kind: translator.KindNetwork, Name: network}
	ls := &nbmodel.LogicalSwitch{}
	var rows []*nbmodel.LogicalSwitch
	owner := model.Condition{Field: &ls.ExternalIDs, Function: ovsdb.ConditionIncludes, Value: map[string]string{translator.KeyOwner: network}}
	if err := c.nb.WhereAll(ls, owner).List(ctx, &rows); err != nil {
		// Let the sync find out.
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

func (f fenced) Transact(ctx context.Context, ops ...ovsdb.Operation) ([]ovsdb.OperationResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("not sent, the controller is stopping: %w", err)
	}
	return f.Client.Transact(ctx, ops...)
}
