package translator

import (
	"cmp"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/kubevirt-ovn/kubevirt-ovn/translator/gateways"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/tunnelkeys"
)

// Objects are declarations: of one source (a manifest file, a Kubernetes
// object), what Input.Set replaces, or of many merged (manifest.Set, what
// a set of manifests declares). A Snapshot holds the same four fields for
// every source at once, with the chassis and what the NB holds
// (Snapshot.Objects, Objects.Snapshot convert).
type Objects struct {
	Routers  []Router
	Networks []Network
	VMs      []VMInterface
	// FloatingIPs belong to the unit of the router they name.
	FloatingIPs []FloatingIP
	// SecurityGroups and SecurityGroupRules belong to the unit of their
	// group.
	SecurityGroups     []SecurityGroup
	SecurityGroupRules []SecurityGroupRule
	// LoadBalancers belong to the unit of the router of their network.
	LoadBalancers []LoadBalancer
	// Invalid are objects that did not decode: their unit fails and keeps
	// its rows.
	Invalid map[Unit]error
}

// Objects are the declarations of s, as one source's.
func (s *Snapshot) Objects() Objects {
	return Objects{Routers: s.Routers, Networks: s.Networks, VMs: s.VMs, FloatingIPs: s.FloatingIPs,
		SecurityGroups: s.SecurityGroups, SecurityGroupRules: s.SecurityGroupRules, LoadBalancers: s.LoadBalancers, Invalid: s.Invalid}
}

// Snapshot is a Snapshot of o alone: no chassis, nothing held.
func (o Objects) Snapshot() *Snapshot {
	return &Snapshot{Routers: o.Routers, Networks: o.Networks, VMs: o.VMs, FloatingIPs: o.FloatingIPs,
		SecurityGroups: o.SecurityGroups, SecurityGroupRules: o.SecurityGroupRules, LoadBalancers: o.LoadBalancers, Invalid: o.Invalid}
}

// Input is the indexed form of the Objects of every source (Set) and the SB
// chassis (SetChassis), what Plan reads one unit at a time; NewInputFrom
// builds one from a Snapshot, which Build plans whole. Plan of one unit
// reads that unit's objects and the indexes of the claims it competes for,
// never the whole input. The cross-router rules (one router per SNAT IP
// and per internal network, an external network is nobody's internal one,
// a name declared once) are maintained indexes.
//
// Input is safe for concurrent use: a source calls Set and SetChassis while
// workers call Plan. Plan decides a unit's allocations through two
// allocators with state of their own: the gateway scheduler
// (gateways.Scheduler: a router's own plan assigns its gateways, another
// unit's plan only asks where it lives) and, in interconnect mode, the
// tunnel key allocator (tunnelkeys.Allocator: a unit takes the keys of its
// own switch and ports). Lock order, by structure: Input's mu, then an
// allocator's own mutex. The allocators are leaves: they import nothing
// of this package, take no callbacks and hold their mutex only inside one
// method, so Input may call them with mu held (read or write) and nothing
// ever waits for mu while holding theirs. Whatever they need of the input
// or of the NB (a router's need, what the NB holds) Input reads first and
// passes as data.
type Input struct {
	mu      sync.RWMutex
	sources map[string]*source
	homes   routerHomes

	routers  map[string]set[*routerDecl]  // by router name
	networks map[string]set[*networkDecl] // by network name
	vms      map[string]set[*vmDecl]      // by VMInterface.Network
	fips     map[string]set[*fipDecl]     // by FloatingIP.Router
	sgs      map[string]set[*sgDecl]      // by SecurityGroup.ID
	sgRules  map[string]set[*ruleDecl]    // by SecurityGroupRule.SecurityGroupID
	lbs      map[string]set[*lbDecl]      // by LoadBalancer.Network
	lbNames  map[string]set[*lbDecl]      // by LoadBalancer.Name
	// lbMembers are the load balancers by normalized member address, and
	// lbDown the members each zone's health checks find offline
	// (lbhealth.go).
	lbMembers map[string]set[*lbDecl]
	lbDown    map[string]set[OfflineMember]
	// rejectEmptyLB: see Snapshot.RejectEmptyLB.
	rejectEmptyLB bool
	// defaultDeny: see Snapshot.DefaultDeny.
	defaultDeny bool
	invalid     map[Unit]map[string]error // unit, then source

	// sgMembers are the VM interfaces bound to each security group by
	// network, sgNetGroups the groups with members on each network and
	// sgNodes the nodes of each group's members, with how many VM
	// interfaces (sgmembers.go); sgRemote the rules (embedded or not)
	// naming each group as their remote group (securitygroup.go).
	sgMembers   map[string]map[string]set[*vmDecl]
	sgNetGroups map[string]map[string]int
	sgNodes     map[string]map[string]int
	sgRemote    map[string]set[*ruleDecl]
	// portsMemo keeps each network's planned VM ports for the groups,
	// sgPlans each group's members as its last plan resolved them.
	portsMemo portsMemo
	sgPlans   sgMemos

	// The claims, by normalized SNAT IP and by network name, of every
	// declaration, eligible or not: who wins is decided when planning.
	snatClaims     map[string]set[*routerDecl]
	internalClaims map[string]set[*routerDecl]
	// externalDecls are the declarations with each external network.
	externalDecls map[string]set[*routerDecl]
	// The floating IPs by normalized floating IP and by normalized fixed
	// IP, and the VM interfaces by "network IP" (floatingip.go).
	fipClaims map[string]set[*fipDecl]
	fipFixed  map[string]set[*fipDecl]
	vmAddrs   map[string]set[*vmDecl]
	// gatewayRouters counts the declarations of a router name whose plan
	// chooses gateways (an external network, and SNAT or a floating IP:
	// hasGateway).
	gatewayRouters map[string]int

	// chassisKnown: the SB is given (SetChassis); sched assigns the
	// routers' gateways from its gateway chassis.
	chassisKnown bool
	sched        *gateways.Scheduler

	// nodeHosts are the chassis' hostnames: the names of the nodes
	// ovn-kubernetes gives a Logical_Switch each (see nodeSwitchErr).
	nodeHosts set[string]

	// Interconnect mode (zones.go): every chassis by name and hostname,
	// the names of those chassis, the zones, and the tunnel keys.
	nodes map[string]node
	// nodeChassis are every SB chassis by name and hostname (nil while no
	// SB is known): the requested-chassis of VM ports (migration.go).
	nodeChassis map[string]string
	// activated are the migrating VM ports whose target the SB showed
	// activated (SetActivated), by port name.
	activated map[string]activation
	// singleChassis: the OVN has no multi-chassis port binding (22.03).
	singleChassis bool
	// release is the OVN release of ovn-northd ("" unknown), monitorAll
	// the chassis (by name) whose ovn-controller monitors all of the SB
	// (release.go).
	release    string
	monitorAll set[string]
	// published are the activations the zones published, by port
	// (SetZoneActivations).
	published    map[string]PortActivation
	chassisNames []string
	zones        []string
	zoned        bool
	keys         *tunnelkeys.Allocator[Unit]
	// follow: plan from an allocator's decisions (zones.go);
	// interconnect: zoned even before any zone is known.
	follow, interconnect bool
	// followZone is the one zone a follower writes, "" when not known
	// (SetFollowerZone).
	followZone string
}

