package nb

import (
	"fmt"
	"reflect"
	"slices"
	"testing"

	"github.com/ovn-kubernetes/libovsdb/model"
	"github.com/ovn-kubernetes/libovsdb/ovsdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubevirt-ovn/kubevirt-ovn/nbmodel"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator"
)

// TestRegistryMatchesTheSchema checks every registry entry against the
// pinned NB schema the models are generated from: the table and every
// managed column exist, a child's parent column references it, a
// reference column references its table, a column a table is owned through
// names rows (a string), a root is a root, a guarded root's name is no
// schema index (else the index guards it), and the model's fields are the
// columns.
func TestRegistryMatchesTheSchema(t *testing.T) {
	schema := nbmodel.Schema()
	full, err := nbmodel.FullDatabaseModel()
	require.NoError(t, err)
	refColumn := func(t *testing.T, table, col, target string) {
		t.Helper()
		c, ok := schema.Tables[table].Columns[col]
		require.True(t, ok, "column %s.%s in the schema", table, col)
		require.NotNil(t, c.TypeObj, "typed column %s.%s", table, col)
		assert.Equal(t, ovsdb.TypeUUID, c.TypeObj.Key.Type, "%s.%s holds references", table, col)
		ref, err := c.TypeObj.Key.RefTable()
		require.NoError(t, err)
		assert.Equal(t, target, ref, "%s.%s references %s", table, col, target)
	}
	for _, reg := range []*Registry{Default} {
		for _, tbl := range reg.Tables() {
			t.Run(tbl.Name, func(t *testing.T) {
				ts, ok := schema.Tables[tbl.Name]
				require.True(t, ok, "table in the schema")
				m := tbl.New()
				got, err := reg.TableOf(m)
				require.NoError(t, err)
				assert.Same(t, tbl, got, "New makes a row of the table")
				assert.Equal(t, full.Types()[tbl.Name], reflect.TypeOf(m), "New makes a row of the table")
				fields := columnFields(reflect.TypeOf(m).Elem())
				for _, col := range tbl.Columns {
					_, inSchema := ts.Columns[col]
					assert.True(t, inSchema, "managed column %s in the schema", col)
					_, inModel := fields[col]
					assert.True(t, inModel, "managed column %s in the model", col)
				}
				assert.Equal(t, ts.IsRoot, tbl.Root(), "a registry root is a schema root")
				if !tbl.Root() {
					parent := reg.Lookup(tbl.Parent)
					require.NotNil(t, parent, "parent %s in the registry", tbl.Parent)
					refColumn(t, tbl.Parent, tbl.ParentColumn, tbl.Name)
					assert.Less(t, slices.Index(reg.Tables(), parent), slices.Index(reg.Tables(), tbl), "parents come before children")
				}
				for _, ref := range tbl.References {
					require.NotNil(t, reg.Lookup(ref.Table), "referenced table %s in the registry", ref.Table)
					refColumn(t, tbl.Name, ref.Column, ref.Table)
				}
				if o := tbl.OwnedThrough; o != nil {
					c, ok := ts.Columns[o.Column]
					require.True(t, ok, "column %s in the schema", o.Column)
					assert.Equal(t, ovsdb.TypeString, c.Type, "%s names its owning row by key", o.Column)
					require.NotNil(t, reg.Lookup(o.Table))
				} else {
					assert.Contains(t, tbl.Columns, "external_ids", "owner keys are managed")
				}
				if tbl.Guard {
					assert.NotContains(t, ts.Indexes, []string{"name"}, "a guarded root's name is no schema index")
				}
			})
		}
	}
}

