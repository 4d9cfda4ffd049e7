package nb_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubevirt-ovn/kubevirt-ovn/nbmodel"
	tr "github.com/kubevirt-ovn/kubevirt-ovn/translator"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/nb"
)

// An NB event names the units it concerns from the registry alone: a row
// with owner keys its owner; a Static_MAC_Binding, which has none, the
// router whose gateway port it names (ours: found in the cache by name);
// another tool's binding nobody, also when its port's name looks like
// ours.
func TestAffectedReadsOwnershipFromTheRegistry(t *testing.T) {
	ours, raw := connect(t, startNB(t))
	requireNoFailures(t, sync(t, ours, example()))
	seedForeign(t, raw)
	require.Eventually(t, func() bool { return len(list[nbmodel.StaticMACBinding](t, ours)) == 2 }, 5*time.Second, 10*time.Millisecond)
	router1 := tr.Unit{Kind: tr.KindRouter, Name: "router1"}
	for _, b := range list[nbmodel.StaticMACBinding](t, ours) {
		got := nb.Affected(ours, nbmodel.StaticMACBindingTable, nil, b, instance)
		if b.LogicalPort == "kv-rtoe-router1" {
			assert.Equal(t, []tr.Unit{router1}, got, "our binding: its router")
			assert.Equal(t, []tr.Unit{router1}, nb.Affected(ours, nbmodel.StaticMACBindingTable, b, nil, instance), "deleted")
		} else {
			assert.Empty(t, got, "another tool's binding")
		}
	}
	lookalike := &nbmodel.StaticMACBinding{LogicalPort: "kv-rtoe-nobody", IP: "1.2.3.4", MAC: "00:00:00:00:00:01"}
	assert.Empty(t, nb.Affected(ours, nbmodel.StaticMACBindingTable, nil, lookalike, instance), "a port named like ours that is not ours")
	lr := lrByName(t, ours)["kv-router1"]
	assert.Equal(t, []tr.Unit{router1}, nb.Affected(ours, nbmodel.LogicalRouterTable, lr, lr, instance))
	assert.Empty(t, nb.Affected(ours, nbmodel.ACLTable, nil, &nbmodel.ACL{}, instance), "a table we do not write")

	// The walks read the same: a binding makes no unit of its own.
	present, err := nb.PresentUnits(context.Background(), ours, instance)
	require.NoError(t, err)
	assert.NotContains(t, present, tr.Unit{Kind: tr.KindRouter, Name: "nobody"})
}
