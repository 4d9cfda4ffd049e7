package translator

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/ovn-kubernetes/libovsdb/client"
	"github.com/ovn-kubernetes/libovsdb/model"
	"github.com/ovn-kubernetes/libovsdb/ovsdb"

	"github.com/kubevirt-ovn/kubevirt-ovn/nbmodel"
)

// Change is one row the diff creates, updates or deletes, for people to
// read: dry runs print them and sync reports them.
type Change struct {
	Action string // "create", "update" or "delete"
	Table  string
	Name   string // the row's readable identity
	Detail string // columns set (create) or "column: old -> new" (update)
}

func (c Change) String() string {
	s := c.Action + " " + c.Table + " " + c.Name
	if c.Detail != "" {
		s += " (" + c.Detail + ")"
	}
	return s
}

// Change actions.
const (
	Create = "create"
	Update = "update"
	Delete = "delete"
)

// UnitOps are the operations that bring one unit from its current rows to
// its desired rows; they commit in one transaction.
type UnitOps struct {
	Unit    Unit
	Ops     []ovsdb.Operation
	Changes []Change
	// Notes say what another tool added to the unit's rows (left alone).
	Notes []string
}

// Differ compares desired rows with the rows a client's cache holds for one
// instance and produces the operations. It reads only the cache. One Differ
// serves one sync so that named UUIDs are unique across batched units.
type Differ struct {
	// ctx bounds the cache reads: libovsdb holds them while the NB is
	// reconnecting, and a stopped sync must not wait for it.
	ctx      context.Context
	c        client.Client
	instance string
	seq      int
}

// NewDiffer returns a Differ reading c's cache, for rows of instance, as
// long as ctx lasts.
func NewDiffer(ctx context.Context, c client.Client, instance string) *Differ {
	return &Differ{ctx: ctx, c: c, instance: instance}
}

// unitDiff accumulates the ops and changes of one unit.
type unitDiff struct {
	*Differ
	u   UnitOps
	err error
}

func (d *Differ) begin(u Unit) *unitDiff {
	return &unitDiff{Differ: d, u: UnitOps{Unit: u}}
}

func (ud *unitDiff) namedUUID() string {
	ud.seq++
	return fmt.Sprintf("kvrow%d", ud.seq)
}

func (ud *unitDiff) add(ops []ovsdb.Operation, err error) {
	if err != nil {
		if ud.err == nil {
			ud.err = fmt.Errorf("%s: building NB operations: %w", ud.u.Unit, err)
		}
		return
	}
	ud.u.Ops = append(ud.u.Ops, ops...)
}

func (ud *unitDiff) change(action, table, name, detail string) {
	ud.u.Changes = append(ud.u.Changes, Change{Action: action, Table: table, Name: name, Detail: detail})
}

func (ud *unitDiff) done() (*UnitOps, error) {
	if ud.err != nil {
		return nil, ud.err
	}
	return &ud.u, nil
}

// ownerCond selects rows by the owner name index; callers check the kind and
// instance of what it returns with OwnedBy.
func ownerCond(field *map[string]string, name string) model.Condition {
	return model.Condition{Field: field, Function: ovsdb.ConditionIncludes, Value: map[string]string{KeyOwner: name}}
}

// listOwned lists the rows of one table that unit u owns, through the owner
// index; ids returns a row's external_ids.
func listOwned[T any, PT interface {
	*T
	model.Model
}](d *Differ, u Unit, ids func(PT) *map[string]string) ([]PT, error) {
	m := PT(new(T))
	var rows []PT
	if err := d.c.WhereAll(m, ownerCond(ids(m), u.Name)).List(d.ctx, &rows); err != nil {
		return nil, err
	}
	return slices.DeleteFunc(rows, func(r PT) bool { return !OwnedBy(*ids(r), d.instance, u) }), nil
}

func (d *Differ) ownedSwitches(u Unit) ([]*nbmodel.LogicalSwitch, error) {
	return listOwned(d, u, func(r *nbmodel.LogicalSwitch) *map[string]string { return &r.ExternalIDs })
}

func (d *Differ) ownedSwitchPorts(u Unit) ([]*nbmodel.LogicalSwitchPort, error) {
	return listOwned(d, u, func(r *nbmodel.LogicalSwitchPort) *map[string]string { return &r.ExternalIDs })
}

