// Package nb is kubevirt-ovn's Northbound layer: which NB tables and
// columns kubevirt-ovn owns (the registry), the indexes over the rows it
// owns, the one generic diff that turns a unit's desired rows into OVSDB
// operations, and the one place those operations are committed.
//
// The registry is data: a table's entry says how a row is identified within
// its owner, which columns kubevirt-ovn manages, which parent row holds it
// and how a unit's rows are found. The diff, the monitor (explicit columns),
// the client indexes and the owned-row walks all read it; adding a table is
// an entry here plus the plan code that emits its rows.
package nb

import (
	"fmt"
	"reflect"
	"strconv"

	"github.com/ovn-kubernetes/libovsdb/model"

	"github.com/kubevirt-ovn/kubevirt-ovn/nbmodel"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator"
)

// Table is a registry entry: one NB table kubevirt-ovn writes.
type Table struct {
	// Name is the schema's table name.
	Name string
	// New returns an empty model of the table.
	New func() model.Model
	// Key is a row's identity within its owner, and its readable name in
	// Change lines: two rows of one owner with one key are duplicates.
	Key func(model.Model) string
	// Columns are the columns kubevirt-ovn sets, in the order Change lines
	// list them; the diff compares and updates these and no other. The
	// columns of Key are among them.
	Columns []string
	// Parent and ParentColumn say which table's column references a row of
	// this table; "" for a root table.
	Parent, ParentColumn string
	// Guard: a root whose name is no schema index. Its insert is guarded by
	// a wait for no row of that name, so that two writers cannot both
	// create it and a row of that name that is not ours is reported.
	Guard bool
	// ByPort: the table has no external_ids; a unit's rows are found by
	// logical_port, the router's gateway port.
	ByPort bool
	// Optional: older NB schemas lack the table (Static_MAC_Binding before
	// OVN 22.12). Absent then says why a desired row is not written.
	Optional bool
	Absent   func(model.Model) string
	// Describe is the detail of a create Change.
	Describe func(model.Model) string
	// Keys: of these map columns (among Columns) kubevirt-ovn manages only
	// the keys listed; the column's other keys are another tool's, left as
	// they are, and a change is written as a mutation of our keys.
	Keys map[string][]string
}

// Root says whether rows of the table live on their own.
func (t *Table) Root() bool { return t.Parent == "" }

// Registry is every table kubevirt-ovn writes, parents before children.
// The order is also the order of a unit's Change lines.
var Registry = []*Table{
	{
		Name: nbmodel.LogicalRouterTable, New: func() model.Model { return &nbmodel.LogicalRouter{} },
		Key:     func(m model.Model) string { return m.(*nbmodel.LogicalRouter).Name },
		Columns: []string{"name", "options", "external_ids"},
		Guard:   true,
		Describe: func(m model.Model) string {
			return "options=" + formatValue(m.(*nbmodel.LogicalRouter).Options)
		},
	},
	{
		Name: nbmodel.LogicalRouterPortTable, New: func() model.Model { return &nbmodel.LogicalRouterPort{} },
		Key:     func(m model.Model) string { return m.(*nbmodel.LogicalRouterPort).Name },
		Columns: []string{"name", "mac", "networks", "external_ids"},
		Parent:  nbmodel.LogicalRouterTable, ParentColumn: "ports",
		Describe: func(m model.Model) string {
			p := m.(*nbmodel.LogicalRouterPort)
			return "mac=" + p.MAC + " networks=" + formatValue(p.Networks)
		},
	},
	{
		Name: nbmodel.GatewayChassisTable, New: func() model.Model { return &nbmodel.GatewayChassis{} },
		Key:     func(m model.Model) string { return m.(*nbmodel.GatewayChassis).Name },
		Columns: []string{"name", "chassis_name", "priority", "external_ids"},
		Parent:  nbmodel.LogicalRouterPortTable, ParentColumn: "gateway_chassis",
		Describe: func(m model.Model) string {
			g := m.(*nbmodel.GatewayChassis)
			return fmt.Sprintf("chassis=%s priority=%d", g.ChassisName, g.Priority)
		},
	},
	{
		Name: nbmodel.NATTable, New: func() model.Model { return &nbmodel.NAT{} },
		Key: func(m model.Model) string {
			n := m.(*nbmodel.NAT)
			return string(n.Type) + " " + n.LogicalIP
		},
		Columns: []string{"type", "logical_ip", "external_ip", "external_port_range", "external_ids"},
		Parent:  nbmodel.LogicalRouterTable, ParentColumn: "nat",
		Describe: func(m model.Model) string {
			n := m.(*nbmodel.NAT)
			return "external_ip=" + n.ExternalIP + " external_port_range=" + n.ExternalPortRange
		},
	},
	{
		Name: nbmodel.LogicalRouterStaticRouteTable, New: func() model.Model { return &nbmodel.LogicalRouterStaticRoute{} },
		Key:     func(m model.Model) string { return m.(*nbmodel.LogicalRouterStaticRoute).IPPrefix },
		Columns: []string{"ip_prefix", "nexthop", "output_port", "external_ids"},
		Parent:  nbmodel.LogicalRouterTable, ParentColumn: "static_routes",
		Describe: func(m model.Model) string {
			r := m.(*nbmodel.LogicalRouterStaticRoute)
			out := ""
			if r.OutputPort != nil {
				out = *r.OutputPort
			}
			return "nexthop=" + r.Nexthop + " output_port=" + out
		},
	},
	{
		Name: nbmodel.LogicalSwitchTable, New: func() model.Model { return &nbmodel.LogicalSwitch{} },
		Key: func(m model.Model) string { return m.(*nbmodel.LogicalSwitch).Name },
		// other_config: only requested-tnl-key, in interconnect mode.
		Columns: []string{"name", "other_config", "external_ids"},
		Keys:    map[string][]string{"other_config": {translator.KeyTunnel}},
		Guard:   true,
	},
	{
		Name: nbmodel.LogicalSwitchPortTable, New: func() model.Model { return &nbmodel.LogicalSwitchPort{} },
		Key:     func(m model.Model) string { return m.(*nbmodel.LogicalSwitchPort).Name },
		Columns: []string{"name", "type", "addresses", "port_security", "options", "tag", "external_ids"},
		Parent:  nbmodel.LogicalSwitchTable, ParentColumn: "ports",
		Describe: describeLSP,
	},
	{
		Name: nbmodel.StaticMACBindingTable, New: func() model.Model { return &nbmodel.StaticMACBinding{} },
		Key: func(m model.Model) string {
			b := m.(*nbmodel.StaticMACBinding)
			return b.LogicalPort + " " + b.IP
		},
		Columns:  []string{"logical_port", "ip", "mac", "override_dynamic_mac"},
		ByPort:   true,
		Optional: true,
		Absent: func(m model.Model) string {
			b := m.(*nbmodel.StaticMACBinding)
			return "peerRouter.mac " + b.MAC + " (" + b.IP + " on " + b.LogicalPort + ") is not pinned: this OVN Northbound has no Static_MAC_Binding table " +
				"(OVN before 22.12); the router still works, OVN learns the peer's MAC by ARP"
		},
		Describe: func(m model.Model) string { return "mac=" + m.(*nbmodel.StaticMACBinding).MAC },
	},
}