// TestRegistryKeysAreManagedColumns: a row's key is read from managed
// columns only, so two rows equal in those columns have one key.
func TestRegistryKeysAreManagedColumns(t *testing.T) {
	for _, tbl := range Default.Tables() {
		a, b := tbl.New(), tbl.New()
		v := reflect.ValueOf(b).Elem()
		for col, i := range columnFields(v.Type()) {
			if slices.Contains(tbl.Columns, col) || col == "_uuid" {
				continue
			}
			// Fill every other column with something.
			f := v.Field(i)
			switch f.Kind() {
			case reflect.String:
				f.SetString("x")
			case reflect.Int:
				f.SetInt(7)
			case reflect.Bool:
				f.SetBool(true)
			case reflect.Slice:
				f.Set(reflect.ValueOf([]string{"x"}))
			}
		}
		assert.Equal(t, tbl.Key(a), tbl.Key(b), "%s key ignores unmanaged columns", tbl.Name)
	}
}

// TestNATKeys: a snat row keeps its key by logical IP (rows written
// before floating IPs keep theirs); a dnat_and_snat row is keyed by its
// external IP, so a floating IP moved to another VM is the same row.
func TestNATKeys(t *testing.T) {
	nat := Default.Lookup(nbmodel.NATTable)
	assert.Equal(t, "snat 10.10.0.0/24", nat.Key(&nbmodel.NAT{Type: nbmodel.NATTypeSNAT, ExternalIP: "172.16.0.100", LogicalIP: "10.10.0.0/24"}))
	assert.Equal(t, "dnat_and_snat 172.16.0.50", nat.Key(&nbmodel.NAT{Type: nbmodel.NATTypeDNATAndSNAT, ExternalIP: "172.16.0.50", LogicalIP: "10.10.0.5"}))
	assert.Equal(t, "dnat_and_snat 172.16.0.50", nat.Key(&nbmodel.NAT{Type: nbmodel.NATTypeDNATAndSNAT, ExternalIP: "172.16.0.50", LogicalIP: "10.20.0.6"}))
}

// TestRegistryRejectsWhatTheDiffCannotDo: an entry the diff could not
// follow is refused when the registry is made, naming the table and the
// field.
func TestRegistryRejectsWhatTheDiffCannotDo(t *testing.T) {
	with := func(t Table, change func(*Table)) *Table { change(&t); return &t }
	// Logical_Router without its references (to Load_Balancer).
	lr := with(*Default.Lookup(nbmodel.LogicalRouterTable), func(t *Table) { t.References = nil })
	lrp := Default.Lookup(nbmodel.LogicalRouterPortTable)
	for name, c := range map[string]struct {
		tables []*Table
		want   string
	}{
		"child before parent":   {[]*Table{lrp, lr}, "Logical_Router_Port: Parent Logical_Router is not listed before it"},
		"identity not managed":  {[]*Table{with(*lr, func(t *Table) { t.Identity = []string{"options"}; t.Columns = []string{"name", "external_ids"} })}, "Logical_Router: Identity column options is not among Columns"},
		"no owner keys":         {[]*Table{with(*lr, func(t *Table) { t.Columns = []string{"name", "options"} })}, "Logical_Router: a table not OwnedThrough carries our owner keys"},
		"partial map not a map": {[]*Table{with(*lr, func(t *Table) { t.PartialMaps = map[string][]string{"name": {"x"}} })}, "Logical_Router: PartialMaps: name is not a map column"},
		"unknown reference":     {[]*Table{with(*lr, func(t *Table) { t.References = []Reference{{Column: "copp", Table: nbmodel.CoppTable}} })}, "Logical_Router: References: Logical_Router.copp refers to Copp, which is not in the registry"},
		"reference managed":     {[]*Table{with(*lr, func(t *Table) { t.References = []Reference{{Column: "name", Table: nbmodel.LogicalRouterTable}} })}, "Logical_Router: References: name is no column of the model outside Columns"},
		"owned through nothing": {[]*Table{Default.Lookup(nbmodel.StaticMACBindingTable)}, "Static_MAC_Binding: OwnedThrough: Logical_Router_Port is not a table with owner keys listed before it"},
		"listed twice":          {[]*Table{lr, lr}, "table Logical_Router listed twice"},
		"identity of a parent": {[]*Table{with(*lr, func(t *Table) { t.IdentityOf = func(model.Model) []string { return []string{"name"} } }), lrp},
			"Logical_Router: IdentityOf: its rows are looked up by key"},
		"identity of unmanaged": {[]*Table{with(*lr, func(t *Table) {
			t.IdentityOf = func(model.Model) []string { return []string{"options"} }
			t.Columns = []string{"name", "external_ids"}
		})},
			"Logical_Router: IdentityOf column options is not among Columns"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := NewRegistry(c.tables...)
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
		})
	}
}

