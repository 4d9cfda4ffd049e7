package translator

import (
	"cmp"
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/kubevirt-ovn/kubevirt-ovn/nbmodel"
)

// Load balancers (kubevirt.io/v1 LoadBalancer, as ONOS kubevirt-networking
// had them) belong to the unit of the router that has their network
// (spec.networkId) as an internal network, as floating IPs belong to the
// router they name. A valid load balancer is one Load_Balancer row per
// protocol of its rules (LoadBalancerName), referenced from the router's
// load_balancer column: on a router with a distributed gateway port OVN
// balances on the gateway chassis, ONOS's centralized semantics. Its VIP
// keys are "<vip>:<port>" for every port of its tcp and udp rules (ranges
// expanded up to LBMaxPortRange ports), and a port-less "<vip>" on an
// icmp row: OVN cannot balance ICMP alone, a port-less VIP takes all IP
// traffic to the VIP (NOTES §7.3). A member's port is the VIP's port (no
// port translation, as ONOS).
//
// A floating IP whose fixed IP is a valid load balancer's VIP gets no NAT
// row: a router NAT does not chain into a load balancer. Its address
// becomes an extra VIP key "<floatingIp>:<port>" on the same rows, which
// nat-addresses=router answers ARP for on the gateway chassis.
//
// The network's switch has rows of its own with the VIP keys (the
// network's unit plans them: switchLoadBalancers), so that the VIP works
// from inside the network, where the router balances nothing (it balances
// only on the gateway chassis).
//
// A load balancer's own error never fails its router or its network: it
// is reported in its status and its rows are left out.

// LBHealthDefaults are OVN's defaults of a health check's options
// (ovn-nb(5), Load_Balancer_Health_Check), written explicitly where a
// LoadBalancer's spec.healthCheck leaves them out.
var LBHealthDefaults = LBHealthCheck{Interval: 5, Timeout: 20, SuccessCount: 3, FailureCount: 3}

// LBHealthCheckRow is a Load_Balancer_Health_Check row and the key (name)
// of the Load_Balancer row holding it.
type LBHealthCheckRow struct {
	LoadBalancer string
	Row          *nbmodel.LoadBalancerHealthCheck
}

// LBMaxPortRange is the most ports a tcp or udp rule's range may span: OVN
// has no range VIPs, each port is one VIP key (and one set of flows).
const LBMaxPortRange = 64

// Load balancer protocols as rows name them.
const (
	lbTCP  = "tcp"
	lbUDP  = "udp"
	lbICMP = "icmp"
)

func (in *Input) addLoadBalancer(d *lbDecl) {
	addTo(in.lbs, d.Network, d)
	addTo(in.lbNames, d.Name, d)
	in.addLBMembers(d)
}

func (in *Input) removeLoadBalancer(d *lbDecl) {
	removeFrom(in.lbs, d.Network, d)
	removeFrom(in.lbNames, d.Name, d)
	in.removeLBMembers(d)
}

// replaceLoadBalancers moves the load balancers that changed from old to
// nw in the load balancer indexes; the units of their networks and of the
// routers on them are affected, and those of the load balancers of the
// same name (a name declared twice is an error of each).
func (in *Input) replaceLoadBalancers(old, nw *source, c *setChange) {
	same := func(a, b *lbDecl) bool { return sameLoadBalancer(&a.LoadBalancer, &b.LoadBalancer) }
	replaceChanged(old.lbs, nw.lbs, same, func(key string, olds, news []*lbDecl) {
		for _, d := range olds {
			in.removeLoadBalancer(d)
			in.affectedByLoadBalancer(d, c.affected)
		}
		for _, d := range news {
			in.addLoadBalancer(d)
			in.affectedByLoadBalancer(d, c.affected)
		}
		for d := range in.lbNames[key] {
			in.affectedByLoadBalancer(d, c.affected)
		}
	})
}

func (in *Input) affectedByLoadBalancer(d *lbDecl, affected set[Unit]) {
	affected.add(Unit{Kind: KindNetwork, Name: d.Network})
	in.addRouterNames(affected, in.internalClaims[d.Network])
	for _, m := range in.siblingNetworks(d.Network) {
		affected.add(Unit{Kind: KindNetwork, Name: m})
	}
}

func sameLoadBalancer(a, b *LoadBalancer) bool {
	x, y := *a, *b
	x.Created, y.Created = time.Time{}, time.Time{}
	return reflect.DeepEqual(x, y) && a.Created.Equal(b.Created)
}

