package translator

import (
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// schedInput is n routers without spec.gateway on the FLAT network public
// (physnet1), their internal networks, in one source each.
func schedInput(n int) *Input {
	in := NewInput()
	wide := publicNet()
	wide.CIDR = "172.16.0.0/16"
	nets := Objects{Networks: []Network{wide}}
	in.Set("networks", nets)
	for i := range n {
		in.Set(fmt.Sprintf("router-%d", i), Objects{Routers: []Router{schedRouter(i)}})
	}
	return in
}

func schedRouter(i int) Router {
	return Router{Name: fmt.Sprintf("r-%04d", i), EnableSNAT: true,
		External: &External{Network: "public", IP: fmt.Sprintf("172.16.%d.%d", i/250, 2+i%250)}}
}

func gatewayNodes(n int, physnets ...string) []Chassis {
	if len(physnets) == 0 {
		physnets = []string{"physnet1"}
	}
	var out []Chassis
	for i := range n {
		out = append(out, Chassis{Name: fmt.Sprintf("gw-%02d", i), Hostname: fmt.Sprintf("node-gw-%02d", i), Gateway: true, Physnets: physnets})
	}
	return out
}

// orders plans every router of in and returns its gateway order by router.
func orders(t *testing.T, in *Input, held Held) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, u := range in.Units() {
		if u.Kind != KindRouter {
			continue
		}
		up := in.Plan(u, testInstance, held)
		require.Empty(t, up.Errs, "router %s", u.Name)
		require.NotNil(t, up.Router.Gateway)
		out[u.Name] = up.Router.Gateway.Chassis
	}
	return out
}

// primaries counts routers by primary chassis, every chassis listed.
func primaries(chassis []Chassis, got map[string][]string) map[string]int {
	load := map[string]int{}
	for _, c := range chassis {
		load[c.Name] = 0
	}
	for _, o := range got {
		load[o[0]]++
	}
	return load
}

func spread(load map[string]int) int {
	vals := slices.Collect(maps.Values(load))
	return slices.Max(vals) - slices.Min(vals)
}

// heldOf is what the NB would hold after committing got.
func heldOf(got map[string][]string) Claims {
	return Claims{Gateways: maps.Clone(got)}
}

func TestSchedulerBalancesFromScratch(t *testing.T) {
	for _, gws := range []int{3, 10} {
		t.Run(fmt.Sprintf("%d gateways", gws), func(t *testing.T) {
			in := schedInput(1000)
			chassis := gatewayNodes(gws)
			in.SetChassis(chassis, true)
			got := orders(t, in, nil)
			require.Len(t, got, 1000)
			load := primaries(chassis, got)
			assert.LessOrEqual(t, spread(load), 1, "primaries per chassis: %v", load)
			for r, o := range got {
				assert.Len(t, o, min(MaxGateways, gws), "router %s: primary and two failover candidates", r)
			}
			// The failover candidates are spread too: no chassis is
			// everybody's second.
			second := map[string]int{}
			for _, o := range got {
				second[o[1]]++
			}
			assert.LessOrEqual(t, slices.Max(slices.Collect(maps.Values(second))), 1000/gws*2, "second candidates: %v", second)

			// Deterministic: the same input planned again from scratch.
			again := schedInput(1000)
			again.SetChassis(chassis, true)
			assert.Equal(t, got, orders(t, again, nil))
		})
	}
}

func TestSchedulerStableOnAddAndRemove(t *testing.T) {
	in := schedInput(300)
	chassis := gatewayNodes(3)
	in.SetChassis(chassis, true)
	before := orders(t, in, nil)
	held := heldOf(before)

	// A fourth gateway: no router moves, none is even reconciled (each has
	// its three).
	withNew := append(slices.Clone(chassis), Chassis{Name: "gw-new", Gateway: true, Physnets: []string{"physnet1"}})
	assert.Empty(t, in.SetChassis(withNew, true), "a new gateway changes no router with three candidates")
	after := orders(t, in, held)
	assert.Equal(t, before, after, "a new gateway moves nothing")

	// New routers go to the new, least-loaded gateway.
	for i := 300; i < 400; i++ {
		in.Set(fmt.Sprintf("router-%d", i), Objects{Routers: []Router{schedRouter(i)}})
	}
	after = orders(t, in, held)
	load := primaries(withNew, after)
	assert.Equal(t, 100, load["gw-new"], "the new routers all go to the empty gateway: %v", load)

	// Remove gw-01: only the routers that used it are affected, only those
	// whose primary it was move, their primary is their first failover
	// candidate, and the rest keep their orders.
	held = heldOf(after)
	without := slices.DeleteFunc(slices.Clone(withNew), func(c Chassis) bool { return c.Name == "gw-01" })
	affected := in.SetChassis(without, true)
	var users []Unit
	for r, o := range after {
		if slices.Contains(o, "gw-01") {
			users = append(users, Unit{Kind: KindRouter, Name: r})
		}
	}
	assert.ElementsMatch(t, users, affected, "exactly the routers that listed gw-01 are reconciled")
	final := orders(t, in, held)
	moved := 0
	for r, o := range after {
		now := final[r]
		assert.NotContains(t, now, "gw-01")
		assert.Len(t, now, MaxGateways)
		if o[0] == "gw-01" {
			moved++
			assert.Equal(t, o[1], now[0], "router %s: its first failover candidate takes over (BFD already moved it there)", r)
			continue
		}
		assert.Equal(t, o[0], now[0], "router %s: primary moved though gw-01 was not its primary", r)
		if !slices.Contains(o, "gw-01") {
			assert.Equal(t, o, now, "router %s: order changed", r)
		}
	}
	assert.Equal(t, primaries(withNew, after)["gw-01"], moved)
	// The moved routers are spread evenly over their failover candidates
	// (the gateways there were when they were scheduled).
	gained := map[string]int{}
	for r, o := range after {
		if o[0] == "gw-01" {
			gained[final[r][0]]++
		}
	}
	assert.Len(t, gained, 2, "gw-01's routers spread over gw-00 and gw-02: %v", gained)
	assert.LessOrEqual(t, spread(gained), 1, "gw-01's routers spread evenly: %v", gained)
}