// TestRegistryInsertOrder: a transaction inserts children before the
// parent whose insert row names them, and a referenced row before the rows
// referring to it.
func TestRegistryInsertOrder(t *testing.T) {
	names := func(ts []*Table) []string {
		var out []string
		for _, t := range ts {
			out = append(out, t.Name)
		}
		return out
	}
	order := names(Default.insertOrder)
	for _, tbl := range Default.Tables() {
		for _, c := range Default.Children(tbl) {
			assert.Less(t, slices.Index(order, c.Name), slices.Index(order, tbl.Name), "%s before its parent %s", c.Name, tbl.Name)
		}
	}
	assert.Less(t, slices.Index(order, nbmodel.DHCPOptionsTable), slices.Index(order, nbmodel.LogicalSwitchPortTable))
	assert.Less(t, slices.Index(order, nbmodel.LogicalSwitchPortTable), slices.Index(order, nbmodel.LogicalSwitchTable))
}

// richSnapshot exercises every row the planner emits (floating IPs' NATs
// and policies among them): FLAT, VLAN and
// overlay networks, routers with and without SNAT, a peer with and without
// a MAC, gateway candidates from the SB, VMs; zone chassis in
// interconnect mode.
func richSnapshot(interconnect bool) *translator.Snapshot {
	s := &translator.Snapshot{
		Networks: []translator.Network{
			{Name: "public", Namespace: "default", Type: "FLAT", PhysicalNetworkName: "physnet1", CIDR: "172.16.0.0/24", GatewayIP: "172.16.0.1"},
			{Name: "vlan", Namespace: "default", Type: "VLAN", SegmentID: "100", PhysicalNetworkName: "physnet1", CIDR: "192.0.2.0/24", GatewayIP: "192.0.2.1"},
			{Name: "net-a", Namespace: "default", Type: "GENEVE", CIDR: "10.10.0.0/24", GatewayIP: "10.10.0.1"},
			{Name: "net-b", Namespace: "default", Type: "VXLAN", SegmentID: "200", CIDR: "10.20.0.0/24", GatewayIP: "10.20.0.1"},
		},
		Routers: []translator.Router{
			{Name: "r1", EnableSNAT: true, Internal: []string{"net-a"}, Description: "d",
				External: &translator.External{IP: "172.16.0.100", Network: "public"}, PeerRouter: &translator.PeerRouter{IP: "172.16.0.1", MAC: "00:00:00:00:ee:01"}},
			{Name: "r2", Internal: []string{"net-b"}, External: &translator.External{IP: "192.0.2.10", Network: "vlan"}, PeerRouter: &translator.PeerRouter{IP: "192.0.2.1"}},
			{Name: "r3", Internal: []string{}},
		},
		VMs: []translator.VMInterface{
			{Namespace: "default", VMI: "vm", Interface: "eth1", Network: "net-a", NetworkNamespace: "default", MAC: "50:54:00:00:00:05", IP: "10.10.0.5", Node: "node-hv1"},
			{Namespace: "default", VMI: "vm2", Interface: "eth1", Network: "net-b", NetworkNamespace: "default", MAC: "50:54:00:00:00:06", IP: "10.20.0.6", Node: "node-hv2"},
		},
		// A floating IP on r1 (SNAT) and one on r2 (no SNAT: policies).
		FloatingIPs: []translator.FloatingIP{
			{Name: "fip-1", ID: "fip-1", Router: "r1", Network: "public", IP: "172.16.0.50", FixedIP: "10.10.0.5", VMName: "vm"},
			{Name: "fip-2", ID: "fip-2", Router: "r2", Network: "vlan", IP: "192.0.2.50", FixedIP: "10.20.0.6"},
		},
		ChassisKnown: true,
		Chassis: []translator.Chassis{
			{Name: "gw1", Hostname: "node-gw1", Gateway: true, Physnets: []string{"physnet1"}},
			{Name: "gw2", Hostname: "node-gw2", Gateway: true, Physnets: []string{"physnet1"}},
			{Name: "hv1", Hostname: "node-hv1"},
			{Name: "hv2", Hostname: "node-hv2"},
		},
	}
	// A load balancer on net-a with a floating IP on its VIP.
	s.LoadBalancers = []translator.LoadBalancer{{Name: "lb-1", ID: "lb-1", Network: "net-a", VIP: "10.10.0.100",
		Members: []string{"10.10.0.5"}, Rules: []translator.LBRule{{Protocol: "tcp", PortMin: 80}, {Protocol: "icmp"}},
		HealthCheck: &translator.LBHealthCheck{SourceIP: "10.10.0.250"}}}
	s.FloatingIPs = append(s.FloatingIPs, translator.FloatingIP{Name: "fip-lb", ID: "fip-lb", Router: "r1", Network: "public", IP: "172.16.0.60", FixedIP: "10.10.0.100"})
	// Security groups: vm in two groups, a remote-group rule (in
	// interconnect mode its remote group's Address_Set) and an embedded
	// rule.
	s.VMs[0].SecurityGroups = "sg-db,sg-web"
	port := 80
	s.SecurityGroups = []translator.SecurityGroup{
		{Name: "sg-web", ID: "sg-web", Rules: []translator.SecurityGroupRule{{ID: "web-http", Direction: "ingress", Protocol: "tcp", PortRangeMin: &port}}},
		{Name: "sg-db", ID: "sg-db"},
	}
	s.SecurityGroupRules = []translator.SecurityGroupRule{{Name: "db-from-web", ID: "db-from-web", SecurityGroupID: "sg-db", Direction: "ingress", RemoteGroupID: "sg-web"}}
	if interconnect {
		s.Interconnect = true
		for i := range s.Chassis {
			s.Chassis[i].Zone = s.Chassis[i].Name
		}
	}
	return s
}

