package translator

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/kubevirt-ovn/kubevirt-ovn/nbmodel"
)

// Floating IPs (kubevirt.io/v1 FloatingIp, as ONOS kubevirt-networking had
// them) belong to the unit of the router they name. A valid floating IP
// bound to a VM's address is one NAT row of type dnat_and_snat on the
// router (external_ip the floating IP, logical_ip the VM's address, no
// logical_port: centralized on the router's gateway chassis, where
// nat-addresses=router answers ARP for it and sends its GARPs). A floating
// IP's own error never fails its router: it is reported in its status and
// only its row is left out, as the user asked of a floating IP that is no
// longer valid.
//
// A router with enableSnat false keeps its gateway side while a floating
// IP names it, without snat rows; router policies then let out only the
// floating IPs' fixed addresses (FloatingIPAllowPriority) and drop the rest
// of its internal networks' traffic that leaves them
// (FloatingIPDropPriority), also towards hosts on the external network,
// and their IPv6 traffic (floating IPs are IPv4).

// Priorities of the Logical_Router_Policy rows of a router with
// enableSnat false and floating IPs.
const (
	FloatingIPAllowPriority = 1001
	FloatingIPDropPriority  = 1000
)

// Reasons of a floating IP that is valid but not Ready.
const (
	reasonNotAssociated = "not associated: no spec.fixedIp"
)

// boundFIP is a floating IP a router's plan binds to a VM's address.
type boundFIP struct {
	id, ip, fixed string
	// lb: the fixed IP is this load balancer's VIP; the floating IP is
	// a VIP key of its rows, no NAT row (loadbalancer.go).
	lb *plannedLB
}

// hasGateway says whether router declaration d's plan has a gateway side:
// an external network, and SNAT or a floating IP naming it.
func (in *Input) hasGateway(d *routerDecl) bool {
	return d.External != nil && (d.EnableSNAT || len(in.fips[d.Name]) > 0)
}

func (in *Input) addFloatingIP(d *fipDecl) {
	addTo(in.fips, d.Router, d)
	if d.ip != "" {
		addTo(in.fipClaims, d.ip, d)
	}
	if d.fixed != "" {
		addTo(in.fipFixed, d.fixed, d)
		// An IPv6 fixed IP may be a VM's SLAAC address: found by its
		// interface identifier too (affectedByVM).
		if a, err := netip.ParseAddr(d.fixed); err == nil && a.Is6() {
			addTo(in.fipFixed, ifaceIDKey(a), d)
		}
	}
}

func (in *Input) removeFloatingIP(d *fipDecl) {
	removeFrom(in.fips, d.Router, d)
	if d.ip != "" {
		removeFrom(in.fipClaims, d.ip, d)
	}
	if d.fixed != "" {
		removeFrom(in.fipFixed, d.fixed, d)
		if a, err := netip.ParseAddr(d.fixed); err == nil && a.Is6() {
			removeFrom(in.fipFixed, ifaceIDKey(a), d)
		}
	}
}

// ifaceIDKey is the index key of IPv6 address a's interface identifier
// (its low 64 bits): a VM port's SLAAC address has its MAC's (macIDKey),
// whatever the network's prefix.
func ifaceIDKey(a netip.Addr) string {
	b := a.As16()
	return fmt.Sprintf("iid %x", b[8:])
}

// macIDKey is ifaceIDKey of the SLAAC addresses of MAC mac ("" for no
// MAC).
func macIDKey(mac string) string {
	if _, err := parseMAC(mac); err != nil {
		return ""
	}
	return ifaceIDKey(SLAACAddress(netip.MustParsePrefix("fe80::/64"), mac))
}

// vmIPv6Keys are the keys VM interface v is indexed by for its IPv6
// addresses: those its status reports, and its MAC's interface
// identifier.
func vmIPv6Keys(v *VMInterface) []string {
	var out []string
	if v.IPv6 != "" {
		for _, s := range strings.Split(v.IPv6, ",") {
			out = append(out, normalizeIP(s))
		}
	}
	if k := macIDKey(v.MAC); k != "" {
		out = append(out, k)
	}
	return out
}

// affectedByFloatingIP adds the router of floating IP d and the routers of
// the floating IPs competing with it for its address.
func (in *Input) affectedByFloatingIP(d *fipDecl, affected set[Unit]) {
	affected.add(Unit{Kind: KindRouter, Name: d.Router})
	if d.ip != "" {
		addFloatingIPRouters(affected, in.fipClaims[d.ip])
	}
}