// macBindings are the Static_MAC_Binding rows on a router's gateway port.
// The table has no external_ids: a binding on a port we own is ours.
func (d *Differ) macBindings(router string) ([]*nbmodel.StaticMACBinding, error) {
	m := &nbmodel.StaticMACBinding{}
	var rows []*nbmodel.StaticMACBinding
	err := d.c.WhereAll(m, model.Condition{Field: &m.LogicalPort, Function: ovsdb.ConditionEqual, Value: GatewayPortName(router)}).List(d.ctx, &rows)
	return rows, err
}

// Network returns the operations that make network np's rows in the NB
// what np says.
func (d *Differ) Network(np *NetworkPlan) (*UnitOps, error) {
	u := Unit{Kind: KindNetwork, Name: np.Name}
	ud := d.begin(u)
	switches, err := d.ownedSwitches(u)
	if err != nil {
		return nil, err
	}
	ports, err := d.ownedSwitchPorts(u)
	if err != nil {
		return nil, err
	}
	cur := map[string]*nbmodel.LogicalSwitchPort{}
	for _, p := range ports {
		cur[p.Name] = p
	}
	slices.SortFunc(switches, func(a, b *nbmodel.LogicalSwitch) int { return strings.Compare(a.UUID, b.UUID) })

	if len(switches) == 0 {
		ls := np.Switch.DeepCopy()
		ls.UUID = ud.namedUUID()
		for _, want := range np.Ports {
			ls.Ports = append(ls.Ports, ud.insertSwitchPort(want, nil))
		}
		ud.insertNamed(ls, &ls.Name, nbmodel.LogicalSwitchTable, ls.Name, "")
		return ud.done()
	}
	ls := switches[0]
	ud.u.Notes = foreignNote(nbmodel.LogicalSwitchTable, ls.Name, d.foreignColumns(ls, "name", "ports", "external_ids"),
		map[string][]string{nbmodel.LogicalSwitchPortTable: d.foreignRefs(ls.Ports, func(u string) model.Model { return &nbmodel.LogicalSwitchPort{UUID: u} })})
	for _, dup := range switches[1:] {
		ud.add(d.c.Where(dup).Delete())
		ud.change(Delete, nbmodel.LogicalSwitchTable, dup.Name, "duplicate "+dup.UUID)
	}
	m := np.Switch.DeepCopy()
	m.UUID = ls.UUID
	var cols columns
	cols.strMap("external_ids", ls.ExternalIDs, m.ExternalIDs, &m.ExternalIDs)
	ud.update(m, cols, nbmodel.LogicalSwitchTable, ls.Name)

	for _, want := range np.Ports {
		if have, ok := cur[want.Name]; ok {
			ud.updateSwitchPort(have, want)
			delete(cur, want.Name)
			continue
		}
		ud.insertSwitchPort(want, &switchRef{uuid: ls.UUID})
	}
	for _, name := range sortedKeys(cur) {
		if slices.Contains(np.KeepPorts, name) {
			continue
		}
		ud.mutateSwitchPorts(&switchRef{uuid: ls.UUID}, ovsdb.MutateOperationDelete, cur[name].UUID)
		ud.change(Delete, nbmodel.LogicalSwitchPortTable, name, "")
	}
	return ud.done()
}

// switchRef finds a parent switch: by UUID when it is in the cache, else by
// name and owner (it is inserted earlier in the same transaction), guarded
// by a wait that it exists exactly once.
type switchRef struct {
	uuid    string
	network string
}

func (ud *unitDiff) mutateSwitchPorts(ref *switchRef, op ovsdb.Mutator, uuid string) {
	ls := &nbmodel.LogicalSwitch{UUID: ref.uuid}
	mut := model.Mutation{Field: &ls.Ports, Mutator: op, Value: []string{uuid}}
	if ref.uuid != "" {
		ud.add(ud.c.Where(ls).Mutate(ls, mut))
		return
	}
	ls.Name = SwitchName(ref.network)
	owner := OwnerIDs(ud.instance, Unit{Kind: KindNetwork, Name: ref.network})
	cond := ud.c.WhereAll(ls,
		model.Condition{Field: &ls.Name, Function: ovsdb.ConditionEqual, Value: ls.Name},
		model.Condition{Field: &ls.ExternalIDs, Function: ovsdb.ConditionIncludes, Value: owner})
	zero := 0
	ud.add(cond.Wait(ovsdb.WaitConditionEqual, &zero, ls, &ls.Name))
	ud.add(cond.Mutate(ls, mut))
}

