package trace

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"

	"github.com/kubevirt-ovn/kubevirt-ovn/nbmodel"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator"
)

// start is where a zone's trace starts.
type start struct {
	x        *index
	datapath string
	inport   string
	h        header
	chassis  string   // where the packet is now
	note     *Hop     // a first hop: where the trace starts, when not at the VM
	verdict  *Verdict // set when nothing needs tracing
}

type tracer struct {
	xs       []*index
	req      Request
	fromDesc string
	toDesc   string
	lbDst    string
	member   string // the member followed, for the hops
}

// target is a resolved destination.
type target struct {
	addr netip.Addr
	desc string
	// lb is the load balancer whose VIP addr is.
	lb *nbmodel.LoadBalancer
	// router owns addr as an external address (SNAT IP, floating IP, a
	// load balancer's floating IP), found in x; natMAC is a distributed
	// floating IP's MAC.
	router *nbmodel.LogicalRouter
	rx     *index
	natMAC string
	vm     *vmPort // a VM interface's address
}

func (t *tracer) plan() (start, error) {
	var src *vmPort
	var srcX *index
	outside, isIP := netip.ParseAddr(t.req.From)
	if isIP != nil {
		v, x, err := t.findVM(t.req.From, "")
		if err != nil {
			return start{}, fmt.Errorf("--from: %w", err)
		}
		src, srcX = &v, x
		t.fromDesc = v.String()
	} else {
		t.fromDesc = "outside host " + outside.String()
	}
	v6Pref := src != nil && !hasV4(src)
	if isIP == nil {
		v6Pref = outside.Is6()
	}
	dst, err := t.resolveTo(src, v6Pref)
	if err != nil {
		return start{}, err
	}
	t.toDesc = dst.desc
	h := header{dst: dst.addr, ttl: 64}
	if err := t.protocol(&h, dst); err != nil {
		return start{}, err
	}
	if src != nil {
		a, ok := src.addressOf(dst.addr.Is6())
		if !ok {
			return start{}, fmt.Errorf("%s has no %s address, and %s is %s", src, family(dst.addr), dst.desc, family(dst.addr))
		}
		h.src, h.ethSrc = a, src.mac
		return t.fromVM(srcX, src, dst, h)
	}
	h.src = outside
	if outside.Is6() != dst.addr.Is6() {
		return start{}, fmt.Errorf("%s is %s and %s is %s", outside, family(outside), dst.desc, family(dst.addr))
	}
	return t.fromOutside(dst, h)
}

func hasV4(v *vmPort) bool {
	_, ok := v.addressOf(false)
	return ok
}

func family(a netip.Addr) string {
	if a.Is6() {
		return "IPv6"
	}
	return "IPv4"
}

// findVM finds a VM interface namespace/name[/interface], in the zone
// where its port is bound or, when that zone is not given, where it has a
// remote twin. prefer is a network to pick when the interface is not
// named and the VM has several.
func (t *tracer) findVM(ref string, prefer string) (vmPort, *index, error) {
	parts := strings.Split(ref, "/")
	if len(parts) < 2 || len(parts) > 3 || parts[0] == "" || parts[1] == "" {
		return vmPort{}, nil, fmt.Errorf("%q is no VM interface: namespace/name[/interface]", ref)
	}
	vmi := parts[0] + "/" + parts[1]
	type found struct {
		v vmPort
		x *index
	}
	// A VM port is in one zone as itself and in others as a remote twin:
	// one per interface, the bound one when a zone given has it.
	byIface := map[string]found{}
	for _, x := range t.xs {
		for _, v := range x.vms {
			if v.vmi != vmi || (len(parts) == 3 && v.iface != parts[2]) {
				continue
			}
			if f, ok := byIface[v.iface]; !ok || f.v.port.Type == "remote" {
				byIface[v.iface] = found{v, x}
			}
		}
	}
	var all []found
	for _, iface := range slices.Sorted(maps.Keys(byIface)) {
		all = append(all, byIface[iface])
	}
	switch {
	case len(all) == 0:
		return vmPort{}, nil, fmt.Errorf("no port of VM %s%s is in the NB (a VirtualMachineInstance with an interface on a network of ours, with its MAC and address)", vmi, ifaceSuffix(parts))
	case len(all) == 1:
		return all[0].v, all[0].x, nil
	}
	for _, f := range all {
		if f.v.network == prefer {
			return f.v, f.x, nil
		}
	}
	var names []string
	for _, f := range all {
		names = append(names, f.v.iface+" ("+f.v.network+")")
	}
	return vmPort{}, nil, fmt.Errorf("VM %s has interfaces %s: name one (%s/%s)", vmi, strings.Join(names, ", "), vmi, all[0].v.iface)
}