func addFloatingIPRouters(affected set[Unit], decls set[*fipDecl]) {
	for d := range decls {
		affected.add(Unit{Kind: KindRouter, Name: d.Router})
	}
}

func vmAddrKey(network, ip string) string { return network + " " + ip }

// addVMAddr and removeVMAddr keep vmAddrs: an interface under its IPv4
// address (none on an IPv6-only network) and its IPv6 keys.
func (in *Input) addVMAddr(d *vmDecl) {
	if d.IP != "" {
		addTo(in.vmAddrs, vmAddrKey(d.Network, normalizeIP(d.IP)), d)
	}
	for _, k := range vmIPv6Keys(&d.VMInterface) {
		addTo(in.vmAddrs, vmAddrKey(d.Network, k), d)
	}
}

func (in *Input) removeVMAddr(d *vmDecl) {
	if d.IP != "" {
		removeFrom(in.vmAddrs, vmAddrKey(d.Network, normalizeIP(d.IP)), d)
	}
	for _, k := range vmIPv6Keys(&d.VMInterface) {
		removeFrom(in.vmAddrs, vmAddrKey(d.Network, k), d)
	}
}

// vmsWithAddr are the VM interfaces of network n (any namespace) that may
// have address ip: its IPv4 address, or one of its IPv6 addresses
// (reported, or the SLAAC address of its MAC: the caller checks with
// vmIPv6).
func (in *Input) vmsWithAddr(n *network, ip netip.Addr) []*vmDecl {
	return in.vmsWithAddrOn(n.Name, ip)
}

// vmsWithAddrOn is vmsWithAddr of the network named network.
func (in *Input) vmsWithAddrOn(network string, ip netip.Addr) []*vmDecl {
	var out []*vmDecl
	for v := range in.vmAddrs[vmAddrKey(network, ip.String())] {
		out = append(out, v)
	}
	if ip.Is6() {
		for v := range in.vmAddrs[vmAddrKey(network, ifaceIDKey(ip))] {
			if !slices.Contains(out, v) {
				out = append(out, v)
			}
		}
	}
	return out
}

// hasAddr says whether valid VM interface v (MAC mac) has address ip on
// network n: its IPv4 address, or one of its port's IPv6 addresses.
func hasAddr(v *VMInterface, n *network, mac, ipv4 string, ip netip.Addr) bool {
	if ip.Is4() {
		return ipv4 == ip.String()
	}
	global, _ := vmIPv6(v, n, mac)
	return slices.Contains(global, ip.String())
}

// affectedByVM adds the routers with a floating IP whose fixed IP is VM
// interface d's address.
func (in *Input) affectedByVM(d *vmDecl, affected set[Unit]) {
	addFloatingIPRouters(affected, in.fipFixed[normalizeIP(d.IP)])
	for _, k := range vmIPv6Keys(&d.VMInterface) {
		addFloatingIPRouters(affected, in.fipFixed[k])
	}
}

// fipDecls are the floating IPs naming router name, in claim order: by
// creation time, then name, then as a snapshot lists them.
func (in *Input) fipDecls(name string) []*fipDecl {
	out := make([]*fipDecl, 0, len(in.fips[name]))
	for d := range in.fips[name] {
		out = append(out, d)
	}
	slices.SortFunc(out, compareFIPOrder)
	return out
}

func compareFIPOrder(a, b *fipDecl) int {
	return cmp.Or(a.Created.Compare(b.Created), strings.Compare(a.Name, b.Name), a.pos.compare(b.pos))
}

func fipErr(name, field, format string, args ...any) *InputError {
	return &InputError{Kind: ObjFloatingIP, Object: name, Field: field, Msg: fmt.Sprintf(format, args...)}
}

// fipCandidate is a floating IP that passed its checks and names a fixed
// IP on network n.
type fipCandidate struct {
	d     *fipDecl
	st    *FloatingIPStatus
	n     *network
	fixed netip.Addr
}

