package controller

import (
	"context"
	"maps"
	"slices"
	"sync"

	"github.com/ovn-kubernetes/libovsdb/model"
	"github.com/ovn-kubernetes/libovsdb/ovsdb"
	"k8s.io/client-go/util/workqueue"

	"github.com/kubevirt-ovn/kubevirt-ovn/nbmodel"
	"github.com/kubevirt-ovn/kubevirt-ovn/nbmodel/sbmodel"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/nb"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/ovn"
)

// Tunnel key collisions (interconnect mode, README): after each commit to
// a zone's NB, and on each SB change of our switches' datapath bindings and
// our ports' bindings, the keys ovn-northd gave our switches and ports
// (the zone SB's monitor, ovn.ConnectZoneSB) are compared with the ones
// they request (translator.CheckTunnelKeys), one network (its switch and
// the ports of ours on it) at a time. A mismatch is logged as an error,
// counted in kubevirt_ovn_tunnel_key_mismatches{zone}, reported on the
// routers attached to the network when the Status is a KeyStatus, and
// handed to Options.KeysChanged (a zone agent publishes them in its
// OVNZone, for the allocator to report); all of it clears when the
// mismatch does.

// KeyStatus is a Status that also shows tunnel key collisions on routers
// (the Kubernetes source: a TunnelKeys condition and a Warning Event).
type KeyStatus interface {
	// TunnelKeys reports the collisions of the networks attached to
	// router in zone; none clears them.
	TunnelKeys(ctx context.Context, router, zone string, mismatches []translator.KeyMismatch) error
}

// keyChecks are one zone controller's tunnel key checks: the networks to
// check, and the mismatches found, by network.
type keyChecks struct {
	queue workqueue.TypedInterface[string]
	// done is closed when the worker has returned.
	done chan struct{}

	mu sync.Mutex
	// mismatches and routers (those attached to the switch) are by
	// network, from the network's last check.
	mismatches map[string][]translator.KeyMismatch
	routers    map[string][]string
	// reported are the mismatches last reported per router.
	reported map[string][]translator.KeyMismatch
	// nudged is the free key each network's switch was last nudged to
	// take (nb.NudgeRequestedKey), until its mismatch is gone: one nudge
	// per mismatch.
	nudged map[string]int
}

// checksKeys says whether c checks tunnel keys: in interconnect mode, with
// the zone's SB.
func (c *Controller) checksKeys() bool { return c.zone != "" && c.sb != nil }

// startKeyChecks checks the networks enqueued by checkKeys until ctx ends
// or stopKeyChecks is called.
func (c *Controller) startKeyChecks(ctx context.Context) {
	c.keys = &keyChecks{
		queue:      workqueue.NewTyped[string](),
		done:       make(chan struct{}),
		mismatches: map[string][]translator.KeyMismatch{},
		routers:    map[string][]string{},
		nudged:     map[string]int{},
		reported:   map[string][]translator.KeyMismatch{},
	}
	c.opts.Metrics.setKeyMismatches(c.zone, 0)
	go func() {
		<-ctx.Done()
		c.keys.queue.ShutDown()
	}()
	go func() {
		defer close(c.keys.done)
		for {
			n, quit := c.keys.queue.Get()
			if quit {
				return
			}
			c.checkNetwork(ctx, n)
			c.keys.queue.Done(n)
		}
	}()
}

// stopKeyChecks stops the checks and returns once the one in progress, if
// any, has.
func (c *Controller) stopKeyChecks() {
	if c.keys == nil {
		return
	}
	c.keys.queue.ShutDown()
	<-c.keys.done
}

// checkKeys schedules the tunnel key check of networks.
func (c *Controller) checkKeys(networks ...string) {
	if c.keys == nil {
		return
	}
	for _, n := range networks {
		c.keys.queue.Add(n)
	}
}

// checkMismatched schedules the check of every network with a mismatch
// now: a datapath not ours changed, which may have freed a key.
func (c *Controller) checkMismatched() {
	if c.keys == nil {
		return
	}
	c.keys.mu.Lock()
	networks := slices.Collect(maps.Keys(c.keys.mismatches))
	c.keys.mu.Unlock()
	c.checkKeys(networks...)
}

