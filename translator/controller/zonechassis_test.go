package controller

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/ovn-kubernetes/libovsdb/client"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubevirt-ovn/kubevirt-ovn/nbmodel"
	"github.com/kubevirt-ovn/kubevirt-ovn/nbmodel/sbmodel"
	tr "github.com/kubevirt-ovn/kubevirt-ovn/translator"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/nbtest"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/ovn"
)

// inputSource is a source over one Input.
type inputSource struct{ in *tr.Input }

func (s inputSource) Input() *tr.Input { return s.in }
func (s inputSource) HasSynced() bool  { return true }

// zoneSB serves an in-process SB holding chassis as local gateway
// chassis, and returns a zone SB client of it.
func zoneSB(t *testing.T, chassis ...tr.Chassis) client.Client {
	t.Helper()
	var rows []*sbmodel.Chassis
	for _, c := range chassis {
		rows = append(rows, &sbmodel.Chassis{Name: c.Name, Hostname: c.Hostname,
			OtherConfig: map[string]string{"ovn-cms-options": "enable-chassis-as-gw", "ovn-bridge-mappings": "physnet1:br-ex"}})
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
	gw1 := tr.Chassis{Name: "gw1", Hostname: "node-gw1"}
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