func lbErr(name, field, format string, args ...any) *InputError {
	return &InputError{Kind: ObjLoadBalancer, Object: name, Field: field, Msg: fmt.Sprintf(format, args...)}
}

// plannedLB is a load balancer that passed its checks.
type plannedLB struct {
	d       *lbDecl
	vip     netip.Addr
	members []string // normalized, sorted
	// ports are the VIP ports by protocol (tcp, udp), sorted; icmp: a
	// port-less VIP.
	ports map[string][]int
	icmp  bool
	// fips are the floating IPs bound to its VIP (external IPs), sorted;
	// fipIDs their spec.id, in the same order.
	fips   []string
	fipIDs []string
	// ports are the members' VM ports, by member; hc its health check
	// (defaults filled in) and hcSource its source IP, nil and "" for
	// none.
	memberPorts map[string]string
	hc          *LBHealthCheck
	// notes say what of its spec was left aside (members that are no VM
	// port, unusable port ranges): the Reason of its Ready status.
	notes []string
}

// reason is the Reason of valid lb's Ready status: its notes, then more.
func (lb *plannedLB) reason(more ...string) string {
	return strings.Join(append(slices.Clip(lb.notes), more...), "; ")
}

// lbDecls are the load balancers on network name, by name then position.
func (in *Input) lbDecls(network string) []*lbDecl {
	out := make([]*lbDecl, 0, len(in.lbs[network]))
	for d := range in.lbs[network] {
		out = append(out, d)
	}
	slices.SortFunc(out, func(a, b *lbDecl) int { return cmp.Or(strings.Compare(a.Name, b.Name), a.pos.compare(b.pos)) })
	return out
}

// planLoadBalancers checks the load balancers on the internal networks of
// router r: their status, by name, and the valid ones, by name.
func (in *Input) planLoadBalancers(r *router) ([]LoadBalancerStatus, []*plannedLB) {
	var statuses []LoadBalancerStatus
	var valid []*plannedLB
	for _, n := range r.internal {
		for _, d := range in.lbDecls(n.Name) {
			st := LoadBalancerStatus{Name: d.Name, Generation: d.Generation, Router: r.Name}
			lb, err := in.checkLoadBalancer(d, n)
			if err != nil {
				st.Reason, st.Err = err.Error(), err
			} else {
				st.Ready, st.Reason = true, lb.reason()
				valid = append(valid, lb)
			}
			statuses = append(statuses, st)
		}
	}
	slices.SortStableFunc(statuses, func(a, b LoadBalancerStatus) int { return strings.Compare(a.Name, b.Name) })
	slices.SortFunc(valid, func(a, b *plannedLB) int { return strings.Compare(a.d.Name, b.d.Name) })
	return statuses, valid
}

