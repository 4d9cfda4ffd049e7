package trace

import (
	"cmp"
	"fmt"
	"net/netip"
	"strings"

	"github.com/kubevirt-ovn/kubevirt-ovn/nbmodel"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator"
)

// explainer walks one zone's events.
type explainer struct {
	t          *tracer
	x          *index
	h          header
	hints      map[string]string
	srcChassis string
	hops       []Hop
	verdict    Verdict
	next       *handoff
	gateway    string // the chassis the packet left the router's gateway on
	seen       map[string]bool
	// dropACL is the last dropping ACL the packet met: the stage that
	// drops it may come later (OVN 23.09 on decide in an ACL stage and
	// drop in another).
	dropACL *nbmodel.ACL
	// dpHop is the hop of the datapath the packet is in, dpKey its
	// pipeline's datapath and ports.
	dpHop int
	dpKey string
}

// datapathHop adds a hop for each datapath the packet enters (the port
// it comes in by) and completes it with the port it leaves by once the
// egress pipeline starts.
func (e *explainer) datapathHop(ev *Event) {
	kind, refs := HopSwitch, map[string]string{}
	if r := e.x.routerRef(ev.Datapath); r != "" {
		refs["router"] = r
	}
	if s := e.x.switchName[ev.Datapath]; s != nil && ours(s.ExternalIDs) {
		refs["network"] = networkName(s)
	}
	if e.x.routerName[ev.Datapath] != nil {
		kind = HopRouter
	}
	if len(refs) == 0 {
		refs = nil
	}
	switch {
	case ev.Pipeline == "ingress" && ev.Datapath+"\x00"+ev.InPort != e.dpKey:
		e.dpKey = ev.Datapath + "\x00" + ev.InPort
		e.hops = append(e.hops, Hop{Zone: e.x.zone.Name, Kind: kind, Object: e.x.describeDatapath(ev.Datapath), Detail: "in from " + e.x.describePort(ev.InPort), Refs: refs})
		e.dpHop = len(e.hops) - 1
	case ev.Pipeline == "egress" && ev.Datapath+"\x00"+ev.InPort+"\x00"+ev.OutPort != e.dpKey:
		in := e.dpKey
		e.dpKey = ev.Datapath + "\x00" + ev.InPort + "\x00" + ev.OutPort
		if in == ev.Datapath+"\x00"+ev.InPort && e.dpHop < len(e.hops) {
			e.hops[e.dpHop].Detail = e.x.describePort(ev.InPort) + " → " + e.x.describePort(ev.OutPort)
			return
		}
		// A trace that starts in egress, or a flood's next port.
		e.hops = append(e.hops, Hop{Zone: e.x.zone.Name, Kind: kind, Object: e.x.describeDatapath(ev.Datapath), Detail: e.x.describePort(ev.InPort) + " → " + e.x.describePort(ev.OutPort), Refs: refs})
		e.dpHop = len(e.hops) - 1
	}
}

// add adds a hop, once, with refs as name, value pairs.
func (e *explainer) add(kind, object, detail, chassis string, refs ...string) {
	key := kind + "\x00" + object + "\x00" + detail
	if e.seen == nil {
		e.seen = map[string]bool{}
	}
	if e.seen[key] {
		return
	}
	e.seen[key] = true
	h := Hop{Zone: e.x.zone.Name, Kind: kind, Object: object, Detail: detail, Chassis: chassis}
	for i := 0; i+1 < len(refs); i += 2 {
		if refs[i+1] == "" {
			continue
		}
		if h.Refs == nil {
			h.Refs = map[string]string{}
		}
		h.Refs[refs[i]] = refs[i+1]
	}
	e.hops = append(e.hops, h)
}