// byName is the registry by table name; tableOf by model type.
var byName = func() map[string]*Table {
	out := map[string]*Table{}
	for _, t := range Registry {
		out[t.Name] = t
	}
	return out
}()

// Lookup returns the registry entry of table, nil when kubevirt-ovn does
// not write it.
func Lookup(table string) *Table { return byName[table] }

// byType is the registry by model type.
var byType = func() map[reflect.Type]*Table {
	out := map[reflect.Type]*Table{}
	for _, t := range Registry {
		out[reflect.TypeOf(t.New())] = t
	}
	return out
}()

// tableOf returns the registry entry of m's table.
func tableOf(m model.Model) (*Table, error) {
	if t := byType[reflect.TypeOf(m)]; t != nil {
		return t, nil
	}
	return nil, fmt.Errorf("kubevirt-ovn does not write rows of %T", m)
}

// children are the registry entries whose parent is t.
func (t *Table) children() []*Table {
	var out []*Table
	for _, c := range Registry {
		if c.Parent == t.Name {
			out = append(out, c)
		}
	}
	return out
}

// owner returns the unit owning row m of instance, from its external_ids or,
// for a ByPort table, from the gateway port it names.
func (t *Table) owner(m model.Model, instance string) (translator.Unit, bool) {
	if t.ByPort {
		b := m.(*nbmodel.StaticMACBinding)
		r, ok := translator.RouterOfGatewayPort(b.LogicalPort)
		return translator.Unit{Kind: translator.KindRouter, Name: r}, ok
	}
	ids := externalIDs(m)
	return translator.OwnerOf(ids, instance)
}

// externalIDs is a row's external_ids; nil for a table without them.
func externalIDs(m model.Model) map[string]string {
	if r, ok := m.(interface{ GetExternalIDs() map[string]string }); ok {
		return r.GetExternalIDs()
	}
	return nil
}

func describeLSP(m model.Model) string {
	p := m.(*nbmodel.LogicalSwitchPort)
	s := ""
	if p.Type != "" {
		s = "type=" + p.Type + " "
	}
	s += "addresses=" + formatValue(p.Addresses)
	if len(p.Options) > 0 {
		s += " options=" + formatValue(p.Options)
	}
	if p.Tag != nil {
		s += " tag=" + strconv.Itoa(*p.Tag)
	}
	return s
}

// ManagedChanged says whether an update of a row of table changed anything
// its owner reconciles: a managed column, or our owner keys. A change of
// reference columns only (a port added to or removed from a switch of
// ours, by us or by another tool) is the business of the children's owners,
// whose own rows' events say so.
func ManagedChanged(table string, old, cur model.Model) bool {
	t := Lookup(table)
	if t == nil {
		return true
	}
	for _, col := range t.Columns {
		if !equalValue(t.managed(old, col), t.managed(cur, col)) {
			return true
		}
	}
	return false
}

// managed is the value of column col of row m that kubevirt-ovn manages:
// the whole column, or of a Keys column only its keys.
func (t *Table) managed(m model.Model, col string) reflect.Value {
	v := field(m, col)
	keys, ok := t.Keys[col]
	if !ok {
		return v
	}
	out := reflect.MakeMap(v.Type())
	for _, k := range keys {
		if e := v.MapIndex(reflect.ValueOf(k)); e.IsValid() {
			out.SetMapIndex(reflect.ValueOf(k), e)
		}
	}
	return out
}

// foreignKeys says whether Keys column col of row m holds keys that are
// not kubevirt-ovn's.
func (t *Table) foreignKeys(m model.Model, col string) bool {
	return field(m, col).Len() > t.managed(m, col).Len()
}
