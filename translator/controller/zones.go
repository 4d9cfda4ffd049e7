package controller

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/ovn-kubernetes/libovsdb/client"

	"github.com/kubevirt-ovn/kubevirt-ovn/nbmodel"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/chassiszone"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/nb"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/ovn"
)

// Zones runs kubevirt-ovn in interconnect mode: one Controller per zone,
// each writing its zone's NB, all planning from one Input (one gateway scheduler,
// one set of tunnel keys). Every zone's SB gives its local chassis; their
// union is the input's chassis. What an input change or a chassis change
// affects is reconciled in every zone.
type Zones struct {
	ctrls []*Controller
	input *translator.Input
	mu    sync.Mutex // serializes refreshChassis
	// claims keep each chassis in one zone; guarded by mu.
	claims chassiszone.Claims
	log    logr.Logger
}

// ZoneClients are one zone's name and its NB and SB clients.
type ZoneClients struct {
	Zone   string
	NB, SB client.Client
}

// NewZones returns the controllers of zones (sorted by name) over source;
// Run starts them. status may be nil.
func NewZones(zones []ZoneClients, source Source, status Status, opts Options) *Zones {
	g := &Zones{input: source.Input(), log: opts.Log}
	g.input.SetInterconnect()
	zones = slices.Clone(zones)
	slices.SortFunc(zones, func(a, b ZoneClients) int { return strings.Compare(a.Zone, b.Zone) })
	// Planning reads every zone's NB as held.
	held := make(translator.ZonesHeld, len(zones))
	indexes := make([]*nb.HeldIndex, len(zones))
	for i, z := range zones {
		indexes[i] = nb.NewHeldIndex(z.NB, opts.Instance)
		held[i] = indexes[i]
	}
	for i, z := range zones {
		o := opts
		o.Log = opts.Log.WithValues("zone", z.Zone)
		g.ctrls = append(g.ctrls, newController(z.NB, z.SB, source, status, o,
			zoneRole{zone: z.Zone, group: g, held: indexes[i], planHeld: held}))
	}
	return g
}

// NewZoneAgent returns the controller of one zone in a cluster whose OVN
// has one NB per zone: it writes zone's NB (nbc) and binds remote ports in
// its SB (sbc), following the allocator's decisions in store (gateway
// orders, tunnel keys) and taking every zone's chassis and offline load
// balancer members from it (ChassisChanged reads them again). It reports
// no status: the allocator does.
func NewZoneAgent(nbc, sbc client.Client, zone string, source Source, store interface {
	translator.Held
	Chassis() []translator.Chassis
	OfflineMembers() map[string][]translator.OfflineMember
	Activations() map[string][]translator.PortActivation
}, opts Options) *Controller {
	source.Input().SetFollowerZone(zone)
	held := nb.NewHeldIndex(nbc, opts.withDefaults().Instance)
	return newController(nbc, sbc, source, nil, opts, zoneRole{
		zone: zone, held: held, planHeld: translator.ZonesHeld{store, held}, chassisFrom: store.Chassis, offlineFrom: store.OfflineMembers,
		activatedFrom: store.Activations})
}

// EnqueueUnits schedules units in every zone.
func (g *Zones) EnqueueUnits(units []translator.Unit) {
	for _, c := range g.ctrls {
		c.EnqueueUnits(units)
	}
}

// Run runs every zone's controller until ctx ends. It first reads every
// zone's NB for the tunnel keys other tools' rows request, before the
// first allocation, and refuses to start when a zone runs VXLAN; the keys
// are read again on every resync, and so are the zones' offline load
// balancer members (also read on every Service_Monitor event).
func (g *Zones) Run(ctx context.Context) error {
	if err := g.refreshForeignKeys(ctx, true); err != nil {
		return err
	}
	go func() {
		ticker := time.NewTicker(g.ctrls[0].opts.Resync)
		defer ticker.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-ticker.C:
				_ = g.refreshForeignKeys(ctx, false)
				// Level-triggered: every zone's offline members again,
				// whatever events were missed.
				for _, c := range g.ctrls {
					g.refreshOfflineMembers(ctx, c)
				}
			}
		}
	}()
	errs := make([]error, len(g.ctrls))
	var wg sync.WaitGroup
	for i, c := range g.ctrls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = c.Run(ctx)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// refreshChassis reads every zone's local chassis into the input and