func ifaceSuffix(parts []string) string {
	if len(parts) == 3 {
		return " interface " + parts[2]
	}
	return ""
}

// resolveTo resolves req.To.
func (t *tracer) resolveTo(src *vmPort, v6Pref bool) (target, error) {
	to := t.req.To
	if a, err := netip.ParseAddr(to); err == nil {
		return t.describeAddr(a), nil
	}
	if ref, ok := strings.CutPrefix(to, "lb:"); ok {
		return t.resolveLB(ref, v6Pref)
	}
	if ref, ok := strings.CutPrefix(to, "fip:"); ok {
		return t.resolveFIP(ref, v6Pref)
	}
	prefer := ""
	if src != nil {
		prefer = src.network
	}
	v, _, err := t.findVM(to, prefer)
	if err != nil {
		return target{}, fmt.Errorf("--to: %w", err)
	}
	a, ok := v.addressOf(v6Pref)
	if !ok {
		if a, ok = v.addressOf(!v6Pref); !ok {
			return target{}, fmt.Errorf("--to: %s has no address", v)
		}
	}
	return target{addr: a, desc: fmt.Sprintf("%s (%s)", v, a), vm: &v}, nil
}

// describeAddr names what address a is of ours: a VM's, a floating IP,
// a router's SNAT IP, a load balancer's VIP.
func (t *tracer) describeAddr(a netip.Addr) target {
	tg := target{addr: a, desc: a.String()}
	for _, x := range t.xs {
		if v, ok := x.byAddr[a]; ok {
			tg.desc = fmt.Sprintf("%s (%s)", v, a)
			tg.vm = &v
			return tg
		}
		for _, n := range x.zone.Rows.NATs {
			if ip, err := netip.ParseAddr(n.ExternalIP); err == nil && ip == a && ours(n.ExternalIDs) {
				tg.router, tg.rx = x.natRouter[n.UUID], x
				if id := n.ExternalIDs[translator.KeyFloatingIP]; id != "" {
					tg.desc = fmt.Sprintf("floating IP %s (%s)", id, a)
					if n.ExternalMAC != nil {
						tg.natMAC = *n.ExternalMAC
					}
				} else {
					tg.desc = fmt.Sprintf("router %s's SNAT IP %s", n.ExternalIDs[translator.KeyOwner], a)
				}
				return tg
			}
		}
		for _, lb := range x.zone.Rows.LoadBalancers {
			if lb.ExternalIDs[translator.KeyFloatingIPAddress] == a.String() {
				tg.desc = fmt.Sprintf("floating IP %s (%s) of load balancer %s", lb.ExternalIDs[translator.KeyFloatingIP], a, lb.ExternalIDs[translator.KeyLoadBalancer])
				tg.lb, tg.router, tg.rx = lb, routerOfLB(x, lb), x
				return tg
			}
			if vipOf(lb) == a {
				tg.desc = fmt.Sprintf("load balancer %s's VIP %s", lb.ExternalIDs[translator.KeyLoadBalancer], a)
				tg.lb = lb
			}
		}
	}
	return tg
}

// vipOf is a load balancer row's VIP address.
func vipOf(lb *nbmodel.LoadBalancer) netip.Addr {
	for vip := range lb.Vips {
		if ap, err := netip.ParseAddrPort(vip); err == nil {
			if lb.ExternalIDs[translator.KeyFloatingIPAddress] == ap.Addr().String() {
				continue
			}
			return ap.Addr()
		}
	}
	return netip.Addr{}
}

