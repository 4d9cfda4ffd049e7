package nb

import (
	"reflect"
	"slices"
	"testing"

	"github.com/ovn-kubernetes/libovsdb/ovsdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubevirt-ovn/kubevirt-ovn/nbmodel"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator"
)

// TestRegistryMatchesTheSchema checks every registry entry against the
// pinned NB schema the models are generated from: the table and every
// managed column exist, a child's parent column references it, a root is a
// root, a guarded root's name is no schema index (else the index guards
// it), and the model's fields are the columns.
func TestRegistryMatchesTheSchema(t *testing.T) {
	schema := nbmodel.Schema()
	for _, tbl := range Registry {
		t.Run(tbl.Name, func(t *testing.T) {
			ts, ok := schema.Tables[tbl.Name]
			require.True(t, ok, "table in the schema")
			m := tbl.New()
			got, err := tableOf(m)
			require.NoError(t, err)
			assert.Same(t, tbl, got, "New makes a row of the table")
			full, err := nbmodel.FullDatabaseModel()
			require.NoError(t, err)
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
				parent := Lookup(tbl.Parent)
				require.NotNil(t, parent, "parent %s in the registry", tbl.Parent)
				pc, ok := schema.Tables[tbl.Parent].Columns[tbl.ParentColumn]
				require.True(t, ok, "parent column %s.%s", tbl.Parent, tbl.ParentColumn)
				require.NotNil(t, pc.TypeObj, "typed parent column")
				assert.Equal(t, ovsdb.TypeUUID, pc.TypeObj.Key.Type, "parent column holds references")
				ref, err := pc.TypeObj.Key.RefTable()
				require.NoError(t, err)
				assert.Equal(t, tbl.Name, ref, "parent column references this table")
				assert.Less(t, slices.Index(Registry, parent), slices.Index(Registry, tbl), "parents come before children")
			}
			if tbl.Guard {
				assert.True(t, tbl.Root())
				assert.NotContains(t, ts.Indexes, []string{"name"}, "a guarded root's name is no schema index")
				assert.Contains(t, tbl.Columns, "name")
			}
			if tbl.ByPort {
				assert.Contains(t, tbl.Columns, "logical_port")
			} else {
				assert.Contains(t, tbl.Columns, "external_ids", "owner keys are managed")
			}
			if tbl.Optional {
				assert.NotNil(t, tbl.Absent, "an optional table says why a row is not written")
			}
		})
	}
}

// TestRegistryKeysAreManagedColumns: a row's key is read from managed
// columns only, so two rows equal in those columns have one key.
func TestRegistryKeysAreManagedColumns(t *testing.T) {
	for _, tbl := range Registry {
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

// TestRegistryOwnsWhatThePlanEmits: every row the plan emits for the
// examples is of a registry table, and a child names a parent row the plan
// emits too or a network switch.
func TestRegistryOwnsWhatThePlanEmits(t *testing.T) {
	s := &translator.Snapshot{
		Networks: []translator.Network{
			{Name: "public", Namespace: "default", Type: "FLAT", CIDR: "172.16.0.0/24", GatewayIP: "172.16.0.1"},
			{Name: "net-a", Namespace: "default", Type: "GENEVE", CIDR: "10.10.0.0/24", GatewayIP: "10.10.0.1"},
		},
		Routers: []translator.Router{{Name: "r1", EnableSNAT: true, Internal: []string{"net-a"},
			External: &translator.External{IP: "172.16.0.100", Network: "public"}, PeerRouter: &translator.PeerRouter{IP: "172.16.0.1", MAC: "00:00:00:00:ee:01"}, Gateway: "gw1"}},
		VMs: []translator.VMInterface{{Namespace: "default", VMI: "vm", Interface: "eth1", Network: "net-a", NetworkNamespace: "default", MAC: "50:54:00:00:00:05", IP: "10.10.0.5"}},
	}
	plan := translator.Build(s, "test")
	require.Empty(t, plan.Errors)
	var rows []translator.Row
	for i := range plan.Networks {
		rows = append(rows, plan.Networks[i].Rows()...)
	}
	for i := range plan.Routers {
		rows = append(rows, plan.Routers[i].Rows()...)
	}
	keys := map[string]bool{}
	seen := map[string]bool{}
	for _, r := range rows {
		tbl, err := tableOf(r.Model)
		require.NoError(t, err)
		seen[tbl.Name] = true
		keys[tbl.Name+" "+tbl.Key(r.Model)] = true
	}
	for _, r := range rows {
		tbl, _ := tableOf(r.Model)
		if tbl.Root() {
			assert.Empty(t, r.Parent, "%s %s", tbl.Name, tbl.Key(r.Model))
			continue
		}
		assert.True(t, keys[tbl.Parent+" "+r.Parent], "%s %s: parent %s %s is planned", tbl.Name, tbl.Key(r.Model), tbl.Parent, r.Parent)
	}
	for _, tbl := range Registry {
		assert.True(t, seen[tbl.Name], "the examples exercise %s", tbl.Name)
	}
}
