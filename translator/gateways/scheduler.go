// Package gateways schedules the gateway chassis of kubevirt-ovn's routers:
// which SB chassis is a router's primary and which are its failover
// candidates.
//
// A router's gateway candidates are the gateway chassis (SB chassis with
// enable-chassis-as-gw) that map its external network's physical network
// (FLAT and VLAN networks; any gateway chassis for the others). Its primary
// is
//   - its pin (spec.gateway) when it has one (it must be a candidate);
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
// spreading each primary's routers over the others (see byLoad). The loads
// count every router with a gateway: before the first assignment, the
// orders the NB holds are adopted for all of them (AdoptHeld), so that a
// restart or a one-shot sync continues from the NB, not from scratch.
//
// A Scheduler is a leaf: it holds its own mutex only inside one method,
// takes no callbacks and imports nothing of the planner, so its caller may
// hold locks of its own while calling it and no lock order involves it.
// It is deterministic: the same calls in the same order give the same
// assignments.
package gateways

import (
	"cmp"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"sync"
)

// MaxGateways is how many chassis a router's gateway port lists: the
// primary and up to two failover candidates.
const MaxGateways = 3

// Chassis is a gateway chassis: an SB chassis with enable-chassis-as-gw.
type Chassis struct {
	Name     string
	Hostname string
	// Physnets are the physical networks its ovn-bridge-mappings map.
	Physnets []string
}

// Need is what a router asks of the scheduler.
type Need struct {
	// Physnet is the physical network its gateway chassis must map, ""
	// when any gateway chassis will do.
	Physnet string
	// Pin is its spec.gateway, a chassis name or hostname; "" for none.
	Pin string
}

// Held is a router's gateway order as the NB holds it, primary first.
type Held struct {
	Router string
	Need   Need
	Order  []string
}

// Error says why a router gets no gateway: Field is the field of its spec
// at fault.
type Error struct {
	Router string
	Field  string
	Msg    string
	// NoCandidate: no chassis can be its gateway (rather than its pin
	// naming a chassis that is not a candidate).
	NoCandidate bool
}

func (e *Error) Error() string {
	return fmt.Sprintf("gateway of router %s: %s %s", e.Router, e.Field, e.Msg)
}

// Scheduler assigns routers their gateway orders and keeps them.
type Scheduler struct {
	mu      sync.Mutex
	adopted bool
	// chassis are the gateway chassis, by name.
	chassis []Chassis
	// cands are the candidates by physical network ("" for the networks
	// that need no mapping), computed from chassis when first asked.
	cands  map[string][]string
	chosen map[string]*choice // by router name
	load   map[string]int     // routers as primary, by chassis name
	// pairs counts routers by primary and first failover candidate: the
	// routers of one primary take over on its failure, spread.
	pairs map[[2]string]int
}

// choice is a router's gateway order and what it was chosen for.
type choice struct {
	need   Need
	pinned string // chassis name of the pin, "" when not pinned
	order  []string
}

// New returns a scheduler without gateway chassis.
func New() *Scheduler {
	return &Scheduler{chosen: map[string]*choice{}, load: map[string]int{}, pairs: map[[2]string]int{}, cands: map[string][]string{}}
}

// SetChassis records the gateway chassis and says whether they differ
// from those recorded before. It changes no assignment: Reassign does.
func (s *Scheduler) SetChassis(chassis []Chassis) bool {
	now := make([]Chassis, 0, len(chassis))
	for _, c := range chassis {
		c.Physnets = slices.Sorted(slices.Values(c.Physnets))
		now = append(now, c)
	}
	slices.SortFunc(now, func(a, b Chassis) int {
		return cmp.Or(strings.Compare(a.Name, b.Name), strings.Compare(a.Hostname, b.Hostname))
	})
	s.mu.Lock()
	defer s.mu.Unlock()
	if slices.EqualFunc(now, s.chassis, sameChassis) {
		return false
	}
	s.chassis = now
	clear(s.cands)
	return true
}

func sameChassis(a, b Chassis) bool {
	return a.Name == b.Name && a.Hostname == b.Hostname && slices.Equal(a.Physnets, b.Physnets)
}