// routerOfLB is the router a load balancer row is on.
func routerOfLB(x *index, lb *nbmodel.LoadBalancer) *nbmodel.LogicalRouter {
	for _, r := range x.zone.Rows.Routers {
		if slices.Contains(r.LoadBalancer, lb.UUID) {
			return r
		}
	}
	return nil
}

func (t *tracer) resolveLB(name string, v6 bool) (target, error) {
	var fallback *nbmodel.LoadBalancer
	if _, err := netip.ParseAddr(t.req.From); err == nil {
		// From outside, the load balancer's floating IP.
		for _, x := range t.xs {
			for _, lb := range x.zone.Rows.LoadBalancers {
				fip, err := netip.ParseAddr(lb.ExternalIDs[translator.KeyFloatingIPAddress])
				if lb.ExternalIDs[translator.KeyLoadBalancer] == name && err == nil && fip.Is6() == v6 {
					return t.describeAddr(fip), nil
				}
			}
		}
	}
	for _, x := range t.xs {
		for _, lb := range x.zone.Rows.LoadBalancers {
			if lb.ExternalIDs[translator.KeyLoadBalancer] != name {
				continue
			}
			if a := vipOf(lb); a.IsValid() && a.Is6() == v6 {
				tg := t.describeAddr(a)
				tg.lb = lb
				return tg, nil
			}
			fallback = lb
		}
	}
	if fallback != nil {
		tg := t.describeAddr(vipOf(fallback))
		tg.lb = fallback
		return tg, nil
	}
	return target{}, fmt.Errorf("--to: no load balancer %s is in the NB", name)
}

func (t *tracer) resolveFIP(ref string, v6 bool) (target, error) {
	var fixed []netip.Addr
	if strings.Contains(ref, "/") {
		v, _, err := t.findVM(ref, "")
		if err != nil {
			return target{}, fmt.Errorf("--to: %w", err)
		}
		fixed = v.addresses
	}
	for _, x := range t.xs {
		for _, n := range x.zone.Rows.NATs {
			if n.Type != nbmodel.NATTypeDNATAndSNAT || !ours(n.ExternalIDs) {
				continue
			}
			li, err := netip.ParseAddr(n.LogicalIP)
			if err != nil {
				continue
			}
			if n.ExternalIDs[translator.KeyFloatingIP] == ref || slices.Contains(fixed, li) {
				if a, err := netip.ParseAddr(n.ExternalIP); err == nil {
					return t.describeAddr(a), nil
				}
			}
		}
		for _, lb := range x.zone.Rows.LoadBalancers {
			if lb.ExternalIDs[translator.KeyFloatingIP] == ref {
				if a, err := netip.ParseAddr(lb.ExternalIDs[translator.KeyFloatingIPAddress]); err == nil {
					return t.describeAddr(a), nil
				}
			}
		}
	}
	return target{}, fmt.Errorf("--to: no floating IP %s is in the NB", ref)
}

// protocol sets h's protocol and ports from the request and, for a load
// balancer, the VIP's.
func (t *tracer) protocol(h *header, dst target) error {
	h.proto, h.dport = t.req.Protocol, t.req.Port
	if dst.lb != nil {
		proto := "tcp"
		if dst.lb.Protocol != nil {
			proto = *dst.lb.Protocol
		}
		if h.proto == "" {
			h.proto = proto
		}
		if h.dport == 0 {
			for vip := range dst.lb.Vips {
				if ap, err := netip.ParseAddrPort(vip); err == nil && ap.Addr() == dst.addr {
					h.dport = int(ap.Port())
					break
				}
			}
		}
	}
	switch h.proto {
	case "", "icmp":
		h.proto = "icmp"
		if t.req.Port != 0 {
			return fmt.Errorf("--port: icmp has no ports")
		}
	case "tcp", "udp":
		if h.dport <= 0 || h.dport > 65535 {
			return fmt.Errorf("--port: %s needs a destination port (1-65535)", h.proto)
		}
		h.sport = SourcePort
	default:
		return fmt.Errorf("--protocol %q: tcp, udp or icmp", h.proto)
	}
	if dst.lb != nil {
		return t.chooseMember(dst, h)
	}
	return nil
}