// enqueues, in every zone, the units that changes. A chassis two zones
// list as local stays in the zone that had it first (by zone name when
// both came at once); the later zone's claim is refused with an error
// naming the chassis and both zones (see chassiszone).
func (g *Zones) refreshChassis(ctx context.Context) {
	g.mu.Lock()
	defer g.mu.Unlock()
	var all []translator.Chassis
	for _, c := range g.ctrls {
		chassis, err := ovn.ZoneChassis(ctx, c.sb, c.zone)
		if err != nil {
			c.opts.Log.Info("reading SB chassis", "error", err.Error())
			return
		}
		all = append(all, chassis...)
	}
	all, conflicts := g.claims.Resolve(all)
	for _, cf := range conflicts {
		g.log.Error(cf, "refusing a zone's claim on a chassis another zone holds", "chassis", cf.Chassis, "zone", cf.Refused, "holder", cf.Kept)
	}
	g.EnqueueUnits(g.input.SetChassis(all, true))
}

// refreshOfflineMembers reads the load balancer members zone c's own
// health checks find offline into the input and enqueues, in every zone,
// the units of the load balancers whose members changed.
func (g *Zones) refreshOfflineMembers(ctx context.Context, c *Controller) {
	if c.sb == nil {
		return
	}
	down, err := ovn.OfflineMembers(ctx, c.sb)
	if err != nil {
		c.opts.Log.Info("reading SB health checks", "error", err.Error())
		return
	}
	g.EnqueueUnits(g.input.SetOfflineMembers(c.zone, down))
}

// refreshForeignKeys reads the keys other tools' rows request in every
// zone's NB into the input and enqueues, in every zone, the networks whose
// switch must move off one. At start (strict) a zone that cannot be read or
// runs VXLAN is an error; later it is logged, and the zone's last keys are
// kept.
func (g *Zones) refreshForeignKeys(ctx context.Context, strict bool) error {
	for _, c := range g.ctrls {
		zk, err := ovn.ReadZoneKeys(ctx, c.nb, c.opts.Instance)
		if err == nil {
			err = zk.CheckGeneve(c.zone)
		} else {
			err = fmt.Errorf("zone %s: %w", c.zone, err)
		}
		if err != nil {
			if strict {
				return err
			}
			c.opts.Log.Info("reading the tunnel keys other tools request", "error", err.Error())
			continue
		}
		g.EnqueueUnits(g.input.SetForeignKeys(ovn.ZoneKeysSource(c.zone), zk.Foreign))
	}
	return nil
}

// work is what unit plan up asks of this controller's NB.
func (c *Controller) work(up translator.UnitPlan) nb.Work {
	return nb.WorkOf(up, c.zone)
}

// switchNetworks are the networks whose switches router rp's rows hang
// from in this controller's NB.
func (c *Controller) switchNetworks(rp *translator.RouterPlan, rows []translator.Row) []string {
	var out []string
	for _, sp := range rp.SwitchPorts {
		sw := translator.SwitchName(sp.Network)
		if slices.ContainsFunc(rows, func(r translator.Row) bool { return r.Parent == sw }) {
			out = append(out, sp.Network)
		}
	}
	return out
}

// isHome says whether rows hold the router itself: this zone is its home.
func (c *Controller) isHome(rows []translator.Row) bool {
	return slices.ContainsFunc(rows, func(r translator.Row) bool {
		_, ok := r.Model.(*nbmodel.LogicalRouter)
		return ok
	})
}

// bindRemotePorts records which remote ports of this zone unit u's rows
// hold and binds them in the SB where ovn-northd does not (OVN before
// 23.09). A port whose binding northd has not created yet is bound when
// its SB event enqueues u again.
func (c *Controller) bindRemotePorts(ctx context.Context, u translator.Unit, rows []translator.Row) error {
	want := map[string]string{}
	for _, r := range rows {
		if p, ok := r.Model.(*nbmodel.LogicalSwitchPort); ok {
			if ch, ok := translator.RemoteBinding(p); ok {
				want[p.Name] = ch
			}
		}
	}
	c.mu.Lock()
	for port, owner := range c.remote {
		if _, ok := want[port]; owner == u && !ok {
			delete(c.remote, port)
		}
	}
	for port := range want {
		c.remote[port] = u
	}
	c.mu.Unlock()
	if len(want) == 0 || c.sb == nil {
		return nil
	}
	pending, err := ovn.BindRemotePorts(ctx, c.sb, want)
	if err != nil {
		return err
	}
	if len(pending) > 0 {
		c.opts.Log.V(2).Info("remote ports not bound yet", "unit", u.String(), "ports", pending, "chassis", slices.Sorted(maps.Values(want)))
	}
	return nil
}

// remoteOwner is the unit whose rows hold remote port port in this zone.
func (c *Controller) remoteOwner(port string) (translator.Unit, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	u, ok := c.remote[port]
	return u, ok
}