type set[K comparable] map[K]struct{}

func (s set[K]) add(k K) { s[k] = struct{}{} }

func (s set[K]) has(k K) bool {
	_, ok := s[k]
	return ok
}

func addTo[K comparable, V comparable](m map[K]set[V], k K, v V) {
	s := m[k]
	if s == nil {
		s = set[V]{}
		m[k] = s
	}
	s.add(v)
}

func removeFrom[K comparable, V comparable](m map[K]set[V], k K, v V) {
	if s := m[k]; s != nil {
		delete(s, v)
		if len(s) == 0 {
			delete(m, k)
		}
	}
}

// source is what one source last Set, grouped by the key a change is
// compared by: routers and networks by name, VMs by network.
type source struct {
	routers  map[string][]*routerDecl
	networks map[string][]*networkDecl
	vms      map[string][]*vmDecl
	fips     map[string][]*fipDecl
	sgs      map[string][]*sgDecl
	sgRules  map[string][]*ruleDecl
	lbs      map[string][]*lbDecl // by LoadBalancer.Name
	invalid  map[Unit]error
}

// pos orders the declarations of one key across sources as a Snapshot that
// concatenates the sources by name would: by source, then position.
type pos struct {
	source string
	idx    int
}

func (a pos) compare(b pos) int {
	return cmp.Or(strings.Compare(a.source, b.source), cmp.Compare(a.idx, b.idx))
}

type routerDecl struct {
	Router
	pos
	snat string // normalized SNAT IP this declaration claims, "" for none
	// snat6 is its normalized spec.external.ipv6, a claim as snat is.
	snat6 string
}

type networkDecl struct {
	Network
	pos
	valid *network // nil when errs
	errs  []error
}

type vmDecl struct {
	VMInterface
	pos
}

type lbDecl struct {
	LoadBalancer
	pos
}

type fipDecl struct {
	FloatingIP
	pos
	ip, fixed string // normalized FloatingIP.IP and FixedIP
}