// chooseMember picks the member ovn-trace load-balances to: the
// requested one, or the first in rotation (online) of the VIP.
func (t *tracer) chooseMember(dst target, h *header) error {
	vip := netip.AddrPortFrom(dst.addr, uint16(h.dport)).String()
	var members []string
	for _, x := range t.xs {
		for _, lb := range x.zone.Rows.LoadBalancers {
			if lb.ExternalIDs[translator.KeyLoadBalancer] != dst.lb.ExternalIDs[translator.KeyLoadBalancer] {
				continue
			}
			backends := lb.Vips[vip]
			if backends == "" {
				continue
			}
			for _, m := range strings.Split(backends, ",") {
				m = strings.TrimSpace(m)
				ap, err := netip.ParseAddrPort(m)
				if err != nil {
					continue
				}
				members = append(members, m)
				if want := t.req.Member; want != "" {
					if want == m || want == ap.Addr().String() {
						t.lbDst = m
						return nil
					}
					continue
				}
				if !x.zone.Offline[m] {
					t.lbDst = m
					return nil
				}
			}
		}
	}
	if t.req.Member != "" {
		return fmt.Errorf("--member %s is no member of %s on %s (members: %s)", t.req.Member, dst.desc, vip, strings.Join(slices.Compact(members), ", "))
	}
	return nil
}

// fromVM is where a VM interface's packet to dst starts.
func (t *tracer) fromVM(x *index, src *vmPort, dst target, h header) (start, error) {
	ls := x.switchOf[src.port.Name]
	if ls == nil {
		return start{}, fmt.Errorf("%s: its port %s is on no switch", src, src.port.Name)
	}
	st := start{x: x, datapath: ls.Name, inport: src.port.Name, h: h, chassis: x.zone.Bound[src.port.Name]}
	if src.port.Type == "remote" {
		// The VM's zone was not given (a node's sockets reach its own
		// zone only): trace from where its packets come into this one.
		st.chassis = src.port.Options["requested-chassis"]
		st.note = &Hop{Zone: x.zone.Name, Kind: HopZone, Object: "zone " + x.zone.Name,
			Detail: fmt.Sprintf("%s is on chassis %s, in a zone this trace was not given: traced from where its packets come into zone %s", src, st.chassis, x.zone.Name)}
	}
	// On the VM's own network, the packet goes to the port that has the
	// address; anywhere else, to the network's router.
	var routerMAC, router string
	for _, p := range x.zone.Rows.SwitchPorts {
		if x.switchOf[p.Name] != ls {
			continue
		}
		if v, ok := vmPortOf(p); ok && slices.Contains(v.addresses, dst.addr) {
			st.h.ethDst = v.mac
			return st, nil
		}
		if r, ok := routerOfSwitchPort(p.Name); ok && strings.HasPrefix(p.Name, translator.NamePrefix+"stor-") {
			if mac := x.routerPortMAC(p); mac != "" && (router == "" || r < router) {
				routerMAC, router = mac, r
			}
		}
	}
	if routerMAC == "" {
		st.verdict = &Verdict{Result: Unreachable, Detail: fmt.Sprintf("network %s has no router, and no port on it has %s", src.network, dst.addr)}
		return st, nil
	}
	st.h.ethDst = routerMAC
	return st, nil
}

// routerPortMAC is the MAC of a router's port on a switch: its peer's in
// the router's zone, the remote twin's own elsewhere.
func (x *index) routerPortMAC(p *nbmodel.LogicalSwitchPort) string {
	if lrp := x.lrp[p.Options["router-port"]]; lrp != nil {
		return lrp.MAC
	}
	if len(p.Addresses) > 0 {
		if f := strings.Fields(p.Addresses[0]); len(f) > 1 {
			return f[0]
		}
	}
	return ""
}

