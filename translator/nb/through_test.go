package nb_test

import (
	"context"
	"testing"

	"github.com/ovn-kubernetes/libovsdb/model"
	"github.com/ovn-kubernetes/libovsdb/ovsdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubevirt-ovn/kubevirt-ovn/nbmodel"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/nb"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/nbtest"
)

// A Static_MAC_Binding is its router's through the gateway port it names.
// When that port is deleted by hand, the binding stays in the NB, owned by
// no port of ours: the router's next sync recreates the port and keeps the
// binding (a second one would break the unique index on its port and IP),
// and the sync after writes nothing.
func TestBindingOfAPortDeletedByHandIsKept(t *testing.T) {
	ours, raw := connect(t, "unix:"+nbtest.Real(t))
	s := example()
	requireNoFailures(t, sync(t, ours, s))
	barrier(t, ours, raw)
	bindings := list[nbmodel.StaticMACBinding](t, raw)
	require.Len(t, bindings, 1)

	lr := lrByName(t, raw)["kv-router1"]
	gw := lrps(t, raw)["kv-rtoe-router1"]
	m := &nbmodel.LogicalRouter{UUID: lr.UUID}
	ops, err := raw.Where(m).Mutate(m, model.Mutation{Field: &m.Ports, Mutator: ovsdb.MutateOperationDelete, Value: []string{gw.UUID}})
	require.NoError(t, err)
	_, err = nb.Commit(context.Background(), raw, "delete the gateway port by hand", ops)
	require.NoError(t, err)
	barrier(t, ours, raw)
	require.NotContains(t, lrps(t, raw), "kv-rtoe-router1", "precondition: the port is gone")

	res := sync(t, ours, s)
	requireNoFailures(t, res)
	barrier(t, ours, raw)
	assert.Contains(t, lrps(t, raw), "kv-rtoe-router1", "the port is back")
	after := list[nbmodel.StaticMACBinding](t, raw)
	require.Len(t, after, 1)
	assert.Equal(t, bindings[0].UUID, after[0].UUID, "the binding is kept")
	requireIdle(t, ours, s)
}
