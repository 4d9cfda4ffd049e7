// Package nb is kubevirt-ovn's Northbound layer: which NB tables and
// columns kubevirt-ovn owns and how their rows refer to each other (the
// registry), the indexes over the rows it owns, the one generic diff that
// turns a unit's desired rows into OVSDB operations, and the one place
// those operations are committed.
//
// The registry is data: a table's entry says how a row is identified, which
// columns kubevirt-ovn manages, which parent row holds it, which of its
// columns reference rows of other tables (by their keys), and whose row it
// is (its external_ids, or the row it names). The diff, the transaction
// assembly, the monitor (its tables, conditions and columns), the client
// indexes, the owned-row walks and the controller's NB events all read it.
package nb

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"

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
	// Identity are the columns whose values, joined by spaces, are a
	// row's key: what identifies it among its owner's rows (two rows of one
	// owner with one key are duplicates), names it in Change lines, and
	// names it in a reference (translator.Row's Parent and Refs). Among
	// Columns. An entry "column:key" is the value of key in map column
	// column ("" when the row's map lacks it): a row whose columns hold
	// nothing unique (DHCP_Options' cidr is not, across routers) is
	// identified by one of our external_ids keys.
	Identity []string
	// IdentityOf, when set, says which columns identify row m, for a table
	// whose rows of different kinds are told apart by different columns
	// (a snat NAT by its logical IP, a dnat_and_snat NAT by its external
	// IP): each call returns Identity or another list of Columns. Rows of
	// such a table are not looked up by key (no parent, reference or
	// owned-through table finds them).
	IdentityOf func(m model.Model) []string
	// Columns are the columns kubevirt-ovn sets, in the order Change lines
	// list them; the diff compares and updates these and no other. The
	// Identity columns are among them; reference columns (Parent's,
	// References) are not: they hold UUIDs, which the diff resolves.
	Columns []string
	// PartialMaps are the map columns (among Columns) of which
	// kubevirt-ovn manages only the keys listed: the column's other keys
	// are another tool's, left as they are, and a change is written as a
	// mutation of our keys.
	PartialMaps map[string][]string
	// Parent and ParentColumn say which table's column holds a row of this
	// table (containment: the row lives in its parent, and goes with it);
	// "" for a root table.
	Parent, ParentColumn string
	// References are this table's columns that hold references to rows of
	// another table: a row of the same unit, of another unit, or a root
	// row that rows of several units share. A desired row names them by
	// key (translator.Row.Refs); the diff resolves a key to the UUID of the
	// row of ours that has it, or to the named UUID of the row the same
	// transaction inserts. Of such a column kubevirt-ovn manages only its
	// references to rows of its own.
	References []Reference
	// OwnedThrough is set for a table without external_ids: its rows are
	// ours when the row they name (by key, in a string column) is, and
	// belong to that row's owner (Static_MAC_Binding.logical_port names
	// the router's gateway port). A unit's diff also takes those naming a
	// row it wants that no other unit has (its port deleted by hand).
	OwnedThrough *Reference
	// OrphanKeys, for a table owned through another, are the keys of the
	// rows of that table that unit u's would have by our naming. A row
	// naming one of them when no row of ours has it (the router and its
	// port deleted by hand, then the router removed from the input) is
	// the unit's orphan: deleted with the unit's rows once a read of the
	// NB shows no row of that key at all (another instance's port is not
	// in our cache), guarded by a wait in the same transaction.
	// OrphanUnit is the inverse: the unit a key would be ours through, so
	// that a full sync finds the units of orphans whose other rows are
	// all gone.
	OrphanKeys func(u translator.Unit) []string
	OrphanUnit func(key string) (translator.Unit, bool)
	// Guard: a root whose name is no schema index. Its insert is guarded by
	// a wait for no row of that name, so that two writers cannot both
	// create it and a row of that name that is not ours is reported.
	Guard bool
	// Optional: older NB schemas lack the table. Missing says what its
	// absence means (logged when connecting); Absent says why a desired row
	// is not written.
	Optional bool
	Missing  string
	Absent   func(model.Model) string
	// Describe is the detail of a create Change.
	Describe func(model.Model) string
}

// Reference is a column that refers to rows of Table by their key: UUIDs
// (References) or the key itself (OwnedThrough).
type Reference struct {
	Column string
	Table  string
}

