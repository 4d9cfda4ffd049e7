package translator

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"sync"
)

// MaxGateways is how many chassis a router's gateway port lists: the
// primary and up to two failover candidates.
const MaxGateways = 3

// The gateway scheduler. A router's gateway candidates are the SB chassis
// with enable-chassis-as-gw that map its external network's physical
// network (FLAT and VLAN networks; any gateway chassis for the others).
// Its primary is
//   - spec.gateway when given (it must be a candidate);
//   - else the primary it has now (the NB's highest-priority
//     Gateway_Chassis, or the choice being committed) while that chassis
//     remains a candidate: a new gateway chassis moves no router, a chassis
//     that goes moves only the routers that used it;
//   - else its first failover candidate that is still a candidate (BFD
//     already moved its traffic there);
//   - else the least-loaded candidate: the fewest routers as primary, ties
//     broken by a hash of router and chassis name.
//
// Failover candidates are kept while they remain candidates and filled up
// to MaxGateways in the same least-loaded order, the first one also
// spreading each primary's routers over the others (see byLoad). The
// loads count every router with a gateway in the input: before the first
// choice, the primaries the NB shows are adopted for all of them, so that
// a restart or a one-shot sync continues from the NB, not from scratch.
type schedule struct {
	mu      sync.Mutex
	settled bool
	chosen  map[string]*choice // by router name
	load    map[string]int     // routers as primary, by chassis name
	// pairs counts routers by primary and first failover candidate: the
	// routers of one primary take over on its failure, spread.
	pairs map[[2]string]int
	// cands are the gateway candidates by physical network ("" for the
	// networks that need no mapping), computed from Input.candidates.
	cands map[string][]string
}

// choice is a router's gateway order and what it was chosen for.
type choice struct {
	physnet string
	pinned  string // chassis name of spec.gateway, "" when not pinned
	order   []string
}

func newSchedule() *schedule {
	return &schedule{chosen: map[string]*choice{}, load: map[string]int{}, pairs: map[[2]string]int{}, cands: map[string][]string{}}
}

// gatewayNeed is what a router asks of the scheduler.
type gatewayNeed struct {
	physnet string
	// gateway is spec.gateway, a chassis name or hostname.
	gateway string
}

// need says what router d needs from the scheduler; ok is false when it
// needs no gateway or its external network is not valid.
func (in *Input) need(d *routerDecl) (gatewayNeed, bool) {
	if d.External == nil || !d.EnableSNAT {
		return gatewayNeed{}, false
	}
	ext, ok := in.validNetwork(d.External.Network)
	if !ok {
		return gatewayNeed{}, false
	}
	return gatewayNeed{physnet: physnetOf(ext.Network), gateway: d.Gateway}, true
}

// physnetOf is the physical network a gateway chassis must map for n, ""
// when any gateway chassis can reach it.
func physnetOf(n *Network) string {
	if n.Type != NetworkFlat && n.Type != NetworkVLAN {
		return ""
	}
	if n.PhysicalNetworkName != "" {
		return n.PhysicalNetworkName
	}
	return n.Name
}

// candidatesFor lists the names of the gateway candidates for physnet,
// sorted, from in.candidates. Callers hold s.mu and in.mu (read).
func (in *Input) candidatesFor(physnet string) []string {
	s := in.sched
	if c, ok := s.cands[physnet]; ok {
		return c
	}
	c := gatewayCandidates(in.candidates, physnet)
	s.cands[physnet] = c
	return c
}

// gatewayCandidates lists the names of the chassis that are gateways and
// map physnet ("": every gateway), in chassis order.
func gatewayCandidates(chassis []Chassis, physnet string) []string {
	var out []string
	for _, c := range chassis {
		if c.Gateway && (physnet == "" || slices.Contains(c.Physnets, physnet)) {
			out = append(out, c.Name)
		}
	}
	return out
}

// gatewaysOf schedules router name (declared once, with need n) and returns
// its gateway order, primary first. held says what the NB shows now.
func (in *Input) gatewaysOf(name string, n gatewayNeed, held Held) ([]string, error) {
	if !in.chassisKnown {
		if n.gateway == "" {
			return nil, routerErr(name, "spec.gateway", "is required when the Southbound database is not given (--sb)")
		}
		return []string{n.gateway}, nil
	}
	if in.follow {
		if order := held.HeldGateways(name); len(order) > 0 {
			return order, nil
		}
		err := routerErr(name, "gateway", "not chosen yet by the allocator")
		err.Reason = ReasonWaiting
		return nil, err
	}
	s := in.sched
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.settled {
		in.settle(held)
	}
	cands := in.candidatesFor(n.physnet)
	pinned, err := pinnedGateway(name, n, in.candidates, cands)
	if err != nil {
		s.drop(name)
		return nil, err
	}
	c := s.decide(name, n.physnet, pinned, cands, held.HeldGateways(name))
	return slices.Clone(c.order), nil
}

