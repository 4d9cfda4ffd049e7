package nbtest

import (
	"context"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/ovn-kubernetes/libovsdb/client"
	"github.com/ovn-kubernetes/libovsdb/ovsdb"
	"github.com/stretchr/testify/require"

	"github.com/kubevirt-ovn/kubevirt-ovn/nbmodel/sbmodel"
)

// BindPorts has the SB at sock (from ServeSB) bind each logical port of
// bound to a chassis it holds (port -> chassis name), as ovn-northd and
// ovn-controller would: a new Port_Binding of type typ for each, on a
// new Datapath_Binding of their own.
func BindPorts(t testing.TB, sock, typ string, bound map[string]string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	dbModel, err := sbmodel.FullDatabaseModel()
	require.NoError(t, err)
	c, err := client.NewOVSDBClient(dbModel, client.WithEndpoint("unix:"+sock))
	require.NoError(t, err)
	require.NoError(t, c.Connect(ctx))
	defer c.Close()
	_, err = c.MonitorAll(ctx)
	require.NoError(t, err)
	var datapaths []*sbmodel.DatapathBinding
	require.NoError(t, c.List(ctx, &datapaths))
	dp := &sbmodel.DatapathBinding{UUID: "dp", TunnelKey: len(datapaths) + 1}
	ops, err := c.Create(dp)
	require.NoError(t, err)
	for i, port := range slices.Sorted(maps.Keys(bound)) {
		ch := &sbmodel.Chassis{Name: bound[port]}
		require.NoError(t, c.Get(ctx, ch), "chassis %s", bound[port])
		op, err := c.Create(&sbmodel.PortBinding{LogicalPort: port, Type: typ, Datapath: dp.UUID, TunnelKey: i + 1, Chassis: &ch.UUID})
		require.NoError(t, err)
		ops = append(ops, op...)
	}
	res, err := c.Transact(ctx, ops...)
	require.NoError(t, err)
	_, err = ovsdb.CheckOperationResults(res, ops)
	require.NoError(t, err, "binding the SB ports")
}
