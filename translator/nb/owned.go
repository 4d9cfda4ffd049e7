package nb

import (
	"cmp"
	"context"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/ovn-kubernetes/libovsdb/cache"
	"github.com/ovn-kubernetes/libovsdb/client"
	"github.com/ovn-kubernetes/libovsdb/model"

	"github.com/kubevirt-ovn/kubevirt-ovn/nbmodel"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator"
)

// HasTable says whether c's client model holds table: the NB client model
// holds an optional table (Static_MAC_Binding, which OVN 22.03 lacks) only
// when the server's schema has it.
func HasTable(c client.Client, table string) bool {
	tc := c.Cache()
	if tc == nil {
		return false
	}
	_, ok := tc.DatabaseModel().Types()[table]
	return ok
}

// eachOwned calls visit with every cached row of ours, table by table in
// registry order, from one view of the cache. It reads the rows in place:
// visit must not keep or change them.
func eachOwned(reg *Registry, c client.Client, instance string, visit func(t *Table, u translator.Unit, row any)) {
	v := takeView(c, reg)
	for _, t := range reg.tables {
		owner := v.walkOwner(t, instance)
		for _, m := range v.rows(t) {
			if u, ok := owner(m); ok {
				visit(t, u, m)
			}
		}
	}
}

// walkOwner is the owner of a row of t for a walk over the whole table:
// of a table owned through another, from one map of the owning rows.
func (v view) walkOwner(t *Table, instance string) func(model.Model) (translator.Unit, bool) {
	o := t.OwnedThrough
	if o == nil {
		return func(m model.Model) (translator.Unit, bool) { return translator.OwnerOf(externalIDs(m), instance) }
	}
	owners := v.ownerOfKey(v.reg.byName[o.Table], instance)
	return func(m model.Model) (translator.Unit, bool) {
		u, ok := owners[field(m, o.Column).String()]
		return u, ok
	}
}

// PresentUnits lists the units that own rows in c's cache.
func PresentUnits(ctx context.Context, c client.Client, instance string) ([]translator.Unit, error) {
	return Default.PresentUnits(ctx, c, instance)
}

// PresentUnits is the package function for registry r.
func (r *Registry) PresentUnits(_ context.Context, c client.Client, instance string) ([]translator.Unit, error) {
	seen := map[translator.Unit]bool{}
	v := takeView(c, r)
	for _, t := range r.tables {
		owner := v.walkOwner(t, instance)
		for _, m := range v.rows(t) {
			u, ok := owner(m)
			switch {
			case ok && t.OwnerKeys():
				seen[u] = true
			case ok:
				// A row owned through another row makes no unit
				// present: that row does.
			case t.OrphanUnit != nil:
				// Owned through a key no row of ours has: the unit
				// our naming gives that key (Table.OrphanUnit), the
				// router whose gateway port and router were deleted
				// by hand, its binding left. Its sync deletes the
				// binding if the NB holds no port of that name.
				if u, ok := t.OrphanUnit(field(m, t.OwnedThrough.Column).String()); ok {
					seen[u] = true
				}
			}
		}
	}
	units := slices.Collect(maps.Keys(seen))
	slices.SortFunc(units, translator.CompareUnits)
	return units, nil
}

// CountOwned counts the rows of ours per table with owner keys, from the
// cache's sizes (the monitor holds only our rows of those tables): a count
// costs nothing per row. A table owned through another row is left out:
// its rows are ours only through a lookup each.
func CountOwned(c client.Client, instance string) map[string]int {
	out := map[string]int{}
	v := takeView(c, Default)
	for _, t := range Default.tables {
		if rc := v.tables[t]; rc != nil && t.OwnerKeys() {
			out[t.Name] = rc.Len()
		}
	}
	return out
}

// HeldClaims reads from the rows instance owns in c's cache who holds each
// SNAT IP, internal network and VM address now, for Snapshot.Held: the
// first claimant keeps what it holds.
func HeldClaims(_ context.Context, c client.Client, instance string) (translator.Claims, error) {
	held := newClaims()
	gws := gateways{}
	eachOwned(Default, c, instance, func(_ *Table, u translator.Unit, row any) {
		for _, cl := range claimsOf(u, row) {
			cl.put(held)
		}
		if gc, ok := row.(*nbmodel.GatewayChassis); ok && u.Kind == translator.KindRouter {
			gws.set(u.Name, gc.UUID, gc)
		}
	})
	held.Gateways = map[string][]string{}
	for r := range gws {
		held.Gateways[r] = gws.order(r)
	}
	return held, nil
}