// fromOutside is where an outside host's packet to an external address
// of a router starts: the router's external network's localnet port, in
// the router's zone, from the peer router's MAC.
func (t *tracer) fromOutside(dst target, h header) (start, error) {
	if dst.router == nil {
		return start{}, fmt.Errorf("from outside, a packet reaches a router's SNAT IP, a floating IP or a load balancer's floating IP; %s is none of them", dst.desc)
	}
	x := dst.rx
	router := routerName(dst.router)
	gw := x.lrp[translator.GatewayPortName(router)]
	if gw == nil {
		return start{}, fmt.Errorf("router %s has no gateway port in the NB", router)
	}
	ls := x.peerSwitch[gw.Name]
	if ls == nil {
		return start{}, fmt.Errorf("router %s's gateway port is on no switch", router)
	}
	st := start{x: x, datapath: ls.Name, h: h, chassis: x.zone.Active[router]}
	for _, p := range x.zone.Rows.SwitchPorts {
		if x.switchOf[p.Name] == ls && p.Type == "localnet" {
			st.inport = p.Name
		}
	}
	if st.inport == "" {
		return start{}, fmt.Errorf("network %s of router %s's gateway has no localnet port: no packet comes in from outside", networkName(ls), router)
	}
	st.h.ethDst = gw.MAC
	if dst.natMAC != "" {
		st.h.ethDst = dst.natMAC
	}
	st.h.ethSrc = "02:00:00:00:00:01"
	for _, b := range x.zone.Rows.StaticBindings {
		if b.LogicalPort == gw.Name {
			st.h.ethSrc = b.MAC // the peer router's
		}
	}
	return st, nil
}

// header is the traced packet's headers.
type header struct {
	ethSrc, ethDst string
	src, dst       netip.Addr
	proto          string
	sport, dport   int
	ttl            int
}

// microflow is h entering by inport, in ovn-trace's expression language.
func (h header) microflow(inport string) string {
	ip := "ip4"
	if h.dst.Is6() {
		ip = "ip6"
	}
	parts := []string{
		fmt.Sprintf("inport == %q", inport),
		"eth.src == " + h.ethSrc, "eth.dst == " + h.ethDst,
		fmt.Sprintf("%s.src == %s", ip, h.src), fmt.Sprintf("%s.dst == %s", ip, h.dst),
		fmt.Sprintf("ip.ttl == %d", h.ttl),
	}
	switch h.proto {
	case "tcp", "udp":
		parts = append(parts, h.proto, fmt.Sprintf("%s.src == %d", h.proto, h.sport), fmt.Sprintf("%s.dst == %d", h.proto, h.dport))
	default:
		if h.dst.Is6() {
			parts = append(parts, "icmp6", "icmp6.type == 128", "icmp6.code == 0")
		} else {
			parts = append(parts, "icmp4", "icmp4.type == 8", "icmp4.code == 0")
		}
	}
	return strings.Join(parts, " && ")
}

func (h header) String() string {
	if h.proto == "icmp" {
		return fmt.Sprintf("icmp echo %s > %s", h.src, h.dst)
	}
	return fmt.Sprintf("%s %s > %s", h.proto, netip.AddrPortFrom(h.src, uint16(h.sport)), netip.AddrPortFrom(h.dst, uint16(h.dport)))
}

// handoff is a packet leaving a zone by a remote port.
type handoff struct {
	datapath, inport, port string
	h                      header
}

// follow finds the zone where a remote port is local, and starts there.
func (t *tracer) follow(from *index, ho *handoff) (start, *Verdict) {
	chassis := ""
	if p := from.lsp[ho.port]; p != nil {
		chassis = p.Options["requested-chassis"]
	}
	for _, x := range t.xs {
		if x == from {
			continue
		}
		if p := x.lsp[ho.port]; p != nil && p.Type != "remote" {
			return start{x: x, datapath: ho.datapath, inport: ho.inport, h: ho.h, chassis: chassis}, nil
		}
	}
	return start{}, &Verdict{Result: Continues, Chassis: chassis,
		Detail: fmt.Sprintf("to %s on chassis %s, in a zone this trace was not given (--zone NAME=NB,SB of the zone of %s)", from.describePort(ho.port), chassis, chassis)}
}