// checkLoadBalancer checks load balancer d on its valid network n: its
// name, its VIP, its members (VM ports on n) and its rules.
func (in *Input) checkLoadBalancer(d *lbDecl, n *network) (*plannedLB, *InputError) {
	if k := len(in.lbNames[d.Name]); k > 1 {
		return nil, lbErr(d.Name, "metadata.name", "is declared %d times", k)
	}
	if msg := badName(d.Name, validation.IsDNS1123Subdomain); msg != "" {
		return nil, lbErr(d.Name, "metadata.name", "%s", msg)
	}
	if d.ID == "" {
		return nil, lbErr(d.Name, "spec.name", "is required")
	}
	lb := &plannedLB{d: d, ports: map[string][]int{}, memberPorts: map[string]string{}}
	vip, err := lbVIP(d, n)
	if err != nil {
		return nil, err
	}
	for o := range in.lbs[n.Name] {
		if o != d && o.Name < d.Name && normalizeIP(o.VIP) == vip.String() {
			return nil, lbErr(d.Name, "spec.vip", "%s is already the VIP of LoadBalancer %s", vip, o.Name)
		}
	}
	if port := in.vmPortOf(n, vip); port != "" {
		return nil, lbErr(d.Name, "spec.vip", "%s is the address of VM port %s on network %s", vip, port, n.Name)
	}
	lb.vip = vip
	// A member that is no VM port (a stopped VM's: KubeVirt deletes its
	// VMI), or the VIP, is left out with a note, as ONOS skipped it: one
	// member must not take the whole load balancer down. A member listed
	// twice is one (ONOS kept a set).
	for i, m := range d.Members {
		field := fmt.Sprintf("spec.members[%d]", i)
		ip, err := netip.ParseAddr(m)
		switch {
		case err != nil || ip.Zone() != "":
			return nil, lbErr(d.Name, field, "%q is not an IP address", m)
		case ip.Is4In6():
			ip = ip.Unmap()
		}
		if ip.Is6() != vip.Is6() {
			lb.notes = append(lb.notes, fmt.Sprintf("%s %s is not of the VIP's family (%s): left out", field, ip, vip))
			continue
		}
		if slices.Contains(lb.members, ip.String()) {
			continue
		}
		if ip == vip {
			lb.notes = append(lb.notes, fmt.Sprintf("%s %s is the VIP: left out", field, ip))
			continue
		}
		port := in.vmPortOf(n, ip)
		if port == "" {
			lb.notes = append(lb.notes, fmt.Sprintf("%s %s is no VM port on network %s: left out until it is one", field, ip, n.Name))
			continue
		}
		lb.members = append(lb.members, ip.String())
		lb.memberPorts[ip.String()] = port
	}
	slices.SortFunc(lb.members, func(a, b string) int {
		return netip.MustParseAddr(a).Compare(netip.MustParseAddr(b))
	})
	for i, r := range d.Rules {
		field := fmt.Sprintf("spec.rules[%d]", i)
		proto := strings.ToLower(r.Protocol)
		switch proto {
		case lbICMP:
			lb.icmp = true
			continue
		case lbTCP, lbUDP:
		case "":
			return nil, lbErr(d.Name, field+".protocol", "is required (tcp, udp or icmp)")
		default:
			return nil, lbErr(d.Name, field+".protocol", "%q is not tcp, udp or icmp", r.Protocol)
		}
		hi := r.PortMax
		if hi == 0 {
			hi = r.PortMin
		}
		// A portRangeMax that makes no range of at most LBMaxPortRange
		// ports is left aside with a note, and portRangeMin alone is
		// balanced: all ONOS ever balanced of a rule.
		switch {
		case r.PortMin < 1 || r.PortMin > 65535:
			return nil, lbErr(d.Name, field+".portRangeMin", "%d is not a port (1-65535)", r.PortMin)
		case hi < r.PortMin || hi > 65535:
			lb.notes = append(lb.notes, fmt.Sprintf("%s.portRangeMax %d is not a port from portRangeMin %d to 65535: port %d alone is balanced, as ONOS did", field, r.PortMax, r.PortMin, r.PortMin))
			hi = r.PortMin
		case hi-r.PortMin+1 > LBMaxPortRange:
			lb.notes = append(lb.notes, fmt.Sprintf("%s.portRangeMax range %d-%d spans %d ports: OVN has no range VIPs and kubevirt-ovn expands at most %d, so port %d alone is balanced, as ONOS did", field, r.PortMin, hi, hi-r.PortMin+1, LBMaxPortRange, r.PortMin))
			hi = r.PortMin
		}
		for p := r.PortMin; p <= hi; p++ {
			if !slices.Contains(lb.ports[proto], p) {
				lb.ports[proto] = append(lb.ports[proto], p)
			}
		}
	}
	if len(lb.ports) == 0 && !lb.icmp {
		return nil, lbErr(d.Name, "spec.rules", "is empty: nothing to balance")
	}
	if d.HealthCheck != nil {
		if vip.Is6() && !IPv6HealthChecks(in.release) {
			return nil, lbErr(d.Name, "spec.healthCheck", "is not supported with IPv6 VIP %s on OVN %s: ovn-controller probes IPv6 members from OVN %s on", vip, in.release, IPv6HealthChecksSince)
		}
		if in.zoned && (n.Type == NetworkFlat || n.Type == NetworkVLAN) {
			// OVN leaves a health-checked member out of a VIP when its
			// port is not in the zone's NB, and a FLAT or VLAN
			// network's VM ports have no remote twins.
			return nil, lbErr(d.Name, "spec.healthCheck", "is not supported on %s network %s in interconnect mode: its VM ports exist only in their own zone, and OVN leaves a health-checked member whose port a zone lacks out of the VIP there", n.Type, n.Name)
		}
		hc, err := in.checkHealthCheck(d, n, vip, lb)
		if err != nil {
			return nil, err
		}
		lb.hc = hc
	}
	for _, ps := range lb.ports {
		slices.Sort(ps)
	}
	return lb, nil
}