// Root says whether rows of the table live on their own.
func (t *Table) Root() bool { return t.Parent == "" }

// OwnerKeys says whether the table's rows carry our owner keys in
// external_ids (the monitor then selects ours by them); a table owned
// through another row has none, and is monitored whole.
func (t *Table) OwnerKeys() bool { return t.OwnedThrough == nil }

// Key is row m's key: its Identity columns' (or IdentityOf's) values
// joined by spaces.
func (t *Table) Key(m model.Model) string {
	cols := t.Identity
	if t.IdentityOf != nil {
		cols = t.IdentityOf(m)
	}
	if len(cols) == 1 {
		return identityValue(m, cols[0])
	}
	parts := make([]string, len(cols))
	for i, id := range cols {
		parts[i] = identityValue(m, id)
	}
	return strings.Join(parts, " ")
}

// identityValue is the value of Identity entry id of row m.
func identityValue(m model.Model, id string) string {
	col, key := identityColumn(id)
	if key == "" {
		return atomString(field(m, col))
	}
	if v := field(m, col).MapIndex(reflect.ValueOf(key)); v.IsValid() {
		return v.String()
	}
	return ""
}

// identityColumn splits Identity entry id into its column and, for an
// entry "column:key", the key of that map column ("" otherwise).
func identityColumn(id string) (col, key string) {
	col, key, _ = strings.Cut(id, ":")
	return col, key
}

// identityColumnKeys are t's Identity entries as client index columns.
func (t *Table) identityColumnKeys() []model.ColumnKey {
	out := make([]model.ColumnKey, len(t.Identity))
	for i, id := range t.Identity {
		col, key := identityColumn(id)
		out[i] = model.ColumnKey{Column: col}
		if key != "" {
			out[i].Key = key
		}
	}
	return out
}

func atomString(v reflect.Value) string {
	switch v.Kind() {
	case reflect.String:
		return v.String()
	case reflect.Pointer:
		if v.IsNil() {
			return ""
		}
		return atomString(v.Elem())
	}
	return fmt.Sprint(v.Interface())
}

// Registry is a set of tables kubevirt-ovn writes, parents before
// children, with what is derived from them. Default is kubevirt-ovn's; a
// test can give the diff and the monitor another (SyncOptions.Registry,
// ovn.ConnectNBWith).
type Registry struct {
	tables   []*Table
	byName   map[string]*Table
	byType   map[reflect.Type]*Table
	children map[*Table][]*Table
	// referrers are, per table, the reference columns that point at it.
	referrers map[*Table][]referrer
	// through are, per table, the tables owned through it.
	through map[*Table][]*Table
	// insertOrder lists the tables so that a row is inserted after the
	// rows it references: children before their parents (a parent's insert
	// names them), referenced rows before the rows referencing them.
	insertOrder []*Table
}

// referrer is a reference column of table t that points at another table.
type referrer struct {
	t   *Table
	ref Reference
}

