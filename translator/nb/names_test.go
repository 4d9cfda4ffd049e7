package nb_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubevirt-ovn/kubevirt-ovn/nbmodel"
	tr "github.com/kubevirt-ovn/kubevirt-ovn/translator"
)

// Router a on chassis b-gw1 and router a-b on chassis gw1: joined with a
// character that router names may hold, both Gateway_Chassis rows would be
// named kv-rtoe-a-b-gw1, the schema's name index would refuse the second
// router and which one won would depend on the order of the commit.
func TestGatewayChassisNamesOfDifferentRoutersNeverClash(t *testing.T) {
	ours, raw := connect(t, startNB(t))
	s := &tr.Snapshot{
		Networks: []tr.Network{
			{Name: "public", Namespace: "default", Type: "FLAT", PhysicalNetworkName: "physnet1", CIDR: "172.16.0.0/24", GatewayIP: "172.16.0.1"},
		},
		Routers: []tr.Router{
			{Name: "a", EnableSNAT: true, External: &tr.External{IP: "172.16.0.10", Network: "public"}, Gateway: "b-gw1"},
			{Name: "a-b", EnableSNAT: true, External: &tr.External{IP: "172.16.0.11", Network: "public"}, Gateway: "gw1"},
		},
	}
	requireNoFailures(t, sync(t, ours, s))
	byPort := map[string]string{}
	for _, p := range list[nbmodel.LogicalRouterPort](t, raw) {
		for _, gc := range p.GatewayChassis {
			byPort[gc] = p.Name
		}
	}
	got := map[string]string{}
	for _, g := range list[nbmodel.GatewayChassis](t, raw) {
		got[byPort[g.UUID]+" "+g.ChassisName] = g.Name
	}
	assert.Equal(t, map[string]string{
		"kv-rtoe-a b-gw1": "kv-rtoe-a_b-gw1",
		"kv-rtoe-a-b gw1": "kv-rtoe-a-b_gw1",
	}, got)
	requireIdle(t, ours, s)
}

// A Gateway_Chassis row named the way kubevirt-ovn named them before (port
// and chassis joined by '-') is replaced by one of the new name, with the
// same chassis and priority, in one transaction.
func TestGatewayChassisOfTheOldNameIsRenamed(t *testing.T) {
	ours, raw := connect(t, startNB(t))
	s := example()
	requireNoFailures(t, sync(t, ours, s))
	gcs := list[nbmodel.GatewayChassis](t, raw)
	require.Len(t, gcs, 1)
	old := *gcs[0]
	old.Name = "kv-rtoe-router1-gw1"
	ops, err := raw.Where(&old).Update(&old, &old.Name)
	require.NoError(t, err)
	_, err = raw.Transact(context.Background(), ops...)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		gcs := list[nbmodel.GatewayChassis](t, ours)
		return len(gcs) == 1 && gcs[0].Name == old.Name
	}, 5*time.Second, 10*time.Millisecond, "our cache sees the old name")

	res := sync(t, ours, s)
	requireNoFailures(t, res)
	gcs = list[nbmodel.GatewayChassis](t, raw)
	require.Len(t, gcs, 1)
	assert.Equal(t, "kv-rtoe-router1_gw1", gcs[0].Name)
	assert.Equal(t, "gw1", gcs[0].ChassisName)
	assert.Equal(t, 1, res.Transactions)
	requireIdle(t, ours, s)
}