func (e *explainer) explain(events []Event) {
	var outputs []Event
	resolving := ""
	var last *Event
	for i := range events {
		ev := &events[i]
		if ev.Kind == Flow && resolving == "" {
			e.datapathHop(ev)
		}
		switch ev.Kind {
		case Flow:
			last = ev
			e.flow(ev, &resolving)
		case Transform:
			e.transform(ev.Text)
			if ev.Text == "arp" || ev.Text == "nd_ns" {
				resolving = ev.Datapath
			}
		case Output:
			// A patch or l3gateway port's peer's pipeline follows: the
			// packet has not left.
			if resolving == "" && ev.PortType != "patch" && ev.PortType != "l3gateway" {
				outputs = append(outputs, *ev)
			}
		case Error:
			e.verdict = Verdict{Result: Failed, Detail: "ovn-trace: " + ev.Text}
			return
		}
	}
	if resolving != "" {
		e.verdict = Verdict{Result: Resolving, Detail: fmt.Sprintf("%s has no MAC binding for the next hop yet: it sends a neighbor request for it and drops this packet; the packets after its answer go on", e.x.describeDatapath(resolving))}
		return
	}
	if len(outputs) > 0 {
		e.output(outputs)
		return
	}
	if last != nil {
		e.dropped(last)
		return
	}
	e.verdict = Verdict{Result: Failed, Detail: "ovn-trace traced nothing"}
}

// flow explains a logical flow by the NB row it comes from.
func (e *explainer) flow(ev *Event, resolving *string) {
	for _, a := range ev.Actions {
		e.action(a)
	}
	row := e.x.byHint[e.hints[ev.UUID]]
	actions := strings.Join(ev.Actions, " ")
	switch r := row.(type) {
	case *nbmodel.ACL:
		e.acl(r)
	case *nbmodel.NAT:
		// The translations of a new connection: DNAT in the router's
		// ingress, SNAT in its egress (lr_in_unsnat and lr_out_undnat
		// are the replies').
		inbound := ev.Pipeline == "ingress" && strings.HasSuffix(ev.Stage, "_dnat")
		if strings.Contains(actions, "ct_") && (inbound || ev.Pipeline == "egress" && strings.HasSuffix(ev.Stage, "_snat")) {
			e.nat(r, inbound)
		}
	case *nbmodel.LoadBalancer:
		// The load balancer's own flow, not the conntrack lookup before
		// it (an address-less ct_lb_mark).
		if strings.Contains(actions, "ct_lb") && strings.Contains(actions, "backends=") {
			e.loadBalancer(r, actions)
		}
	case *nbmodel.LogicalRouterStaticRoute:
		if strings.HasSuffix(ev.Stage, "ip_routing") {
			e.route(ev, r)
		}
	case *nbmodel.LogicalRouterPort:
		switch {
		case strings.HasSuffix(ev.Stage, "ip_routing"):
			prefix := strings.TrimSpace(lastField(ev.Match, "=="))
			e.add(HopRoute, e.x.describeDatapath(ev.Datapath), fmt.Sprintf("%s is %s's, directly connected", prefix, e.x.describePort(r.Name)), "",
				"router", e.x.routerRef(ev.Datapath), "prefix", prefix, "network", e.x.networkOfRouterPort(r))
		case strings.HasSuffix(ev.Stage, "gw_redirect") && strings.Contains(actions, `outport = "cr-`):
			e.gatewayHop(ev.Datapath)
		}
	}
	if ev.Stage != "" && strings.HasSuffix(ev.Stage, "arp_resolve") {
		for _, a := range ev.Actions {
			if strings.Contains(a, "No MAC binding") {
				*resolving = ev.Datapath
			}
		}
	}
}

func lastField(s, sep string) string {
	i := strings.LastIndex(s, sep)
	if i < 0 {
		return s
	}
	return s[i+len(sep):]
}