// checkHealthCheck checks load balancer d's health check on network n:
// its source IP is an address of n of the VIP's family that is nobody
// else's, its numbers are not negative and, with tcp or udp rules, there
// is something to probe. It returns the health check with OVN's defaults
// filled in.
func (in *Input) checkHealthCheck(d *lbDecl, n *network, vip netip.Addr, lb *plannedLB) (*LBHealthCheck, *InputError) {
	hc := *d.HealthCheck
	const f = "spec.healthCheck."
	parse, prefix, gateway, poolStart, poolEnd := parseIPv4, n.prefix, n.gateway, n.poolStart, n.poolEnd
	pfxField, gwField, poolField := "", "gatewayIp", "ipPool"
	if vip.Is6() {
		parse, prefix, gateway, poolStart, poolEnd = parseIPv6Host, n.prefix6, n.gateway6, n.pool6Start, n.pool6End
		pfxField, gwField, poolField = "ipv6Cidr ", "ipv6GatewayIp", "ipv6Pool"
	}
	src, err := parse(hc.SourceIP)
	switch {
	case hc.SourceIP == "":
		return nil, lbErr(d.Name, f+"sourceIp", "is empty")
	case err != nil:
		if a, aerr := netip.ParseAddr(hc.SourceIP); aerr == nil && a.Is6() != vip.Is6() {
			return nil, lbErr(d.Name, f+"sourceIp", "%s is not of the family of VIP %s: OVN probes a member from an address of its own family", hc.SourceIP, vip)
		}
		return nil, lbErr(d.Name, f+"sourceIp", "%v", err)
	case !hostIn(prefix, src):
		return nil, lbErr(d.Name, f+"sourceIp", "%s is outside network %s (%s%s): OVN probes the members from the subnet", src, n.Name, pfxField, prefix)
	case gateway.IsValid() && src == gateway:
		return nil, lbErr(d.Name, f+"sourceIp", "%s is the %s of network %s", src, gwField, n.Name)
	case src == vip:
		return nil, lbErr(d.Name, f+"sourceIp", "%s is the VIP", src)
	case poolStart.IsValid() && !src.Less(poolStart) && !poolEnd.Less(src):
		return nil, lbErr(d.Name, f+"sourceIp", "%s is in the %s %s-%s of network %s, the range a VM may be given its address from", src, poolField, poolStart, poolEnd, n.Name)
	case len(lb.ports) == 0:
		return nil, lbErr(d.Name, "spec.healthCheck", "needs a tcp or udp rule: OVN probes ports, not ICMP")
	}
	if port := in.vmPortOf(n, src); port != "" {
		return nil, lbErr(d.Name, f+"sourceIp", "%s is the address of VM port %s on network %s", src, port, n.Name)
	}
	for _, v := range []struct {
		field string
		v     *int
		def   int
	}{{"interval", &hc.Interval, LBHealthDefaults.Interval}, {"timeout", &hc.Timeout, LBHealthDefaults.Timeout},
		{"successCount", &hc.SuccessCount, LBHealthDefaults.SuccessCount}, {"failureCount", &hc.FailureCount, LBHealthDefaults.FailureCount}} {
		switch {
		case *v.v < 0:
			return nil, lbErr(d.Name, f+v.field, "%d is negative", *v.v)
		case *v.v == 0:
			*v.v = v.def
		}
	}
	hc.SourceIP = src.String()
	return &hc, nil
}

// vmPortOf is the VM port on valid network n that has address ip, "" for
// none.
func (in *Input) vmPortOf(n *network, ip netip.Addr) string {
	var ports []string
	for _, v := range in.vmsWithAddr(n, ip) {
		if v.NetworkNamespace != n.Namespace {
			continue
		}
		mac, ipv4, err := validateVM(&v.VMInterface, n)
		if err != nil || !hasAddr(&v.VMInterface, n, mac, ipv4, ip) {
			continue
		}
		ports = append(ports, VMPortName(n.Name, v.Namespace, v.VMI, v.Interface))
	}
	if len(ports) == 0 {
		return ""
	}
	return slices.Min(ports)
}

// protocols are the protocols lb has a row for, sorted.
func (lb *plannedLB) protocols() []string {
	var out []string
	if lb.icmp {
		out = append(out, lbICMP)
	}
	for _, p := range []string{lbTCP, lbUDP} {
		if len(lb.ports[p]) > 0 {
			out = append(out, p)
		}
	}
	return out
}