// Reassign brings every assignment up to date with the chassis: a router
// whose order is no longer what Assign gives (a chassis of its went, or it
// has room for a new failover candidate) is assigned again, and a router
// left without candidate, or whose pin is no candidate any more, loses its
// assignment. It returns those routers, sorted; ok is false when nothing
// is assigned yet (AdoptHeld has not run), and then it changes nothing.
func (s *Scheduler) Reassign() (changed []string, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.adopted {
		return nil, false
	}
	names := make([]string, 0, len(s.chosen))
	for name := range s.chosen {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		c := s.chosen[name]
		cands := s.candidates(c.need.Physnet)
		if len(cands) == 0 || (c.pinned != "" && !slices.Contains(cands, c.pinned)) {
			s.drop(name)
			changed = append(changed, name)
			continue
		}
		before := slices.Clone(c.order)
		if now := s.decide(name, c.need, c.pinned, cands, nil); !slices.Equal(before, now.order) {
			changed = append(changed, name)
		}
	}
	return changed, true
}

// Adopted says whether AdoptHeld has run.
func (s *Scheduler) Adopted() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.adopted
}

// AdoptHeld adopts, before the first assignment, the orders the NB holds:
// every router's whose primary is still a candidate (and whose pin, if
// any, is one), by router name, so that the loads count them before any
// new choice. Once anything is adopted or assigned it does nothing.
func (s *Scheduler) AdoptHeld(held []Held) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.adoptHeld(held)
}

func (s *Scheduler) adoptHeld(held []Held) {
	if s.adopted {
		return
	}
	s.adopted = true
	held = slices.Clone(held)
	slices.SortStableFunc(held, func(a, b Held) int { return strings.Compare(a.Router, b.Router) })
	for _, h := range held {
		cands := s.candidates(h.Need.Physnet)
		if len(h.Order) == 0 || !slices.Contains(cands, h.Order[0]) {
			continue
		}
		if pinned, err := s.pinned(h.Router, h.Need, cands); err == nil {
			s.decide(h.Router, h.Need, pinned, cands, h.Order)
		}
	}
}

// Assign decides router's gateway order for need, given the order the NB
// holds for it (held, primary first; nil for none), records it and
// returns it, primary first. A router's own plan calls it: it keeps the
// order it has, adopts another writer's move in the NB (kubevirt-ovn
// rebalance), and fills up its failover candidates. A router that cannot
// have a gateway gets an *Error and loses its assignment.
func (s *Scheduler) Assign(router string, need Need, held []string) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, err := s.assign(router, need, held)
	if err != nil {
		return nil, err
	}
	return slices.Clone(c.order), nil
}

// Primary is router's primary chassis as assigned for need. It never
// changes a standing assignment: other units' plans ask it where a router
// lives. A router not assigned yet, or assigned for another need (its spec
// changed and its own plan has not run yet), is assigned first, as Assign
// would.
func (s *Scheduler) Primary(router string, need Need, held []string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.chosen[router]
	if c == nil || c.need != need {
		var err error
		if c, err = s.assign(router, need, held); err != nil {
			return "", err
		}
	}
	return c.order[0], nil
}

// Check is the error Assign would return for router's need, and assigns
// nothing: a router whose plan fails for other reasons still hears what is
// wrong with its gateway.
func (s *Scheduler) Check(router string, need Need) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, err := s.pinned(router, need, s.candidates(need.Physnet))
	return err
}

// Standing is router's primary chassis when it is assigned for need, and
// assigns nothing: ok is false when it is not.
func (s *Scheduler) Standing(router string, need Need) (primary string, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.chosen[router]; c != nil && c.need == need {
		return c.order[0], true
	}
	return "", false
}

func (s *Scheduler) assign(router string, need Need, held []string) (*choice, error) {
	s.adopted = true // nothing held is adopted after a first choice
	cands := s.candidates(need.Physnet)
	pinned, err := s.pinned(router, need, cands)
	if err != nil {
		s.drop(router)
		return nil, err
	}
	return s.decide(router, need, pinned, cands, held), nil
}

// Order is router's recorded order, primary first; nil when it has none.
func (s *Scheduler) Order(router string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.chosen[router]; c != nil {
		return slices.Clone(c.order)
	}
	return nil
}

// Release forgets router's assignment: it needs no gateway any more.
func (s *Scheduler) Release(router string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.drop(router)
}