// planFloatingIPs plans the floating IPs of router r, which passed its
// checks and got its claims: their status, by name, and the ones bound to a
// VM's address, by floating IP.
//
// Claims: a floating IP's address belongs to one floating IP, of any
// router: the one whose NAT row the NB shows with it (held) while it still
// claims it, else the first by creation time and name; a router's SNAT IP
// is never a floating IP. On one router, a fixed IP has one floating IP,
// decided the same way among those that passed their other checks.
func (in *Input) planFloatingIPs(r *router, held Held) ([]FloatingIPStatus, []boundFIP) {
	decls := in.fipDecls(r.Name)
	if len(decls) == 0 {
		return nil, nil
	}
	statuses := make([]FloatingIPStatus, len(decls))
	var cands []fipCandidate
	names := map[string]int{}
	for _, d := range decls {
		names[d.Name]++
	}
	for i, d := range decls {
		st := &statuses[i]
		*st = FloatingIPStatus{Name: d.Name, ID: d.ID, Generation: d.Generation}
		if names[d.Name] > 1 {
			st.fail(fipErr(d.Name, "metadata.name", "is declared %d times", names[d.Name]))
			continue
		}
		if err := in.checkFloatingIP(d, r, held); err != nil {
			st.fail(err)
			continue
		}
		switch {
		case d.FixedIP == "" && d.VMName == "":
			st.Reason = reasonNotAssociated
			continue
		case d.FixedIP == "":
			st.fail(fipErr(d.Name, "spec.fixedIp", "is required with spec.vmName %s: the VM's port is found by both", d.VMName))
			continue
		}
		n, fixed, err := fixedNetwork(d, r)
		if err != nil {
			st.fail(err)
			continue
		}
		cands = append(cands, fipCandidate{d: d, st: st, n: n, fixed: fixed})
	}

	// One floating IP per fixed IP on the router.
	owner := map[netip.Addr]*fipDecl{}
	for _, c := range cands {
		if held.HeldFixedIP(r.Name, c.fixed.String()) == c.d.ID && owner[c.fixed] == nil {
			owner[c.fixed] = c.d
		}
	}
	var bound []boundFIP
	for _, c := range cands {
		if o := owner[c.fixed]; o == nil {
			owner[c.fixed] = c.d
		} else if o != c.d {
			c.st.fail(fipErr(c.d.Name, "spec.fixedIp", "%s already has FloatingIp %s: one floating IP per fixed IP", c.fixed, o.Name))
			continue
		}
		if lb := lbOfVIP(r.lbs, c.n, c.fixed); lb != nil {
			// No VM port has a VIP: the floating IP is the load
			// balancer's.
			c.st.Ready, c.st.LoadBalancer = true, lb.d.Name
			lb.fips, lb.fipIDs = append(lb.fips, c.d.ip), append(lb.fipIDs, c.d.ID)
			bound = append(bound, boundFIP{id: c.d.ID, ip: c.d.ip, fixed: c.fixed.String(), lb: lb})
			continue
		}
		port, reason, err := in.fixedPort(c, held)
		switch {
		case err != nil:
			c.st.fail(err)
		case port == "":
			c.st.Reason = reason
		default:
			c.st.Ready, c.st.Port = true, port
			bound = append(bound, boundFIP{id: c.d.ID, ip: c.d.ip, fixed: c.fixed.String()})
		}
	}
	// Stable: two declarations of one name stay in claim order.
	slices.SortStableFunc(statuses, func(a, b FloatingIPStatus) int { return strings.Compare(a.Name, b.Name) })
	slices.SortFunc(bound, func(a, b boundFIP) int { return strings.Compare(a.ip, b.ip) })
	return statuses, bound
}

func (st *FloatingIPStatus) fail(err *InputError) {
	st.Ready, st.Port = false, ""
	st.Reason = err.Error()
	st.Err = err
}