func newClaims() translator.Claims {
	return translator.Claims{SNATIPs: map[string]string{}, Internal: map[string]string{}, VMAddresses: map[string]string{},
		Keys:        translator.TunnelKeys{Switches: map[string]int{}, Ports: map[string]int{}},
		FloatingIPs: map[string]string{}, FixedIPs: map[string]string{}}
}

// gateways are the Gateway_Chassis rows of each router, by UUID.
type gateways map[string]map[string]*nbmodel.GatewayChassis

func (g gateways) set(router, uuid string, gc *nbmodel.GatewayChassis) {
	if g[router] == nil {
		g[router] = map[string]*nbmodel.GatewayChassis{}
	}
	g[router][uuid] = gc
}

func (g gateways) remove(router, uuid string) {
	delete(g[router], uuid)
	if len(g[router]) == 0 {
		delete(g, router)
	}
}

// order is router's chassis by priority, highest first, each once.
func (g gateways) order(router string) []string {
	rows := slices.Collect(maps.Values(g[router]))
	slices.SortFunc(rows, func(a, b *nbmodel.GatewayChassis) int {
		return cmp.Or(cmp.Compare(b.Priority, a.Priority), strings.Compare(a.ChassisName, b.ChassisName))
	})
	var out []string
	for _, gc := range rows {
		if !slices.Contains(out, gc.ChassisName) {
			out = append(out, gc.ChassisName)
		}
	}
	return out
}

// claim is one thing a row says of what the NB holds: for key (an SNAT
// IP, a network, a VM address, a switch or port name), value (the router
// or VM port holding it, or the tunnel key it requests).
type claim struct {
	kind  int // claimSNAT, claimInternal, claimVM, claimSwitchKey, claimPortKey
	key   string
	value string
}

const (
	claimSNAT = iota
	claimInternal
	claimVM
	claimSwitchKey  // key: switch name, value: its tunnel key
	claimPortKey    // key: port name, value: its tunnel key
	claimFloatingIP // key: external IP, value: the floating IP's spec.id
	claimFixedIP    // key: "router logical-IP", value: the floating IP's spec.id
)

func (cl claim) put(held translator.Claims) {
	switch cl.kind {
	case claimSNAT:
		held.SNATIPs[cl.key] = cl.value
	case claimInternal:
		held.Internal[cl.key] = cl.value
	case claimVM:
		held.VMAddresses[cl.key] = cl.value
	case claimSwitchKey:
		held.Keys.Switches[cl.key], _ = strconv.Atoi(cl.value)
	case claimPortKey:
		held.Keys.Ports[cl.key], _ = strconv.Atoi(cl.value)
	case claimFloatingIP:
		held.FloatingIPs[cl.key] = cl.value
	case claimFixedIP:
		held.FixedIPs[cl.key] = cl.value
	}
}

// claimsOf says what a row of unit u holds: a gateway port its SNAT IP, a
// router's port on a network switch that network, a VM port its MAC and IP,
// a floating IP's NAT row (or a router's load balancer row with a floating IP
// on its VIP) its external IP and, on its router, its fixed IP.
func claimsOf(u translator.Unit, row any) []claim {
	out := keyClaims(row)
	return append(out, ownerClaims(u, row)...)
}

// keyClaims are the tunnel keys a switch or switch port of ours requests.
func keyClaims(row any) []claim {
	switch r := row.(type) {
	case *nbmodel.LogicalSwitch:
		if k := r.OtherConfig[translator.KeyTunnel]; k != "" {
			return []claim{{claimSwitchKey, r.Name, k}}
		}
	case *nbmodel.LogicalSwitchPort:
		if k := r.Options[translator.KeyTunnel]; k != "" {
			return []claim{{claimPortKey, r.Name, k}}
		}
	}
	return nil
}

