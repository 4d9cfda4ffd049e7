package ovn

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// staticPeer is router1's static binding of its peer router, as the
// proxy reads it from the SB.
func staticPeer(override bool) staticBinding {
	return staticBinding{row: json.RawMessage(`{"logical_port":"kv-rtoe-router1","ip":"172.16.0.1","mac":"00:00:00:00:ee:01","datapath":["uuid","d1"]}`), override: override}
}

// monitoredRows decodes the table of a patched monitor answer: updates2 row
// changes by UUID.
func monitoredRows(t *testing.T, updates json.RawMessage, table string) map[string]map[string]map[string]any {
	t.Helper()
	var u map[string]map[string]map[string]map[string]any
	require.NoError(t, json.Unmarshal(updates, &u))
	return u[table]
}

// ovn-trace's monitor answer gets the static binding in MAC_Binding
// (replacing a learned one it overrides) and the load balancers' backends
// narrowed to the member followed; the rest is as the SB sent it.
func TestTraceProxyPatch(t *testing.T) {
	p := &TraceProxy{rows: map[string]staticBinding{"kv-rtoe-router1/172.16.0.1": staticPeer(true)}}
	p.SetMember("10.10.0.9:8080")
	answer := `{"id":3,"error":null,"result":[false,"0",{
		"MAC_Binding":{"u1":{"initial":{"logical_port":"kv-rtoe-router1","ip":"172.16.0.1","mac":"aa:aa:aa:aa:aa:aa"}},
		               "u2":{"initial":{"logical_port":"kv-rtoe-router1","ip":"172.16.0.9","mac":"bb:bb:bb:bb:bb:bb"}}},
		"Logical_Flow":{"f1":{"initial":{"match":"ct.new","actions":"reg0[1] = 0; ct_lb_mark(backends=10.10.0.5:8080,10.10.0.9:8080);"}},
		                "f2":{"initial":{"match":"ct.new","actions":"ct_lb_mark(backends=10.10.0.7:80; hash_fields=\"ip_src\");"}}}}]}`
	out, err := p.patch(json.RawMessage(answer), "monitor_cond_since")
	require.NoError(t, err)
	var msg struct {
		ID     int               `json:"id"`
		Result []json.RawMessage `json:"result"`
	}
	require.NoError(t, json.Unmarshal(out, &msg))
	assert.Equal(t, 3, msg.ID)
	require.Len(t, msg.Result, 3)
	assert.JSONEq(t, `false`, string(msg.Result[0]))

	macs := monitoredRows(t, msg.Result[2], "MAC_Binding")
	assert.NotContains(t, macs, "u1", "the learned binding the static one overrides")
	assert.Contains(t, macs, "u2")
	require.Len(t, macs, 2)
	for uuid, change := range macs {
		if uuid != "u2" {
			assert.Equal(t, map[string]any{"logical_port": "kv-rtoe-router1", "ip": "172.16.0.1", "mac": "00:00:00:00:ee:01", "datapath": []any{"uuid", "d1"}}, change["initial"])
		}
	}
	flows := monitoredRows(t, msg.Result[2], "Logical_Flow")
	assert.Equal(t, "reg0[1] = 0; ct_lb_mark(backends=10.10.0.9:8080);", flows["f1"]["initial"]["actions"])
	assert.Equal(t, `ct_lb_mark(backends=10.10.0.7:80; hash_fields="ip_src");`, flows["f2"]["initial"]["actions"], "another load balancer")
}

// A static binding that does not override learned ones leaves a learned
// one in place; where none is learned it is added, as a monitor (v1)
// answer's "new" row.
func TestTraceProxyPatchKeepsLearned(t *testing.T) {
	p := &TraceProxy{rows: map[string]staticBinding{"kv-rtoe-router1/172.16.0.1": staticPeer(false)}}
	learned := `{"id":"x","result":{"MAC_Binding":{"u1":{"new":{"logical_port":"kv-rtoe-router1","ip":"172.16.0.1","mac":"aa:aa:aa:aa:aa:aa"}}}}}`
	out, err := p.patch(json.RawMessage(learned), "monitor")
	require.NoError(t, err)
	var msg struct{ Result json.RawMessage }
	require.NoError(t, json.Unmarshal(out, &msg))
	assert.Equal(t, map[string]map[string]map[string]any{"u1": {"new": {"logical_port": "kv-rtoe-router1", "ip": "172.16.0.1", "mac": "aa:aa:aa:aa:aa:aa"}}}, monitoredRows(t, msg.Result, "MAC_Binding"))

	out, err = p.patch(json.RawMessage(`{"id":"x","result":{}}`), "monitor")
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(out, &msg))
	macs := monitoredRows(t, msg.Result, "MAC_Binding")
	require.Len(t, macs, 1)
	for _, change := range macs {
		assert.Equal(t, "00:00:00:00:ee:01", change["new"]["mac"])
	}
}