// insertSwitchPort inserts a switch port and, with parent, references it
// from that switch. It returns the port's named UUID.
func (ud *unitDiff) insertSwitchPort(want *nbmodel.LogicalSwitchPort, parent *switchRef) string {
	m := want.DeepCopy()
	m.UUID = ud.namedUUID()
	ud.add(ud.c.Create(m))
	if parent != nil {
		ud.mutateSwitchPorts(parent, ovsdb.MutateOperationInsert, m.UUID)
	}
	ud.change(Create, nbmodel.LogicalSwitchPortTable, m.Name, describeLSP(m))
	return m.UUID
}

func (ud *unitDiff) updateSwitchPort(have, want *nbmodel.LogicalSwitchPort) {
	m := want.DeepCopy()
	m.UUID = have.UUID
	var cols columns
	cols.str("type", have.Type, m.Type, &m.Type)
	cols.strSlice("addresses", have.Addresses, m.Addresses, &m.Addresses)
	cols.strSlice("port_security", have.PortSecurity, m.PortSecurity, &m.PortSecurity)
	cols.strMap("options", have.Options, m.Options, &m.Options)
	cols.intPtr("tag", have.Tag, m.Tag, &m.Tag)
	cols.strMap("external_ids", have.ExternalIDs, m.ExternalIDs, &m.ExternalIDs)
	ud.update(m, cols, nbmodel.LogicalSwitchPortTable, m.Name)
}

// insertNamed inserts a root row whose name is not a schema index, after a
// wait that fails the transaction if a row of that name already exists, so
// that two writers cannot both create it.
func (ud *unitDiff) insertNamed(m model.Model, name *string, table, rowName, detail string) {
	zero := 0
	guard := ud.c.WhereAll(m, model.Condition{Field: name, Function: ovsdb.ConditionEqual, Value: *name})
	ud.add(guard.Wait(ovsdb.WaitConditionNotEqual, &zero, m, name))
	ud.add(ud.c.Create(m))
	ud.change(Create, table, rowName, detail)
}

// update writes the changed columns of m (which carries the row's UUID) in
// place; it writes nothing when no column changed.
func (ud *unitDiff) update(m model.Model, cols columns, table, name string) {
	if len(cols.fields) == 0 {
		return
	}
	ud.add(ud.c.Where(m).Update(m, cols.fields...))
	ud.change(Update, table, name, strings.Join(cols.desc, "; "))
}