// loadBalancerRows adds the Load_Balancer rows of router r's valid load
// balancers to rp, one per protocol, sorted by name: VIP keys for the VIP
// and for the floating IPs bound to it.
func loadBalancerRows(rp *RouterPlan, r *router, ids func() map[string]string, reject bool) {
	for _, lb := range r.lbs {
		addrs := append([]string{lb.vip.String()}, lb.fips...)
		for _, proto := range lb.protocols() {
			row, hcs := lb.row(LoadBalancerName(lb.d.Name, proto), proto, addrs, ids, reject)
			if len(lb.fips) == 1 {
				row.ExternalIDs[KeyFloatingIP] = lb.fipIDs[0]
				row.ExternalIDs[KeyFloatingIPAddress] = lb.fips[0]
				row.ExternalIDs[KeyLBVIP] = lb.vip.String()
			}
			rp.LoadBalancers = append(rp.LoadBalancers, row)
			rp.LBHealthChecks = append(rp.LBHealthChecks, hcs...)
		}
	}
	slices.SortFunc(rp.LoadBalancers, func(a, b *nbmodel.LoadBalancer) int { return strings.Compare(a.Name, b.Name) })
	sortHealthChecks(rp.LBHealthChecks)
}

// switchLoadBalancers are the Load_Balancer rows of network n's switch:
// one per protocol of each valid load balancer on n, VIP keys for the VIP
// only, sorted by name. They are the network's own rows, not the router's:
// a row of the router's unit that the switch referred to would make each
// unit wait for the other (the router's ports need the network's switch,
// the switch would need the router's row), and the VIP works from inside
// the network also without a router. In interconnect mode every zone
// holding the switch holds them (zoneNetwork).
func (in *Input) switchLoadBalancers(n *network, instance string) ([]*nbmodel.LoadBalancer, []LBHealthCheckRow) {
	var out []*nbmodel.LoadBalancer
	var hcs []LBHealthCheckRow
	for _, d := range in.lbDecls(n.Name) {
		lb, err := in.checkLoadBalancer(d, n)
		if err != nil {
			continue
		}
		ids := func() map[string]string { return OwnerIDs(instance, Unit{Kind: KindNetwork, Name: n.Name}) }
		for _, proto := range lb.protocols() {
			row, rowHCs := lb.row(SwitchLoadBalancerName(d.Name, proto), proto, []string{lb.vip.String()}, ids, in.rejectEmptyLB)
			out = append(out, row)
			hcs = append(hcs, rowHCs...)
		}
	}
	slices.SortFunc(out, func(a, b *nbmodel.LoadBalancer) int { return strings.Compare(a.Name, b.Name) })
	sortHealthChecks(hcs)
	return out, hcs
}

func sortHealthChecks(hcs []LBHealthCheckRow) {
	slices.SortFunc(hcs, func(a, b LBHealthCheckRow) int {
		return cmp.Or(strings.Compare(a.LoadBalancer, b.LoadBalancer), strings.Compare(a.Row.Vip, b.Row.Vip))
	})
}

// row is lb's Load_Balancer row name for proto, with VIP keys for addrs
// (each with every port of proto's rules, or port-less for icmp) and
// owner keys from ids; with a health check, its members' ip_port_mappings
// and one Load_Balancer_Health_Check per tcp or udp VIP key.
func (lb *plannedLB) row(name, proto string, addrs []string, newIDs func() map[string]string, reject bool) (*nbmodel.LoadBalancer, []LBHealthCheckRow) {
	ids := newIDs()
	ids[KeyLoadBalancer] = lb.d.Name
	ids[KeyLoadBalancerID] = lb.d.ID
	if lb.d.Description != "" {
		ids[KeyDescription] = lb.d.Description
	}
	row := &nbmodel.LoadBalancer{Name: name, Vips: map[string]string{}, ExternalIDs: ids}
	if proto == lbICMP {
		for _, a := range addrs {
			row.Vips[a] = strings.Join(lb.members, ",")
		}
	} else {
		p := proto
		row.Protocol = &p
		for _, port := range lb.ports[proto] {
			ps := strconv.Itoa(port)
			backends := make([]string, len(lb.members))
			for i, m := range lb.members {
				backends[i] = hostPort(m, ps)
			}
			for _, a := range addrs {
				row.Vips[hostPort(a, ps)] = strings.Join(backends, ",")
			}
		}
	}
	if reject && len(lb.members) == 0 {
		row.Options = map[string]string{"reject": "true"}
	}
	if lb.hc == nil || proto == lbICMP {
		return row, nil
	}
	if len(lb.members) > 0 {
		row.IPPortMappings = map[string]string{}
		for _, m := range lb.members {
			row.IPPortMappings[mappingAddr(m)] = lb.memberPorts[m] + ":" + mappingAddr(lb.hc.SourceIP)
		}
	}
	var hcs []LBHealthCheckRow
	for vip := range row.Vips {
		hcIDs := newIDs()
		hcIDs[KeyLoadBalancer] = lb.d.Name
		hcs = append(hcs, LBHealthCheckRow{LoadBalancer: name, Row: &nbmodel.LoadBalancerHealthCheck{
			Vip: vip,
			Options: map[string]string{
				"interval":      strconv.Itoa(lb.hc.Interval),
				"timeout":       strconv.Itoa(lb.hc.Timeout),
				"success_count": strconv.Itoa(lb.hc.SuccessCount),
				"failure_count": strconv.Itoa(lb.hc.FailureCount),
			},
			ExternalIDs: hcIDs,
		}})
	}
	sortHealthChecks(hcs)
	return row, hcs
}