// action applies a flow's action to the packet's headers.
func (e *explainer) action(a string) {
	a = strings.TrimSuffix(strings.TrimSpace(a), ";")
	if a == "ip.ttl--" {
		e.h.ttl--
		return
	}
	if mac, ok := strings.CutPrefix(a, "/* MAC binding to "); ok {
		e.h.ethDst = strings.TrimSuffix(strings.TrimSuffix(mac, " */"), ".")
		return
	}
	field, value, ok := strings.Cut(a, " = ")
	if !ok {
		return
	}
	switch field {
	case "eth.src":
		e.h.ethSrc = value
	case "eth.dst":
		e.h.ethDst = value
	case "ip4.src", "ip6.src":
		if ip, err := netip.ParseAddr(value); err == nil {
			e.h.src = ip
		}
	case "ip4.dst", "ip6.dst":
		if ip, err := netip.ParseAddr(value); err == nil {
			e.h.dst = ip
		}
	}
}

// transform applies a conntrack NAT's effect (ct_dnat(ip4.dst=X),
// ct_snat(ip4.src=X), ct_lb_mark to the chosen member).
func (e *explainer) transform(title string) {
	if strings.HasPrefix(title, "ct_lb") && e.t.lbDst != "" {
		if ap, err := netip.ParseAddrPort(e.t.member); err == nil {
			e.h.dst, e.h.dport = ap.Addr(), int(ap.Port())
		}
		return
	}
	open := strings.Index(title, "(")
	if !strings.HasPrefix(title, "ct_") || open < 0 {
		return
	}
	field, value, ok := strings.Cut(strings.TrimSuffix(title[open+1:], ")"), "=")
	if !ok {
		return
	}
	ip, err := netip.ParseAddr(value)
	if err != nil {
		return
	}
	if strings.HasSuffix(field, ".src") {
		e.h.src = ip
	} else {
		e.h.dst = ip
	}
}

// acl names the security group rule (or another owner's ACL) a flow
// comes from.
func (e *explainer) acl(a *nbmodel.ACL) {
	if a.Action == nbmodel.ACLActionDrop || a.Action == nbmodel.ACLActionReject {
		e.dropACL = a
	}
	kind, object, detail := describeACL(a)
	if !ours(a.ExternalIDs) {
		e.add(kind, object, detail, "", "action", a.Action)
		return
	}
	group := ""
	if a.ExternalIDs[translator.KeyOwnerKind] == string(translator.KindSecurityGroup) {
		group = a.ExternalIDs[translator.KeyOwner]
	}
	e.add(kind, object, detail, "", "securityGroup", group, "rule", a.ExternalIDs[translator.KeySecurityACL], "action", a.Action)
}

// describeACL is the hop of an ACL: the security group and its rule, or
// another owner's ACL.
func describeACL(a *nbmodel.ACL) (kind, object, detail string) {
	verb := "allows"
	if a.Action == nbmodel.ACLActionDrop || a.Action == nbmodel.ACLActionReject {
		verb = "drops"
	}
	if !ours(a.ExternalIDs) {
		return HopACL, "ACL " + a.UUID[:8] + " (not kubevirt-ovn's)", fmt.Sprintf("%s it, %s priority %d: %s (%s)", verb, a.Direction, a.Priority, a.Match, a.Action)
	}
	object = "security group " + a.ExternalIDs[translator.KeyOwner]
	if a.ExternalIDs[translator.KeyOwnerKind] == string(translator.KindNetwork) {
		object = "network " + a.ExternalIDs[translator.KeyOwner] + "'s default deny"
	}
	rule := a.ExternalIDs[translator.KeySecurityACL]
	what := "rule " + strings.TrimPrefix(rule, "rule/")
	if base, ok := strings.CutPrefix(rule, "base/"); ok {
		what = "base rule " + base
	}
	dir := "egress (from the VM)"
	if a.Direction == nbmodel.ACLDirectionToLport {
		dir = "ingress (to the VM)"
	}
	return HopSecurityGroup, object, fmt.Sprintf("%s %s it, %s: %s (%s)", what, verb, dir, a.Match, a.Action)
}