// Router returns the operations that make router rp's rows in the NB what
// rp says.
func (d *Differ) Router(rp *RouterPlan) (*UnitOps, error) {
	u := Unit{Kind: KindRouter, Name: rp.Name}
	ud := d.begin(u)
	st, err := d.routerState(u)
	if err != nil {
		return nil, err
	}

	// The router row; a new one is inserted with its children referenced.
	var lr *nbmodel.LogicalRouter
	var newLR *nbmodel.LogicalRouter
	if len(st.routers) == 0 {
		newLR = rp.Router.DeepCopy()
		newLR.UUID = ud.namedUUID()
	} else {
		lr = st.routers[0]
		ud.u.Notes = foreignNote(nbmodel.LogicalRouterTable, lr.Name, d.foreignColumns(lr, "name", "ports", "nat", "static_routes", "options", "external_ids"),
			map[string][]string{
				nbmodel.LogicalRouterPortTable:        d.foreignRefs(lr.Ports, func(u string) model.Model { return &nbmodel.LogicalRouterPort{UUID: u} }),
				nbmodel.NATTable:                      d.foreignRefs(lr.Nat, func(u string) model.Model { return &nbmodel.NAT{UUID: u} }),
				nbmodel.LogicalRouterStaticRouteTable: d.foreignRefs(lr.StaticRoutes, func(u string) model.Model { return &nbmodel.LogicalRouterStaticRoute{UUID: u} }),
			})
		for _, dup := range st.routers[1:] {
			ud.add(d.c.Where(dup).Delete())
			ud.change(Delete, nbmodel.LogicalRouterTable, dup.Name, "duplicate "+dup.UUID)
		}
		m := rp.Router.DeepCopy()
		m.UUID = lr.UUID
		var cols columns
		cols.strMap("options", lr.Options, m.Options, &m.Options)
		cols.strMap("external_ids", lr.ExternalIDs, m.ExternalIDs, &m.ExternalIDs)
		ud.update(m, cols, nbmodel.LogicalRouterTable, lr.Name)
	}
	// refLR references a new child row from the router.
	refLR := func(field func(*nbmodel.LogicalRouter) *[]string, uuid string) {
		if newLR != nil {
			f := field(newLR)
			*f = append(*f, uuid)
			return
		}
		m := &nbmodel.LogicalRouter{UUID: lr.UUID}
		ud.add(d.c.Where(m).Mutate(m, model.Mutation{Field: field(m), Mutator: ovsdb.MutateOperationInsert, Value: []string{uuid}}))
	}
	unrefLR := func(field func(*nbmodel.LogicalRouter) *[]string, uuid string) {
		m := &nbmodel.LogicalRouter{UUID: lr.UUID}
		ud.add(d.c.Where(m).Mutate(m, model.Mutation{Field: field(m), Mutator: ovsdb.MutateOperationDelete, Value: []string{uuid}}))
	}
	ports := func(r *nbmodel.LogicalRouter) *[]string { return &r.Ports }
	nats := func(r *nbmodel.LogicalRouter) *[]string { return &r.Nat }
	routes := func(r *nbmodel.LogicalRouter) *[]string { return &r.StaticRoutes }

	// Router ports, and the gateway chassis of the gateway port.
	curPorts := map[string]*nbmodel.LogicalRouterPort{}
	for _, p := range st.ports {
		curPorts[p.Name] = p
	}
	curGC := map[string]*nbmodel.GatewayChassis{}
	for _, g := range st.gatewayChassis {
		curGC[g.Name] = g
	}
	gwPort := GatewayPortName(rp.Name)
	for _, want := range rp.Ports {
		var wantGC []*nbmodel.GatewayChassis
		if want.Name == gwPort {
			wantGC = rp.GatewayChassis
		}
		have, ok := curPorts[want.Name]
		if !ok {
			m := want.DeepCopy()
			m.UUID = ud.namedUUID()
			for _, g := range wantGC {
				m.GatewayChassis = append(m.GatewayChassis, ud.insertGatewayChassis(g))
			}
			ud.add(d.c.Create(m))
			ud.change(Create, nbmodel.LogicalRouterPortTable, m.Name, describeLRP(m))
			refLR(ports, m.UUID)
			continue
		}
		delete(curPorts, want.Name)
		m := want.DeepCopy()
		m.UUID = have.UUID
		var cols columns
		cols.str("mac", have.MAC, m.MAC, &m.MAC)
		cols.strSlice("networks", have.Networks, m.Networks, &m.Networks)
		cols.strMap("external_ids", have.ExternalIDs, m.ExternalIDs, &m.ExternalIDs)
		ud.update(m, cols, nbmodel.LogicalRouterPortTable, m.Name)

		for _, g := range wantGC {
			if hg, ok := curGC[g.Name]; ok && slices.Contains(have.GatewayChassis, hg.UUID) {
				delete(curGC, g.Name)
				gm := g.DeepCopy()
				gm.UUID = hg.UUID
				var cols columns
				cols.str("chassis_name", hg.ChassisName, gm.ChassisName, &gm.ChassisName)
				cols.int("priority", hg.Priority, gm.Priority, &gm.Priority)
				cols.strMap("external_ids", hg.ExternalIDs, gm.ExternalIDs, &gm.ExternalIDs)
				ud.update(gm, cols, nbmodel.GatewayChassisTable, gm.Name)
				continue
			}
			uuid := ud.insertGatewayChassis(g)
			pm := &nbmodel.LogicalRouterPort{UUID: have.UUID}
			ud.add(d.c.Where(pm).Mutate(pm, model.Mutation{Field: &pm.GatewayChassis, Mutator: ovsdb.MutateOperationInsert, Value: []string{uuid}}))
		}
		for _, name := range sortedKeys(curGC) {
			g := curGC[name]
			if !slices.Contains(have.GatewayChassis, g.UUID) {
				continue
			}
			delete(curGC, name)
			pm := &nbmodel.LogicalRouterPort{UUID: have.UUID}
			ud.add(d.c.Where(pm).Mutate(pm, model.Mutation{Field: &pm.GatewayChassis, Mutator: ovsdb.MutateOperationDelete, Value: []string{g.UUID}}))
			ud.change(Delete, nbmodel.GatewayChassisTable, g.Name, "")
		}
	}
	for _, name := range sortedKeys(curPorts) {
		unrefLR(ports, curPorts[name].UUID)
		ud.change(Delete, nbmodel.LogicalRouterPortTable, name, "")
	}

	// NAT, keyed by type and logical IP.
	natKey := func(n *nbmodel.NAT) string { return n.Type + " " + n.LogicalIP }
	curNAT, dupNAT := keyed(st.nats, natKey, func(n *nbmodel.NAT) string { return n.UUID })
	for _, dup := range dupNAT {
		unrefLR(nats, dup.UUID)
		ud.change(Delete, nbmodel.NATTable, natKey(dup), "duplicate "+dup.UUID)
	}
	for _, want := range rp.NATs {
		key := want.Type + " " + want.LogicalIP
		have, ok := curNAT[key]
		if !ok {
			m := want.DeepCopy()
			m.UUID = ud.namedUUID()
			ud.add(d.c.Create(m))
			ud.change(Create, nbmodel.NATTable, key, "external_ip="+m.ExternalIP+" external_port_range="+m.ExternalPortRange)
			refLR(nats, m.UUID)
			continue
		}
		delete(curNAT, key)
		m := want.DeepCopy()
		m.UUID = have.UUID
		var cols columns
		cols.str("external_ip", have.ExternalIP, m.ExternalIP, &m.ExternalIP)
		cols.str("external_port_range", have.ExternalPortRange, m.ExternalPortRange, &m.ExternalPortRange)
		cols.strMap("external_ids", have.ExternalIDs, m.ExternalIDs, &m.ExternalIDs)
		ud.update(m, cols, nbmodel.NATTable, key)
	}
	for _, key := range sortedKeys(curNAT) {
		unrefLR(nats, curNAT[key].UUID)
		ud.change(Delete, nbmodel.NATTable, key, "")
	}

	// Static routes, keyed by prefix.
	curRoute, dupRoute := keyed(st.routes, func(r *nbmodel.LogicalRouterStaticRoute) string { return r.IPPrefix },
		func(r *nbmodel.LogicalRouterStaticRoute) string { return r.UUID })
	for _, dup := range dupRoute {
		unrefLR(routes, dup.UUID)
		ud.change(Delete, nbmodel.LogicalRouterStaticRouteTable, dup.IPPrefix, "duplicate "+dup.UUID)
	}
	for _, want := range rp.Routes {
		have, ok := curRoute[want.IPPrefix]
		if !ok {
			m := want.DeepCopy()
			m.UUID = ud.namedUUID()
			ud.add(d.c.Create(m))
			ud.change(Create, nbmodel.LogicalRouterStaticRouteTable, m.IPPrefix, "nexthop="+m.Nexthop+" output_port="+deref(m.OutputPort))
			refLR(routes, m.UUID)
			continue
		}
		delete(curRoute, want.IPPrefix)
		m := want.DeepCopy()
		m.UUID = have.UUID
		var cols columns
		cols.str("nexthop", have.Nexthop, m.Nexthop, &m.Nexthop)
		cols.strPtr("output_port", have.OutputPort, m.OutputPort, &m.OutputPort)
		cols.strMap("external_ids", have.ExternalIDs, m.ExternalIDs, &m.ExternalIDs)
		ud.update(m, cols, nbmodel.LogicalRouterStaticRouteTable, m.IPPrefix)
	}
	for _, key := range sortedKeys(curRoute) {
		unrefLR(routes, curRoute[key].UUID)
		ud.change(Delete, nbmodel.LogicalRouterStaticRouteTable, key, "")
	}

	if newLR != nil {
		ud.insertNamed(newLR, &newLR.Name, nbmodel.LogicalRouterTable, newLR.Name, describeLR(newLR))
	}

	// The router's ports on network switches.
	curSP := map[string]*nbmodel.LogicalSwitchPort{}
	for _, p := range st.switchPorts {
		curSP[p.Name] = p
	}
	for _, want := range rp.SwitchPorts {
		parent, err := d.switchOf(want.Network)
		if err != nil {
			return nil, err
		}
		have, ok := curSP[want.Port.Name]
		if !ok {
			ud.insertSwitchPort(want.Port, parent)
			continue
		}
		delete(curSP, want.Port.Name)
		ud.updateSwitchPort(have, want.Port)
		// The external network of a router can change: move its port.
		if parent.uuid != "" && d.switchHasPort(parent.uuid, have.UUID) {
			continue
		}
		if old, err := d.parentSwitch(have.UUID); err != nil {
			return nil, err
		} else if old != "" {
			ud.mutateSwitchPorts(&switchRef{uuid: old}, ovsdb.MutateOperationDelete, have.UUID)
		}
		ud.mutateSwitchPorts(parent, ovsdb.MutateOperationInsert, have.UUID)
		ud.change(Update, nbmodel.LogicalSwitchPortTable, want.Port.Name, "moved to "+SwitchName(want.Network))
	}
	for _, name := range sortedKeys(curSP) {
		if err := ud.deleteSwitchPort(curSP[name]); err != nil {
			return nil, err
		}
	}

	// Static MAC bindings of the gateway port, keyed by IP; without the
	// table (OVN 22.03) a note says the MAC is not pinned.
	if !HasTable(d.c, nbmodel.StaticMACBindingTable) {
		for _, want := range rp.MACBindings {
			ud.u.Notes = append(ud.u.Notes, notPinnedNote(want.LogicalPort, want.IP, want.MAC))
		}
		return ud.done()
	}
	curMB := map[string]*nbmodel.StaticMACBinding{}
	for _, b := range st.macBindings {
		curMB[b.IP] = b
	}
	for _, want := range rp.MACBindings {
		have, ok := curMB[want.IP]
		if !ok {
			m := want.DeepCopy()
			m.UUID = ud.namedUUID()
			ud.add(d.c.Create(m))
			ud.change(Create, nbmodel.StaticMACBindingTable, m.LogicalPort+" "+m.IP, "mac="+m.MAC)
			continue
		}
		delete(curMB, want.IP)
		m := want.DeepCopy()
		m.UUID = have.UUID
		var cols columns
		cols.str("mac", have.MAC, m.MAC, &m.MAC)
		cols.bool("override_dynamic_mac", have.OverrideDynamicMAC, m.OverrideDynamicMAC, &m.OverrideDynamicMAC)
		ud.update(m, cols, nbmodel.StaticMACBindingTable, m.LogicalPort+" "+m.IP)
	}
	for _, ip := range sortedKeys(curMB) {
		b := curMB[ip]
		ud.add(d.c.Where(b).Delete())
		ud.change(Delete, nbmodel.StaticMACBindingTable, b.LogicalPort+" "+b.IP, "")
	}
	return ud.done()
}