// checkFloatingIP checks floating IP d of router r: its required fields,
// its network (r's external one) and its address, which it must hold.
func (in *Input) checkFloatingIP(d *fipDecl, r *router, held Held) *InputError {
	switch {
	case d.ID == "":
		return fipErr(d.Name, "spec.id", "is required")
	case d.Network == "":
		return fipErr(d.Name, "spec.networkName", "is required")
	case d.IP == "":
		return fipErr(d.Name, "spec.floatingIp", "is required")
	case r.ext == nil:
		return fipErr(d.Name, "spec.routerName", "VirtualRouter %s has no spec.external network to answer floating IPs on", r.Name)
	case d.Network != r.ext.Name:
		return fipErr(d.Name, "spec.networkName", "%s is not the external network of VirtualRouter %s (%s)", d.Network, r.Name, r.ext.Name)
	}
	if a, err := netip.ParseAddr(d.IP); err == nil && a.Is6() && !a.Is4In6() {
		ip, err := parseIPv6Host(d.IP)
		switch {
		case err != nil:
			return fipErr(d.Name, "spec.floatingIp", "%v", err)
		case !r.ext.prefix6.IsValid():
			return fipErr(d.Name, "spec.floatingIp", "%s is IPv6 and network %s has no ipv6Cidr", ip, r.ext.Name)
		case !r.ext.prefix6.Contains(ip) || ip == r.ext.prefix6.Addr():
			return fipErr(d.Name, "spec.floatingIp", "%s is outside network %s's ipv6Cidr %s", ip, r.ext.Name, r.ext.prefix6)
		case ip == r.ext.gateway6:
			return fipErr(d.Name, "spec.floatingIp", "%s is the ipv6GatewayIp of network %s", ip, r.ext.Name)
		case ip == r.ext6:
			return fipErr(d.Name, "spec.floatingIp", "%s is the spec.external.ipv6 of VirtualRouter %s", ip, r.Name)
		case ip == r.peer6:
			return fipErr(d.Name, "spec.floatingIp", "%s is the peerRouter ipv6 of VirtualRouter %s", ip, r.Name)
		}
		return in.claimFloatingIP(d, ip, "spec.external.ipv6", held)
	}
	ip, err := parseIPv4(d.IP)
	switch {
	case err != nil:
		return fipErr(d.Name, "spec.floatingIp", "%v", err)
	case !hostIn(r.ext.prefix, ip):
		return fipErr(d.Name, "spec.floatingIp", "%s is outside network %s (%s)", ip, r.ext.Name, r.ext.prefix)
	case ip == r.ext.gateway:
		return fipErr(d.Name, "spec.floatingIp", "%s is the gatewayIp of network %s", ip, r.ext.Name)
	case ip == r.snat:
		return fipErr(d.Name, "spec.floatingIp", "%s is the SNAT IP of VirtualRouter %s", ip, r.Name)
	case r.peer.IsValid() && ip == r.peer:
		return fipErr(d.Name, "spec.floatingIp", "%s is the peerRouter IP of VirtualRouter %s", ip, r.Name)
	}
	return in.claimFloatingIP(d, ip, "SNAT IP", held)
}

// claimFloatingIP checks that floating IP d holds its address ip: no
// router claims it (as its SNAT IP or spec.external.ipv6: what), and no
// other floating IP holds it.
func (in *Input) claimFloatingIP(d *fipDecl, ip netip.Addr, what string, held Held) *InputError {
	var owner *routerDecl
	for rd := range in.snatClaims[d.ip] {
		if owner == nil || compareClaimOrder(rd, owner) < 0 {
			owner = rd
		}
	}
	if owner != nil {
		return fipErr(d.Name, "spec.floatingIp", "%s is the %s of VirtualRouter %s", ip, what, owner.Name)
	}
	if o := in.fipOwner(d.ip, held); o != d {
		return fipErr(d.Name, "spec.floatingIp", "%s is already the floating IP of FloatingIp %s", ip, o.Name)
	}
	return nil
}

// fipOwner is the floating IP that gets address ip (normalized): the one
// the NB shows holding it (by spec.id), else the first by creation time and
// name.
func (in *Input) fipOwner(ip string, held Held) *fipDecl {
	holder := held.HeldFloatingIP(ip)
	var first, heldBy *fipDecl
	for d := range in.fipClaims[ip] {
		if holder != "" && d.ID == holder && (heldBy == nil || compareFIPOrder(d, heldBy) < 0) {
			heldBy = d
		}
		if first == nil || compareFIPOrder(d, first) < 0 {
			first = d
		}
	}
	if heldBy != nil {
		return heldBy
	}
	return first
}

