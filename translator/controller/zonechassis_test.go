package controller

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/ovn-kubernetes/libovsdb/client"
	"github.com/ovn-kubernetes/libovsdb/ovsdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubevirt-ovn/kubevirt-ovn/nbmodel"
	"github.com/kubevirt-ovn/kubevirt-ovn/nbmodel/sbmodel"
	tr "github.com/kubevirt-ovn/kubevirt-ovn/translator"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/nb"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/nbtest"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/ovn"
)

// inputSource is a source over one Input.
type inputSource struct{ in *tr.Input }

func (s inputSource) Input() *tr.Input { return s.in }
func (s inputSource) HasSynced() bool  { return true }

// zoneSB serves an in-process SB holding chassis as local chassis (those
// marked Gateway gateway chassis mapping physnet1), and returns a zone SB
// client of it.
func zoneSB(t *testing.T, chassis ...tr.Chassis) client.Client {
	t.Helper()
	var rows []*sbmodel.Chassis
	for _, c := range chassis {
		row := &sbmodel.Chassis{Name: c.Name, Hostname: c.Hostname}
		if c.Gateway {
			row.OtherConfig = map[string]string{"ovn-cms-options": "enable-chassis-as-gw", "ovn-bridge-mappings": "physnet1:br-ex"}
		}
		rows = append(rows, row)
	}
	sock := nbtest.ServeSB(t, rows...)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sb, err := ovn.ConnectZoneSB(ctx, ovn.Endpoint{Address: "unix:" + sock}, instance, logr.Discard())
	require.NoError(t, err)
	t.Cleanup(sb.Close)
	require.Eventually(t, func() bool {
		var rows []*sbmodel.Chassis
		return sb.List(ctx, &rows) == nil && len(rows) == len(chassis)
	}, 5*time.Second, 10*time.Millisecond)
	return sb
}

// `run --zone`: a chassis that two zones' SBs list as local stays in one
// zone, the first by name, and the later zone's claim is refused with an
// error naming the chassis and both zones; the router whose gateway it is
// lives in that zone. (The later zone silently won before.)
func TestZonesRefuseTheLaterZonesClaimOnAChassis(t *testing.T) {
	var mu sync.Mutex
	var logged []string
	log := funcr.New(func(prefix, args string) {
		mu.Lock()
		defer mu.Unlock()
		logged = append(logged, args)
	}, funcr.Options{})
	gw1 := tr.Chassis{Name: "gw1", Hostname: "node-gw1", Gateway: true}
	zones := []ZoneClients{
		{Zone: "zone-b", NB: ctrlNB(t), SB: zoneSB(t, gw1, tr.Chassis{Name: "hv2", Hostname: "node-hv2"})},
		{Zone: "zone-a", NB: ctrlNB(t), SB: zoneSB(t, gw1, tr.Chassis{Name: "hv1", Hostname: "node-hv1"})},
	}
	in := tr.NewInputFrom(example())
	g := NewZones(zones, inputSource{in}, nil, Options{Instance: instance, Workers: 1, Log: log})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	g.refreshChassis(ctx)

	up := in.Plan(tr.Unit{Kind: tr.KindRouter, Name: "router1"}, instance, g.ctrls[0].planHeld)
	require.Empty(t, up.Errs)
	require.NotNil(t, up.Router)
	home := ""
	for zone, zr := range up.Router.Zones {
		for _, r := range zr.Rows {
			if _, ok := r.Model.(*nbmodel.LogicalRouter); ok {
				home = zone
			}
		}
	}
	assert.Equal(t, "zone-a", home, "router1's gateway gw1 stays in zone-a, the first zone that lists it")

	mu.Lock()
	defer mu.Unlock()
	found := false
	for _, l := range logged {
		if strings.Contains(l, "chassis gw1 is a local chassis of zones zone-a and zone-b") && strings.Contains(l, `"zone"="zone-b"`) {
			found = true
		}
	}
	assert.True(t, found, "an error names the chassis, both zones and the refused one: %q", logged)
}

// `run --zone`: kubevirt-ovn rebalance moves a router from gw1 to gw2, both
// gateways of zone gw, by swapping its Gateway_Chassis priorities in that
// zone's NB. The router adopts the order, and its rows in the other zones
// follow it: zone hv1's twin of its port on net-a (type remote, where vm1's
// packets to the router tunnel) is bound to the new primary. Before, only
// zone gw's controller saw the NB change, and zone hv1 kept tunnelling to
// the old gateway until a resync.
func TestZonesRouterAdoptingARebalanceMoveFollowsInEveryZone(t *testing.T) {
	gw1 := tr.Chassis{Name: "gw1", Hostname: "node-gw1", Gateway: true}
	gw2 := tr.Chassis{Name: "gw2", Hostname: "node-gw2", Gateway: true}
	nbs := map[string]client.Client{"gw": ctrlNB(t), "hv1": ctrlNB(t)}
	zones := []ZoneClients{
		{Zone: "gw", NB: nbs["gw"], SB: zoneSB(t, gw1, gw2)},
		{Zone: "hv1", NB: nbs["hv1"], SB: zoneSB(t, tr.Chassis{Name: "hv1", Hostname: "node-hv1"})},
	}
	snap := example()
	snap.Routers[0].Gateway = "" // scheduled: rebalance may move it
	snap.VMs = []tr.VMInterface{{Namespace: "default", VMI: "vm1", Interface: "eth0", Network: "net-a", NetworkNamespace: "default",
		MAC: "02:00:00:00:00:01", IP: "10.10.0.5", Node: "node-hv1"}}
	in := tr.NewInputFrom(snap)
	g := NewZones(zones, inputSource{in}, nil, Options{Instance: instance, Workers: 1, Log: logr.Discard(), Resync: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = g.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	twin := func() string {
		var rows []*nbmodel.LogicalSwitchPort
		if nbs["hv1"].List(ctx, &rows) != nil {
			return ""
		}
		for _, p := range rows {
			if p.Name == tr.SwitchRouterPortName("net-a", "router1") && p.Type == "remote" {
				return p.Options["requested-chassis"]
			}
		}
		return ""
	}
	var gcs []*nbmodel.GatewayChassis
	require.Eventually(t, func() bool {
		gcs = nil
		return nbs["gw"].List(ctx, &gcs) == nil && len(gcs) == 2 && twin() != ""
	}, 10*time.Second, 10*time.Millisecond, "router1 in zone gw, its twin in zone hv1")
	slices.SortFunc(gcs, func(a, b *nbmodel.GatewayChassis) int { return b.Priority - a.Priority })
	primary, next := gcs[0].ChassisName, gcs[1].ChassisName
	require.Eventually(t, func() bool { return twin() == primary }, 10*time.Second, 10*time.Millisecond, "precondition: the twin is bound to the primary")

	// What rebalance writes: the two rows' priorities swapped.
	var ops []ovsdb.Operation
	for i, gc := range gcs {
		m := &nbmodel.GatewayChassis{UUID: gc.UUID, Priority: gcs[1-i].Priority}
		o, err := nbs["gw"].Where(m).Update(m, &m.Priority)
		require.NoError(t, err)
		ops = append(ops, o...)
	}
	_, err := nb.Commit(ctx, nbs["gw"], "rebalance's move", ops)
	require.NoError(t, err)

	assert.Eventually(t, func() bool { return twin() == next }, 10*time.Second, 10*time.Millisecond,
		"zone hv1's twin of router1's port follows the move from %s to %s (it is bound to %q)", primary, next, twin())
}