// keyed indexes rows by their identity within a unit. Two rows of one
// identity are a duplicate (a second writer, a transaction retried after a
// lost reply, a hand-made copy): the row with the lowest UUID is kept, so
// that every writer keeps the same one, and the others are returned for
// deletion.
func keyed[T any](rows []T, key, uuid func(T) string) (map[string]T, []T) {
	rows = slices.Clone(rows)
	slices.SortFunc(rows, func(a, b T) int { return strings.Compare(uuid(a), uuid(b)) })
	out := make(map[string]T, len(rows))
	var dups []T
	for _, r := range rows {
		if _, ok := out[key(r)]; ok {
			dups = append(dups, r)
			continue
		}
		out[key(r)] = r
	}
	return out, dups
}

func (ud *unitDiff) insertGatewayChassis(g *nbmodel.GatewayChassis) string {
	m := g.DeepCopy()
	m.UUID = ud.namedUUID()
	ud.add(ud.c.Create(m))
	ud.change(Create, nbmodel.GatewayChassisTable, m.Name, fmt.Sprintf("chassis=%s priority=%d", m.ChassisName, m.Priority))
	return m.UUID
}

func (ud *unitDiff) deleteSwitchPort(p *nbmodel.LogicalSwitchPort) error {
	parent, err := ud.parentSwitch(p.UUID)
	if err != nil {
		return err
	}
	if parent != "" {
		ud.mutateSwitchPorts(&switchRef{uuid: parent}, ovsdb.MutateOperationDelete, p.UUID)
	} else {
		ud.add(ud.c.Where(p).Delete())
	}
	ud.change(Delete, nbmodel.LogicalSwitchPortTable, p.Name, "")
	return nil
}