// NewInput returns an empty input without Southbound chassis.
func NewInput() *Input {
	return &Input{
		sources:        map[string]*source{},
		routers:        map[string]set[*routerDecl]{},
		networks:       map[string]set[*networkDecl]{},
		vms:            map[string]set[*vmDecl]{},
		fips:           map[string]set[*fipDecl]{},
		sgs:            map[string]set[*sgDecl]{},
		sgRules:        map[string]set[*ruleDecl]{},
		sgMembers:      map[string]map[string]set[*vmDecl]{},
		sgNetGroups:    map[string]map[string]int{},
		sgNodes:        map[string]map[string]int{},
		sgRemote:       map[string]set[*ruleDecl]{},
		lbs:            map[string]set[*lbDecl]{},
		lbNames:        map[string]set[*lbDecl]{},
		lbMembers:      map[string]set[*lbDecl]{},
		lbDown:         map[string]set[OfflineMember]{},
		invalid:        map[Unit]map[string]error{},
		snatClaims:     map[string]set[*routerDecl]{},
		internalClaims: map[string]set[*routerDecl]{},
		externalDecls:  map[string]set[*routerDecl]{},
		fipClaims:      map[string]set[*fipDecl]{},
		fipFixed:       map[string]set[*fipDecl]{},
		vmAddrs:        map[string]set[*vmDecl]{},
		activated:      map[string]activation{},
		gatewayRouters: map[string]int{},
		sched:          gateways.New(),
	}
}

// NewInputFrom returns the input of snapshot s: one source holding all its
// objects, and its chassis. s.Held is not part of the input.
func NewInputFrom(s *Snapshot) *Input {
	in := NewInput()
	if s.Interconnect {
		in.SetInterconnect()
	}
	for _, source := range slices.Sorted(maps.Keys(s.ForeignKeys)) {
		in.SetForeignKeys(source, s.ForeignKeys[source])
	}
	in.rejectEmptyLB = s.RejectEmptyLB
	in.defaultDeny = s.DefaultDeny
	in.singleChassis = s.SingleChassis
	in.release = s.OVNRelease
	for _, zone := range slices.Sorted(maps.Keys(s.OfflineMembers)) {
		in.SetOfflineMembers(zone, s.OfflineMembers[zone])
	}
	in.Set("snapshot", s.Objects())
	in.SetChassis(s.Chassis, s.ChassisKnown)
	return in
}

// Set replaces the objects last set under source name with objs (empty objs
// remove them) and returns the units whose plan may have changed, sorted
// networks first: the units of the objects that changed and the units that
// share a claim or a network with them. Setting the same objects again
// returns nothing. Set costs what the source and the affected units cost.
func (in *Input) Set(name string, objs Objects) []Unit {
	in.mu.Lock()
	defer in.mu.Unlock()

	old := in.sources[name]
	if old == nil {
		old = &source{}
	}
	nw := newSource(name, objs)
	c := &setChange{affected: set[Unit]{}, routers: set[string]{}, networks: set[string]{}}
	in.replaceRouters(old, nw, c)
	in.replaceNetworks(old, nw, c)
	in.replaceVMs(old, nw, c)
	in.replaceFloatingIPs(old, nw, c)
	in.replaceSecurityGroups(old, nw, c)
	in.replaceLoadBalancers(old, nw, c)
	in.replaceInvalid(name, old, nw, c)
	if nw.empty() {
		delete(in.sources, name)
	} else {
		in.sources[name] = nw
	}

	in.affectedByNetworks(c)
	in.affectedByRouters(old, c)
	if len(in.published) > 0 {
		in.applyPublished(c.affected)
	}
	in.zoneAffected(c.affected)
	return sortedUnits(c.affected)
}

// setChange is what one Set changed, as its steps find it.
type setChange struct {
	// affected are the units whose plan may change.
	affected set[Unit]
	// routers are the router names whose declarations, or whose
	// eligibility for claims, changed.
	routers set[string]
	// networks are the network names whose declarations changed.
	networks set[string]
}

// newSource is objs as source name's declarations: copies (the caller may
// reuse objs), grouped by the key a change is compared by.
func newSource(name string, objs Objects) *source {
	s := &source{
		routers:  map[string][]*routerDecl{},
		networks: map[string][]*networkDecl{},
		vms:      map[string][]*vmDecl{},
		fips:     map[string][]*fipDecl{},
		sgs:      map[string][]*sgDecl{},
		sgRules:  map[string][]*ruleDecl{},
		lbs:      map[string][]*lbDecl{},
		invalid:  map[Unit]error{},
	}
	for i, r := range objs.Routers {
		s.routers[r.Name] = append(s.routers[r.Name], newRouterDecl(r, pos{name, i}))
	}
	for i, n := range objs.Networks {
		s.networks[n.Name] = append(s.networks[n.Name], &networkDecl{Network: cloneNetwork(n), pos: pos{name, i}})
	}
	for i, v := range objs.VMs {
		s.vms[v.Network] = append(s.vms[v.Network], &vmDecl{VMInterface: v, pos: pos{name, i}})
	}
	for i, f := range objs.FloatingIPs {
		s.fips[f.Router] = append(s.fips[f.Router], &fipDecl{FloatingIP: f, pos: pos{name, i}, ip: normalizeIP(f.IP), fixed: normalizeIP(f.FixedIP)})
	}
	for i, g := range objs.SecurityGroups {
		s.sgs[g.ID] = append(s.sgs[g.ID], newSGDecl(g, pos{name, i}))
	}
	for i, r := range objs.SecurityGroupRules {
		s.sgRules[r.SecurityGroupID] = append(s.sgRules[r.SecurityGroupID], &ruleDecl{SecurityGroupRule: r, pos: pos{name, i}})
	}
	for i, lb := range objs.LoadBalancers {
		d := &lbDecl{LoadBalancer: lb, pos: pos{name, i}}
		d.Members = slices.Clone(lb.Members)
		d.Rules = slices.Clone(lb.Rules)
		if lb.HealthCheck != nil {
			hc := *lb.HealthCheck
			d.HealthCheck = &hc
		}
		s.lbs[lb.Name] = append(s.lbs[lb.Name], d)
	}
	for u, err := range objs.Invalid {
		if err != nil {
			s.invalid[u] = err
		}
	}
	return s
}

