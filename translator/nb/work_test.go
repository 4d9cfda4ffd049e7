package nb_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubevirt-ovn/kubevirt-ovn/nbmodel"
	tr "github.com/kubevirt-ovn/kubevirt-ovn/translator"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/nb"
)

// TestPlanWorkAgreesWithWorkOfUnitPlan: a sync (a whole Plan, PlanWork)
// and the controller (one unit's plan, WorkOf) ask the same of an NB for
// a network, a router, a unit whose input is invalid, a unit gone from the
// input, and each zone's NB in interconnect mode.
func TestPlanWorkAgreesWithWorkOfUnitPlan(t *testing.T) {
	net, router := tr.Unit{Kind: tr.KindNetwork, Name: "net-a"}, tr.Unit{Kind: tr.KindRouter, Name: "router1"}
	failed, removed := tr.Unit{Kind: tr.KindRouter, Name: "broken"}, tr.Unit{Kind: tr.KindRouter, Name: "gone"}
	units := []tr.Unit{net, router, failed, removed}

	central := example()
	central.Routers = append(central.Routers, tr.Router{Name: "broken", Internal: []string{"no-such-net"}})
	zoned := example()
	zoned.Networks[2].Type = "GENEVE"
	zoned.Routers = append(zoned.Routers, tr.Router{Name: "broken", Internal: []string{"no-such-net"}})
	zoned.VMs[0].Node, zoned.VMs[1].Node = "node-hv1", "node-hv2"
	zoned.Interconnect, zoned.ChassisKnown = true, true
	zoned.Chassis = []tr.Chassis{
		{Name: "gw1", Hostname: "node-gw1", Gateway: true, Physnets: []string{"physnet1"}, Zone: "gw1"},
		{Name: "hv1", Hostname: "node-hv1", Zone: "hv1"},
		{Name: "hv2", Hostname: "node-hv2", Zone: "hv2"},
	}

	for _, tc := range []struct {
		name string
		s    *tr.Snapshot
		zone string
	}{
		{"one NB", central, ""},
		{"zone gw1", zoned, "gw1"},
		{"zone hv1", zoned, "hv1"},
		{"zone hv2", zoned, "hv2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			whole := nb.PlanWork(tr.Build(tc.s, instance), units, tc.zone)
			require.Len(t, whole, len(units))
			// The controller plans one unit at a time; in the order Build
			// does, its Input hands out the same tunnel keys.
			in := tr.NewInputFrom(tc.s)
			plans := map[tr.Unit]tr.UnitPlan{}
			for _, u := range in.Units() {
				plans[u] = in.Plan(u, instance, tc.s.Held)
			}
			require.NotContains(t, plans, removed)
			plans[removed] = in.Plan(removed, instance, tc.s.Held)
			for i, u := range units {
				one := nb.WorkOf(plans[u], tc.zone)
				assert.Equal(t, u, whole[i].Unit)
				assert.Equal(t, one.Desired, whole[i].Desired, u.String())
				assert.Equal(t, errText(one.Err), errText(whole[i].Err), u.String())
			}
			byUnit := map[tr.Unit]nb.Work{}
			for _, w := range whole {
				byUnit[w.Unit] = w
			}
			assert.Error(t, byUnit[failed].Err, "an invalid router's rows are left as they are")
			assert.Empty(t, byUnit[failed].Rows)
			assert.NoError(t, byUnit[removed].Err)
			assert.Empty(t, byUnit[removed].Rows, "a router gone from the input has its rows removed")
			assert.NoError(t, byUnit[net].Err)
			assert.NoError(t, byUnit[router].Err)
			if tc.zone == "" || tc.zone == "hv1" {
				assert.NotEmpty(t, byUnit[net].Rows, "net-a's VM is in zone hv1")
			}
			if tc.zone == "" {
				assert.NotEmpty(t, byUnit[router].Rows)
			}
		})
	}

	// The zones split the router's rows: its home zone holds the router.
	plan := tr.Build(zoned, instance)
	require.Len(t, plan.Routers, 1)
	home := 0
	for _, zone := range []string{"gw1", "hv1", "hv2"} {
		w := nb.PlanWork(plan, []tr.Unit{router}, zone)[0]
		zr := plan.Routers[0].Zones[zone]
		if zr == nil {
			assert.Empty(t, w.Rows, zone)
			continue
		}
		assert.Equal(t, zr.Rows, w.Rows, zone)
		if hasRouter(w.Rows) {
			home++
		}
	}
	assert.Equal(t, 1, home, "one zone is the router's home")
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func hasRouter(rows []tr.Row) bool {
	for _, r := range rows {
		if _, ok := r.Model.(*nbmodel.LogicalRouter); ok {
			return true
		}
	}
	return false
}
