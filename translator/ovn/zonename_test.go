package ovn

import (
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/ovn-kubernetes/libovsdb/ovsdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubevirt-ovn/kubevirt-ovn/nbmodel"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/nbtest"
)

// A zone's name is its NB's NB_Global name, once ovn-kubernetes has set
// it; before, a named error says what to wait for or give.
func TestZoneName(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := ConnectNB(ctx, Endpoint{Address: "unix:" + nbtest.Serve(t)}, "test", logr.Discard())
	require.NoError(t, err)
	defer c.Close()

	_, err = ZoneName(ctx, c)
	assert.ErrorIs(t, err, ErrZoneUnnamed, "no NB_Global row")

	g := &nbmodel.NBGlobal{UUID: "g"}
	ops, err := c.Create(g)
	require.NoError(t, err)
	res, err := c.Transact(ctx, ops...)
	require.NoError(t, err)
	_, err = ovsdb.CheckOperationResults(res, ops)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		var gs []*nbmodel.NBGlobal
		return c.List(ctx, &gs) == nil && len(gs) == 1
	}, 5*time.Second, 10*time.Millisecond)
	_, err = ZoneName(ctx, c)
	assert.ErrorIs(t, err, ErrZoneUnnamed, "NB_Global without a name")

	var gs []*nbmodel.NBGlobal
	require.NoError(t, c.List(ctx, &gs))
	gs[0].Name = "node-hv1"
	ops, err = c.Where(gs[0]).Update(gs[0], &gs[0].Name)
	require.NoError(t, err)
	res, err = c.Transact(ctx, ops...)
	require.NoError(t, err)
	_, err = ovsdb.CheckOperationResults(res, ops)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		name, err := ZoneName(ctx, c)
		return err == nil && name == "node-hv1"
	}, 5*time.Second, 10*time.Millisecond)
}