// empty reports whether the source declares nothing, not even an
// undecodable object.
func (s *source) empty() bool {
	return len(s.routers)+len(s.networks)+len(s.vms)+len(s.fips)+len(s.sgs)+len(s.sgRules)+len(s.lbs)+len(s.invalid) == 0
}

// newRouterDecl is a copy of r at p with the SNAT IP it claims.
func newRouterDecl(r Router, p pos) *routerDecl {
	d := &routerDecl{Router: r, pos: p}
	d.Internal = slices.Clone(r.Internal)
	if r.External != nil {
		ext := *r.External
		d.External = &ext
		if ext.IP != "" {
			d.snat = normalizeIP(ext.IP)
		}
		if ext.IPv6 != "" {
			d.snat6 = normalizeIP(ext.IPv6)
		}
	}
	if r.PeerRouter != nil {
		pr := *r.PeerRouter
		d.PeerRouter = &pr
	}
	return d
}

// replaceChanged calls replace with the old and the new declarations of
// every key whose declarations differ between old and nw (same compares
// two). A key whose declarations are the same keeps the old ones in nw: the
// indexes hold those.
func replaceChanged[D any](old, nw map[string][]D, same func(a, b D) bool, replace func(key string, olds, news []D)) {
	for key, olds := range old {
		news, ok := nw[key]
		if ok && slices.EqualFunc(olds, news, same) {
			nw[key] = olds
			continue
		}
		replace(key, olds, news)
	}
	for key, news := range nw {
		if _, ok := old[key]; !ok {
			replace(key, nil, news)
		}
	}
}

// replaceRouters moves the router declarations that changed from old to nw
// in the router and claim indexes.
func (in *Input) replaceRouters(old, nw *source, c *setChange) {
	same := func(a, b *routerDecl) bool { return sameRouter(&a.Router, &b.Router) }
	replaceChanged(old.routers, nw.routers, same, func(key string, olds, news []*routerDecl) {
		for _, d := range olds {
			in.removeRouter(d)
		}
		for _, d := range news {
			in.addRouter(d)
		}
		c.routers.add(key)
	})
}

// replaceNetworks moves the network declarations that changed from old to
// nw in the network index, validating the new ones.
func (in *Input) replaceNetworks(old, nw *source, c *setChange) {
	same := func(a, b *networkDecl) bool { return reflect.DeepEqual(a.Network, b.Network) }
	replaceChanged(old.networks, nw.networks, same, func(key string, olds, news []*networkDecl) {
		for _, d := range olds {
			removeFrom(in.networks, key, d)
		}
		for _, d := range news {
			in.addNetwork(d)
		}
		in.touchSGNetwork(key)
		c.networks.add(key)
	})
}

// replaceVMs moves the VM interfaces that changed from old to nw in the VM
// indexes; their network's unit is affected, and the routers of the
// floating IPs bound to their addresses.
func (in *Input) replaceVMs(old, nw *source, c *setChange) {
	same := func(a, b *vmDecl) bool { return a.VMInterface == b.VMInterface }
	replaceChanged(old.vms, nw.vms, same, func(key string, olds, news []*vmDecl) {
		in.portsMemo.forget(key)
		in.touchSGNetwork(key)       // the groups it had members of
		defer in.touchSGNetwork(key) // and those it has
		// The interfaces that came, went or changed: their floating IPs'
		// routers are affected.
		had := make(map[VMInterface]bool, len(olds))
		for _, d := range olds {
			removeFrom(in.vms, key, d)
			in.removeVMAddr(d)
			in.removeVMGroups(d)
			had[d.VMInterface] = true
		}
		regrouped := regroupings(olds)
		for _, d := range news {
			addTo(in.vms, key, d)
			in.addVMAddr(d)
			in.addVMGroups(d)
			if old, ok := regrouped[withoutGroups(d.VMInterface)]; ok && !had[d.VMInterface] && had[old] {
				// Only its groups changed: only the groups it left or
				// joined are re-planned.
				in.affectedByVM(d, c.affected)
				in.affectedByRegrouping(&old, &d.VMInterface, c.affected)
				delete(had, old)
				continue
			}
			if !had[d.VMInterface] {
				in.affectedByVM(d, c.affected)
				in.affectedByVMGroups(&d.VMInterface, c.affected)
				in.affectedByAddrGroups(&d.VMInterface, c.affected)
			}
			delete(had, d.VMInterface)
		}
		for v := range had {
			in.affectedByVM(&vmDecl{VMInterface: v}, c.affected)
			in.affectedByVMGroups(&v, c.affected)
			in.affectedByAddrGroups(&v, c.affected)
		}
		c.affected.add(Unit{Kind: KindNetwork, Name: key})
		// Members and VIPs of the network's load balancers are checked
		// against its VM ports.
		if len(in.lbs[key]) > 0 {
			in.addRouterNames(c.affected, in.internalClaims[key])
			in.affectedSiblings(key, c.affected)
		}
	})
}