// candidates lists the names of the gateway chassis that map physnet
// ("": every gateway chassis), sorted. Callers hold s.mu.
func (s *Scheduler) candidates(physnet string) []string {
	if c, ok := s.cands[physnet]; ok {
		return c
	}
	var out []string
	for _, c := range s.chassis {
		if physnet == "" || slices.Contains(c.Physnets, physnet) {
			out = append(out, c.Name)
		}
	}
	s.cands[physnet] = out
	return out
}

// pinned checks router's need against the candidates and returns the
// chassis its pin names ("" when none): by chassis name, else by hostname.
// Callers hold s.mu.
func (s *Scheduler) pinned(router string, n Need, cands []string) (string, error) {
	if len(cands) == 0 {
		return "", s.noCandidate(router, n.Physnet)
	}
	if n.Pin == "" {
		return "", nil
	}
	if slices.Contains(cands, n.Pin) {
		return n.Pin, nil
	}
	for _, c := range s.chassis {
		if c.Hostname == n.Pin && slices.Contains(cands, c.Name) {
			return c.Name, nil
		}
	}
	// Every gateway chassis by name, with the hostname a node name
	// matches when it has one: a chassis without hostname is still named.
	var names []string
	for _, c := range s.chassis {
		label := c.Name
		if c.Hostname != "" && c.Hostname != c.Name {
			label += " (hostname " + c.Hostname + ")"
		}
		if n.Physnet != "" && !slices.Contains(c.Physnets, n.Physnet) {
			label += " (does not map " + n.Physnet + ")"
		}
		names = append(names, label)
	}
	slices.Sort(names)
	return "", &Error{Router: router, Field: "spec.gateway",
		Msg: fmt.Sprintf("node %s is not a gateway candidate (chassis with enable-chassis-as-gw: %s)", n.Pin, strings.Join(names, ", "))}
}

func (s *Scheduler) noCandidate(router, physnet string) error {
	var names []string
	for _, c := range s.chassis {
		maps := strings.Join(c.Physnets, ",")
		if maps == "" {
			maps = "nothing"
		}
		names = append(names, fmt.Sprintf("%s maps %s", c.Name, maps))
	}
	if physnet == "" || len(names) == 0 {
		return &Error{Router: router, Field: "spec.gateway", NoCandidate: true,
			Msg: "has no gateway candidate: no SB chassis has ovn-cms-options=enable-chassis-as-gw"}
	}
	return &Error{Router: router, Field: "spec.external.network", NoCandidate: true,
		Msg: fmt.Sprintf("has no gateway candidate: no SB chassis with enable-chassis-as-gw maps physical network %s in ovn-bridge-mappings (%s)", physnet, strings.Join(names, "; "))}
}

// decide computes and records the order of router name, given its
// candidates and the order the NB holds (held, nil for none). Callers
// hold s.mu.
func (s *Scheduler) decide(name string, need Need, pinned string, cands, held []string) *choice {
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
	c := &choice{need: need, pinned: pinned, order: order}
	s.set(name, c)
	return c
}

// byLoad sorts chassis, the candidates for the next place after order,
// least-loaded first, ties broken by a hash of router and chassis name,
// then by name. For the first failover candidate, the fewest routers with
// the same primary and that failover candidate come first: when a primary
// fails, its routers are spread over the others.
func (s *Scheduler) byLoad(router string, order, chassis []string) {
	pair := func(string) int { return 0 }
	if len(order) == 1 {
		pair = func(ch string) int { return s.pairs[[2]string{order[0], ch}] }
	}
	slices.SortFunc(chassis, func(a, b string) int {
		return cmp.Or(cmp.Compare(pair(a), pair(b)), cmp.Compare(s.load[a], s.load[b]),
			cmp.Compare(hash(router, b), hash(router, a)),
			strings.Compare(a, b))
	})
}

func (s *Scheduler) set(name string, c *choice) {
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
func (s *Scheduler) drop(name string) {
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

// ByHash is the chassis of chassis that router hashes highest with
// (rendezvous hashing: a chassis that comes or goes moves only the routers
// that hash highest with it), "" for none: the chassis a router without
// gateway port is bound to in interconnect mode.
func ByHash(router string, chassis []string) string {
	best, bestHash := "", uint64(0)
	for _, ch := range chassis {
		if h := hash(router, ch); best == "" || h > bestHash || (h == bestHash && ch < best) {
			best, bestHash = ch, h
		}
	}
	return best
}

func hash(router, chassis string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(router))
	h.Write([]byte{0})
	h.Write([]byte(chassis))
	return h.Sum64()
}
