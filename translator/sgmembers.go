package translator

import (
	"cmp"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"sync"
)

// A security group's members are re-planned on every event of any of them
// (a VM added, removed or rebound, its network changed), and a group may
// have thousands of members on thousands of networks: planning them from
// scratch each time would cost what the whole group costs, per event. So
// a group's members, as its last plan resolved them, are kept per network
// (sgMemo), and a plan resolves again only the networks that changed since
// (and those whose ports follow the NB's claims, which may change any
// time): what one event costs is what its network costs, plus one pass
// over the group's sorted ports.
//
// What a network's members of a group are depends on the network's
// declarations (validNetwork), its VM interfaces (plannedVMPorts, which
// also decides the address claims), and the group's members on it
// (sgMembers): all change only in Set, under the input's write lock,
// where replaceNetworks and replaceVMs mark the network changed in the
// memo of every group with a member on it before or after
// (touchSGNetwork). A network whose VMs claim an address twice has its
// ports decided by held (plannedVMPorts memoizes it not): the memo
// resolves it again in each plan. Where a member's node is (its zone) is
// read in each plan, not kept.

// sgMember is a member port of a security group, its IPv4 address (addr
// as parsed: invalid when it is none), and its node (in interconnect
// mode, its node's zone's NB holds the port). from is the network's
// resolution it came from.
type sgMember struct {
	// target is the node a live migration moves it to ("" none): its
	// port is in that node's zone too while it runs (zonePort).
	port, ip, node, target string
	addr                   netip.Addr
	// ip6 are its IPv6 addresses (comma-joined), addrs6 them parsed.
	ip6    string
	addrs6 []netip.Addr
	from   *sgNetMembers
}

// compareSGMembers orders members, and says whether two are the same:
// every field a plan reads counts (a member whose migration target
// changed is another member: its port is in the target's zone too).
func compareSGMembers(a, b *sgMember) int {
	return cmp.Or(strings.Compare(a.port, b.port), strings.Compare(a.ip, b.ip), strings.Compare(a.ip6, b.ip6), strings.Compare(a.node, b.node),
		strings.Compare(a.target, b.target))
}

// sgNetMembers are a group's members on one network: those with a port,
// sorted (compareSGMembers), the network's gateways (IPv4, then IPv6;
// those it has) and whether it has an ipv6Cidr. stale: a newer resolution
// replaced it. members is not changed once made: a memo's sorted list
// points into it.
type sgNetMembers struct {
	members  []sgMember
	gateways []netip.Addr
	ipv6     bool
	stale    bool
}

func (e *sgNetMembers) same(o *sgNetMembers) bool {
	if e == nil || o == nil {
		return e == o
	}
	return slices.Equal(e.gateways, o.gateways) && e.ipv6 == o.ipv6 && slices.EqualFunc(e.members, o.members, func(a, b sgMember) bool { return compareSGMembers(&a, &b) == 0 })
}

// sgMemo is a group's members as its last plan resolved them. mu is held
// by the plan that reads and updates it (plans of several units run at
// once under the input's read lock); touch runs under its write lock.
type sgMemo struct {
	mu sync.Mutex
	// nets are the resolutions of the networks with a member port, and
	// dirty the networks to resolve again: every network of the group's
	// members when new, then those touched. volatile are the networks
	// whose ports held decides: resolved again in every plan.
	nets     map[string]*sgNetMembers
	dirty    set[string]
	volatile set[string]
	fresh    bool

	// members are every network's, sorted: pointers into their
	// resolutions (spare is the other buffer they are merged into); ports
	// are theirs without duplicates.
	members, spare []*sgMember
	ports          []string
	// gateways counts the networks with a member port by gateway; ping
	// is the match of the ping ACL to them of Port_Group pingFor ("":
	// none, pingGatewayMatch). ipv6Nets counts those with an ipv6Cidr.
	gateways      map[netip.Addr]int
	ping, pingFor string
	ipv6Nets      int
	// addrs are the members' addresses (IPv4, then IPv6), sorted, without duplicates,
	// as strings (addrStrs), and addrCount how many members have each
	// (addrsTouched: came or went since sortAddrs).
	addrs        []netip.Addr
	addrStrs     []string
	addrCount    map[netip.Addr]int
	addrsTouched []netip.Addr
}