func TestSchedulerContinuesFromTheNB(t *testing.T) {
	// The NB holds an unbalanced assignment (everything on gw-00, as an
	// older kubevirt-ovn may have written): a restart keeps it, and new
	// routers go to the least-loaded gateways.
	in := schedInput(60)
	chassis := gatewayNodes(3)
	in.SetChassis(chassis, true)
	held := Claims{Gateways: map[string][]string{}}
	for i := range 60 {
		held.Gateways[schedRouter(i).Name] = []string{"gw-00", "gw-01", "gw-02"}
	}
	for i := 60; i < 120; i++ {
		in.Set(fmt.Sprintf("router-%d", i), Objects{Routers: []Router{schedRouter(i)}})
	}
	got := orders(t, in, held)
	load := primaries(chassis, got)
	assert.Equal(t, map[string]int{"gw-00": 60, "gw-01": 30, "gw-02": 30}, load)
	for i := range 60 {
		assert.Equal(t, []string{"gw-00", "gw-01", "gw-02"}, got[schedRouter(i).Name])
	}
	// A held order naming a chassis that is gone: the rest of it, filled.
	held.Gateways["r-0000"] = []string{"gw-gone", "gw-02"}
	in2 := schedInput(1)
	in2.SetChassis(chassis, true)
	o := orders(t, in2, held)["r-0000"]
	assert.Equal(t, "gw-02", o[0])
	assert.Len(t, o, 3)
}

func TestSchedulerPhysnetFilter(t *testing.T) {
	in := NewInput()
	vlan := Network{Name: "provider", Namespace: "default", Type: NetworkVLAN, SegmentID: "100", CIDR: "172.17.0.0/24", GatewayIP: "172.17.0.1", PhysicalNetworkName: "physnet2"}
	geneve := Network{Name: "overlay", Namespace: "default", Type: NetworkGeneve, CIDR: "172.18.0.0/24", GatewayIP: "172.18.0.1"}
	in.Set("networks", Objects{Networks: []Network{publicNet(), vlan, geneve}})
	var routers []Router
	for i := range 30 {
		ext := []string{"public", "provider", "overlay"}[i%3]
		routers = append(routers, Router{Name: fmt.Sprintf("r-%02d", i), EnableSNAT: true,
			External: &External{Network: ext, IP: fmt.Sprintf("172.%d.0.%d", 16+i%3, 10+i)}})
	}
	in.Set("routers", Objects{Routers: routers})
	chassis := []Chassis{
		{Name: "gw-a", Gateway: true, Physnets: []string{"physnet1"}},
		{Name: "gw-b", Gateway: true, Physnets: []string{"physnet1", "physnet2"}},
		{Name: "gw-c", Gateway: true, Physnets: []string{"physnet2"}},
		{Name: "gw-unmapped", Gateway: true},
		{Name: "compute", Physnets: []string{"physnet1", "physnet2"}},
	}
	in.SetChassis(chassis, true)
	got := orders(t, in, nil)
	for i, r := range routers {
		o := got[r.Name]
		switch i % 3 {
		case 0:
			assert.ElementsMatch(t, []string{"gw-a", "gw-b"}, o, "router %s on physnet1", r.Name)
		case 1:
			assert.ElementsMatch(t, []string{"gw-b", "gw-c"}, o, "router %s on physnet2", r.Name)
		case 2:
			assert.Len(t, o, 3, "router %s on an overlay network: any gateway", r.Name)
			assert.NotContains(t, o, "compute")
		}
	}
	load := primaries(chassis, got)
	assert.Zero(t, load["compute"])
	assert.Positive(t, load["gw-unmapped"], "overlay routers may use an unmapped gateway: %v", load)

	// No chassis maps the network: a clear error naming what each maps.
	in.SetChassis([]Chassis{{Name: "gw-x", Gateway: true, Physnets: []string{"physnet9"}}}, true)
	up := in.Plan(Unit{Kind: KindRouter, Name: "r-00"}, testInstance, nil)
	require.Len(t, up.Errs, 1)
	assert.EqualError(t, up.Errs[0], "VirtualRouter r-00: spec.external.network has no gateway candidate: no SB chassis with enable-chassis-as-gw maps physical network physnet1 in ovn-bridge-mappings (gw-x maps physnet9)")
	in.SetChassis(nil, true)
	up = in.Plan(Unit{Kind: KindRouter, Name: "r-00"}, testInstance, nil)
	require.Len(t, up.Errs, 1)
	assert.EqualError(t, up.Errs[0], "VirtualRouter r-00: spec.gateway has no gateway candidate: no SB chassis has ovn-cms-options=enable-chassis-as-gw")
}

