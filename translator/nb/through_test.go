package nb_test

import (
	"context"
	"testing"

	"github.com/ovn-kubernetes/libovsdb/client"
	"github.com/ovn-kubernetes/libovsdb/model"
	"github.com/ovn-kubernetes/libovsdb/ovsdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubevirt-ovn/kubevirt-ovn/nbmodel"
	tr "github.com/kubevirt-ovn/kubevirt-ovn/translator"
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

// A router and its gateway port deleted by hand leave the binding that
// named the port, which then names no row at all. When the router leaves
// the input too, its sync deletes the binding: in a full sync (the binding
// alone makes the router a unit to sync) and in a sync of the router alone
// (a controller's reconcile of the removed router). A port of that name
// that is not ours (another instance's router) keeps it: the binding may
// be theirs.
func TestBindingOfARouterDeletedByHandGoesWithIt(t *testing.T) {
	router1 := tr.Unit{Kind: tr.KindRouter, Name: "router1"}
	deleteRouterByHand := func(t *testing.T, ours, raw client.Client) {
		lr := lrByName(t, raw)["kv-router1"]
		ops, err := raw.Where(lr).Delete()
		require.NoError(t, err)
		_, err = nb.Commit(context.Background(), raw, "delete the router by hand", ops)
		require.NoError(t, err)
		barrier(t, ours, raw)
		require.NotContains(t, lrps(t, raw), "kv-rtoe-router1", "precondition: the port is gone")
		require.Len(t, list[nbmodel.StaticMACBinding](t, raw), 1, "precondition: the binding stays")
	}
	for _, tc := range []struct {
		name string
		sync func(t *testing.T, c client.Client, s *tr.Snapshot) *nb.SyncResult
	}{
		{"full sync", sync},
		{"the router's sync", func(t *testing.T, c client.Client, s *tr.Snapshot) *nb.SyncResult {
			res, err := nb.SyncUnits(context.Background(), c, tr.Build(s, instance), []tr.Unit{router1}, nb.SyncOptions{Instance: instance})
			require.NoError(t, err)
			return res
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ours, raw := connect(t, startNB(t))
			s := example()
			requireNoFailures(t, sync(t, ours, s))
			barrier(t, ours, raw)
			deleteRouterByHand(t, ours, raw)

			s.Routers = nil
			res := tc.sync(t, ours, s)
			requireNoFailures(t, res)
			assert.Equal(t, map[string]int{"delete": 1}, res.Changes()[nbmodel.StaticMACBindingTable], "the binding goes")
			barrier(t, ours, raw)
			assert.Empty(t, list[nbmodel.StaticMACBinding](t, raw))
			requireIdle(t, ours, s)
		})
	}

	t.Run("a port of that name not ours", func(t *testing.T) {
		ours, raw := connect(t, startNB(t))
		s := example()
		requireNoFailures(t, sync(t, ours, s))
		barrier(t, ours, raw)
		deleteRouterByHand(t, ours, raw)
		lrp := &nbmodel.LogicalRouterPort{UUID: "lrp", Name: "kv-rtoe-router1", MAC: "0a:58:ac:10:00:09", Networks: []string{"172.16.0.9/24"}}
		lr := &nbmodel.LogicalRouter{UUID: "lr", Name: "kv-router1", Ports: []string{"lrp"}}
		var ops []ovsdb.Operation
		for _, m := range []model.Model{lrp, lr} {
			o, err := raw.Create(m)
			require.NoError(t, err)
			ops = append(ops, o...)
		}
		_, err := nb.Commit(context.Background(), raw, "another writer's router", ops)
		require.NoError(t, err)
		barrier(t, ours, raw)

		s.Routers = nil
		res := sync(t, ours, s)
		requireNoFailures(t, res)
		assert.Empty(t, res.Changes()[nbmodel.StaticMACBindingTable])
		barrier(t, ours, raw)
		assert.Len(t, list[nbmodel.StaticMACBinding](t, raw), 1)
		requireIdle(t, ours, s)
	})
}