// NewRegistry checks tables and derives what the diff needs from them. Its
// error names the table and the field at fault.
func NewRegistry(tables ...*Table) (*Registry, error) {
	r := &Registry{tables: tables, byName: map[string]*Table{}, byType: map[reflect.Type]*Table{},
		children: map[*Table][]*Table{}, referrers: map[*Table][]referrer{}, through: map[*Table][]*Table{}}
	for i, t := range tables {
		if t.Name == "" || t.New == nil {
			return nil, fmt.Errorf("registry entry %d: Name and New are required", i)
		}
		if r.byName[t.Name] != nil {
			return nil, fmt.Errorf("registry: table %s listed twice", t.Name)
		}
		fields := columnFields(reflect.TypeOf(t.New()).Elem())
		has := func(col string) bool { _, ok := fields[col]; return ok }
		if len(t.Identity) == 0 {
			return nil, fmt.Errorf("registry: %s: Identity names no column", t.Name)
		}
		for _, id := range t.Identity {
			col, key := identityColumn(id)
			if !slices.Contains(t.Columns, col) {
				return nil, fmt.Errorf("registry: %s: Identity column %s is not among Columns", t.Name, col)
			}
			if key != "" && (!has(col) || reflect.TypeOf(t.New()).Elem().Field(fields[col]).Type != reflect.TypeFor[map[string]string]()) {
				return nil, fmt.Errorf("registry: %s: Identity %s: %s is no map column of strings", t.Name, id, col)
			}
		}
		for _, col := range t.Columns {
			if !has(col) {
				return nil, fmt.Errorf("registry: %s: Columns: the model has no column %s", t.Name, col)
			}
		}
		for col := range t.PartialMaps {
			if !slices.Contains(t.Columns, col) || reflect.ValueOf(t.New()).Elem().Field(fields[col]).Kind() != reflect.Map {
				return nil, fmt.Errorf("registry: %s: PartialMaps: %s is not a map column among Columns", t.Name, col)
			}
		}
		if !t.Root() {
			p := r.byName[t.Parent]
			if p == nil {
				return nil, fmt.Errorf("registry: %s: Parent %s is not listed before it", t.Name, t.Parent)
			}
			if !hasColumn(p.New(), t.ParentColumn) {
				return nil, fmt.Errorf("registry: %s: ParentColumn: %s has no column %s", t.Name, t.Parent, t.ParentColumn)
			}
			r.children[p] = append(r.children[p], t)
		}
		for _, ref := range t.References {
			if !has(ref.Column) || slices.Contains(t.Columns, ref.Column) {
				return nil, fmt.Errorf("registry: %s: References: %s is no column of the model outside Columns", t.Name, ref.Column)
			}
		}
		if o := t.OwnedThrough; o != nil {
			target := r.byName[o.Table]
			if target == nil || !target.OwnerKeys() {
				return nil, fmt.Errorf("registry: %s: OwnedThrough: %s is not a table with owner keys listed before it", t.Name, o.Table)
			}
			if !slices.Contains(t.Columns, o.Column) {
				return nil, fmt.Errorf("registry: %s: OwnedThrough: column %s is not among Columns", t.Name, o.Column)
			}
			if len(target.Identity) != 1 {
				return nil, fmt.Errorf("registry: %s: OwnedThrough: %s is not identified by one column", t.Name, o.Table)
			}
			r.through[target] = append(r.through[target], t)
		} else if !has("external_ids") || !slices.Contains(t.Columns, "external_ids") {
			return nil, fmt.Errorf("registry: %s: a table not OwnedThrough carries our owner keys: external_ids must be among Columns", t.Name)
		}
		if t.Guard && (!t.Root() || !slices.Contains(t.Columns, "name")) {
			return nil, fmt.Errorf("registry: %s: Guard is for a root with a name column", t.Name)
		}
		if t.Optional && t.Absent == nil {
			return nil, fmt.Errorf("registry: %s: an Optional table says why a row is not written (Absent)", t.Name)
		}
		r.byName[t.Name] = t
		r.byType[reflect.TypeOf(t.New())] = t
	}
	for _, t := range tables {
		for _, ref := range t.References {
			target := r.byName[ref.Table]
			if target == nil {
				return nil, fmt.Errorf("registry: %s: References: %s.%s refers to %s, which is not in the registry", t.Name, t.Name, ref.Column, ref.Table)
			}
			if len(target.Identity) != 1 {
				return nil, fmt.Errorf("registry: %s: References: %s is not identified by one column", t.Name, ref.Table)
			}
			r.referrers[target] = append(r.referrers[target], referrer{t: t, ref: ref})
		}
	}
	for _, t := range tables {
		if t.IdentityOf == nil {
			continue
		}
		if r.lookedUpByKey(t) {
			return nil, fmt.Errorf("registry: %s: IdentityOf: its rows are looked up by key (a parent, a referenced or an owning table)", t.Name)
		}
		for _, col := range t.IdentityOf(t.New()) {
			if !slices.Contains(t.Columns, col) {
				return nil, fmt.Errorf("registry: %s: IdentityOf column %s is not among Columns", t.Name, col)
			}
		}
	}
	// A parent found by name in another unit is looked up by its key.
	for p := range r.children {
		if p.Root() && len(p.Identity) != 1 {
			return nil, fmt.Errorf("registry: %s: a root parent is identified by one column", p.Name)
		}
	}
	order, err := r.topoOrder()
	if err != nil {
		return nil, err
	}
	r.insertOrder = order
	return r, nil
}