func (e *explainer) nat(n *nbmodel.NAT, inbound bool) {
	router := n.ExternalIDs[translator.KeyOwner]
	if r := e.x.natRouter[n.UUID]; r != nil {
		router = routerName(r)
	}
	if id := n.ExternalIDs[translator.KeyFloatingIP]; id != "" {
		vm := n.LogicalIP
		if v := e.t.vmWith(n.LogicalIP); v != "" {
			vm = v + " (" + n.LogicalIP + ")"
		}
		refs := []string{"floatingIP", id, "router", router, "externalIP", n.ExternalIP, "logicalIP", n.LogicalIP}
		if inbound {
			e.add(HopFloatingIP, "floating IP "+id, fmt.Sprintf("on router %s: %s is DNATed to %s", router, n.ExternalIP, vm), "", refs...)
		} else {
			e.add(HopFloatingIP, "floating IP "+id, fmt.Sprintf("on router %s: %s is SNATed to %s", router, vm, n.ExternalIP), "", refs...)
		}
		return
	}
	if inbound {
		e.add(HopNAT, "router "+router, fmt.Sprintf("%s %s → %s", n.Type, n.ExternalIP, n.LogicalIP), "", "router", router, "externalIP", n.ExternalIP, "logicalIP", n.LogicalIP)
		return
	}
	ports := ""
	if n.ExternalPortRange != "" {
		ports = " (ports " + n.ExternalPortRange + ")"
	}
	e.add(HopNAT, "router "+router, fmt.Sprintf("SNAT %s → %s, router %s's SNAT IP%s", n.LogicalIP, n.ExternalIP, router, ports), "",
		"router", router, "snatIP", n.ExternalIP, "logicalIP", n.LogicalIP)
}

// vmWith names the VM interface that has address s, "" none.
func (t *tracer) vmWith(s string) string {
	a, err := netip.ParseAddr(s)
	if err != nil {
		return ""
	}
	for _, x := range t.xs {
		if v, ok := x.byAddr[a]; ok {
			return v.String()
		}
	}
	return ""
}

func (e *explainer) loadBalancer(lb *nbmodel.LoadBalancer, actions string) {
	name := lb.ExternalIDs[translator.KeyLoadBalancer]
	if name == "" {
		name = lb.Name
	}
	vip := netip.AddrPortFrom(e.h.dst, uint16(e.h.dport)).String()
	var rotation, offline []string
	for _, m := range strings.Split(lb.Vips[vip], ",") {
		if m = strings.TrimSpace(m); m == "" {
			continue
		}
		if e.x.zone.Offline[m] {
			offline = append(offline, m)
		} else {
			rotation = append(rotation, m)
		}
	}
	of := "of " + strings.Join(rotation, ", ") + " in rotation"
	if len(offline) > 0 {
		of += "; " + strings.Join(offline, ", ") + " failing its health check"
	}
	member := e.t.lbDst
	if member == "" || !strings.Contains(actions, "backends="+member) {
		e.add(HopLoadBalancer, "load balancer "+name, fmt.Sprintf("VIP %s → a member %s", vip, of), "", "loadBalancer", name, "vip", vip)
		return
	}
	e.t.member = member
	desc := member
	if ap, err := netip.ParseAddrPort(member); err == nil {
		if v := e.t.vmWith(ap.Addr().String()); v != "" {
			desc = v + " (" + member + ")"
		}
	}
	e.add(HopLoadBalancer, "load balancer "+name, fmt.Sprintf("VIP %s → member %s, %s (OVN picks one per connection; --member follows another)", vip, desc, of), "",
		"loadBalancer", name, "vip", vip, "member", member)
}

func (e *explainer) route(ev *Event, r *nbmodel.LogicalRouterStaticRoute) {
	what := fmt.Sprintf("route %s via %s", r.IPPrefix, r.Nexthop)
	if r.IPPrefix == "0.0.0.0/0" || r.IPPrefix == "::/0" {
		what += " (the default route, to the peer router)"
	}
	if !ours(r.ExternalIDs) {
		what += " (not kubevirt-ovn's)"
	}
	e.add(HopRoute, e.x.describeDatapath(ev.Datapath), what, "", "router", e.x.routerRef(ev.Datapath), "prefix", r.IPPrefix, "nexthop", r.Nexthop)
}

