package translator

import (
	"slices"
	"strings"

	"github.com/ovn-kubernetes/libovsdb/model"

	"github.com/kubevirt-ovn/kubevirt-ovn/nbmodel"
)

// A VM on another internal network of a load balancer's router reaches
// its VIP through its own switch. The router's own Load_Balancer rows do
// not serve it: on a router with a distributed gateway port, OVN balances
// only on the gateway chassis (is_chassis_resident of the gateway port),
// elsewhere the router routes the VIP to the load balancer's network and
// ARPs for it there, unanswered; and a switch does not balance what comes
// from its router port. So each internal network's switch refers to rows
// of its own (SiblingLoadBalancerName) for the load balancers of the other
// internal networks of the routers that declare it: OVN balances on the
// client's switch, the router then routes to the chosen member, and the
// member's reply is turned back into the VIP's address on the way out of
// the client's switch. The network owns those rows (a reference to the
// rows of the load balancer's own network would tie two networks' units
// to each other both ways, and units synced apart could then never
// settle).
//
// In interconnect mode the sibling rows go, as the switch's own load
// balancer rows do, to every zone that holds the sibling network's switch
// (zoneNetwork): OVN balances in the client's zone, the router's
// switch-side port there (a remote port bound to the router's home
// chassis) takes the flow to the router, and the reply is un-DNATed in the
// client's zone on its way out of the switch. Their health checks differ
// in one way (zoneSiblingLB): ovn-northd leaves a health-checked member
// out of a VIP when its ip_port_mappings names a port the zone's NB lacks,
// and a zone of the sibling network's switch may hold no switch of the
// load balancer's network, so no member's port, local or remote. A zone
// where no member's port is local probes none of them anyway, so there
// the rows have no ip_port_mappings and no health checks, and a member
// offline in its own zone is left out of the VIP's backends (zoneLB, as
// for every zone that is not the member's).

// SiblingLoadBalancerName is the Load_Balancer row of a LoadBalancer for
// one protocol on the switch of network, another internal network of its
// router. The LoadBalancer's name and the network's hold no '_', so it
// never meets another row's name.
func SiblingLoadBalancerName(lb, proto, network string) string {
	return LoadBalancerName(lb, proto) + "_from_" + network
}

// siblingNetworks are the internal networks other than n of the routers
// that declare n internal, sorted. (Declared, not won: which router holds
// a contested network does not change the rows.)
func (in *Input) siblingNetworks(n string) []string {
	var out []string
	for d := range in.internalClaims[n] {
		for _, m := range d.Internal {
			if m != n {
				out = append(out, m)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// siblingLoadBalancers are the rows of valid network n's switch for the
// valid load balancers on its sibling networks, and their health checks.
func (in *Input) siblingLoadBalancers(n *network, instance string) ([]*nbmodel.LoadBalancer, []LBHealthCheckRow) {
	var out []*nbmodel.LoadBalancer
	var hcs []LBHealthCheckRow
	ids := func() map[string]string { return OwnerIDs(instance, Unit{Kind: KindNetwork, Name: n.Name}) }
	for _, name := range in.siblingNetworks(n.Name) {
		m, ok := in.validNetwork(name)
		if !ok {
			continue
		}
		for _, d := range in.lbDecls(m.Name) {
			lb, err := in.checkLoadBalancer(d, m)
			if err != nil {
				continue
			}
			for _, proto := range lb.protocols() {
				row, rowHCs := lb.row(SiblingLoadBalancerName(d.Name, proto, n.Name), proto, []string{lb.vip.String()}, ids, in.rejectEmptyLB)
				out = append(out, row)
				hcs = append(hcs, rowHCs...)
			}
		}
	}
	return out, hcs
}

// withSiblingLoadBalancers adds the sibling rows to network plan np of
// valid network n, keeping its rows sorted by name.
func (in *Input) withSiblingLoadBalancers(np *NetworkPlan, n *network, instance string) {
	rows, hcs := in.siblingLoadBalancers(n, instance)
	if len(rows) == 0 {
		return
	}
	np.LoadBalancers = append(np.LoadBalancers, rows...)
	np.LBHealthChecks = append(np.LBHealthChecks, hcs...)
	slices.SortFunc(np.LoadBalancers, func(a, b *nbmodel.LoadBalancer) int { return strings.Compare(a.Name, b.Name) })
	sortHealthChecks(np.LBHealthChecks)
}

// affectedSiblings adds the sibling networks of network n when it has
// load balancers: their switches carry its load balancers' rows.
func (in *Input) affectedSiblings(n string, affected set[Unit]) {
	if len(in.lbs[n]) == 0 {
		return
	}
	for _, m := range in.siblingNetworks(n) {
		affected.add(Unit{Kind: KindNetwork, Name: m})
	}
}

// affectedByRouterSiblings adds the internal networks of router
// declaration d when one of them has load balancers: its declaration
// makes them siblings.
func (in *Input) affectedByRouterSiblings(d *routerDecl, affected set[Unit]) {
	if !slices.ContainsFunc(d.Internal, func(n string) bool { return len(in.lbs[n]) > 0 }) {
		return
	}
	for _, n := range d.Internal {
		affected.add(Unit{Kind: KindNetwork, Name: n})
	}
}

// zoneSiblingLB is lb, one of network's rows, as zone z holds it: a
// sibling row with a health check whose members' ports are all in other
// zones is, in z, without ip_port_mappings and health checks, and without
// the members their own zones find offline (see above); every other row
// is zoneLB's. It says whether z keeps lb's health checks. Callers hold
// in.mu (read).
func (in *Input) zoneSiblingLB(lb *nbmodel.LoadBalancer, network, z string) (*nbmodel.LoadBalancer, bool) {
	if len(lb.IPPortMappings) == 0 || lb.Protocol == nil || lb.Name != SiblingLoadBalancerName(lb.ExternalIDs[KeyLoadBalancer], *lb.Protocol, network) {
		return in.zoneLB(lb, z), true
	}
	for ip, mapping := range lb.IPPortMappings {
		lsp, _, _ := strings.Cut(mapping, ":")
		if in.portZone(lb, ip, lsp) == z {
			return in.zoneLB(lb, z), true
		}
	}
	// No member's zone is z: zoneLB leaves out every member offline in
	// its own zone.
	out := model.Clone(in.zoneLB(lb, z)).(*nbmodel.LoadBalancer)
	out.IPPortMappings = nil
	return out, false
}