func ownerClaims(u translator.Unit, row any) []claim {
	switch p := row.(type) {
	case *nbmodel.LoadBalancer:
		// A floating IP on a load balancer's VIP: a VIP key, no NAT.
		id := p.ExternalIDs[translator.KeyFloatingIP]
		if u.Kind != translator.KindRouter || id == "" {
			return nil
		}
		ext, err1 := netip.ParseAddr(p.ExternalIDs[translator.KeyFloatingIPAddress])
		vip, err2 := netip.ParseAddr(p.ExternalIDs[translator.KeyLBVIP])
		if err1 != nil || err2 != nil {
			return nil
		}
		return []claim{{claimFloatingIP, ext.String(), id}, {claimFixedIP, u.Name + " " + vip.String(), id}}
	case *nbmodel.NAT:
		id := p.ExternalIDs[translator.KeyFloatingIP]
		if u.Kind != translator.KindRouter || p.Type != nbmodel.NATTypeDNATAndSNAT || id == "" {
			return nil
		}
		ext, err1 := netip.ParseAddr(p.ExternalIP)
		fixed, err2 := netip.ParseAddr(p.LogicalIP)
		if err1 != nil || err2 != nil {
			return nil
		}
		return []claim{{claimFloatingIP, ext.String(), id}, {claimFixedIP, u.Name + " " + fixed.String(), id}}
	case *nbmodel.LogicalRouterPort:
		if u.Kind != translator.KindRouter || p.Name != translator.GatewayPortName(u.Name) || len(p.Networks) == 0 {
			return nil
		}
		// The SNAT IP, and the router's external IPv6 address (a claim
		// of the same kind: the families do not meet).
		var out []claim
		for _, n := range p.Networks {
			if pfx, err := netip.ParsePrefix(n); err == nil {
				out = append(out, claim{claimSNAT, pfx.Addr().String(), u.Name})
			}
		}
		return out
	case *nbmodel.LogicalSwitchPort:
		switch {
		case u.Kind == translator.KindRouter:
			// kv-stor-<network>_<router>: the router's port on an internal
			// network.
			rest, ok := strings.CutPrefix(p.Name, translator.NamePrefix+"stor-")
			if network, ok2 := strings.CutSuffix(rest, "_"+u.Name); ok && ok2 {
				return []claim{{claimInternal, network, u.Name}}
			}
		case p.ExternalIDs[translator.KeyVMI] != "" && len(p.Addresses) == 1:
			// "MAC IPv4 [IPv6...]": each is the port's.
			if f := strings.Fields(p.Addresses[0]); len(f) >= 2 {
				out := make([]claim, 0, len(f))
				for _, a := range f {
					out = append(out, claim{claimVM, u.Name + " " + a, p.Name})
				}
				return out
			}
		}
	}
	return nil
}

// HeldIndex is who holds what in the NB, kept up to date from the NB
// cache's events, for a controller that plans one unit at a time: reading
// it costs a map lookup, not a walk over every row. It implements
// translator.Held. It trails the cache by the events not yet delivered; a
// claim read in that moment is the one before, and the event that changes
// it enqueues its owner again.
type HeldIndex struct {
	instance string
	mu       sync.RWMutex
	rows     map[string][]claim // row UUID -> what it holds
	held     translator.Claims
	gws      gateways
	gwOwner  map[string]string // Gateway_Chassis UUID -> router
}

// NewHeldIndex indexes c's cache for instance: its rows now and every
// change after.
func NewHeldIndex(c client.Client, instance string) *HeldIndex {
	h := &HeldIndex{instance: instance, rows: map[string][]claim{}, gws: gateways{}, gwOwner: map[string]string{},
		held: newClaims()}
	c.Cache().AddEventHandler(&cache.EventHandlerFuncs{
		AddFunc:    func(table string, m model.Model) { h.update(table, m, false) },
		UpdateFunc: func(table string, _, m model.Model) { h.update(table, m, false) },
		DeleteFunc: func(table string, m model.Model) { h.update(table, m, true) },
	})
	// Rows the cache held before the handler: an event for one of them
	// replaces what this walk put, so the order does not matter.
	eachOwned(Default, c, instance, func(t *Table, _ translator.Unit, row any) {
		h.update(t.Name, row.(model.Model), false)
	})
	return h
}