// replaceFloatingIPs moves the floating IPs that changed from old to nw
// in the floating IP index; the unit of the router they name is affected.
func (in *Input) replaceFloatingIPs(old, nw *source, c *setChange) {
	same := func(a, b *fipDecl) bool { return sameFloatingIP(&a.FloatingIP, &b.FloatingIP) }
	replaceChanged(old.fips, nw.fips, same, func(key string, olds, news []*fipDecl) {
		for _, d := range olds {
			in.removeFloatingIP(d)
			in.affectedByFloatingIP(d, c.affected)
		}
		for _, d := range news {
			in.addFloatingIP(d)
			in.affectedByFloatingIP(d, c.affected)
		}
		in.refreshGatewayRouter(key)
		c.affected.add(Unit{Kind: KindRouter, Name: key})
	})
}

// replaceInvalid replaces source name's undecodable objects, old's by nw's,
// in the index of invalid units; a unit whose error came, went or changed
// is affected.
func (in *Input) replaceInvalid(name string, old, nw *source, c *setChange) {
	for u, err := range old.invalid {
		e, ok := nw.invalid[u]
		if !ok || e.Error() != err.Error() {
			c.invalidChanged(u)
		}
		if !ok {
			delete(in.invalid[u], name)
			if len(in.invalid[u]) == 0 {
				delete(in.invalid, u)
			}
		}
	}
	for u, err := range nw.invalid {
		if _, ok := old.invalid[u]; !ok {
			c.invalidChanged(u)
		}
		if in.invalid[u] == nil {
			in.invalid[u] = map[string]error{}
		}
		in.invalid[u][name] = err
	}
}

// invalidChanged records that the undecodable object of unit u changed.
func (c *setChange) invalidChanged(u Unit) {
	c.affected.add(u)
	if u.Kind == KindRouter {
		// An undecodable router takes part in no claim.
		c.routers.add(u.Name)
	}
}

// affectedByNetworks adds the networks that changed and the routers on
// them: a network's routers validate against it.
func (in *Input) affectedByNetworks(c *setChange) {
	for n := range c.networks {
		c.affected.add(Unit{Kind: KindNetwork, Name: n})
		in.affectedByNetworkGroups(n, c.affected)
		in.addRouterNames(c.affected, in.internalClaims[n])
		in.addRouterNames(c.affected, in.externalDecls[n])
		in.affectedSiblings(n, c.affected)
	}
}

// affectedByRouters adds the routers that changed, or whose eligibility for
// claims did, and with each the routers competing for any claim one of its
// declarations makes or made, and the routers whose internal network is
// its external one (their error names the first router with that external
// network). In interconnect mode it adds the networks it is or was on:
// they gain or lose it in its home zone. old is the source before the Set:
// its declarations of a changed router are gone from the indexes, yet the
// routers they competed with are affected.
func (in *Input) affectedByRouters(old *source, c *setChange) {
	for r := range c.routers {
		c.affected.add(Unit{Kind: KindRouter, Name: r})
		// A declaration that stayed (an undecodable twin changed) is also
		// in in.routers: adding its rivals twice adds nothing.
		for _, d := range old.routers[r] {
			in.affectedByClaims(d, c.affected)
		}
		for d := range in.routers[r] {
			in.affectedByClaims(d, c.affected)
		}
	}
}

// affectedByClaims adds the routers competing with declaration d for a
// claim, and in interconnect mode the networks d is on.
func (in *Input) affectedByClaims(d *routerDecl, affected set[Unit]) {
	if d.snat != "" {
		in.addRouterNames(affected, in.snatClaims[d.snat])
	}
	if d.snat6 != "" {
		in.addRouterNames(affected, in.snatClaims[d.snat6])
		addFloatingIPRouters(affected, in.fipClaims[d.snat6])
	}
	for _, n := range d.Internal {
		in.addRouterNames(affected, in.internalClaims[n])
	}
	if d.External != nil && d.External.Network != "" {
		in.addRouterNames(affected, in.internalClaims[d.External.Network])
	}
	if d.snat != "" {
		// A floating IP may not be any router's SNAT IP.
		addFloatingIPRouters(affected, in.fipClaims[d.snat])
	}
	in.affectedByRouterSiblings(d, affected)
	if in.zoned {
		for _, n := range d.Internal {
			affected.add(Unit{Kind: KindNetwork, Name: n})
		}
		if d.External != nil {
			affected.add(Unit{Kind: KindNetwork, Name: d.External.Network})
		}
	}
}