// switchOf is the reference to a network's switch.
func (d *Differ) switchOf(network string) (*switchRef, error) {
	sw, err := d.ownedSwitches(Unit{Kind: KindNetwork, Name: network})
	if err != nil {
		return nil, err
	}
	if len(sw) == 0 {
		return &switchRef{network: network}, nil
	}
	slices.SortFunc(sw, func(a, b *nbmodel.LogicalSwitch) int { return strings.Compare(a.UUID, b.UUID) })
	return &switchRef{uuid: sw[0].UUID, network: network}, nil
}

func (d *Differ) switchHasPort(ls, port string) bool {
	m := &nbmodel.LogicalSwitch{UUID: ls}
	if err := d.c.Get(d.ctx, m); err != nil {
		return false
	}
	return slices.Contains(m.Ports, port)
}

// parentSwitch finds the owned switch that references port; "" if none.
// Only moves and deletions of router ports need it.
func (d *Differ) parentSwitch(port string) (string, error) {
	rows, err := ListManaged(d.ctx, d.c, d.instance, func(r *nbmodel.LogicalSwitch) *map[string]string { return &r.ExternalIDs })
	if err != nil {
		return "", err
	}
	for _, ls := range rows {
		if slices.Contains(ls.Ports, port) {
			return ls.UUID, nil
		}
	}
	return "", nil
}