// sgMemos are the memos of the groups planned, by group id; a group's
// goes with its last member (removeVMGroups).
type sgMemos struct {
	mu    sync.Mutex
	memos map[string]*sgMemo
}

// get is group id's memo, a fresh one if it has none.
func (s *sgMemos) get(id string) *sgMemo {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.memos == nil {
		s.memos = map[string]*sgMemo{}
	}
	m := s.memos[id]
	if m == nil {
		m = &sgMemo{fresh: true, nets: map[string]*sgNetMembers{}, dirty: set[string]{}, volatile: set[string]{}, gateways: map[netip.Addr]int{}, addrCount: map[netip.Addr]int{}}
		s.memos[id] = m
	}
	return m
}

// touch marks network changed in group id's memo, if it has one.
func (s *sgMemos) touch(id, network string) {
	s.mu.Lock()
	m := s.memos[id]
	s.mu.Unlock()
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.fresh {
		m.dirty.add(network)
	}
}

// drop forgets group id's memo: it has no members left.
func (s *sgMemos) drop(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.memos, id)
}

// addVMGroups and removeVMGroups keep the members indexes: the VM
// interfaces bound to each group by network (sgMembers), the groups with
// members on each network (sgNetGroups), and the nodes of each group's
// members (sgNodes), with how many interfaces of each.
func (in *Input) addVMGroups(d *vmDecl) {
	for _, g := range d.Groups() {
		nets := in.sgMembers[g]
		if nets == nil {
			nets = map[string]set[*vmDecl]{}
			in.sgMembers[g] = nets
		}
		addTo(nets, d.Network, d)
		countIn(in.sgNetGroups, d.Network, g, 1)
		countIn(in.sgNodes, g, d.Node, 1)
		if d.MigrationTarget != "" {
			countIn(in.sgNodes, g, d.MigrationTarget, 1)
		}
	}
}

func (in *Input) removeVMGroups(d *vmDecl) {
	for _, g := range d.Groups() {
		if nets := in.sgMembers[g]; nets != nil {
			removeFrom(nets, d.Network, d)
			if len(nets) == 0 {
				delete(in.sgMembers, g)
				in.sgPlans.drop(g)
			}
		}
		countIn(in.sgNetGroups, d.Network, g, -1)
		countIn(in.sgNodes, g, d.Node, -1)
		if d.MigrationTarget != "" {
			countIn(in.sgNodes, g, d.MigrationTarget, -1)
		}
	}
}

// countIn adds delta to m[a][b], dropping a count that reaches 0.
func countIn(m map[string]map[string]int, a, b string, delta int) {
	c := m[a]
	if c == nil {
		c = map[string]int{}
		m[a] = c
	}
	if c[b] += delta; c[b] <= 0 {
		delete(c, b)
		if len(c) == 0 {
			delete(m, a)
		}
	}
}

// touchSGNetwork marks network n changed in the memos of the groups with
// members on it. replaceVMs calls it before and after it moves the
// network's VM interfaces (groups they leave and join), replaceNetworks
// when the network's declarations change. Callers hold in.mu (write).
func (in *Input) touchSGNetwork(n string) {
	for g := range in.sgNetGroups[n] {
		in.sgPlans.touch(g, n)
	}
}