// onSBKeys schedules the checks an SB change calls for: the network of a
// switch of ours whose datapath binding changed, of a port of ours whose
// binding changed, or, for another datapath, the networks with a
// mismatch.
func (c *Controller) onSBKeys(ctx context.Context, table string, m model.Model) {
	if c.keys == nil {
		return
	}
	switch table {
	case sbmodel.DatapathBindingTable:
		dp := m.(*sbmodel.DatapathBinding)
		if n, ok := c.networkOfSwitch(ctx, dp.ExternalIDs["logical-switch"]); ok {
			c.checkKeys(n)
			return
		}
		c.checkMismatched()
	case sbmodel.PortBindingTable:
		pb := m.(*sbmodel.PortBinding)
		if n, ok := c.networkOfSwitch(ctx, ovn.SwitchOfDatapath(ctx, c.sb, pb.Datapath)); ok {
			c.checkKeys(n)
		}
	}
}

// networkOfSwitch is the network owning the NB switch uuid, if it is ours.
func (c *Controller) networkOfSwitch(ctx context.Context, uuid string) (string, bool) {
	if uuid == "" {
		return "", false
	}
	ls := &nbmodel.LogicalSwitch{UUID: uuid}
	if err := c.nb.Get(ctx, ls); err != nil {
		return "", false
	}
	u, ok := translator.OwnerOf(ls.ExternalIDs, c.opts.Instance)
	if !ok || u.Kind != translator.KindNetwork {
		return "", false
	}
	return u.Name, true
}

// nudgeFreeKey nudges network's switch once (nb.NudgeRequestedKey) when
// its requested key is free but the SB gave it another (ovn-northd from
// 25.09 on gives a freed key only to a row that changes); the SB change
// that follows checks the network again.
func (c *Controller) nudgeFreeKey(ctx context.Context, network, uuid string, ms []translator.KeyMismatch) {
	key := 0
	for _, m := range ms {
		if m.Port == "" && m.Free {
			key = m.Key
		}
	}
	k := c.keys
	k.mu.Lock()
	done := key == 0 || k.nudged[network] == key
	if key == 0 {
		delete(k.nudged, network)
	} else {
		k.nudged[network] = key
	}
	k.mu.Unlock()
	if done {
		return
	}
	if err := nb.NudgeRequestedKey(ctx, fenced{c.nb}, uuid, key); err != nil {
		c.opts.Log.Info("nudging a switch to take its free tunnel key", "network", network, "key", key, "error", err.Error())
		return
	}
	c.opts.Log.Info("switch nudged to take its tunnel key: it was free but ovn-northd had given the switch another (it gives a freed key only to a row that changes, from OVN 25.09 on)", "network", network, "key", key)
}