func (in *Input) addRouterNames(affected set[Unit], decls set[*routerDecl]) {
	for d := range decls {
		affected.add(Unit{Kind: KindRouter, Name: d.Name})
	}
}

func (in *Input) addRouter(d *routerDecl) {
	addTo(in.routers, d.Name, d)
	if d.snat != "" {
		addTo(in.snatClaims, d.snat, d)
	}
	if d.snat6 != "" {
		addTo(in.snatClaims, d.snat6, d)
	}
	for _, n := range d.Internal {
		addTo(in.internalClaims, n, d)
	}
	if d.External != nil && d.External.Network != "" {
		addTo(in.externalDecls, d.External.Network, d)
	}
	in.refreshGatewayRouter(d.Name)
}

func (in *Input) removeRouter(d *routerDecl) {
	removeFrom(in.routers, d.Name, d)
	if d.snat != "" {
		removeFrom(in.snatClaims, d.snat, d)
	}
	if d.snat6 != "" {
		removeFrom(in.snatClaims, d.snat6, d)
	}
	for _, n := range d.Internal {
		removeFrom(in.internalClaims, n, d)
	}
	if d.External != nil && d.External.Network != "" {
		removeFrom(in.externalDecls, d.External.Network, d)
	}
	in.refreshGatewayRouter(d.Name)
}

// refreshGatewayRouter counts the declarations of router name whose plan
// has a gateway (gatewayRouters); when none is left, the scheduler
// releases its gateways.
func (in *Input) refreshGatewayRouter(name string) {
	n := 0
	for d := range in.routers[name] {
		if in.hasGateway(d) {
			n++
		}
	}
	if n > 0 {
		in.gatewayRouters[name] = n
		return
	}
	if _, ok := in.gatewayRouters[name]; ok {
		delete(in.gatewayRouters, name)
		in.sched.Release(name)
	}
}

func (in *Input) addNetwork(d *networkDecl) {
	d.valid, d.errs = validateNetwork(&d.Network)
	if len(d.errs) > 0 {
		d.valid = nil
	}
	addTo(in.networks, d.Name, d)
}

// SetChassis sets the SB chassis (known false: no SB is given) and returns
// the routers whose gateway order changes (see package gateways): those
// that used a chassis that went or have room for a new failover
// candidate. It returns nothing when the gateway candidates are unchanged.
func (in *Input) SetChassis(chassis []Chassis, known bool) []Unit {
	in.mu.Lock()
	defer in.mu.Unlock()
	renamed := in.setNodeHosts(chassis)
	in.monitorAll = set[string]{}
	for _, c := range chassis {
		if c.MonitorAll {
			in.monitorAll.add(c.Name)
		}
	}
	changed := in.sched.SetChassis(gatewayChassis(chassis))
	var nc map[string]string
	if known {
		nc = nodeChassis(chassis)
	}
	// A node whose chassis changed changes what its VMs' ports request:
	// their networks are planned again.
	old := in.nodeChassis
	chassisMoved := (old == nil) != (nc == nil) || !maps.Equal(old, nc)
	in.nodeChassis = nc
	if in.setNodes(chassis) {
		// A chassis came, went or changed zone: every unit's zones may
		// change (rare: a node joins or leaves).
		in.chassisKnown = known
		in.reassignGateways()
		all := set[Unit]{}
		for n := range in.networks {
			all.add(Unit{Kind: KindNetwork, Name: n})
		}
		for r := range in.routers {
			all.add(Unit{Kind: KindRouter, Name: r})
		}
		for g := range in.sgs {
			all.add(Unit{Kind: KindSecurityGroup, Name: g})
		}
		return sortedUnits(all)
	}
	same := known == in.chassisKnown && (!known || !changed)
	in.chassisKnown = known
	affected := set[Unit]{}
	if !same {
		affected = in.reassignGateways()
		in.zoneAffected(affected)
	}
	for _, u := range renamed {
		affected.add(u)
	}
	if chassisMoved {
		for n, decls := range in.vms {
			for d := range decls {
				if bindingChanged(&d.VMInterface, old, nc) {
					affected.add(Unit{Kind: KindNetwork, Name: n})
					break
				}
			}
		}
	}
	return sortedUnits(affected)
}

// bindingChanged says whether v's port binding (vmPortBinding) differs
// between chassis maps old and new.
func bindingChanged(v *VMInterface, old, new map[string]string) bool {
	o, _ := vmPortBinding(v, old)
	n, _ := vmPortBinding(v, new)
	return !maps.Equal(o, n)
}