// pinnedGateway checks router name's need against the gateway chassis
// (chassis, of which cands are its candidates) and returns the chassis its
// spec.gateway names ("" when none): by chassis name, else by hostname.
func pinnedGateway(name string, n gatewayNeed, chassis []Chassis, cands []string) (string, error) {
	if len(cands) == 0 {
		return "", noCandidate(name, n.physnet, chassis)
	}
	if n.gateway == "" {
		return "", nil
	}
	if slices.Contains(cands, n.gateway) {
		return n.gateway, nil
	}
	for _, c := range chassis {
		if c.Hostname == n.gateway && slices.Contains(cands, c.Name) {
			return c.Name, nil
		}
	}
	// Every gateway chassis by name, with the hostname a node name
	// matches when it has one: a chassis without hostname is still named.
	var names []string
	for _, c := range chassis {
		if !c.Gateway {
			continue
		}
		label := c.Name
		if c.Hostname != "" && c.Hostname != c.Name {
			label += " (hostname " + c.Hostname + ")"
		}
		if n.physnet != "" && !slices.Contains(c.Physnets, n.physnet) {
			label += " (does not map " + n.physnet + ")"
		}
		names = append(names, label)
	}
	slices.Sort(names)
	return "", routerErr(name, "spec.gateway", "node %s is not a gateway candidate (chassis with enable-chassis-as-gw: %s)", n.gateway, strings.Join(names, ", "))
}

func noCandidate(name, physnet string, chassis []Chassis) error {
	var names []string
	for _, c := range chassis {
		if !c.Gateway {
			continue
		}
		maps := strings.Join(c.Physnets, ",")
		if maps == "" {
			maps = "nothing"
		}
		names = append(names, fmt.Sprintf("%s maps %s", c.Name, maps))
	}
	var err *InputError
	if physnet == "" || len(names) == 0 {
		err = routerErr(name, "spec.gateway", "has no gateway candidate: no SB chassis has ovn-cms-options=enable-chassis-as-gw")
	} else {
		err = routerErr(name, "spec.external.network", "has no gateway candidate: no SB chassis with enable-chassis-as-gw maps physical network %s in ovn-bridge-mappings (%s)", physnet, strings.Join(names, "; "))
	}
	err.Reason = ReasonNoGatewayCandidate
	return err
}

// settle adopts, for every router with a gateway in the input, the order
// the NB shows when its primary is still a candidate, so that the loads
// count them before any new choice. Callers hold s.mu and in.mu (read or
// write).
func (in *Input) settle(held Held) {
	s := in.sched
	s.settled = true
	for name := range in.gatewayRouters {
		if len(in.routers[name]) != 1 {
			continue // ambiguous: not planned
		}
		for d := range in.routers[name] {
			n, ok := in.need(d)
			if !ok {
				continue
			}
			order := held.HeldGateways(name)
			cands := in.candidatesFor(n.physnet)
			if len(order) == 0 || !slices.Contains(cands, order[0]) {
				continue
			}
			if pinned, err := pinnedGateway(name, n, in.candidates, cands); err == nil {
				s.decide(name, n.physnet, pinned, cands, order)
			}
		}
	}
}

// decide computes and records the order of router name, given its
// candidates and the order the NB holds (held, nil for none).
func (s *schedule) decide(name, physnet, pinned string, cands, held []string) *choice {
	prev := s.chosen[name]
	valid := func(order []string) bool { return len(order) > 0 && slices.Contains(cands, order[0]) }
	// part: held is fewer of prev's chassis, e.g. the rows of our own
	// commit read while the NB's events for them are still arriving, or
	// a row someone deleted: not a decision to adopt.
	part := prev != nil && len(held) < len(prev.order) && !slices.ContainsFunc(held, func(ch string) bool { return !slices.Contains(prev.order, ch) })
	var base []string
	switch {
	case prev != nil && valid(prev.order) && (len(held) == 0 || held[0] == prev.order[0] || !valid(held) || part):
		// Ours, committed or being committed: kept as it is (refilling
		// from the loads of the moment would churn the failover
		// candidates).
		base = prev.order
	case valid(held):
		// What the NB holds: after a restart, or written by another
		// (kubevirt-ovn rebalance).
		base = held
	case len(held) > 0:
		// Its primary went: the failover candidates, in order.
		base = held
	case prev != nil:
		base = prev.order
	}
	var order []string
	for _, ch := range base {
		if slices.Contains(cands, ch) && !slices.Contains(order, ch) {
			order = append(order, ch)
		}
	}
	if pinned != "" {
		order = slices.DeleteFunc(order, func(ch string) bool { return ch == pinned })
		order = slices.Insert(order, 0, pinned)
	}
	want := min(MaxGateways, len(cands))
	if len(order) > want {
		order = order[:want]
	}
	for len(order) < want {
		rest := slices.DeleteFunc(slices.Clone(cands), func(ch string) bool { return slices.Contains(order, ch) })
		s.byLoad(name, order, rest)
		order = append(order, rest[0])
	}
	c := &choice{physnet: physnet, pinned: pinned, order: order}
	s.set(name, c)
	return c
}