// topoOrder is insertOrder: the registry walked from its end, each table
// after the tables it must follow. With parents before children in the
// registry and no references, it is the registry reversed.
func (r *Registry) topoOrder() ([]*Table, error) {
	state := map[*Table]int{} // 1 visiting, 2 done
	var out []*Table
	var visit func(t *Table) error
	visit = func(t *Table) error {
		switch state[t] {
		case 1:
			return fmt.Errorf("registry: %s: its references form a cycle", t.Name)
		case 2:
			return nil
		}
		state[t] = 1
		var deps []*Table
		deps = append(deps, r.children[t]...)
		for _, ref := range t.References {
			if target := r.byName[ref.Table]; target != t {
				deps = append(deps, target)
			}
		}
		slices.SortFunc(deps, func(a, b *Table) int { return slices.Index(r.tables, b) - slices.Index(r.tables, a) })
		for _, d := range deps {
			if err := visit(d); err != nil {
				return err
			}
		}
		state[t] = 2
		out = append(out, t)
		return nil
	}
	for i := len(r.tables) - 1; i >= 0; i-- {
		if err := visit(r.tables[i]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// MustRegistry is NewRegistry for tables known to be right.
func MustRegistry(tables ...*Table) *Registry {
	r, err := NewRegistry(tables...)
	if err != nil {
		panic(err)
	}
	return r
}

// Tables are the registry's tables, parents before children: the order of a
// unit's Change lines.
func (r *Registry) Tables() []*Table { return r.tables }

// Lookup returns the entry of table, nil when the registry lacks it.
func (r *Registry) Lookup(table string) *Table { return r.byName[table] }

// TableOf returns the entry of m's table.
func (r *Registry) TableOf(m model.Model) (*Table, error) {
	if t := r.byType[reflect.TypeOf(m)]; t != nil {
		return t, nil
	}
	return nil, fmt.Errorf("kubevirt-ovn does not write rows of %T", m)
}

// Children are the tables whose parent is t.
func (r *Registry) Children(t *Table) []*Table { return r.children[t] }

// ReadColumns are the columns a diff reads of t: every column of a root
// (the diff reports values another tool set in them); of a child table, its
// managed and reference columns and its children's parent columns (at
// thousands of routers, the other columns of their ports would only cost
// the monitor's first reply). _uuid first.
func (r *Registry) ReadColumns(t *Table) []string {
	if t.Root() {
		return modelColumnNames(t.New())
	}
	cols := append([]string{"_uuid"}, t.Columns...)
	for _, ref := range t.References {
		cols = append(cols, ref.Column)
	}
	for _, c := range r.children[t] {
		cols = append(cols, c.ParentColumn)
	}
	return cols
}

// modelColumnNames are the columns of model m, _uuid first.
func modelColumnNames(m model.Model) []string {
	v := reflect.ValueOf(m).Elem()
	out := []string{"_uuid"}
	for i := 0; i < v.NumField(); i++ {
		if col := v.Type().Field(i).Tag.Get("ovsdb"); col != "" && col != "_uuid" {
			out = append(out, col)
		}
	}
	return out
}

// ClientIndexes are the indexes of the client cache the diff looks rows of
// t up by: by owner (its external_ids keys, or the column naming the row
// it is owned through); by key, for a row found from another unit's rows
// (a parent, a referenced or an owning row) unless the schema indexes it;
// and by reference, for each reference column holding one UUID (who still
// refers to a root row that goes).
func (r *Registry) ClientIndexes(t *Table) []model.ClientIndex {
	var out []model.ClientIndex
	if t.OwnerKeys() {
		out = append(out,
			model.ClientIndex{Columns: []model.ColumnKey{{Column: "external_ids", Key: translator.KeyOwner}}},
			model.ClientIndex{Columns: []model.ColumnKey{{Column: "external_ids", Key: translator.KeyManagedBy}}})
	} else {
		out = append(out, model.ClientIndex{Columns: []model.ColumnKey{{Column: t.OwnedThrough.Column}}})
	}
	if r.lookedUpByKey(t) && !schemaIndexed(t.Name, t.Identity) {
		out = append(out, model.ClientIndex{Columns: t.identityColumnKeys()})
	}
	for _, ref := range t.References {
		if field(t.New(), ref.Column).Kind() == reflect.Pointer {
			out = append(out, model.ClientIndex{Columns: []model.ColumnKey{{Column: ref.Column}}})
		}
	}
	return out
}

// lookedUpByKey says whether rows of t are found by key from other rows: a
// root holding children (another unit's, found by name), the target of a
// reference or of an owned-through table.
func (r *Registry) lookedUpByKey(t *Table) bool {
	return (t.Root() && len(r.children[t]) > 0) || len(r.referrers[t]) > 0 || len(r.through[t]) > 0
}

func schemaIndexed(table string, cols []string) bool {
	ts, ok := nbmodel.Schema().Tables[table]
	if !ok {
		return false
	}
	for _, idx := range ts.Indexes {
		if slices.Equal(idx, cols) {
			return true
		}
	}
	return false
}

// Default is every table kubevirt-ovn writes, parents before children. The
// order is also the order of a unit's Change lines.
var Default = MustRegistry(
	&Table{
		Name: nbmodel.LogicalRouterTable, New: func() model.Model { return &nbmodel.LogicalRouter{} },
		Identity: []string{"name"},
		Columns:  []string{"name", "options", "external_ids"},
		Guard:    true,
		// The load balancers of its internal networks (its unit's).
		References: []Reference{{Column: "load_balancer", Table: nbmodel.LoadBalancerTable}},
		Describe: func(m model.Model) string {
			return "options=" + formatValue(m.(*nbmodel.LogicalRouter).Options)
		},
	},
	&Table{
		Name: nbmodel.LogicalRouterPortTable, New: func() model.Model { return &nbmodel.LogicalRouterPort{} },
		Identity: []string{"name"},
		Columns:  []string{"name", "mac", "networks", "ipv6_ra_configs", "external_ids"},
		Parent:   nbmodel.LogicalRouterTable, ParentColumn: "ports",
		Describe: func(m model.Model) string {
			p := m.(*nbmodel.LogicalRouterPort)
			return "mac=" + p.MAC + " networks=" + formatValue(p.Networks)
		},
	},
	&Table{
		Name: nbmodel.GatewayChassisTable, New: func() model.Model { return &nbmodel.GatewayChassis{} },
		Identity: []string{"name"},
		Columns:  []string{"name", "chassis_name", "priority", "external_ids"},
		Parent:   nbmodel.LogicalRouterPortTable, ParentColumn: "gateway_chassis",
		Describe: func(m model.Model) string {
			g := m.(*nbmodel.GatewayChassis)
			return fmt.Sprintf("chassis=%s priority=%d", g.ChassisName, g.Priority)
		},
	},
	&Table{
		Name: nbmodel.NATTable, New: func() model.Model { return &nbmodel.NAT{} },
		// A router's snat rows are one per internal network; its
		// dnat_and_snat rows (floating IPs) one per external IP, so that
		// moving a floating IP to another VM updates its logical_ip in
		// place.
		Identity:   []string{"type", "logical_ip"},
		IdentityOf: natIdentity,
		Columns:    []string{"type", "logical_ip", "external_ip", "external_port_range", "external_ids"},
		Parent:     nbmodel.LogicalRouterTable, ParentColumn: "nat",
		Describe: func(m model.Model) string {
			n := m.(*nbmodel.NAT)
			if n.Type == nbmodel.NATTypeDNATAndSNAT {
				return "logical_ip=" + n.LogicalIP
			}
			return "external_ip=" + n.ExternalIP + " external_port_range=" + n.ExternalPortRange
		},
	},
	&Table{
		Name: nbmodel.LogicalRouterPolicyTable, New: func() model.Model { return &nbmodel.LogicalRouterPolicy{} },
		Identity: []string{"priority", "match"},
		Columns:  []string{"priority", "match", "action", "external_ids"},
		Parent:   nbmodel.LogicalRouterTable, ParentColumn: "policies",
		Describe: func(m model.Model) string { return "action=" + m.(*nbmodel.LogicalRouterPolicy).Action },
	},
	&Table{
		Name: nbmodel.LogicalRouterStaticRouteTable, New: func() model.Model { return &nbmodel.LogicalRouterStaticRoute{} },
		Identity: []string{"ip_prefix"},
		Columns:  []string{"ip_prefix", "nexthop", "output_port", "external_ids"},
		Parent:   nbmodel.LogicalRouterTable, ParentColumn: "static_routes",
		Describe: func(m model.Model) string {
			r := m.(*nbmodel.LogicalRouterStaticRoute)
			out := ""
			if r.OutputPort != nil {
				out = *r.OutputPort
			}
			return "nexthop=" + r.Nexthop + " output_port=" + out
		},
	},
	&Table{
		Name: nbmodel.LogicalSwitchTable, New: func() model.Model { return &nbmodel.LogicalSwitch{} },
		Identity: []string{"name"},
		// other_config: only requested-tnl-key, in interconnect mode.
		Columns:     []string{"name", "other_config", "external_ids"},
		PartialMaps: map[string][]string{"other_config": {translator.KeyTunnel}},
		Guard:       true,
		// Its network's load balancers (its unit's own rows): the VIP
		// from inside the network.
		References: []Reference{{Column: "load_balancer", Table: nbmodel.LoadBalancerTable}},
	},
	&Table{
		// A load balancer's row for one protocol: a root, which the
		// router of its network refers to (the router's unit's row) or
		// the network's switch (the network's unit's row).
		Name: nbmodel.LoadBalancerTable, New: func() model.Model { return &nbmodel.LoadBalancer{} },
		Identity: []string{"name"},
		Columns:  []string{"name", "protocol", "vips", "options", "ip_port_mappings", "external_ids"},
		Describe: func(m model.Model) string {
			lb := m.(*nbmodel.LoadBalancer)
			s := "vips=" + formatValue(lb.Vips)
			if lb.Protocol != nil {
				s = "protocol=" + *lb.Protocol + " " + s
			}
			if len(lb.Options) > 0 {
				s += " options=" + formatValue(lb.Options)
			}
			return s
		},
	},
	&Table{
		// A network's DHCP options, which its VM ports refer to. Its CIDR
		// is no identity: networks of two routers may have one CIDR.
		Name: nbmodel.DHCPOptionsTable, New: func() model.Model { return &nbmodel.DHCPOptions{} },
		Identity: []string{"external_ids:" + translator.KeyDHCPNetwork},
		Columns:  []string{"cidr", "options", "external_ids"},
		Describe: func(m model.Model) string {
			d := m.(*nbmodel.DHCPOptions)
			return "cidr=" + d.Cidr + " options=" + formatValue(d.Options)
		},
	},
	&Table{
		// A health check of one VIP key of a load balancer's row.
		Name: nbmodel.LoadBalancerHealthCheckTable, New: func() model.Model { return &nbmodel.LoadBalancerHealthCheck{} },
		Identity: []string{"vip"},
		Columns:  []string{"vip", "options", "external_ids"},
		Parent:   nbmodel.LoadBalancerTable, ParentColumn: "health_check",
		Describe: func(m model.Model) string {
			return "options=" + formatValue(m.(*nbmodel.LoadBalancerHealthCheck).Options)
		},
	},
	&Table{
		Name: nbmodel.LogicalSwitchPortTable, New: func() model.Model { return &nbmodel.LogicalSwitchPort{} },
		Identity: []string{"name"},
		Columns:  []string{"name", "type", "addresses", "port_security", "options", "tag", "external_ids"},
		Parent:   nbmodel.LogicalSwitchTable, ParentColumn: "ports",
		// A VM port's DHCP and DHCPv6 options: its network's.
		References: []Reference{{Column: "dhcpv4_options", Table: nbmodel.DHCPOptionsTable}, {Column: "dhcpv6_options", Table: nbmodel.DHCPOptionsTable}},
		Describe:   describeLSP,
	},
	&Table{
		Name: nbmodel.StaticMACBindingTable, New: func() model.Model { return &nbmodel.StaticMACBinding{} },
		Identity: []string{"logical_port", "ip"},
		Columns:  []string{"logical_port", "ip", "mac", "override_dynamic_mac"},
		// No external_ids: a binding is the router's whose gateway port
		// it names.
		OwnedThrough: &Reference{Column: "logical_port", Table: nbmodel.LogicalRouterPortTable},
		OrphanKeys: func(u translator.Unit) []string {
			if u.Kind != translator.KindRouter {
				return nil
			}
			return []string{translator.GatewayPortName(u.Name)}
		},
		OrphanUnit: func(port string) (translator.Unit, bool) {
			r, ok := translator.RouterOfGatewayPort(port)
			return translator.Unit{Kind: translator.KindRouter, Name: r}, ok && r != ""
		},
		Optional: true,
		Missing:  "(OVN before 22.12): peer router MACs are not pinned",
		Absent: func(m model.Model) string {
			b := m.(*nbmodel.StaticMACBinding)
			return "peerRouter.mac " + b.MAC + " (" + b.IP + " on " + b.LogicalPort + ") is not pinned: this OVN Northbound has no Static_MAC_Binding table " +
				"(OVN before 22.12); the router still works, OVN learns the peer's MAC by ARP"
		},
		Describe: func(m model.Model) string { return "mac=" + m.(*nbmodel.StaticMACBinding).MAC },
	},
	&Table{
		// A security group's Port_Group: its ports are VM ports of the
		// networks' units (weak references in the schema: a port deleted
		// leaves the group by itself). The schema indexes its name.
		Name: nbmodel.PortGroupTable, New: func() model.Model { return &nbmodel.PortGroup{} },
		Identity:   []string{"name"},
		Columns:    []string{"name", "external_ids"},
		References: []Reference{{Column: "ports", Table: nbmodel.LogicalSwitchPortTable}},
	},
	&Table{
		// A security group's ACLs, identified by the rule they are of (or
		// the base ACL they are): editing a rule updates its ACL in place.
		Name: nbmodel.ACLTable, New: func() model.Model { return &nbmodel.ACL{} },
		Identity: []string{"external_ids:" + translator.KeySecurityACL},
		Columns:  []string{"direction", "priority", "match", "action", "external_ids"},
		Parent:   nbmodel.PortGroupTable, ParentColumn: "acls",
		Describe: func(m model.Model) string {
			a := m.(*nbmodel.ACL)
			return fmt.Sprintf("%s priority=%d %s match=%q", a.Direction, a.Priority, a.Action, a.Match)
		},
	},
	&Table{
		// A security group's members' addresses in every zone, in
		// interconnect mode, for the rules naming it as their remote
		// group. The schema indexes its name.
		Name: nbmodel.AddressSetTable, New: func() model.Model { return &nbmodel.AddressSet{} },
		Identity: []string{"name"},
		Columns:  []string{"name", "addresses", "external_ids"},
	},
)

// natIdentity: a dnat_and_snat row is identified by its external IP, the
// others by their logical IP.
func natIdentity(m model.Model) []string {
	if m.(*nbmodel.NAT).Type == nbmodel.NATTypeDNATAndSNAT {
		return natByExternal
	}
	return natByLogical
}

var (
	natByLogical  = []string{"type", "logical_ip"}
	natByExternal = []string{"type", "external_ip"}
)

// Lookup returns Default's entry of table, nil when kubevirt-ovn does not
// write it.
func Lookup(table string) *Table { return Default.Lookup(table) }

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
// its owner reconciles: a managed column or a reference column (our owner
// keys among them). A change of a parent's containment columns only (a
// port added to or removed from a switch of ours, by us or by another
// tool) is the business of the children's owners, whose own rows' events
// say so.
func ManagedChanged(table string, old, cur model.Model) bool {
	return Default.ManagedChanged(table, old, cur)
}

// ManagedChanged is the package function for registry r.
func (r *Registry) ManagedChanged(table string, old, cur model.Model) bool {
	t := r.Lookup(table)
	if t == nil {
		return true
	}
	for _, col := range t.Columns {
		if !equalValue(t.managed(old, col), t.managed(cur, col)) {
			return true
		}
	}
	for _, ref := range t.References {
		if !equalValue(field(old, ref.Column), field(cur, ref.Column)) {
			return true
		}
	}
	return false
}

// managed is the value of column col of row m that kubevirt-ovn manages:
// the whole column, or of a PartialMaps column only its keys.
func (t *Table) managed(m model.Model, col string) reflect.Value {
	v := field(m, col)
	keys, ok := t.PartialMaps[col]
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

// foreignKeys says whether PartialMaps column col of row m holds keys that
// are not kubevirt-ovn's.
func (t *Table) foreignKeys(m model.Model, col string) bool {
	return field(m, col).Len() > t.managed(m, col).Len()
}

// externalIDs is a row's external_ids; nil for a table without them.
func externalIDs(m model.Model) map[string]string {
	if r, ok := m.(interface{ GetExternalIDs() map[string]string }); ok {
		return r.GetExternalIDs()
	}
	return nil
}
