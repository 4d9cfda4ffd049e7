package gateways

import (
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// chassisN is n gateway chassis gw-00… mapping physnet1.
func chassisN(n int) []Chassis {
	var out []Chassis
	for i := range n {
		out = append(out, Chassis{Name: fmt.Sprintf("gw-%02d", i), Hostname: fmt.Sprintf("node-gw-%02d", i), Physnets: []string{"physnet1"}})
	}
	return out
}

func spread(load map[string]int) int {
	vals := slices.Collect(maps.Values(load))
	return slices.Max(vals) - slices.Min(vals)
}

var anyGateway = Need{}

func scheduler(n int) *Scheduler {
	s := New()
	s.SetChassis(chassisN(n))
	return s
}

func TestAssignSpreadsAndKeeps(t *testing.T) {
	s := scheduler(3)
	load := map[string]int{"gw-00": 0, "gw-01": 0, "gw-02": 0}
	orders := map[string][]string{}
	for i := range 30 {
		r := fmt.Sprintf("r-%02d", i)
		order, err := s.Assign(r, anyGateway, nil)
		require.NoError(t, err)
		require.Len(t, order, MaxGateways)
		load[order[0]]++
		orders[r] = order
	}
	assert.Zero(t, spread(load), "%v", load)
	for r, o := range orders {
		again, err := s.Assign(r, anyGateway, nil)
		require.NoError(t, err)
		assert.Equal(t, o, again, "%s keeps its order", r)
		assert.Equal(t, o, s.Order(r))
	}
}

// Primary answers another unit's question (where does the router live?)
// from the router's assignment: it never adopts what the NB holds in its
// place; the router's own Assign does.
func TestPrimaryNeverRedecides(t *testing.T) {
	s := scheduler(3)
	order, err := s.Assign("r", anyGateway, nil)
	require.NoError(t, err)
	moved := []string{order[1], order[0], order[2]} // kubevirt-ovn rebalance's move
	p, err := s.Primary("r", anyGateway, moved)
	require.NoError(t, err)
	assert.Equal(t, order[0], p)
	assert.Equal(t, order, s.Order("r"))

	now, err := s.Assign("r", anyGateway, moved)
	require.NoError(t, err)
	assert.Equal(t, moved, now, "its own plan adopts the move")
	p, _ = s.Primary("r", anyGateway, nil)
	assert.Equal(t, moved[0], p)
}

// A router without assignment, or assigned for another need (its spec
// changed, its own plan not run yet), is assigned by Primary as Assign
// would assign it.
func TestPrimaryAssignsWhatAssignWould(t *testing.T) {
	a, b := scheduler(3), scheduler(3)
	for i := range 10 {
		r := fmt.Sprintf("r-%d", i)
		_, err := a.Assign(r, anyGateway, nil)
		require.NoError(t, err)
		_, err = b.Primary(r, anyGateway, nil)
		require.NoError(t, err)
		assert.Equal(t, a.Order(r), b.Order(r))
	}
	pinned := Need{Pin: "node-gw-02"}
	p, err := b.Primary("r-0", pinned, nil)
	require.NoError(t, err)
	assert.Equal(t, "gw-02", p, "a new pin, by hostname")
	order, err := a.Assign("r-0", pinned, nil)
	require.NoError(t, err)
	assert.Equal(t, order, b.Order("r-0"))
}

// The NB's orders are adopted once, before the first choice, whatever
// order they come in.
func TestAdoptHeld(t *testing.T) {
	held := []Held{
		{Router: "a", Order: []string{"gw-00"}},
		{Router: "b", Order: []string{"gw-00"}},
		{Router: "c", Order: []string{"gw-gone", "gw-01"}}, // its primary went: not adopted
	}
	s := scheduler(3)
	require.False(t, s.Adopted())
	s.AdoptHeld(held)
	require.True(t, s.Adopted())
	assert.Equal(t, "gw-00", s.Order("a")[0])
	assert.Equal(t, "gw-00", s.Order("b")[0])
	assert.Nil(t, s.Order("c"))
	assert.NotEqual(t, s.Order("a")[1], s.Order("b")[1], "gw-00's routers fail over to different chassis")

	reversed := scheduler(3)
	reversed.AdoptHeld([]Held{held[2], held[1], held[0]})
	for _, r := range []string{"a", "b", "c"} {
		assert.Equal(t, s.Order(r), reversed.Order(r), "router %s: deterministic", r)
	}

	s.AdoptHeld([]Held{{Router: "d", Order: []string{"gw-02"}}})
	assert.Nil(t, s.Order("d"), "adopted once")
	late := scheduler(3)
	_, err := late.Assign("x", anyGateway, nil)
	require.NoError(t, err)
	late.AdoptHeld(held)
	assert.Nil(t, late.Order("a"), "nothing is adopted after a first choice")
}

func TestReassign(t *testing.T) {
	s := scheduler(3)
	_, ok := s.Reassign()
	assert.False(t, ok, "nothing assigned yet")
	orders := map[string][]string{}
	for i := range 6 {
		r := fmt.Sprintf("r-%d", i)
		orders[r], _ = s.Assign(r, anyGateway, nil)
	}
	_, err := s.Assign("pinned", Need{Pin: "gw-01"}, nil)
	require.NoError(t, err)

	assert.False(t, s.SetChassis(chassisN(3)), "the same chassis")
	assert.True(t, s.SetChassis(chassisN(4)))
	changed, ok := s.Reassign()
	assert.True(t, ok)
	assert.Empty(t, changed, "a new chassis moves no router with three")

	without := slices.DeleteFunc(chassisN(4), func(c Chassis) bool { return c.Name == "gw-01" })
	require.True(t, s.SetChassis(without))
	changed, _ = s.Reassign()
	var users []string
	for r, o := range orders {
		if slices.Contains(o, "gw-01") {
			users = append(users, r)
		}
	}
	assert.ElementsMatch(t, append(users, "pinned"), changed)
	assert.True(t, slices.IsSorted(changed))
	assert.Nil(t, s.Order("pinned"), "its pin is no candidate: unassigned")
	for r, o := range orders {
		assert.NotContains(t, s.Order(r), "gw-01", r)
		if o[0] == "gw-01" {
			assert.Equal(t, o[1], s.Order(r)[0], "%s: its first failover candidate takes over", r)
		}
	}

	s.Release("r-0")
	assert.Nil(t, s.Order("r-0"))
}

func TestErrors(t *testing.T) {
	s := New()
	s.SetChassis([]Chassis{{Name: "gw-x", Physnets: []string{"physnet9"}}})
	_, err := s.Assign("r", Need{Physnet: "physnet1"}, nil)
	var ge *Error
	require.ErrorAs(t, err, &ge)
	assert.Equal(t, &Error{Router: "r", Field: "spec.external.network", NoCandidate: true,
		Msg: "has no gateway candidate: no SB chassis with enable-chassis-as-gw maps physical network physnet1 in ovn-bridge-mappings (gw-x maps physnet9)"}, ge)

	_, err = s.Assign("r", Need{Pin: "gw-y"}, nil)
	require.ErrorAs(t, err, &ge)
	assert.Equal(t, &Error{Router: "r", Field: "spec.gateway", Msg: "node gw-y is not a gateway candidate (chassis with enable-chassis-as-gw: gw-x)"}, ge)
	assert.Nil(t, s.Order("r"))
}

func TestByHash(t *testing.T) {
	assert.Empty(t, ByHash("r", nil))
	chassis := []string{"a", "b", "c", "d"}
	home := ByHash("r", chassis)
	assert.Contains(t, chassis, home)
	assert.Equal(t, home, ByHash("r", []string{"d", "c", "b", "a"}), "whatever the order")
	victim := chassis[0]
	if victim == home {
		victim = chassis[1]
	}
	rest := slices.DeleteFunc(slices.Clone(chassis), func(c string) bool { return c == victim })
	assert.Equal(t, home, ByHash("r", rest), "another chassis going moves nothing")
}

func TestRebalance(t *testing.T) {
	chassis := chassisN(3)
	var routers []Assignment
	for i := range 100 {
		a := Assignment{Router: fmt.Sprintf("r-%03d", i), Physnet: "physnet1", Order: []string{"gw-00", "gw-01", "gw-02"}}
		if i < 10 {
			a.Order = []string{"gw-01", "gw-00", "gw-02"}
		}
		routers = append(routers, a)
	}
	routers[50].Pinned = true
	moves := Rebalance(routers, chassis)
	load := map[string]int{"gw-00": 90, "gw-01": 10, "gw-02": 0}
	seen := map[string]bool{}
	for _, m := range moves {
		assert.False(t, seen[m.Router], "router %s moved twice", m.Router)
		seen[m.Router] = true
		assert.NotEqual(t, "r-050", m.Router, "a pinned router moved")
		assert.Equal(t, m.To, m.Order[0])
		assert.Equal(t, m.From, m.Order[1], "the old primary becomes the first failover candidate")
		assert.Len(t, m.Order, 3)
		load[m.From]--
		load[m.To]++
	}
	assert.LessOrEqual(t, spread(load), 1, "after the moves: %v", load)
	assert.Len(t, moves, 56, "the fewest moves: 90,10,0 → 34,33,33")
	assert.Equal(t, moves, Rebalance(routers, chassis), "deterministic")

	// Balanced already: nothing to do.
	var balanced []Assignment
	for i := range 10 {
		balanced = append(balanced, Assignment{Router: fmt.Sprintf("b-%d", i), Order: []string{chassis[i%3].Name}})
	}
	assert.Empty(t, Rebalance(balanced, chassis))

	// Physnets: a router never moves to a chassis that does not map its
	// network.
	mixed := []Chassis{{Name: "a", Physnets: []string{"p1"}}, {Name: "b", Physnets: []string{"p2"}}}
	var stuck []Assignment
	for i := range 6 {
		stuck = append(stuck, Assignment{Router: fmt.Sprintf("s-%d", i), Physnet: "p1", Order: []string{"a"}})
	}
	assert.Empty(t, Rebalance(stuck, mixed))
}