// checkNetwork compares the keys network's switch and our ports on it
// request in this zone's NB with those the SB gave them, and reports what
// changed.
func (c *Controller) checkNetwork(ctx context.Context, network string) {
	if ctx.Err() != nil {
		return
	}
	sw, ports, routers, err := c.switchRows(ctx, network)
	if err != nil {
		c.opts.Log.Info("reading a network's switch from the NB cache for its tunnel keys", "network", network, "error", err.Error())
		return
	}
	var ms []translator.KeyMismatch
	if sw != nil {
		rows := []translator.Row{{Model: sw}}
		var names []string
		for _, p := range ports {
			rows = append(rows, translator.Row{Model: p, Parent: sw.Name})
			names = append(names, p.Name)
		}
		want := translator.KeysOfRows(rows, nil)
		have, err := ovn.CachedSBKeys(ctx, c.sb, names)
		if err != nil {
			c.opts.Log.Info("reading tunnel keys from the SB", "network", network, "error", err.Error())
			return
		}
		ms = translator.CheckTunnelKeys(c.zone, want, have)
		c.nudgeFreeKey(ctx, network, sw.UUID, ms)
	}

	k := c.keys
	k.mu.Lock()
	old := k.mismatches[network]
	if len(ms) == 0 {
		delete(k.mismatches, network)
	} else {
		k.mismatches[network] = ms
	}
	affected := map[string]bool{}
	for _, r := range k.routers[network] {
		affected[r] = true
	}
	for _, r := range routers {
		affected[r] = true
	}
	if len(routers) == 0 {
		delete(k.routers, network)
	} else {
		k.routers[network] = routers
	}
	total := 0
	var zone []translator.KeyMismatch
	for _, n := range slices.Sorted(maps.Keys(k.mismatches)) {
		total += len(k.mismatches[n])
		zone = append(zone, k.mismatches[n]...)
	}
	// Each affected router's mismatches: those of every network it is
	// attached to.
	byRouter := map[string][]translator.KeyMismatch{}
	for r := range affected {
		byRouter[r] = nil
		for n, rs := range k.routers {
			if slices.Contains(rs, r) {
				byRouter[r] = append(byRouter[r], k.mismatches[n]...)
			}
		}
		if slices.Equal(byRouter[r], k.reported[r]) {
			delete(byRouter, r)
		}
	}
	k.mu.Unlock()

	c.opts.Metrics.setKeyMismatches(c.zone, total)
	if c.opts.KeysChanged != nil && !slices.Equal(old, ms) {
		c.opts.KeysChanged(zone)
	}
	for _, m := range ms {
		if !slices.Contains(old, m) {
			c.opts.Log.Error(nil, "tunnel key collision", "network", network, "switch", m.Switch, "port", m.Port,
				"requested", m.Key, "actual", m.Actual, "message", m.String())
		}
	}
	if len(old) > 0 && len(ms) == 0 {
		c.opts.Log.Info("tunnel key collision resolved: the SB gives every switch and port of the network the key it requests", "network", network)
	}
	ks, ok := c.status.(KeyStatus)
	if !ok {
		return
	}
	for _, r := range slices.Sorted(maps.Keys(byRouter)) {
		if err := ks.TunnelKeys(ctx, r, c.zone, byRouter[r]); err != nil {
			c.opts.Log.Info("writing the tunnel key status of a router", "router", r, "error", err.Error())
			continue
		}
		k.mu.Lock()
		k.reported[r] = byRouter[r]
		k.mu.Unlock()
	}
}

// switchRows are, from the NB cache, network's switch (nil when this
// zone's NB has none of ours), our ports on it, and the routers whose
// ports are on it (sorted).
func (c *Controller) switchRows(ctx context.Context, network string) (*nbmodel.LogicalSwitch, []*nbmodel.LogicalSwitchPort, []string, error) {
	u := translator.Unit{Kind: translator.KindNetwork, Name: network}
	ls := &nbmodel.LogicalSwitch{}
	var rows []*nbmodel.LogicalSwitch
	owner := model.Condition{Field: &ls.ExternalIDs, Function: ovsdb.ConditionIncludes, Value: map[string]string{translator.KeyOwner: network}}
	if err := c.nb.WhereAll(ls, owner).List(ctx, &rows); err != nil {
		return nil, nil, nil, err
	}
	i := slices.IndexFunc(rows, func(r *nbmodel.LogicalSwitch) bool { return translator.OwnedBy(r.ExternalIDs, c.opts.Instance, u) })
	if i < 0 {
		return nil, nil, nil, nil
	}
	sw := rows[i]
	var ports []*nbmodel.LogicalSwitchPort
	routers := map[string]bool{}
	for _, uuid := range sw.Ports {
		p := &nbmodel.LogicalSwitchPort{UUID: uuid}
		if err := c.nb.Get(ctx, p); err != nil {
			continue // not ours: not monitored
		}
		o, ok := translator.OwnerOf(p.ExternalIDs, c.opts.Instance)
		if !ok {
			continue
		}
		ports = append(ports, p)
		if o.Kind == translator.KindRouter {
			routers[o.Name] = true
		}
	}
	return sw, ports, slices.Sorted(maps.Keys(routers)), nil
}