// sgMembersOf resolves group id's members as its memo keeps them (see
// above) and returns the memo, locked: the caller reads members, ports,
// ping (of its Port_Group pg) and addrStrs and unlocks it.
func (in *Input) sgMembersOf(id, pg string, held Held) *sgMemo {
	m := in.sgPlans.get(id)
	m.mu.Lock()
	if m.fresh {
		m.fresh = false
		for n := range in.sgMembers[id] {
			m.dirty.add(n)
		}
	}
	var removed, added []*sgMember
	changed, gatewaysChanged := false, false
	resolve := func(net string) {
		nw, volatile := in.resolveSGNetwork(id, net, held)
		if volatile {
			m.volatile.add(net)
		} else {
			delete(m.volatile, net)
		}
		old := m.nets[net]
		if old.same(nw) {
			return
		}
		changed = true
		// The new gateways counted first: the same ones stay.
		if nw != nil {
			for _, gw := range nw.gateways {
				if m.gateways[gw]++; m.gateways[gw] == 1 {
					gatewaysChanged = true
				}
			}
			if nw.ipv6 {
				m.ipv6Nets++
			}
			for _, mb := range nw.members {
				m.countAddrs(&mb, 1)
			}
		}
		if old != nil {
			old.stale = true
			for i := range old.members {
				removed = append(removed, &old.members[i])
			}
			for _, mb := range old.members {
				m.countAddrs(&mb, -1)
			}
			for _, gw := range old.gateways {
				if m.gateways[gw]--; m.gateways[gw] == 0 {
					delete(m.gateways, gw)
					gatewaysChanged = true
				}
			}
			if old.ipv6 {
				m.ipv6Nets--
			}
		}
		if nw == nil {
			delete(m.nets, net)
			return
		}
		m.nets[net] = nw
		for i := range nw.members {
			added = append(added, &nw.members[i])
		}
	}
	for net := range m.dirty {
		resolve(net)
	}
	for net := range m.volatile {
		if _, done := m.dirty[net]; !done {
			resolve(net)
		}
	}
	clear(m.dirty)
	if changed {
		m.update(removed, added)
		m.sortAddrs()
	}
	if gatewaysChanged || m.pingFor != pg {
		m.pingFor = pg
		m.ping = pingGatewayMatch(pg, slices.SortedFunc(func(yield func(netip.Addr) bool) {
			for a := range m.gateways {
				if !yield(a) {
					return
				}
			}
		}, netip.Addr.Compare))
	}
	return m
}

// sgSpliceMax is the most members one plan may remove and add for the
// kept lists to be spliced (a few binary searches and one copy) rather
// than merged whole.
var sgSpliceMax = 64

// update makes members the members of networks still resolved: without
// removed (those of the resolutions replaced, now stale), with added, and
// ports theirs.
func (m *sgMemo) update(removed, added []*sgMember) {
	slices.SortFunc(added, compareSGMembers)
	if len(removed)+len(added) > sgSpliceMax || !m.splice(removed, added) {
		m.merge(added)
	}
}

// merge makes members the members not stale and added (sorted), merged
// in one pass, and ports theirs.
func (m *sgMemo) merge(added []*sgMember) {
	out := m.spare[:0]
	i := 0
	for _, mb := range m.members {
		if mb.from.stale {
			continue
		}
		for i < len(added) && compareSGMembers(added[i], mb) < 0 {
			out = append(out, added[i])
			i++
		}
		out = append(out, mb)
	}
	out = append(out, added[i:]...)
	m.swap(out)
	m.ports = m.ports[:0]
	for _, mb := range m.members {
		if len(m.ports) == 0 || m.ports[len(m.ports)-1] != mb.port {
			m.ports = append(m.ports, mb.port)
		}
	}
}

// swap makes out the members, and the members' buffer the spare one.
func (m *sgMemo) swap(out []*sgMember) {
	clear(m.members) // the spare buffer refers to nothing
	m.members, m.spare = out, m.members[:0]
}

// splice makes members the members without removed and with added
// (sorted), found by binary search, in one copy, and edits ports where
// a port's first member came or its last went. It reports false, having
// changed nothing, when a removed member is not found (merge then).
func (m *sgMemo) splice(removed, added []*sgMember) bool {
	old := m.members
	del := make([]int, 0, len(removed))
	for _, r := range removed {
		i, _ := slices.BinarySearchFunc(old, r, compareSGMembers)
		for i < len(old) && old[i] != r && compareSGMembers(old[i], r) == 0 {
			i++
		}
		if i == len(old) || old[i] != r {
			return false
		}
		del = append(del, i)
	}
	slices.Sort(del)
	at := make([]int, len(added)) // added[k] goes before old[at[k]]
	for k, a := range added {
		at[k], _ = slices.BinarySearchFunc(old, a, compareSGMembers)
	}
	out := m.spare[:0]
	pos, d, k := 0, 0, 0
	for {
		next := len(old)
		if k < len(added) {
			next = min(next, at[k])
		}
		if d < len(del) {
			next = min(next, del[d])
		}
		out = append(out, old[pos:next]...)
		pos = next
		for k < len(added) && at[k] == pos {
			out = append(out, added[k])
			k++
		}
		if d < len(del) && del[d] == pos {
			pos++
			d++
			continue
		}
		if pos == len(old) && k == len(added) {
			break
		}
	}
	byPort := func(mb *sgMember, port string) int { return strings.Compare(mb.port, port) }
	has := func(members []*sgMember, port string) bool {
		_, found := slices.BinarySearchFunc(members, port, byPort)
		return found
	}
	for _, r := range removed {
		if !has(out, r.port) {
			if i, found := slices.BinarySearch(m.ports, r.port); found {
				m.ports = slices.Delete(m.ports, i, i+1)
			}
		}
	}
	for _, a := range added {
		if !has(old, a.port) {
			if i, found := slices.BinarySearch(m.ports, a.port); !found {
				m.ports = slices.Insert(m.ports, i, a.port)
			}
		}
	}
	m.swap(out)
	return true
}

