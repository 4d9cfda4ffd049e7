package syncer

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubevirt-ovn/kubevirt-ovn/nbmodel/sbmodel"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator"
	kvnb "github.com/kubevirt-ovn/kubevirt-ovn/translator/nb"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/nbtest"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/ovn"
)

// A router's gateway that moved to another primary while the old one is
// still a chassis is a move to finish (the old gateway may keep the
// port's flows); one whose old primary is gone, whose commit failed, or
// that did not move is not.
func TestGatewayMoves(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sock := nbtest.ServeSB(t, &sbmodel.Chassis{Name: "gw1"}, &sbmodel.Chassis{Name: "gw2"})
	sb, err := ovn.ConnectSB(ctx, ovn.Endpoint{Address: "unix:" + sock}, logr.Discard())
	require.NoError(t, err)
	defer sb.Close()
	require.Eventually(t, func() bool { return ovn.IsChassis(ctx, sb, "gw2") }, 5*time.Second, 10*time.Millisecond)

	plan := examplePlan(t) // router1's primary: gw1 (spec.gateway)
	require.Len(t, plan.Routers, 1)
	require.Equal(t, "gw1", plan.Routers[0].Gateway.Chassis[0])
	router1 := translator.Unit{Kind: translator.KindRouter, Name: "router1"}
	ok := &kvnb.SyncResult{Units: []kvnb.UnitResult{{Unit: router1}}}
	failed := &kvnb.SyncResult{Units: []kvnb.UnitResult{{Unit: router1, Err: errors.New("refused")}}}

	assert.Equal(t, map[string]string{"router1": "gw1"}, GatewayMoves(ctx, sb, plan, ok, map[string][]string{"router1": {"gw2", "gw1"}}))
	assert.Empty(t, GatewayMoves(ctx, sb, plan, ok, map[string][]string{"router1": {"gw3"}}), "the old primary is no chassis any more")
	assert.Empty(t, GatewayMoves(ctx, sb, plan, failed, map[string][]string{"router1": {"gw2"}}), "the move was not committed")
	assert.Empty(t, GatewayMoves(ctx, sb, plan, ok, map[string][]string{"router1": {"gw1", "gw2"}}), "same primary")
	assert.Empty(t, GatewayMoves(ctx, sb, plan, ok, nil), "a new router")

	var n notes
	FinishMoves(ctx, nil, sb, nil, n.note)
	assert.Empty(t, n.all, "nothing moved: nothing said")
}