// setNodeHosts records the chassis' hostnames and returns the networks
// whose switch name became or stopped being one of them. Callers hold
// in.mu (write).
func (in *Input) setNodeHosts(chassis []Chassis) []Unit {
	hosts := set[string]{}
	for _, c := range chassis {
		if c.Hostname != "" {
			hosts.add(c.Hostname)
		}
	}
	var out []Unit
	for n := range in.networks {
		sw := SwitchName(n)
		if _, was := in.nodeHosts[sw]; was != hostsHas(hosts, sw) {
			out = append(out, Unit{Kind: KindNetwork, Name: n})
		}
	}
	in.nodeHosts = hosts
	return out
}

func hostsHas(s set[string], k string) bool {
	_, ok := s[k]
	return ok
}

// Units lists every unit of the input, valid or not, networks first, then by
// name.
func (in *Input) Units() []Unit {
	in.mu.RLock()
	defer in.mu.RUnlock()
	units := set[Unit]{}
	for n := range in.networks {
		units.add(Unit{Kind: KindNetwork, Name: n})
	}
	for r := range in.routers {
		units.add(Unit{Kind: KindRouter, Name: r})
	}
	for r := range in.fips {
		units.add(Unit{Kind: KindRouter, Name: r})
	}
	for g := range in.sgs {
		units.add(Unit{Kind: KindSecurityGroup, Name: g})
	}
	for u := range in.invalid {
		units.add(u)
	}
	return sortedUnits(units)
}

// ReconcileOrder is every unit of the input in the order a controller best
// reconciles them all at once (a start, a resync): first the networks that
// several routers hang from (an external network), then each router, in
// name order, right after the networks only it hangs from, then the other
// networks, the security groups (their Port_Groups refer to the networks'
// VM ports), the invalid units and the routers only floating IPs name.
// Taken in batches in this order, a router
// mostly comes with its own networks, whose switches are written in its
// transaction; one hanging from a shared network written by another batch
// would have to wait for that batch.
func (in *Input) ReconcileOrder() []Unit {
	in.mu.RLock()
	defer in.mu.RUnlock()
	users := map[string]int{}
	networksOf := map[string][]string{}
	for name := range in.routers {
		seen := set[string]{}
		for d := range in.routers[name] {
			for _, n := range d.Internal {
				seen.add(n)
			}
			if d.External != nil {
				seen.add(d.External.Network)
			}
		}
		for n := range seen {
			users[n]++
		}
		networksOf[name] = slices.Sorted(maps.Keys(seen))
	}
	out := make([]Unit, 0, len(in.routers)+len(in.networks)+len(in.invalid))
	done := set[Unit]{}
	add := func(u Unit) {
		if _, ok := done[u]; !ok {
			done.add(u)
			out = append(out, u)
		}
	}
	addNetwork := func(n string) {
		if _, ok := in.networks[n]; ok {
			add(Unit{Kind: KindNetwork, Name: n})
		}
	}
	for _, n := range slices.Sorted(maps.Keys(users)) {
		if users[n] > 1 {
			addNetwork(n)
		}
	}
	for _, r := range slices.Sorted(maps.Keys(in.routers)) {
		for _, n := range networksOf[r] {
			addNetwork(n)
		}
		add(Unit{Kind: KindRouter, Name: r})
	}
	for _, n := range slices.Sorted(maps.Keys(in.networks)) {
		addNetwork(n)
	}
	// Security groups refer to the VM ports of networks: after them.
	for _, g := range slices.Sorted(maps.Keys(in.sgs)) {
		add(Unit{Kind: KindSecurityGroup, Name: g})
	}
	invalid := set[Unit]{}
	for u := range in.invalid {
		invalid.add(u)
	}
	for r := range in.fips {
		// Floating IPs naming a router that is not declared: their status.
		invalid.add(Unit{Kind: KindRouter, Name: r})
	}
	for _, u := range sortedUnits(invalid) {
		add(u)
	}
	return out
}

// Routers are the routers the input declares, valid or not, in name
// order and, for a name declared twice, in the order its declarations win.
func (in *Input) Routers() []Router {
	in.mu.RLock()
	defer in.mu.RUnlock()
	var out []Router
	for _, name := range slices.Sorted(maps.Keys(in.routers)) {
		for _, d := range in.routerDecls(name) {
			out = append(out, d.Router)
		}
	}
	return out
}

// Counts says how many router and network names the input declares.
func (in *Input) Counts() (routers, networks int) {
	in.mu.RLock()
	defer in.mu.RUnlock()
	return len(in.routers), len(in.networks)
}

// Empty reports whether the input declares no router and no network.
func (in *Input) Empty() bool {
	r, n := in.Counts()
	return r == 0 && n == 0
}