// byLoad sorts chassis, the candidates for the next place after order,
// least-loaded first, ties broken by a hash of router and chassis name,
// then by name. For the first failover candidate, the fewest routers with
// the same primary and that failover candidate come first: when a primary
// fails, its routers are spread over the others.
func (s *schedule) byLoad(router string, order, chassis []string) {
	pair := func(string) int { return 0 }
	if len(order) == 1 {
		pair = func(ch string) int { return s.pairs[[2]string{order[0], ch}] }
	}
	slices.SortFunc(chassis, func(a, b string) int {
		return cmp.Or(cmp.Compare(pair(a), pair(b)), cmp.Compare(s.load[a], s.load[b]),
			cmp.Compare(rendezvous(router, b), rendezvous(router, a)),
			strings.Compare(a, b))
	})
}

func (s *schedule) set(name string, c *choice) {
	s.drop(name)
	s.chosen[name] = c
	if len(c.order) > 0 {
		s.load[c.order[0]]++
	}
	if len(c.order) > 1 {
		s.pairs[[2]string{c.order[0], c.order[1]}]++
	}
}

// drop forgets router name's choice.
func (s *schedule) drop(name string) {
	prev := s.chosen[name]
	if prev == nil {
		return
	}
	delete(s.chosen, name)
	if len(prev.order) > 0 {
		if s.load[prev.order[0]]--; s.load[prev.order[0]] <= 0 {
			delete(s.load, prev.order[0])
		}
	}
	if len(prev.order) > 1 {
		k := [2]string{prev.order[0], prev.order[1]}
		if s.pairs[k]--; s.pairs[k] <= 0 {
			delete(s.pairs, k)
		}
	}
}

// rechoose is SetChassis's part: with the candidates changed, the routers
// whose recorded order is no longer what decide gives (a chassis of theirs
// went, or they have room for a new failover candidate) are chosen again,
// by name, and returned. Callers hold in.mu (write).
func (in *Input) rechoose() set[Unit] {
	s := in.sched
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.cands)
	affected := set[Unit]{}
	if !s.settled {
		for r := range in.gatewayRouters {
			affected.add(Unit{Kind: KindRouter, Name: r})
		}
		return affected
	}
	for r := range in.gatewayRouters {
		if s.chosen[r] == nil {
			// Failed before (no candidate, not a candidate) or never
			// planned: plan it.
			affected.add(Unit{Kind: KindRouter, Name: r})
		}
	}
	names := make([]string, 0, len(s.chosen))
	for name := range s.chosen {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		c := s.chosen[name]
		cands := in.candidatesFor(c.physnet)
		if len(cands) == 0 || (c.pinned != "" && !slices.Contains(cands, c.pinned)) {
			s.drop(name)
			affected.add(Unit{Kind: KindRouter, Name: name})
			continue
		}
		before := slices.Clone(c.order)
		if now := s.decide(name, c.physnet, c.pinned, cands, nil); !slices.Equal(before, now.order) {
			affected.add(Unit{Kind: KindRouter, Name: name})
		}
	}
	return affected
}

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

// Move is one router's new gateway order.
type Move struct {
	Router   string
	From, To string
	Order    []string
}

// Rebalance returns the moves that even out the primaries over the gateway
// candidates: after them, for every pair of chassis some router could move
// between, the loads differ by at most one (max − min ≤ 1 when every router
// may use every chassis). Each move takes a router, by name, from a most
// loaded chassis to a least loaded candidate of it, keeping the old primary
// as first failover candidate. Pinned routers and routers whose primary is
// not a candidate stay (the controller moves those).
func Rebalance(routers []Assignment, chassis []Chassis) []Move {
	var cands []Chassis
	for _, c := range chassis {
		if c.Gateway {
			cands = append(cands, c)
		}
	}
	candsOf := map[string][]string{}
	candidates := func(physnet string) []string {
		if c, ok := candsOf[physnet]; ok {
			return c
		}
		var out []string
		for _, c := range cands {
			if physnet == "" || slices.Contains(c.Physnets, physnet) {
				out = append(out, c.Name)
			}
		}
		slices.Sort(out)
		candsOf[physnet] = out
		return out
	}
	load := map[string]int{}
	for _, c := range cands {
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