// gatewayHop names the chassis a router's packet leaves its gateway port
// on, and whether that chassis is active now.
func (e *explainer) gatewayHop(dp string) {
	lr := e.x.routerName[dp]
	if lr == nil {
		return
	}
	router := routerName(lr)
	order := e.x.zone.Order[router]
	active := e.x.zone.Active[router]
	e.gateway = active
	inOrder := "gateway chassis in order: " + strings.Join(order, ", ")
	if z := e.x.zone.Name; z != "" {
		// A zone holds the Gateway_Chassis of its own chassis only.
		inOrder = "gateway chassis of zone " + z + " in order: " + strings.Join(order, ", ")
	}
	detail := fmt.Sprintf("leaves by its gateway port, active on %s now (%s)", active, inOrder)
	switch {
	case active == "":
		detail = fmt.Sprintf("would leave by its gateway port, which is active on no chassis now (%s): the packet goes nowhere", inOrder)
		e.gateway = "-"
	case len(order) > 0 && order[0] != active:
		detail = fmt.Sprintf("leaves by its gateway port, active on %s now: failed over from %s (%s)", active, order[0], inOrder)
	}
	e.add(HopGateway, "router "+router, detail, active, "router", router, "activeChassis", active, "gatewayChassis", strings.Join(order, ","))
}

// output is the verdict of a packet that left the zone's datapaths.
func (e *explainer) output(outs []Event) {
	if e.gateway == "-" {
		e.verdict = Verdict{Result: Unreachable, Detail: "the router's gateway port is active on no chassis"}
		return
	}
	var remote *Event
	var parts []string
	result := ""
	chassis := ""
	for i := range outs {
		o := &outs[i]
		switch o.PortType {
		case "remote":
			remote = o
		case "localnet":
			result = Left
			chassis = cmp.Or(e.gateway, e.srcChassis)
			parts = append(parts, fmt.Sprintf("leaves by %s on %s, as %s", e.x.describePort(o.Text), chassis, e.h))
		case "":
			if result == "" {
				result = Delivered
			}
			chassis = e.x.zone.Bound[o.Text]
			parts = append(parts, fmt.Sprintf("delivered to %s on %s, as %s", e.x.describePort(o.Text), cmp.Or(chassis, "no chassis yet"), e.h))
		}
	}
	if remote != nil && len(parts) == 0 {
		e.next = &handoff{datapath: remote.Datapath, inport: remote.InPort, port: remote.Text, h: e.h}
		e.verdict = Verdict{Result: Continues, Detail: "to " + e.x.describePort(remote.Text) + " in another zone"}
		return
	}
	if len(parts) == 0 {
		e.verdict = Verdict{Result: Dropped, Detail: "it reaches no port"}
		return
	}
	e.verdict = Verdict{Result: result, Detail: strings.Join(parts, "; "), Chassis: chassis}
}

// dropped is the verdict of a packet whose trace ends in a flow with no
// output: an ACL's drop, a table with no match.
func (e *explainer) dropped(last *Event) {
	if a := e.dropACL; a != nil {
		_, object, detail := describeACL(a)
		e.verdict = Verdict{Result: Dropped, Detail: fmt.Sprintf("%s: %s", object, detail)}
		return
	}
	where := e.x.describeDatapath(last.Datapath)
	if strings.HasSuffix(last.Stage, "ip_routing") {
		e.verdict = Verdict{Result: Unreachable, Detail: fmt.Sprintf("%s has no route to %s", where, e.h.dst)}
		return
	}
	if last.UUID == "" {
		e.verdict = Verdict{Result: Dropped, Detail: fmt.Sprintf("%s: no flow of stage %s matches it", where, last.Stage)}
		return
	}
	e.verdict = Verdict{Result: Dropped, Detail: fmt.Sprintf("%s: stage %s drops it (%s, priority %d)", where, last.Stage, last.Match, last.Priority)}
}