type routerState struct {
	routers        []*nbmodel.LogicalRouter
	ports          []*nbmodel.LogicalRouterPort
	gatewayChassis []*nbmodel.GatewayChassis
	nats           []*nbmodel.NAT
	routes         []*nbmodel.LogicalRouterStaticRoute
	switchPorts    []*nbmodel.LogicalSwitchPort
	macBindings    []*nbmodel.StaticMACBinding
}

func (d *Differ) routerState(u Unit) (*routerState, error) {
	st := &routerState{}
	var err error
	if st.routers, err = listOwned(d, u, func(r *nbmodel.LogicalRouter) *map[string]string { return &r.ExternalIDs }); err != nil {
		return nil, err
	}
	slices.SortFunc(st.routers, func(a, b *nbmodel.LogicalRouter) int { return strings.Compare(a.UUID, b.UUID) })
	if st.ports, err = listOwned(d, u, func(r *nbmodel.LogicalRouterPort) *map[string]string { return &r.ExternalIDs }); err != nil {
		return nil, err
	}
	if st.gatewayChassis, err = listOwned(d, u, func(r *nbmodel.GatewayChassis) *map[string]string { return &r.ExternalIDs }); err != nil {
		return nil, err
	}
	if st.nats, err = listOwned(d, u, func(r *nbmodel.NAT) *map[string]string { return &r.ExternalIDs }); err != nil {
		return nil, err
	}
	if st.routes, err = listOwned(d, u, func(r *nbmodel.LogicalRouterStaticRoute) *map[string]string { return &r.ExternalIDs }); err != nil {
		return nil, err
	}
	if st.switchPorts, err = d.ownedSwitchPorts(u); err != nil {
		return nil, err
	}
	if HasTable(d.c, nbmodel.StaticMACBindingTable) {
		if st.macBindings, err = d.macBindings(u.Name); err != nil {
			return nil, err
		}
	}
	if len(st.routers) == 0 {
		// Without its router, a child row is garbage the database collects:
		// the router is created anew with all its children.
		st.ports, st.gatewayChassis, st.nats, st.routes = nil, nil, nil, nil
	} else {
		// Children of our router only.
		lr := st.routers[0]
		st.ports = slices.DeleteFunc(st.ports, func(p *nbmodel.LogicalRouterPort) bool { return !slices.Contains(lr.Ports, p.UUID) })
		st.nats = slices.DeleteFunc(st.nats, func(n *nbmodel.NAT) bool { return !slices.Contains(lr.Nat, n.UUID) })
		st.routes = slices.DeleteFunc(st.routes, func(r *nbmodel.LogicalRouterStaticRoute) bool {
			return !slices.Contains(lr.StaticRoutes, r.UUID)
		})
	}
	return st, nil
}

// DeleteRouter returns the operations that remove every row router name
// owns.
func (d *Differ) DeleteRouter(name string) (*UnitOps, error) {
	u := Unit{Kind: KindRouter, Name: name}
	ud := d.begin(u)
	st, err := d.routerState(u)
	if err != nil {
		return nil, err
	}
	// Deleting the router collects its ports, NAT, routes and gateway
	// chassis with it.
	for _, lr := range st.routers {
		ud.add(d.c.Where(lr).Delete())
		ud.change(Delete, nbmodel.LogicalRouterTable, lr.Name, "")
	}
	for _, p := range st.switchPorts {
		if err := ud.deleteSwitchPort(p); err != nil {
			return nil, err
		}
	}
	for _, b := range st.macBindings {
		ud.add(d.c.Where(b).Delete())
		ud.change(Delete, nbmodel.StaticMACBindingTable, b.LogicalPort+" "+b.IP, "")
	}
	return ud.done()
}

