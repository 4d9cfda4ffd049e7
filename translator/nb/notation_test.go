package nb

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/ovn-kubernetes/libovsdb/ovsdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubevirt-ovn/kubevirt-ovn/nbmodel"
)

// The notation an insert writes reads back, through libovsdb's own
// decoding, as the value it was written from: strings with quotes,
// backslashes, control and non-ASCII characters, sets of one and of many,
// maps, optional values, references to existing and to new rows.
func TestNotationReadsBackAsWritten(t *testing.T) {
	tag := 7
	out := "kv-rtoe-\"r\"\\1"
	rows := []any{
		&nbmodel.LogicalSwitchPort{Name: "a\"b\\c\x01é\u2028", Type: "router", Addresses: []string{"router"},
			PortSecurity: []string{"52:54:00:00:00:01 10.0.0.1", "52:54:00:00:00:02"}, Options: map[string]string{"router-port": "x", "k\"": "v\n"},
			Tag: &tag, ExternalIDs: map[string]string{"kubevirt-ovn/owner": "r1"}},
		&nbmodel.LogicalSwitch{Name: "kv-net", Ports: []string{"kvrow12", "0b0f5d3e-8c1e-4d4b-9d4a-5f8b8a1c2d3e"}},
		&nbmodel.LogicalRouterStaticRoute{IPPrefix: "0.0.0.0/0", Nexthop: "172.16.0.1", OutputPort: &out},
		&nbmodel.GatewayChassis{Name: "g", ChassisName: "gw1", Priority: 32767},
		&nbmodel.StaticMACBinding{LogicalPort: "p", IP: "1.2.3.4", MAC: "00:00:00:00:ee:01", OverrideDynamicMAC: true},
		&nbmodel.NAT{Type: nbmodel.NATTypeSNAT, LogicalIP: "10.0.0.0/24", ExternalIP: "172.16.0.100"},
	}
	schema := nbmodel.Schema()
	var a arena
	for _, m := range rows {
		tbl, err := Default.TableOf(m)
		require.NoError(t, err)
		ts := schema.Table(tbl.Name)
		v := reflect.ValueOf(m).Elem()
		for col, i := range columnFields(v.Type()) {
			f := v.Field(i)
			if col == "_uuid" || emptyValue(f) {
				continue
			}
			cs := ts.Column(col)
			raw, err := a.encode(cs, f)
			require.NoError(t, err, "%s.%s", tbl.Name, col)
			require.True(t, json.Valid(raw), "%s.%s: %s", tbl.Name, col, raw)
			var generic any
			require.NoError(t, json.Unmarshal(raw, &generic))
			ovs, err := ovsdb.OvsToNative(cs, toOvs(t, cs, raw))
			require.NoError(t, err, "%s.%s: %s", tbl.Name, col, raw)
			want := f.Interface()
			if f.Kind() == reflect.Pointer {
				want = f.Elem().Interface()
				ovs = reflect.ValueOf(ovs).Elem().Interface()
			}
			if s, ok := want.([]string); ok && cs.TypeObj.Key.Type == ovsdb.TypeUUID {
				// A new row's name reads back as a name.
				assert.ElementsMatch(t, s, ovs, "%s.%s: %s", tbl.Name, col, raw)
				continue
			}
			if f.Kind() == reflect.Slice {
				assert.ElementsMatch(t, want, ovs, "%s.%s: %s", tbl.Name, col, raw)
				continue
			}
			assert.EqualValues(t, want, ovs, "%s.%s: %s", tbl.Name, col, raw)
		}
	}
}

// toOvs decodes raw as libovsdb decodes a column of a row it receives.
func toOvs(t *testing.T, cs *ovsdb.ColumnSchema, raw json.RawMessage) any {
	t.Helper()
	var row ovsdb.Row
	require.NoError(t, json.Unmarshal([]byte(`{"c":`+string(raw)+`}`), &row))
	return row["c"]
}