func TestSchedulerPinnedGateway(t *testing.T) {
	in := schedInput(30)
	chassis := gatewayNodes(3)
	in.SetChassis(chassis, true)
	pinned := schedRouter(5)
	pinned.Gateway = "node-gw-02" // by hostname
	in.Set("router-5", Objects{Routers: []Router{pinned}})
	got := orders(t, in, nil)
	assert.Equal(t, "gw-02", got[pinned.Name][0])
	assert.Len(t, got[pinned.Name], 3)
	assert.LessOrEqual(t, spread(primaries(chassis, got)), 1, "the pinned router counts in the loads")

	// Pinned elsewhere: it moves there whatever the NB holds.
	pinned.Gateway = "gw-00"
	in.Set("router-5", Objects{Routers: []Router{pinned}})
	o := orders(t, in, heldOf(got))[pinned.Name]
	assert.Equal(t, "gw-00", o[0])
	assert.Len(t, o, 3)

	// Pinned to a chassis that is not a candidate: an error, the others
	// unaffected.
	pinned.Gateway = "gw-09"
	in.Set("router-5", Objects{Routers: []Router{pinned}})
	up := in.Plan(Unit{Kind: KindRouter, Name: pinned.Name}, testInstance, nil)
	require.Len(t, up.Errs, 1)
	assert.Contains(t, up.Errs[0].Error(), "VirtualRouter r-0005: spec.gateway node gw-09 is not a gateway candidate (chassis with enable-chassis-as-gw: gw-00 (hostname node-gw-00), gw-01 (hostname node-gw-01), gw-02 (hostname node-gw-02))")
}

// A running controller keeps what another writer (kubevirt-ovn rebalance)
// committed: a new primary in the NB is adopted, not reverted; a change of
// failover candidates alone is ours to repair.
func TestSchedulerAdoptsAnotherWritersMove(t *testing.T) {
	in := schedInput(6)
	chassis := gatewayNodes(3)
	in.SetChassis(chassis, true)
	got := orders(t, in, nil)
	held := heldOf(got)
	r := schedRouter(0).Name
	old := got[r]
	moved := []string{old[1], old[0], old[2]}
	held.Gateways[r] = moved
	assert.Equal(t, moved, orders(t, in, held)[r], "the rebalanced order is kept")
	held.Gateways[r] = []string{old[1], old[0]}
	assert.Equal(t, moved, orders(t, in, held)[r], "a failover candidate removed behind our back comes back")
}

// TestSchedulerIgnoresItsOwnRowsHalfRead: a router's Gateway_Chassis rows
// of one commit reach the held index one event at a time; a plan made in
// between (the commit's echo enqueued the router) sees some of them. That
// is not another writer's move: the order stays. A whole reordering of
// the same chassis is one, and is adopted.
func TestSchedulerIgnoresItsOwnRowsHalfRead(t *testing.T) {
	in := schedInput(1)
	in.SetChassis(gatewayNodes(3), true)
	first := orders(t, in, nil)["r-0000"]
	require.Len(t, first, 3)
	for _, part := range [][]string{{first[1]}, {first[2]}, {first[2], first[1]}, {first[1], first[2]}} {
		held := Claims{Gateways: map[string][]string{"r-0000": part}}
		assert.Equal(t, first, orders(t, in, held)["r-0000"], "held %v", part)
	}
	moved := []string{first[1], first[0], first[2]}
	held := Claims{Gateways: map[string][]string{"r-0000": moved}}
	assert.Equal(t, moved, orders(t, in, held)["r-0000"], "another writer's move is adopted")
}