// DeleteNetwork returns the operations that remove every row network name
// owns. Its switch goes, and with it every port on it.
func (d *Differ) DeleteNetwork(name string) (*UnitOps, error) {
	u := Unit{Kind: KindNetwork, Name: name}
	ud := d.begin(u)
	switches, err := d.ownedSwitches(u)
	if err != nil {
		return nil, err
	}
	for _, ls := range switches {
		ud.add(d.c.Where(ls).Delete())
		ud.change(Delete, nbmodel.LogicalSwitchTable, ls.Name, fmt.Sprintf("%d ports", len(ls.Ports)))
		if foreign := d.foreignRefs(ls.Ports, func(u string) model.Model { return &nbmodel.LogicalSwitchPort{UUID: u} }); len(foreign) > 0 {
			ud.u.Notes = append(ud.u.Notes, fmt.Sprintf("%s %s is deleted with %d %s row(s) that are not kubevirt-ovn's (%s): a removed network takes its switch's ports with it",
				nbmodel.LogicalSwitchTable, ls.Name, len(foreign), nbmodel.LogicalSwitchPortTable, strings.Join(foreign, ", ")))
		}
	}
	ports, err := d.ownedSwitchPorts(u)
	if err != nil {
		return nil, err
	}
	for _, p := range ports {
		if parent, err := d.parentSwitch(p.UUID); err != nil {
			return nil, err
		} else if parent != "" && slices.ContainsFunc(switches, func(ls *nbmodel.LogicalSwitch) bool { return ls.UUID == parent }) {
			continue
		}
		if err := ud.deleteSwitchPort(p); err != nil {
			return nil, err
		}
	}
	return ud.done()
}

// ListManaged lists the rows of one table that instance manages, through
// the managed-by index; ids returns a row's external_ids.
func ListManaged[T any, PT interface {
	*T
	model.Model
}](ctx context.Context, c client.Client, instance string, ids func(PT) *map[string]string) ([]PT, error) {
	m := PT(new(T))
	var rows []PT
	cond := model.Condition{Field: ids(m), Function: ovsdb.ConditionIncludes, Value: map[string]string{KeyManagedBy: instance}}
	err := c.WhereAll(m, cond).List(ctx, &rows)
	return rows, err
}

func visitManaged[T any, PT interface {
	*T
	model.Model
}](ctx context.Context, c client.Client, instance, table string, ids func(PT) *map[string]string, visit func(table string, ids map[string]string)) error {
	rows, err := ListManaged(ctx, c, instance, ids)
	for _, r := range rows {
		visit(table, *ids(r))
	}
	return err
}

// EachManaged calls visit with the table and external_ids of every row
// instance manages, in every table kubevirt-ovn writes that has
// external_ids.
func EachManaged(ctx context.Context, c client.Client, instance string, visit func(table string, ids map[string]string)) error {
	return errors.Join(
		visitManaged(ctx, c, instance, nbmodel.LogicalRouterTable, func(r *nbmodel.LogicalRouter) *map[string]string { return &r.ExternalIDs }, visit),
		visitManaged(ctx, c, instance, nbmodel.LogicalRouterPortTable, func(r *nbmodel.LogicalRouterPort) *map[string]string { return &r.ExternalIDs }, visit),
		visitManaged(ctx, c, instance, nbmodel.LogicalSwitchTable, func(r *nbmodel.LogicalSwitch) *map[string]string { return &r.ExternalIDs }, visit),
		visitManaged(ctx, c, instance, nbmodel.LogicalSwitchPortTable, func(r *nbmodel.LogicalSwitchPort) *map[string]string { return &r.ExternalIDs }, visit),
		visitManaged(ctx, c, instance, nbmodel.NATTable, func(r *nbmodel.NAT) *map[string]string { return &r.ExternalIDs }, visit),
		visitManaged(ctx, c, instance, nbmodel.LogicalRouterStaticRouteTable, func(r *nbmodel.LogicalRouterStaticRoute) *map[string]string { return &r.ExternalIDs }, visit),
		visitManaged(ctx, c, instance, nbmodel.GatewayChassisTable, func(r *nbmodel.GatewayChassis) *map[string]string { return &r.ExternalIDs }, visit),
	)
}

// PresentUnits lists the units that own rows in the NB.
func (d *Differ) PresentUnits() ([]Unit, error) {
	seen := map[Unit]bool{}
	err := EachManaged(d.ctx, d.c, d.instance, func(_ string, ids map[string]string) {
		if u, ok := OwnerOf(ids, d.instance); ok {
			seen[u] = true
		}
	})
	if err != nil {
		return nil, err
	}
	units := slices.Collect(maps.Keys(seen))
	slices.SortFunc(units, compareUnits)
	return units, nil
}

func compareUnits(a, b Unit) int {
	if c := strings.Compare(string(a.Kind), string(b.Kind)); c != 0 {
		return c
	}
	return strings.Compare(a.Name, b.Name)
}