// hostPort is address a with port p as OVN's Load_Balancer vips take it:
// a:p, an IPv6 address in brackets.
func hostPort(a, p string) string {
	if strings.Contains(a, ":") {
		return "[" + a + "]:" + p
	}
	return a + ":" + p
}

// mappingAddr is address a as a Load_Balancer's ip_port_mappings write
// it, in its keys and as the source address of its values: an IPv6
// address in brackets (ovn-nb.xml; ovn-northd looks an IPv6 member up as
// "[a]").
func mappingAddr(a string) string {
	if strings.Contains(a, ":") {
		return "[" + a + "]"
	}
	return a
}

// lbVIP checks load balancer d's VIP on network n: an IPv4 host address
// of its cidr, or an IPv6 one of its ipv6Cidr, not its gateway.
func lbVIP(d *lbDecl, n *network) (netip.Addr, *InputError) {
	if a, err := netip.ParseAddr(d.VIP); err == nil && a.Is6() && !a.Is4In6() {
		vip, err := parseIPv6Host(d.VIP)
		switch {
		case err != nil:
			return vip, lbErr(d.Name, "spec.vip", "%v", err)
		case !n.prefix6.IsValid():
			return vip, lbErr(d.Name, "spec.vip", "%s is IPv6 and network %s has no ipv6Cidr", vip, n.Name)
		case !n.prefix6.Contains(vip) || vip == n.prefix6.Addr():
			return vip, lbErr(d.Name, "spec.vip", "%s is outside network %s's ipv6Cidr %s", vip, n.Name, n.prefix6)
		case vip == n.gateway6:
			return vip, lbErr(d.Name, "spec.vip", "%s is the ipv6GatewayIp of network %s", vip, n.Name)
		}
		return vip, nil
	}
	vip, err := parseIPv4(d.VIP)
	switch {
	case err != nil:
		return vip, lbErr(d.Name, "spec.vip", "%v", err)
	case !n.prefix.IsValid():
		return vip, lbErr(d.Name, "spec.vip", "%s is IPv4 and network %s is IPv6-only (no cidr)", vip, n.Name)
	case !hostIn(n.prefix, vip):
		return vip, lbErr(d.Name, "spec.vip", "%s is outside network %s (%s)", vip, n.Name, n.prefix)
	case n.gateway.IsValid() && vip == n.gateway:
		return vip, lbErr(d.Name, "spec.vip", "%s is the gatewayIp of network %s", vip, n.Name)
	}
	return vip, nil
}

// lbOfVIP is the valid load balancer of router r whose VIP is ip on
// network n, nil for none.
func lbOfVIP(lbs []*plannedLB, n *network, ip netip.Addr) *plannedLB {
	for _, lb := range lbs {
		if lb.d.Network == n.Name && lb.vip == ip {
			return lb
		}
	}
	return nil
}

// SetRejectEmptyLB says whether a load balancer without members rejects
// (options:reject=true: TCP RST, ICMP unreachable) rather than drops, as
// ONOS did; it returns the networks and routers with load balancers, whose
// plans change.
func (in *Input) SetRejectEmptyLB(reject bool) []Unit {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.rejectEmptyLB == reject {
		return nil
	}
	in.rejectEmptyLB = reject
	affected := set[Unit]{}
	for _, decls := range in.lbs {
		for d := range decls {
			in.affectedByLoadBalancer(d, affected)
		}
	}
	return sortedUnits(affected)
}