func sortedUnits(s set[Unit]) []Unit {
	if len(s) == 0 {
		return nil
	}
	out := make([]Unit, 0, len(s))
	for u := range s {
		out = append(out, u)
	}
	slices.SortFunc(out, CompareUnits)
	return out
}

// CompareUnits orders units as they are planned and committed: networks
// before routers (a router's ports go on its networks' switches), routers
// before the rest (security groups: their Port_Groups refer to the
// networks' ports, and a router's traffic does not wait for them), then
// by name.
func CompareUnits(a, b Unit) int {
	rank := func(k OwnerKind) int {
		switch k {
		case KindNetwork:
			return 0
		case KindRouter:
			return 1
		}
		return 2
	}
	return cmp.Or(cmp.Compare(rank(a.Kind), rank(b.Kind)), strings.Compare(string(a.Kind), string(b.Kind)), strings.Compare(a.Name, b.Name))
}

// sameRouter reports whether a and b plan alike: equal fields, creation
// times equal as instants.
func sameRouter(a, b *Router) bool {
	return a.Name == b.Name && a.MAC == b.MAC && a.Description == b.Description &&
		a.EnableSNAT == b.EnableSNAT && slices.Equal(a.Internal, b.Internal) &&
		equalPtr(a.External, b.External) && equalPtr(a.PeerRouter, b.PeerRouter) &&
		a.Gateway == b.Gateway && a.Created.Equal(b.Created) && a.Generation == b.Generation
}

// sameFloatingIP reports whether a and b plan alike: equal fields,
// creation times equal as instants.
func sameFloatingIP(a, b *FloatingIP) bool {
	x, y := *a, *b
	x.Created, y.Created = time.Time{}, time.Time{}
	return x == y && a.Created.Equal(b.Created)
}

func equalPtr[T comparable](a, b *T) bool {
	return a == b || a != nil && b != nil && *a == *b
}

func cloneNetwork(n Network) Network {
	n.HostRoutes = slices.Clone(n.HostRoutes)
	n.DNSes = slices.Clone(n.DNSes)
	n.IPPool, n.IPv6Pool = clonePool(n.IPPool), clonePool(n.IPv6Pool)
	return n
}

func clonePool(p *IPPool) *IPPool {
	if p == nil {
		return nil
	}
	c := *p
	return &c
}

// invalidErr is the decoding error of unit u, from the first source by
// name when several give one.
func (in *Input) invalidErr(u Unit) error {
	var first string
	var err error
	for src, e := range in.invalid[u] {
		if err == nil || src < first {
			first, err = src, e
		}
	}
	return err
}

// routerDecls are the declarations of router name in claim order: by
// creation time, then (the name being the same) as a snapshot lists them.
func (in *Input) routerDecls(name string) []*routerDecl {
	out := make([]*routerDecl, 0, len(in.routers[name]))
	for d := range in.routers[name] {
		out = append(out, d)
	}
	slices.SortFunc(out, func(a, b *routerDecl) int {
		return cmp.Or(a.Created.Compare(b.Created), a.pos.compare(b.pos))
	})
	return out
}

// eligible reports whether declaration d takes part in claims: its router
// is declared once and decoded.
func (in *Input) eligible(d *routerDecl) bool {
	return len(in.routers[d.Name]) == 1 && len(in.invalid[Unit{Kind: KindRouter, Name: d.Name}]) == 0
}

// claimOwner is who gets a claim among claimants (the declarations that
// make it): the router the NB shows holding it while that router's input
// still makes the claim, else the first eligible claimant by creation time
// and name. ok is false when no claimant is eligible.
func (in *Input) claimOwner(claimants set[*routerDecl], holder string) (owner string, ok bool) {
	var first *routerDecl
	for d := range claimants {
		if !in.eligible(d) {
			continue
		}
		if d.Name == holder {
			return d.Name, true
		}
		if first == nil || compareClaimOrder(d, first) < 0 {
			first = d
		}
	}
	if first == nil {
		return "", false
	}
	return first.Name, true
}

func compareClaimOrder(a, b *routerDecl) int {
	return cmp.Or(a.Created.Compare(b.Created), strings.Compare(a.Name, b.Name), a.pos.compare(b.pos))
}

// firstExternal is the first router, by creation time and name, of all
// declarations that have network as their external network.
func (in *Input) firstExternal(network string) (string, bool) {
	var first *routerDecl
	for d := range in.externalDecls[network] {
		if first == nil || compareClaimOrder(d, first) < 0 {
			first = d
		}
	}
	if first == nil {
		return "", false
	}
	return first.Name, true
}

// validNetwork is network name when it is declared once and valid. An
// undecodable object of the same name in another source fails the network's
// unit but does not hide the valid declaration from its routers, as in
// Build; without one, routers fail as on an unknown network.
func (in *Input) validNetwork(name string) (*network, bool) {
	defs := in.networks[name]
	if len(defs) != 1 {
		return nil, false
	}
	for d := range defs {
		return d.valid, d.valid != nil
	}
	return nil, false
}