// TestRegistryOwnsWhatThePlanEmits: every row a whole plan emits, in
// central and in interconnect mode, is of a registry table; a child names
// a parent row the plan emits too, and a root none; every reference names
// a reference column of the registry and a row the plan emits. A plan row
// of a table the registry lacks fails here, not in a user's sync.
func TestRegistryOwnsWhatThePlanEmits(t *testing.T) {
	for _, interconnect := range []bool{false, true} {
		plan := translator.Build(richSnapshot(interconnect), "test")
		require.Empty(t, plan.Errors)
		require.Empty(t, plan.Failed)
		var sets [][]translator.Row
		for i := range plan.Networks {
			np := &plan.Networks[i]
			sets = append(sets, np.Rows())
			for _, zr := range np.Zones {
				sets = append(sets, zr.Rows)
			}
		}
		for i := range plan.Routers {
			rp := &plan.Routers[i]
			sets = append(sets, rp.Rows())
			for _, zr := range rp.Zones {
				sets = append(sets, zr.Rows)
			}
		}
		for i := range plan.SecurityGroups {
			sp := &plan.SecurityGroups[i]
			sets = append(sets, sp.Rows())
			for _, zr := range sp.Zones {
				sets = append(sets, zr.Rows)
			}
		}
		if interconnect {
			require.NotEmpty(t, plan.Networks[0].Zones, "precondition: zone rows planned")
		}
		keys := map[rowKey]bool{}
		seen := map[string]bool{}
		for _, rows := range sets {
			for _, r := range rows {
				tbl, err := Default.TableOf(r.Model)
				require.NoError(t, err, "interconnect=%v", interconnect)
				seen[tbl.Name] = true
				keys[rowKey{tbl.Name, tbl.Key(r.Model)}] = true
			}
		}
		for _, rows := range sets {
			for _, r := range rows {
				tbl, _ := Default.TableOf(r.Model)
				name := tbl.Name + " " + tbl.Key(r.Model)
				if tbl.Root() {
					assert.Empty(t, r.Parent, name)
				} else {
					assert.True(t, keys[rowKey{tbl.Parent, r.Parent}], "%s: parent %s %s is planned", name, tbl.Parent, r.Parent)
				}
				for _, ref := range r.Refs {
					i := slices.IndexFunc(tbl.References, func(x Reference) bool { return x.Column == ref.Column })
					require.GreaterOrEqual(t, i, 0, "%s: %s is a reference column", name, ref.Column)
					assert.True(t, keys[rowKey{tbl.References[i].Table, ref.Key}], "%s: %s %s is planned", name, tbl.References[i].Table, ref.Key)
				}
			}
		}
		for _, tbl := range Default.Tables() {
			if !interconnect && tbl.Name == nbmodel.AddressSetTable {
				continue // interconnect mode only
			}
			assert.True(t, seen[tbl.Name], "interconnect=%v: the snapshot exercises %s", interconnect, tbl.Name)
		}
	}
}