// fixedNetwork is the internal network of router r that floating IP d's
// fixed IP is on: an IPv4 host address of its cidr, or for an IPv6
// floating IP an IPv6 one of its ipv6Cidr; not its gateway.
func fixedNetwork(d *fipDecl, r *router) (*network, netip.Addr, *InputError) {
	fip, _ := netip.ParseAddr(d.ip)
	v6 := fip.Is6()
	parse, family, other, gatewayKey := parseIPv4, "IPv4", "IPv6", "gatewayIp"
	if v6 {
		parse, family, other, gatewayKey = parseIPv6Host, "IPv6", "IPv4", "ipv6GatewayIp"
	}
	fixed, err := parse(d.FixedIP)
	if err != nil {
		if a, aerr := netip.ParseAddr(d.FixedIP); aerr == nil && a.Unmap().Is6() != v6 {
			return nil, netip.Addr{}, fipErr(d.Name, "spec.fixedIp", "%s is %s: spec.floatingIp %s is %s", a, other, fip, family)
		}
		return nil, netip.Addr{}, fipErr(d.Name, "spec.fixedIp", "%v", err)
	}
	var nets []string
	for _, n := range r.internal {
		prefix, gateway := n.prefix, n.gateway
		if v6 {
			prefix, gateway = n.prefix6, n.gateway6
		}
		switch {
		case !prefix.IsValid():
			continue
		case !hostIn(prefix, fixed):
			nets = append(nets, fmt.Sprintf("%s (%s)", n.Name, prefix))
			continue
		case fixed == gateway:
			return nil, fixed, fipErr(d.Name, "spec.fixedIp", "%s is the %s of network %s", fixed, gatewayKey, n.Name)
		}
		return n, fixed, nil
	}
	if len(nets) == 0 {
		none := "none"
		switch {
		case v6:
			none = "none with an ipv6Cidr"
		case len(r.internal) > 0:
			none = "none with a cidr"
		}
		return nil, fixed, fipErr(d.Name, "spec.fixedIp", "%s is on no internal network: VirtualRouter %s has %s", fixed, r.Name, none)
	}
	return nil, fixed, fipErr(d.Name, "spec.fixedIp", "%s is on none of VirtualRouter %s's internal networks: %s", fixed, r.Name, strings.Join(nets, ", "))
}

// fixedPort is the VM port candidate c binds to: the port of the VM
// interface that has the fixed IP on its network, as the network gives the
// address (the NB's holder, else the first port by name: planVMPorts), of
// the VMI spec.vmName names when set. Without one, reason says what it
// waits for.
func (in *Input) fixedPort(c fipCandidate, held Held) (port, reason string, err *InputError) {
	ns, name := "", c.d.VMName
	if i := strings.IndexByte(name, '/'); i >= 0 {
		ns, name = name[:i], name[i+1:]
	}
	type iface struct{ port, vmi string }
	var all []iface
	for _, v := range in.vmsWithAddr(c.n, c.fixed) {
		if v.NetworkNamespace != c.n.Namespace {
			continue
		}
		mac, ip, err := validateVM(&v.VMInterface, c.n)
		if err != nil || !hasAddr(&v.VMInterface, c.n, mac, ip, c.fixed) {
			continue
		}
		all = append(all, iface{VMPortName(c.n.Name, v.Namespace, v.VMI, v.Interface), v.Namespace + "/" + v.VMI})
	}
	slices.SortFunc(all, func(a, b iface) int { return strings.Compare(a.port, b.port) })
	var owner *iface
	for i := range all {
		if all[i].port == held.HeldVMAddress(c.n.Name, c.fixed.String()) {
			owner = &all[i]
		}
	}
	if owner == nil && len(all) > 0 {
		owner = &all[0]
	}
	var named []string // the VMIs vmName names that have the address
	for _, f := range all {
		fns, fname, _ := strings.Cut(f.vmi, "/")
		if name == "" || (fname == name && (ns == "" || fns == ns)) {
			if !slices.Contains(named, f.vmi) {
				named = append(named, f.vmi)
			}
		}
	}
	switch {
	case len(named) == 0:
		vm := "a VM"
		if c.d.VMName != "" {
			vm = "VM " + c.d.VMName
		}
		return "", fmt.Sprintf("waiting for %s with ip %s on network %s", vm, c.fixed, c.n.Name), nil
	case name != "" && len(named) > 1:
		return "", "", fipErr(c.d.Name, "spec.vmName", "%s is ambiguous: %s have %s on network %s; write namespace/name", c.d.VMName, strings.Join(named, " and "), c.fixed, c.n.Name)
	case name != "" && named[0] != owner.vmi:
		return "", "", fipErr(c.d.Name, "spec.fixedIp", "%s on network %s is %s %s's, not %s's", c.fixed, c.n.Name, ObjVMI, owner.vmi, named[0])
	}
	return owner.port, "", nil
}