func (h *HeldIndex) update(table string, m model.Model, deleted bool) {
	t := Lookup(table)
	if t != nil && table == nbmodel.GatewayChassisTable {
		h.updateGateway(m, deleted)
		return
	}
	if t == nil || (table != nbmodel.LogicalRouterPortTable && table != nbmodel.LogicalSwitchPortTable && table != nbmodel.LogicalSwitchTable && table != nbmodel.NATTable &&
		table != nbmodel.LoadBalancerTable) {
		return
	}
	uuid := uuidOf(m)
	var now []claim
	if u, ok := translator.OwnerOf(externalIDs(m), h.instance); ok && !deleted {
		now = claimsOf(u, m)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, cl := range h.rows[uuid] {
		if cl.get(h.held) == cl.value {
			cl.drop(h.held)
		}
	}
	if len(now) == 0 {
		delete(h.rows, uuid)
		return
	}
	h.rows[uuid] = now
	for _, cl := range now {
		cl.put(h.held)
	}
}

func (h *HeldIndex) updateGateway(m model.Model, deleted bool) {
	uuid := uuidOf(m)
	h.mu.Lock()
	defer h.mu.Unlock()
	if r, ok := h.gwOwner[uuid]; ok {
		h.gws.remove(r, uuid)
		delete(h.gwOwner, uuid)
	}
	u, ok := translator.OwnerOf(externalIDs(m), h.instance)
	if deleted || !ok || u.Kind != translator.KindRouter {
		return
	}
	gc := *m.(*nbmodel.GatewayChassis)
	h.gws.set(u.Name, uuid, &gc)
	h.gwOwner[uuid] = u.Name
}

// HeldGateways implements translator.Held.
func (h *HeldIndex) HeldGateways(router string) []string {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.gws.order(router)
}

// HeldTunnelKeys implements translator.Held: a copy.
func (h *HeldIndex) HeldTunnelKeys() translator.TunnelKeys {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return translator.TunnelKeys{Switches: maps.Clone(h.held.Keys.Switches), Ports: maps.Clone(h.held.Keys.Ports)}
}

// HeldSNATIP implements translator.Held.
func (h *HeldIndex) HeldSNATIP(ip string) string {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.held.HeldSNATIP(ip)
}

// HeldInternal implements translator.Held.
func (h *HeldIndex) HeldInternal(network string) string {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.held.HeldInternal(network)
}

// HeldVMAddress implements translator.Held.
func (h *HeldIndex) HeldVMAddress(network, addr string) string {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.held.HeldVMAddress(network, addr)
}

// HeldFloatingIP implements translator.Held.
func (h *HeldIndex) HeldFloatingIP(ip string) string {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.held.HeldFloatingIP(ip)
}

// HeldFixedIP implements translator.Held.
func (h *HeldIndex) HeldFixedIP(router, ip string) string {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.held.HeldFixedIP(router, ip)
}

func (cl claim) get(held translator.Claims) string {
	switch cl.kind {
	case claimSNAT:
		return held.SNATIPs[cl.key]
	case claimInternal:
		return held.Internal[cl.key]
	case claimSwitchKey:
		return strconv.Itoa(held.Keys.Switches[cl.key])
	case claimPortKey:
		return strconv.Itoa(held.Keys.Ports[cl.key])
	case claimFloatingIP:
		return held.FloatingIPs[cl.key]
	case claimFixedIP:
		return held.FixedIPs[cl.key]
	}
	return held.VMAddresses[cl.key]
}

func (cl claim) drop(held translator.Claims) {
	switch cl.kind {
	case claimSNAT:
		delete(held.SNATIPs, cl.key)
	case claimInternal:
		delete(held.Internal, cl.key)
	case claimVM:
		delete(held.VMAddresses, cl.key)
	case claimSwitchKey:
		delete(held.Keys.Switches, cl.key)
	case claimPortKey:
		delete(held.Keys.Ports, cl.key)
	case claimFloatingIP:
		delete(held.FloatingIPs, cl.key)
	case claimFixedIP:
		delete(held.FixedIPs, cl.key)
	}
}
