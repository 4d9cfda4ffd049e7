package gateways

import (
	"slices"
	"strings"
)

// Assignment is a router's gateway order as the NB holds it, for Rebalance.
type Assignment struct {
	Router string
	// Physnet is the physical network its gateway chassis must map ("":
	// any gateway chassis).
	Physnet string
	// Pinned routers (spec.gateway) never move.
	Pinned bool
	// Order is the chassis by priority, primary first.
	Order []string
}

// Move is one router's new gateway order, from Rebalance.
type Move struct {
	Router   string
	From, To string
	Order    []string
}

// Rebalance returns the moves that even out the primaries over the gateway
// chassis (each router's candidates among them): after them, for every pair of chassis some router could move
// between, the loads differ by at most one (max − min ≤ 1 when every router
// may use every chassis). Each move takes a router, by name, from a most
// loaded chassis to a least loaded candidate of it, keeping the old primary
// as first failover candidate. Pinned routers and routers whose primary is
// not a candidate stay (the controller moves those).
func Rebalance(routers []Assignment, chassis []Chassis) []Move {
	candsOf := map[string][]string{}
	candidates := func(physnet string) []string {
		if c, ok := candsOf[physnet]; ok {
			return c
		}
		var out []string
		for _, c := range chassis {
			if physnet == "" || slices.Contains(c.Physnets, physnet) {
				out = append(out, c.Name)
			}
		}
		slices.Sort(out)
		candsOf[physnet] = out
		return out
	}
	load := map[string]int{}
	for _, c := range chassis {
		load[c.Name] = 0
	}
	type state struct {
		Assignment
		cands []string
	}
	var movable []*state
	for _, a := range routers {
		if len(a.Order) == 0 {
			continue
		}
		if _, ok := load[a.Order[0]]; !ok {
			continue
		}
		load[a.Order[0]]++
		cs := candidates(a.Physnet)
		if a.Pinned || !slices.Contains(cs, a.Order[0]) {
			continue
		}
		movable = append(movable, &state{Assignment: Assignment{Router: a.Router, Physnet: a.Physnet, Order: slices.Clone(a.Order)}, cands: cs})
	}
	slices.SortFunc(movable, func(a, b *state) int { return strings.Compare(a.Router, b.Router) })

	var moves []Move
	for {
		// The move with the largest gap between a router's primary and
		// one of its candidates; of equal gaps, the first router by name
		// and candidate by name.
		var best *state
		var to string
		gap := 1
		for _, st := range movable {
			from := st.Order[0]
			for _, c := range st.cands {
				if d := load[from] - load[c]; d > gap {
					best, to, gap = st, c, d
				}
			}
		}
		if best == nil {
			return moves
		}
		from := best.Order[0]
		order := append([]string{to}, slices.DeleteFunc(slices.Clone(best.Order), func(ch string) bool { return ch == to })...)
		if len(order) > MaxGateways {
			order = order[:MaxGateways]
		}
		best.Order = order
		load[from]--
		load[to]++
		moves = append(moves, Move{Router: best.Router, From: from, To: to, Order: slices.Clone(order)})
	}
}