// floatingIPRows adds router r's floating IP rows to rp: a dnat_and_snat
// NAT per bound floating IP and, for a router with enableSnat false, the
// policies that let out only the floating IPs' fixed addresses.
func floatingIPRows(rp *RouterPlan, r *router, ids func() map[string]string) {
	for _, b := range r.fips {
		if b.lb != nil {
			continue
		}
		natIDs := ids()
		natIDs[KeyFloatingIP] = b.id
		rp.NATs = append(rp.NATs, &nbmodel.NAT{
			Type:        nbmodel.NATTypeDNATAndSNAT,
			ExternalIP:  b.ip,
			LogicalIP:   b.fixed,
			ExternalIDs: natIDs,
		})
	}
	if r.EnableSNAT || len(r.internal) == 0 {
		return
	}
	// IPv6 leaves routed (no NAT66), so the same keeps it in as IPv4:
	// enableSnat false lets nothing of the VMs out but what a floating IP
	// allows.
	for _, ip := range []string{"ip4", "ip6"} {
		var cidrs []string
		for _, n := range r.internal {
			p := n.prefix
			if ip == "ip6" {
				p = n.prefix6
			}
			if p.IsValid() {
				cidrs = append(cidrs, p.String())
			}
		}
		if len(cidrs) == 0 {
			continue
		}
		inside := ovnSet(cidrs)
		rp.Policies = append(rp.Policies, &nbmodel.LogicalRouterPolicy{
			Priority:    FloatingIPDropPriority,
			Match:       ip + ".src == " + inside + " && " + ip + ".dst != " + inside,
			Action:      nbmodel.LogicalRouterPolicyActionDrop,
			ExternalIDs: ids(),
		})
	}
	for _, b := range r.fips {
		// Its VM's traffic, and traffic of the router's other VMs to the
		// floating IP (hairpin through the gateway).
		polIDs := ids()
		polIDs[KeyFloatingIP] = b.id
		ip := "ip4"
		if strings.Contains(b.ip, ":") {
			ip = "ip6"
		}
		match := ip + ".src == " + b.fixed + " || " + ip + ".dst == " + b.ip
		if b.lb != nil {
			// A load balancer's replies leave from its members (the
			// router undoes the DNAT on its way out).
			match = ip + ".dst == " + b.ip
			if len(b.lb.members) > 0 {
				match = ip + ".src == " + ovnSet(b.lb.members) + " || " + match
			}
		}
		rp.Policies = append(rp.Policies, &nbmodel.LogicalRouterPolicy{
			Priority:    FloatingIPAllowPriority,
			Match:       match,
			Action:      nbmodel.LogicalRouterPolicyActionAllow,
			ExternalIDs: polIDs,
		})
	}
	slices.SortFunc(rp.Policies, func(a, b *nbmodel.LogicalRouterPolicy) int {
		return cmp.Or(cmp.Compare(b.Priority, a.Priority), strings.Compare(a.Match, b.Match))
	})
}

// ovnSet is items as an OVN match operand: the one item, or a set.
func ovnSet(items []string) string {
	if len(items) == 1 {
		return items[0]
	}
	return "{" + strings.Join(items, ", ") + "}"
}

// finishFloatingIPs completes the floating IP status of router unit up:
// when the router is not planned, none is Ready and each says why; else the
// Ready ones are answered on its active gateway.
func (in *Input) finishFloatingIPs(up *UnitPlan) {
	if up.Router != nil {
		gw := ""
		if g := up.Router.Gateway; g != nil && len(g.Chassis) > 0 {
			gw = g.Chassis[0]
		}
		for i := range up.FloatingIPs {
			if up.FloatingIPs[i].Ready {
				up.FloatingIPs[i].Gateway = gw
			}
		}
		return
	}
	decls := in.fipDecls(up.Unit.Name)
	if len(decls) == 0 {
		up.FloatingIPs = nil
		return
	}
	reason := fmt.Sprintf("VirtualRouter %s is not declared", up.Unit.Name)
	if len(up.Errs) > 0 {
		reason = "waits for its router: " + up.Errs[0].Error()
	}
	up.FloatingIPs = make([]FloatingIPStatus, 0, len(decls))
	for _, d := range decls {
		up.FloatingIPs = append(up.FloatingIPs, FloatingIPStatus{Name: d.Name, ID: d.ID, Generation: d.Generation, Reason: reason})
	}
	slices.SortStableFunc(up.FloatingIPs, func(a, b FloatingIPStatus) int { return strings.Compare(a.Name, b.Name) })
}