// countAddrs counts member mb's addresses, both families (countAddr).
func (m *sgMemo) countAddrs(mb *sgMember, delta int) {
	m.countAddr(mb.addr, delta)
	for _, a := range mb.addrs6 {
		m.countAddr(a, delta)
	}
}

// countAddr adds delta members with address a (none when invalid);
// one that came or went is in addrsTouched until sortAddrs.
func (m *sgMemo) countAddr(a netip.Addr, delta int) {
	if !a.IsValid() {
		return
	}
	c := m.addrCount[a] + delta
	if c > 0 {
		m.addrCount[a] = c
	} else {
		delete(m.addrCount, a)
	}
	if c <= 0 || c == delta {
		m.addrsTouched = append(m.addrsTouched, a)
	}
}

// sortAddrs makes addrs (and addrStrs) the addresses counted: the few
// that came or went inserted or deleted, or all sorted again.
func (m *sgMemo) sortAddrs() {
	if len(m.addrsTouched) > 32 {
		m.addrs = slices.AppendSeq(m.addrs[:0], maps.Keys(m.addrCount))
		slices.SortFunc(m.addrs, netip.Addr.Compare)
		m.addrStrs = m.addrStrs[:0]
		for _, a := range m.addrs {
			m.addrStrs = append(m.addrStrs, a.String())
		}
	} else {
		for _, a := range m.addrsTouched {
			_, counted := m.addrCount[a]
			i, found := slices.BinarySearchFunc(m.addrs, a, netip.Addr.Compare)
			switch {
			case counted && !found:
				m.addrs = slices.Insert(m.addrs, i, a)
				m.addrStrs = slices.Insert(m.addrStrs, i, a.String())
			case !counted && found:
				m.addrs = slices.Delete(m.addrs, i, i+1)
				m.addrStrs = slices.Delete(m.addrStrs, i, i+1)
			}
		}
	}
	m.addrsTouched = m.addrsTouched[:0]
}

// resolveSGNetwork is what network net gives group id: its members with a
// port, the ports the network plans (nil: none), and whether held decided
// them (volatile: the network's VMs claim an address twice).
func (in *Input) resolveSGNetwork(id, net string, held Held) (e *sgNetMembers, volatile bool) {
	decls := in.sgMembers[id][net]
	if len(decls) == 0 {
		return nil, false
	}
	n, valid := in.validNetwork(net)
	if !valid {
		return nil, false
	}
	ports, memoized := in.plannedVMPorts(n, held)
	e = &sgNetMembers{}
	for d := range decls {
		if d.NetworkNamespace != n.Namespace {
			continue
		}
		pi, ok := ports.of(d)
		if !ok {
			continue
		}
		mb := sgMember{port: pi.port, ip: pi.ip, node: d.Node, target: d.MigrationTarget, from: e}
		if a, err := netip.ParseAddr(pi.ip); err == nil && a.Is4() {
			mb.addr = a
		}
		if len(pi.ip6) > 0 {
			mb.ip6 = strings.Join(pi.ip6, ",")
			for _, s := range pi.ip6 {
				if a, err := netip.ParseAddr(s); err == nil {
					mb.addrs6 = append(mb.addrs6, a)
				}
			}
		}
		e.members = append(e.members, mb)
	}
	if len(e.members) == 0 {
		return nil, !memoized
	}
	slices.SortFunc(e.members, func(a, b sgMember) int { return compareSGMembers(&a, &b) })
	if n.gateway.IsValid() {
		e.gateways = append(e.gateways, n.gateway)
	}
	if n.gateway6.IsValid() {
		e.gateways = append(e.gateways, n.gateway6)
	}
	e.ipv6 = n.prefix6.IsValid()
	return e, !memoized
}