// TestRegistryMapKeyIdentity: an Identity entry "column:key" is the value
// of one key of a map column: the row's key (also without the key: ""),
// the column of the client index the diff finds rows by (the key's
// value), and refused on a column that is no map of strings or is not
// managed.
func TestRegistryMapKeyIdentity(t *testing.T) {
	d := Default.Lookup(nbmodel.DHCPOptionsTable)
	require.NotNil(t, d)
	assert.Equal(t, "net-a", d.Key(&nbmodel.DHCPOptions{Cidr: "10.0.0.0/24", ExternalIDs: map[string]string{translator.KeyDHCPNetwork: "net-a", "other": "x"}}))
	assert.Equal(t, "", d.Key(&nbmodel.DHCPOptions{Cidr: "10.0.0.0/24"}), "a row without the key")
	assert.Contains(t, Default.ClientIndexes(d),
		model.ClientIndex{Columns: []model.ColumnKey{{Column: "external_ids", Key: translator.KeyDHCPNetwork}}},
		"rows referred to are found by the key's value")

	lr := Default.Lookup(nbmodel.LogicalRouterTable)
	with := func(change func(*Table)) *Table { c := *lr; c.References = nil; change(&c); return &c }
	two := with(func(t *Table) { t.Identity = []string{"name", "external_ids:k"} })
	reg, err := NewRegistry(two)
	require.NoError(t, err)
	assert.Equal(t, "r1 v", reg.Lookup(nbmodel.LogicalRouterTable).Key(&nbmodel.LogicalRouter{Name: "r1", ExternalIDs: map[string]string{"k": "v"}}))
	for name, c := range map[string]struct {
		table *Table
		want  string
	}{
		"not a map":   {with(func(t *Table) { t.Identity = []string{"name:x"} }), "Logical_Router: Identity name:x: name is no map column of strings"},
		"not managed": {with(func(t *Table) { t.Identity = []string{"load_balancer:x"} }), "Logical_Router: Identity column load_balancer is not among Columns"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := NewRegistry(c.table)
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
		})
	}
}

// A port group's thousands of ports are compared through sets: the
// difference is the same as the small lists' linear one.
func TestSymmetricDifferenceOfLargeSets(t *testing.T) {
	var a, b []string
	for i := 0; i < 1000; i++ {
		a = append(a, fmt.Sprint("p", i))
		b = append(b, fmt.Sprint("p", i+3))
	}
	assert.Equal(t, []string{"p0", "p1", "p2", "p1000", "p1001", "p1002"}, symmetricDifference(a, b))
	assert.Empty(t, symmetricDifference(a, slices.Clone(a)))
	assert.Equal(t, []string{"x", "y"}, symmetricDifference([]string{"x", "z"}, []string{"z", "y"}))
}
