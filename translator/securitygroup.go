package translator

import (
	"cmp"
	"fmt"
	"maps"
	"net/netip"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/kubevirt-ovn/kubevirt-ovn/nbmodel"
)

// Security groups (kubevirt.io/v1 SecurityGroup and SecurityGroupRule, as
// ONOS kubevirt-networking had them, with Neutron's semantics) are units of
// their own (KindSecurityGroup, named by the group's spec.id). A group is
// one Port_Group (PortGroupName) whose ports are the VM ports bound to it
// by their VMI's securityGroups annotation (references to the switch ports
// their networks' units own), and whose acls are:
//
//   - per valid IPv4 rule, one allow-related ACL (SGRulePriority): ingress
//     is to-lport "outport == @pg && ip4 && ...", egress from-lport
//     "inport == @pg && ip4 && ..."; a remote prefix matches the other
//     end's address, a remote group its Port_Group's address set
//     ($<pg>_ip4, which OVN keeps for every Port_Group; in interconnect
//     mode our Address_Set of every zone's members, zoneSecurityGroup);
//     ports match the destination port in both directions, ICMP min/max
//     are type/code;
//   - the group's default drop, both directions (SGDropPriority), and the
//     base allows ONOS handled before its ACL tables (SGBasePriority): a
//     DHCP request, and ping to the gateway of a member port's network.
//
// Every group carries its own drop and base ACLs rather than sharing one
// drop group (Neutron's neutron_pg_drop): OVN applies the ACLs of every
// group a port is in as one list by priority, so a port in two groups is
// dropped unless a rule of either allows (a union), and no unit's plan
// depends on the ports of every other group. A port in no group is not
// touched.
//
// A rule's own error leaves its ACL as it is in the NB (KeepACLs) and is
// reported; the group's other rows are planned.

// ACL priorities of a security group.
const (
	SGDropPriority = 1000
	SGBasePriority = 1001
	SGRulePriority = 1002
)

type sgDecl struct {
	SecurityGroup
	pos
	rules []*ruleDecl // the embedded rules
}

type ruleDecl struct {
	SecurityGroupRule
	pos
	embedded bool
}

func newSGDecl(g SecurityGroup, p pos) *sgDecl {
	d := &sgDecl{SecurityGroup: g, pos: p}
	d.Rules = nil
	for _, r := range g.Rules {
		if r.SecurityGroupID == "" {
			r.SecurityGroupID = g.ID
		}
		d.rules = append(d.rules, &ruleDecl{SecurityGroupRule: r, pos: p, embedded: true})
	}
	return d
}

func (in *Input) addSecurityGroup(d *sgDecl) {
	addTo(in.sgs, d.ID, d)
	for _, r := range d.rules {
		in.addRuleRemote(r)
	}
}

func (in *Input) removeSecurityGroup(d *sgDecl) {
	removeFrom(in.sgs, d.ID, d)
	for _, r := range d.rules {
		in.removeRuleRemote(r)
	}
}

func (in *Input) addRuleRemote(r *ruleDecl) {
	if r.RemoteGroupID != "" {
		addTo(in.sgRemote, r.RemoteGroupID, r)
	}
}

func (in *Input) removeRuleRemote(r *ruleDecl) {
	if r.RemoteGroupID != "" {
		removeFrom(in.sgRemote, r.RemoteGroupID, r)
	}
}

// affectedBySecurityGroup adds group id and the groups with a rule whose
// remote group it is (their rules check that it is declared).
func (in *Input) affectedBySecurityGroup(id string, affected set[Unit]) {
	affected.add(Unit{Kind: KindSecurityGroup, Name: id})
	for r := range in.sgRemote[id] {
		affected.add(Unit{Kind: KindSecurityGroup, Name: r.SecurityGroupID})
	}
}

// replaceSecurityGroups moves the groups and rules that changed from old
// to nw in the indexes; their groups are affected.
func (in *Input) replaceSecurityGroups(old, nw *source, c *setChange) {
	// The embedded rules are in rules (SecurityGroup.Rules is cleared):
	// a rule edited alone is a change too.
	sameSG := func(a, b *sgDecl) bool {
		return reflect.DeepEqual(a.SecurityGroup, b.SecurityGroup) &&
			slices.EqualFunc(a.rules, b.rules, func(x, y *ruleDecl) bool { return reflect.DeepEqual(x.SecurityGroupRule, y.SecurityGroupRule) })
	}
	replaceChanged(old.sgs, nw.sgs, sameSG, func(key string, olds, news []*sgDecl) {
		for _, d := range olds {
			in.removeSecurityGroup(d)
			in.affectedByRemotes(d.rules, c.affected)
		}
		for _, d := range news {
			in.addSecurityGroup(d)
			in.affectedByRemotes(d.rules, c.affected)
		}
		in.affectedBySecurityGroup(key, c.affected)
	})
	sameRule := func(a, b *ruleDecl) bool { return reflect.DeepEqual(a.SecurityGroupRule, b.SecurityGroupRule) }
	replaceChanged(old.sgRules, nw.sgRules, sameRule, func(key string, olds, news []*ruleDecl) {
		for _, d := range olds {
			removeFrom(in.sgRules, key, d)
			in.removeRuleRemote(d)
		}
		for _, d := range news {
			addTo(in.sgRules, key, d)
			in.addRuleRemote(d)
		}
		in.affectedByRemotes(olds, c.affected)
		in.affectedByRemotes(news, c.affected)
		c.affected.add(Unit{Kind: KindSecurityGroup, Name: key})
	})
}

// affectedByRemotes adds, in interconnect mode, the remote groups of
// rules: whether and where their Address_Sets are needed follows the
// rules naming them.
func (in *Input) affectedByRemotes(rules []*ruleDecl, affected set[Unit]) {
	if !in.zoned {
		return
	}
	for _, r := range rules {
		if r.RemoteGroupID != "" {
			affected.add(Unit{Kind: KindSecurityGroup, Name: r.RemoteGroupID})
		}
	}
}

// affectedByVMGroups adds the groups VM interface v is bound to and, in
// interconnect mode, the remote groups of their rules (the zones of their
// Address_Sets follow the members').
func (in *Input) affectedByVMGroups(v *VMInterface, affected set[Unit]) {
	for _, g := range v.Groups() {
		affected.add(Unit{Kind: KindSecurityGroup, Name: g})
		in.remoteGroupsOf(g, affected)
	}
}

// withoutGroups is v but for its groups.
func withoutGroups(v VMInterface) VMInterface {
	v.SecurityGroups = ""
	return v
}

// regroupings maps each of the VM interfaces olds (but for their groups)
// to the interface, when no other of them is the same but for its groups:
// a new interface equal to one of them but for its groups changed groups
// only. Its port, and which VM gets an address, are as they were: the
// groups it stays in plan the same rows.
func regroupings(olds []*vmDecl) map[VMInterface]VMInterface {
	out := make(map[VMInterface]VMInterface, len(olds))
	twice := map[VMInterface]bool{}
	for _, d := range olds {
		k := withoutGroups(d.VMInterface)
		if _, dup := out[k]; dup {
			twice[k] = true
		}
		out[k] = d.VMInterface
	}
	for k := range twice {
		delete(out, k)
	}
	return out
}

// affectedByRegrouping adds the groups VM interface old was bound to and
// nw is not, and those nw is bound to and old was not, with the groups
// naming them as remote group (as affectedByVMGroups).
func (in *Input) affectedByRegrouping(old, nw *VMInterface, affected set[Unit]) {
	before, after := old.Groups(), nw.Groups()
	for _, g := range before {
		if !slices.Contains(after, g) {
			affected.add(Unit{Kind: KindSecurityGroup, Name: g})
			in.remoteGroupsOf(g, affected)
		}
	}
	for _, g := range after {
		if !slices.Contains(before, g) {
			affected.add(Unit{Kind: KindSecurityGroup, Name: g})
			in.remoteGroupsOf(g, affected)
		}
	}
}

// affectedByAddrGroups adds the groups of the VM interfaces that have VM
// interface v's IP on its network: which of them gets the address (and a
// port) may change with v. (A MAC shared the same way has no index: a
// resync catches it.)
func (in *Input) affectedByAddrGroups(v *VMInterface, affected set[Unit]) {
	for d := range in.vmAddrs[vmAddrKey(v.Network, normalizeIP(v.IP))] {
		in.affectedByVMGroups(&d.VMInterface, affected)
	}
}

// affectedByNetworkGroups adds the groups the VM interfaces on network n
// are bound to: their ports, and their gateway ping, follow the network.
func (in *Input) affectedByNetworkGroups(n string, affected set[Unit]) {
	for d := range in.vms[n] {
		in.affectedByVMGroups(&d.VMInterface, affected)
	}
}

func sgErr(name, field, format string, args ...any) *InputError {
	return &InputError{Kind: ObjSecurityGroup, Object: name, Field: field, Msg: fmt.Sprintf(format, args...)}
}

// ruleErr names rule r: a SecurityGroupRule by its metadata.name, an
// embedded one as its group's spec.rules entry.
func ruleErr(r *ruleDecl, group, field, format string, args ...any) *InputError {
	if r.embedded {
		return &InputError{Kind: ObjSecurityGroup, Object: group, Field: "spec.rules[" + r.ID + "]." + strings.TrimPrefix(field, "spec."), Msg: fmt.Sprintf(format, args...)}
	}
	return &InputError{Kind: ObjSGRule, Object: r.Name, Field: field, Msg: fmt.Sprintf(format, args...)}
}

// ACLKeyRule is the KeySecurityACL value of the ACL of rule id.
func ACLKeyRule(id string) string { return "rule/" + id }

// planSecurityGroup plans security group up.Unit: its Port_Group, its
// ports and ACLs.
func (in *Input) planSecurityGroup(up *UnitPlan, instance string, held Held) {
	id := up.Unit.Name
	decls := make([]*sgDecl, 0, len(in.sgs[id]))
	for d := range in.sgs[id] {
		decls = append(decls, d)
	}
	if len(decls) == 0 {
		return
	}
	up.InInput = true
	slices.SortFunc(decls, func(a, b *sgDecl) int { return cmp.Or(strings.Compare(a.Name, b.Name), a.pos.compare(b.pos)) })
	if len(decls) > 1 {
		names := make([]string, len(decls))
		for i, d := range decls {
			names[i] = d.Name
		}
		for _, d := range decls {
			up.Errs = append(up.Errs, sgErr(d.Name, "spec.id", "%s is declared by %d SecurityGroups (%s); a spec.id names one group", id, len(decls), strings.Join(names, ", ")))
		}
		return
	}
	g := decls[0]
	up.Generation = g.Generation
	pg := PortGroupName(id)
	u := Unit{Kind: KindSecurityGroup, Name: id}
	ids := func(key string) map[string]string {
		m := PolicyIDs(instance, u)
		m[KeySecurityACL] = key
		return m
	}
	pgIDs := PolicyIDs(instance, u)
	pgIDs[KeySecurityGroup] = id
	sp := &SecurityGroupPlan{ID: id, PortGroup: &nbmodel.PortGroup{Name: pg, ExternalIDs: pgIDs}}

	// Members: the ports their networks plan (a reference to a port the
	// NB may not have would fail the group), as the group's memo keeps
	// them (sgmembers.go).
	m := in.sgMembersOf(id, pg, held)
	defer m.mu.Unlock()
	if len(m.ports) > 0 {
		sp.Ports = slices.Clone(m.ports)
	}

	// The base ACLs.
	sp.ACLs = append(sp.ACLs, baseACLsTo(pg, m.ping, m.ipv6Nets > 0, ids)...)

	// The rules: embedded ones, then SecurityGroupRule objects.
	rules := slices.Clone(g.rules)
	for r := range in.sgRules[id] {
		rules = append(rules, r)
	}
	slices.SortFunc(rules, func(a, b *ruleDecl) int { return cmp.Or(strings.Compare(a.ID, b.ID), a.pos.compare(b.pos)) })
	count := map[string]int{}
	for _, r := range rules {
		count[r.ID]++
	}
	for _, r := range rules {
		key := ACLKeyRule(r.ID)
		var err *InputError
		var acl *nbmodel.ACL
		var note string
		switch {
		case r.ID == "":
			err = ruleErr(r, g.Name, "spec.id", "is required")
		case count[r.ID] > 1:
			err = ruleErr(r, g.Name, "spec.id", "%s is declared %d times in SecurityGroup %s", r.ID, count[r.ID], id)
		case r.SecurityGroupID != id:
			err = ruleErr(r, g.Name, "spec.securityGroupId", "%s is not its group %s", r.SecurityGroupID, id)
		default:
			acl, note, err = in.ruleACL(r, g.Name, pg)
		}
		switch {
		case err != nil:
			if r.ID != "" && !slices.Contains(sp.KeepACLs, key) {
				sp.KeepACLs = append(sp.KeepACLs, key)
			}
			sp.RuleErrors = append(sp.RuleErrors, err)
		default:
			if note != "" {
				sp.Notes = append(sp.Notes, note)
			}
			if acl != nil {
				acl.ExternalIDs = ids(key)
				sp.ACLs = append(sp.ACLs, acl)
			}
		}
	}
	slices.SortFunc(sp.ACLs, func(a, b *nbmodel.ACL) int {
		return strings.Compare(a.ExternalIDs[KeySecurityACL], b.ExternalIDs[KeySecurityACL])
	})
	if in.zoned {
		in.zoneSecurityGroup(sp, m, pgIDs)
	}
	up.SecurityGroup = sp
}

// baseACLs are the ACLs of a default-deny Port_Group pg (a security
// group's, or a network's with --default-deny): its ports' IP traffic
// dropped both ways (SGDropPriority), a DHCP request and ping to gateways
// (sorted, either family; none: no ping ACL) allowed with their replies
// (SGBasePriority); with ipv6 (a member network has an ipv6Cidr), a
// DHCPv6 request too. ARP is no IP, so it passes; neighbor discovery,
// router solicitations and advertisements and MLD are IPv6 but pass too:
// ovn-northd allows them ahead of every ACL. ids gives each ACL's
// external_ids from its KeySecurityACL value.
func baseACLs(pg string, gateways []netip.Addr, ipv6 bool, ids func(key string) map[string]string) []*nbmodel.ACL {
	return baseACLsTo(pg, pingGatewayMatch(pg, gateways), ipv6, ids)
}

// gatewaysMatch is the ip4.dst or ip6.dst operand of the sorted addresses
// gateways: one address, or a set of them; "" for none.
func gatewaysMatch(gateways []netip.Addr) string {
	switch len(gateways) {
	case 0:
		return ""
	case 1:
		return gateways[0].String()
	}
	var b strings.Builder
	b.Grow(len(gateways) * 16)
	b.WriteByte('{')
	for i, a := range gateways {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(a.String())
	}
	b.WriteByte('}')
	return b.String()
}

// pingGatewayMatch is the match of Port_Group pg's ping ACL to gateways,
// sorted (IPv4 before IPv6): an echo request to an IPv4 gateway, or an
// ICMPv6 one to an IPv6 gateway; "" when there is none.
func pingGatewayMatch(pg string, gateways []netip.Addr) string {
	split := len(gateways)
	for i, a := range gateways {
		if a.Is6() {
			split = i
			break
		}
	}
	var alts []string
	if m := gatewaysMatch(gateways[:split]); m != "" {
		alts = append(alts, "ip4.dst == "+m+" && icmp4 && icmp4.type == 8")
	}
	if m := gatewaysMatch(gateways[split:]); m != "" {
		alts = append(alts, "ip6.dst == "+m+" && icmp6 && icmp6.type == 128")
	}
	switch len(alts) {
	case 0:
		return ""
	case 1:
		return "inport == @" + pg + " && " + alts[0]
	}
	return "inport == @" + pg + " && ((" + alts[0] + ") || (" + alts[1] + "))"
}

// baseACLsTo are baseACLs with their ping ACL's match as pingGatewayMatch
// gives it.
func baseACLsTo(pg, ping string, ipv6 bool, ids func(key string) map[string]string) []*nbmodel.ACL {
	in4, out4 := "inport == @"+pg, "outport == @"+pg
	acls := []*nbmodel.ACL{
		{Direction: nbmodel.ACLDirectionFromLport, Priority: SGDropPriority, Match: in4 + " && ip", Action: nbmodel.ACLActionDrop, ExternalIDs: ids("base/drop-egress")},
		{Direction: nbmodel.ACLDirectionToLport, Priority: SGDropPriority, Match: out4 + " && ip", Action: nbmodel.ACLActionDrop, ExternalIDs: ids("base/drop-ingress")},
		{Direction: nbmodel.ACLDirectionFromLport, Priority: SGBasePriority, Match: in4 + " && ip4 && udp.src == 68 && udp.dst == 67", Action: nbmodel.ACLActionAllowRelated, ExternalIDs: ids("base/dhcp")},
	}
	if ipv6 {
		acls = append(acls, &nbmodel.ACL{Direction: nbmodel.ACLDirectionFromLport, Priority: SGBasePriority,
			Match: in4 + " && ip6 && udp.src == 546 && udp.dst == 547", Action: nbmodel.ACLActionAllowRelated, ExternalIDs: ids("base/dhcp6")})
	}
	if ping != "" {
		acls = append(acls, &nbmodel.ACL{Direction: nbmodel.ACLDirectionFromLport, Priority: SGBasePriority,
			Match: ping, Action: nbmodel.ACLActionAllowRelated, ExternalIDs: ids("base/ping-gateway")})
	}
	return acls
}

// zoneSecurityGroup fills sp.Zones in interconnect mode. A zone whose NB
// holds a member's port gets the group's Port_Group with the members it
// holds (its ports there are the LSPs of its own zone's nodes: a
// type=remote twin runs neither ACL direction in that zone) and every
// ACL. A remote group's address set of a zone (OVN's $<pg>_ip4) would
// know only that zone's ports, and a zone may have none of them, so when
// a rule of a declared group names this group as its remote group, the
// group also has an explicit Address_Set (AddressSetName) with every
// member's address in all zones, in each zone where a group with such a
// rule has a member.
func (in *Input) zoneSecurityGroup(sp *SecurityGroupPlan, m *sgMemo, pgIDs map[string]string) {
	// Each zone's ports, in the members' order (by port): sorted, a port
	// of two members once.
	local := map[string][]Ref{}
	lastNode, lastZone := "", ""
	add := func(z, port string) {
		refs := local[z]
		if len(refs) > 0 && refs[len(refs)-1].Key == port {
			return
		}
		local[z] = append(refs, Ref{Column: "ports", Key: port})
	}
	for i, mb := range m.members {
		if i == 0 || mb.node != lastNode {
			lastNode, lastZone = mb.node, in.nodes[mb.node].zone
		}
		if lastZone != "" {
			add(lastZone, mb.port)
		}
		// A migration to another zone: its port is that zone's too.
		if tz := in.nodes[mb.target].zone; mb.target != "" && tz != "" && tz != lastZone {
			add(tz, mb.port)
		}
	}
	sp.Zones = map[string]*ZoneRows{}
	for z, refs := range local {
		zr := &ZoneRows{Rows: make([]Row, 0, 1+len(sp.ACLs)), Keep: sp.KeepACLs}
		zr.Rows = append(zr.Rows, Row{Model: sp.PortGroup, Refs: refs})
		for _, a := range sp.ACLs {
			zr.Rows = append(zr.Rows, Row{Model: a, Parent: sp.PortGroup.Name})
		}
		sp.Zones[z] = zr
	}
	setZones, v6 := in.remoteSetZones(sp.ID)
	if len(setZones) == 0 {
		return
	}
	// addrs: IPv4, then IPv6.
	split := len(m.addrs)
	for i, a := range m.addrs {
		if a.Is6() {
			split = i
			break
		}
	}
	ips := slices.Clone(m.addrStrs[:split])
	sp.AddressSet = &nbmodel.AddressSet{Name: AddressSetName(sp.ID), Addresses: ips, ExternalIDs: maps.Clone(pgIDs)}
	if v6 {
		sp.AddressSet6 = &nbmodel.AddressSet{Name: AddressSetName6(sp.ID), Addresses: slices.Clone(m.addrStrs[split:]), ExternalIDs: maps.Clone(pgIDs)}
	}
	for z := range setZones {
		if sp.Zones[z] == nil {
			sp.Zones[z] = &ZoneRows{}
		}
		sp.Zones[z].Rows = append(sp.Zones[z].Rows, Row{Model: sp.AddressSet})
		if v6 {
			sp.Zones[z].Rows = append(sp.Zones[z].Rows, Row{Model: sp.AddressSet6})
		}
	}
}

// remoteSetZones are the zones where group id's Address_Sets are needed
// in interconnect mode: those of the member nodes of every declared group
// with a rule whose remote group id is (its ACLs match the set there). A
// member whose port its network does not plan counts too: a set where no
// ACL uses it costs nothing, a missing one would break the ACL. v6: one
// of those rules is IPv6 (the IPv6 set is needed too).
func (in *Input) remoteSetZones(id string) (out set[string], v6 bool) {
	out = set[string]{}
	groups := set[string]{}
	for r := range in.sgRemote[id] {
		groups.add(r.SecurityGroupID)
		if strings.EqualFold(strings.TrimSpace(r.EtherType), "ipv6") {
			v6 = true
		}
	}
	for g := range groups {
		if len(in.sgs[g]) == 0 {
			continue
		}
		for nd := range in.sgNodes[g] {
			if z := in.nodes[nd].zone; z != "" {
				out.add(z)
			}
		}
	}
	return out, v6
}

// remoteGroupsOf adds, in interconnect mode, the groups that the rules of
// group g name as remote groups: where their Address_Sets are needed
// follows g's members.
func (in *Input) remoteGroupsOf(g string, affected set[Unit]) {
	if !in.zoned {
		return
	}
	for d := range in.sgs[g] {
		for _, r := range d.rules {
			if r.RemoteGroupID != "" {
				affected.add(Unit{Kind: KindSecurityGroup, Name: r.RemoteGroupID})
			}
		}
	}
	for r := range in.sgRules[g] {
		if r.RemoteGroupID != "" {
			affected.add(Unit{Kind: KindSecurityGroup, Name: r.RemoteGroupID})
		}
	}
}

// plannedVMPorts are the VM ports valid network n plans: those of its VM
// interfaces without an error, its address claims decided as its own plan
// decides them (planVMPorts), with their IPs. It costs what the network's
// VMs cost, once: a group is re-planned on every binding change of a
// member and has members on most networks, so the ports of a network
// whose VMs claim no address twice (then held, the NB's claims, decides
// nothing) are kept until its VM interfaces or the network change
// (portsMemo): memoized says they are.
func (in *Input) plannedVMPorts(n *network, held Held) (ports *netVMPorts, memoized bool) {
	if ports, ok := in.portsMemo.get(n); ok {
		return ports, true
	}
	decls := make([]*vmDecl, 0, len(in.vms[n.Name]))
	for d := range in.vms[n.Name] {
		if d.NetworkNamespace == n.Namespace {
			decls = append(decls, d)
		}
	}
	vms := make([]*VMInterface, len(decls))
	declOf := make(map[*VMInterface]*vmDecl, len(decls))
	for i, d := range decls {
		vms[i] = &d.VMInterface
		declOf[vms[i]] = d
	}
	out := &netVMPorts{n: n, byName: map[string]vmPortIP{}, byDecl: make(map[*vmDecl]vmPortIP, len(decls))}
	claimed := set[string]{}
	clean := true
	for _, vp := range planVMPorts(vms, n, held) {
		if vp.err == nil {
			pi := vmPortIP{port: vp.port, ip: vp.ip, ip6: vp.ip6}
			out.byName[vp.port] = pi
			out.byDecl[declOf[vp.VMInterface]] = pi
		}
		if vp.mac == "" { // invalid on its own: claims nothing
			continue
		}
		keys := []string{"MAC " + vp.mac}
		if vp.ip != "" { // none on an IPv6-only network
			keys = append(keys, "IP "+vp.ip)
		}
		for _, k := range keys {
			if _, dup := claimed[k]; dup {
				clean = false
			}
			claimed.add(k)
		}
	}
	if clean {
		in.portsMemo.put(n, out, len(in.networks))
	}
	return out, clean
}

// netVMPorts are the VM ports a network plans, with their IPs: by name,
// and by the declaration of the VM interface each is planned for.
type netVMPorts struct {
	n      *network
	byName map[string]vmPortIP
	byDecl map[*vmDecl]vmPortIP
}

// vmPortIP is a VM port and its addresses: IPv4, and IPv6 (vmIPv6).
type vmPortIP struct {
	port, ip string
	ip6      []string
}

// of is the port VM interface d of the network gets, if any, with its
// addresses: its own, or the port of its name that another declaration
// of it gets.
func (p *netVMPorts) of(d *vmDecl) (vmPortIP, bool) {
	if pi, ok := p.byDecl[d]; ok {
		return pi, true
	}
	pi, ok := p.byName[VMPortName(p.n.Name, d.Namespace, d.VMI, d.Interface)]
	return pi, ok
}

// portsMemo keeps plannedVMPorts' answer per network while the network
// (its *network, replaced when its declaration changes) and its VM
// declarations are the same: replaceVMs forgets a network whose VM
// interfaces change. Plans of several units may run at once (under the
// input's read lock; replaceVMs holds its write lock).
type portsMemo struct {
	mu      sync.Mutex
	entries map[string]*netVMPorts // by network name
}

func (m *portsMemo) get(n *network) (*netVMPorts, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.entries[n.Name]
	if e == nil || e.n != n {
		return nil, false
	}
	return e, true
}

// put keeps ports; when there are twice as many entries as networks (those
// of networks gone stay until then), all are dropped.
func (m *portsMemo) put(n *network, ports *netVMPorts, networks int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.entries == nil {
		m.entries = map[string]*netVMPorts{}
	}
	if len(m.entries) >= 2*networks+16 {
		clear(m.entries)
	}
	m.entries[n.Name] = ports
}

// forget drops network name's entry: its VM interfaces changed.
func (m *portsMemo) forget(name string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.entries, name)
}

// ruleACL is rule r's ACL in group pg (whose SecurityGroup is named
// group), or its error: ip4 for etherType IPv4 (or none), ip6 for IPv6.
// An ACL may come with a note saying what of the rule was read as ONOS
// read it (both remotes, ports beside protocol any).
func (in *Input) ruleACL(r *ruleDecl, group, pg string) (*nbmodel.ACL, string, *InputError) {
	acl := &nbmodel.ACL{Priority: SGRulePriority, Action: nbmodel.ACLActionAllowRelated}
	var m []string
	remote := "src"
	switch strings.ToLower(r.Direction) {
	case "ingress":
		acl.Direction = nbmodel.ACLDirectionToLport
		m = append(m, "outport == @"+pg)
	case "egress":
		acl.Direction = nbmodel.ACLDirectionFromLport
		m = append(m, "inport == @"+pg)
		remote = "dst"
	case "":
		return nil, "", ruleErr(r, group, "spec.direction", "is required: ingress or egress")
	default:
		return nil, "", ruleErr(r, group, "spec.direction", "%q is neither ingress nor egress", r.Direction)
	}
	ip := "ip4"
	switch strings.ToLower(strings.TrimSpace(r.EtherType)) {
	case "", "ipv4":
	case "ipv6":
		ip = "ip6"
	default:
		return nil, "", ruleErr(r, group, "spec.etherType", "%q is neither IPv4 nor IPv6", r.EtherType)
	}
	m = append(m, ip)
	remote = ip + "." + remote
	var notes []string
	note := func(format string, args ...any) {
		notes = append(notes, fmt.Sprintf(format, args...))
	}
	switch {
	case r.RemoteIPPrefix != "" && r.RemoteGroupID != "":
		// ONOS's reading: the group, the prefix ignored.
		note("spec.remoteIpPrefix %s is ignored beside spec.remoteGroupId %s, as ONOS ignored it", r.RemoteIPPrefix, r.RemoteGroupID)
	}
	switch {
	case r.RemoteIPPrefix != "" && r.RemoteGroupID == "":
		p, err := parseRemotePrefix(r.RemoteIPPrefix, ip == "ip6")
		if err != nil {
			return nil, "", ruleErr(r, group, "spec.remoteIpPrefix", "%v", err)
		}
		if p.Bits() > 0 {
			s := p.String()
			if p.IsSingleIP() {
				s = p.Addr().String()
			}
			m = append(m, remote+" == "+s)
		}
	case r.RemoteGroupID != "":
		if len(in.sgs[r.RemoteGroupID]) == 0 {
			return nil, "", ruleErr(r, group, "spec.remoteGroupId", "SecurityGroup %s is not declared", r.RemoteGroupID)
		}
		set := PortGroupName(r.RemoteGroupID) + "_" + ip // OVN's, of the group's Port_Group
		if in.zoned {
			set = AddressSetName(r.RemoteGroupID) // ours, every zone's members
			if ip == "ip6" {
				set = AddressSetName6(r.RemoteGroupID)
			}
		}
		m = append(m, remote+" == $"+set)
	}
	proto, protoNote, err := protocolMatch(r, group, ip == "ip6")
	if err != nil {
		return nil, "", err
	}
	if protoNote != "" {
		note("%s", protoNote)
	}
	m = append(m, proto...)
	acl.Match = strings.Join(m, " && ")
	if len(notes) == 0 {
		return acl, "", nil
	}
	return acl, fmt.Sprintf("%s rule %s: %s", ObjSecurityGroup+" "+group, r.ID, strings.Join(notes, "; ")), nil
}

// parseRemotePrefix reads a prefix or address (a /32 or /128) of the
// rule's family (IPv6 when v6); host bits are cleared, as Neutron does.
func parseRemotePrefix(s string, v6 bool) (netip.Prefix, error) {
	family, other := "IPv4", "IPv6"
	if v6 {
		family, other = other, family
	}
	var p netip.Prefix
	if !strings.Contains(s, "/") {
		a, err := netip.ParseAddr(s)
		if err != nil || a.Zone() != "" {
			return netip.Prefix{}, fmt.Errorf("%q is not an %s address or prefix", s, family)
		}
		a = a.Unmap()
		p = netip.PrefixFrom(a, a.BitLen())
	} else {
		var err error
		if p, err = netip.ParsePrefix(s); err != nil {
			return netip.Prefix{}, fmt.Errorf("%q is not an %s prefix", s, family)
		}
	}
	if p.Addr().Is6() != v6 {
		return netip.Prefix{}, fmt.Errorf("%s is an %s prefix; the rule's spec.etherType is %s", s, other, family)
	}
	return p.Masked(), nil
}

// IP protocols by the names ONOS and Neutron accept ("icmp" is ICMPv6 in
// an IPv6 rule, as Neutron reads it).
var protocolNumbers = map[string]int{"tcp": 6, "udp": 17, "icmp": 1, "sctp": 132, "ipv6-icmp": 58, "icmpv6": 58}

// protocolMatch is the match of rule r's protocol and port range: the
// destination port in both directions (ONOS matched the source port of
// egress rules), ICMP type and code (ONOS swapped them). Where ONOS read
// a range as every port (0 to 0, or ports beside protocol any), so does
// it, and the note says so.
func protocolMatch(r *ruleDecl, group string, v6 bool) ([]string, string, *InputError) {
	p := strings.ToLower(strings.TrimSpace(r.Protocol))
	num := -1
	switch {
	case p == "" || p == "any":
	case protocolNumbers[p] != 0:
		num = protocolNumbers[p]
	default:
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 || n > 255 {
			return nil, "", ruleErr(r, group, "spec.protocol", "%q is none of tcp, udp, icmp, sctp, any or an IP protocol number 0-255", r.Protocol)
		}
		if n > 0 {
			num = n
		}
	}
	switch {
	case v6 && num == 1:
		num = 58
	case !v6 && num == 58:
		return nil, "", ruleErr(r, group, "spec.protocol", "%q is ICMPv6: the rule's spec.etherType is IPv4", r.Protocol)
	}
	icmp := "icmp4"
	if v6 {
		icmp = "icmp6"
	}
	lo, hi := r.PortRangeMin, r.PortRangeMax
	switch num {
	case -1:
		switch {
		case (lo != nil || hi != nil) && p == "":
			return nil, "", ruleErr(r, group, "spec.portRangeMin", "needs a spec.protocol (tcp, udp, sctp or icmp)")
		case lo != nil || hi != nil:
			return nil, fmt.Sprintf("spec.portRangeMin and spec.portRangeMax are ignored with protocol %s: the rule allows every protocol, as ONOS read it", r.Protocol), nil
		}
		return nil, "", nil
	case 6, 17, 132:
		name := map[int]string{6: "tcp", 17: "udp", 132: "sctp"}[num]
		if lo == nil && hi == nil {
			return []string{name}, "", nil
		}
		if lo == nil {
			return nil, "", ruleErr(r, group, "spec.portRangeMin", "is required with spec.portRangeMax")
		}
		min, max := *lo, *lo
		if hi != nil {
			max = *hi
		}
		// Port 0 is no port: ONOS read a range from 0 as starting at
		// the first port, and 0 to 0 as every port.
		note := ""
		if min == 0 {
			min = 1
			if max == 0 {
				max = 65535
				note = "spec.portRangeMin 0 with no portRangeMax above it is every port, as ONOS read it"
			}
		}
		switch {
		case min < 1 || min > 65535:
			return nil, "", ruleErr(r, group, "spec.portRangeMin", "%d is not a port (1-65535)", min)
		case max < 1 || max > 65535:
			return nil, "", ruleErr(r, group, "spec.portRangeMax", "%d is not a port (1-65535)", max)
		case max < min:
			return nil, "", ruleErr(r, group, "spec.portRangeMax", "%d is below spec.portRangeMin %d", max, min)
		case max == min:
			return []string{name, fmt.Sprintf("%s.dst == %d", name, min)}, note, nil
		case min == 1 && max == 65535:
			return []string{name}, note, nil
		}
		return []string{name, fmt.Sprintf("%s.dst >= %d", name, min), fmt.Sprintf("%s.dst <= %d", name, max)}, note, nil
	case 1, 58:
		out := []string{icmp}
		if lo != nil {
			if *lo < 0 || *lo > 255 {
				return nil, "", ruleErr(r, group, "spec.portRangeMin", "%d is not an ICMP type (0-255)", *lo)
			}
			out = append(out, fmt.Sprintf("%s.type == %d", icmp, *lo))
		}
		if hi != nil {
			switch {
			case lo == nil:
				return nil, "", ruleErr(r, group, "spec.portRangeMax", "(the ICMP code) needs spec.portRangeMin (the ICMP type)")
			case *hi < 0 || *hi > 255:
				return nil, "", ruleErr(r, group, "spec.portRangeMax", "%d is not an ICMP code (0-255)", *hi)
			}
			out = append(out, fmt.Sprintf("%s.code == %d", icmp, *hi))
		}
		return out, "", nil
	}
	if lo != nil || hi != nil {
		return nil, "", ruleErr(r, group, "spec.portRangeMin", "is for tcp, udp, sctp and icmp, not protocol %d", num)
	}
	return []string{fmt.Sprintf("ip.proto == %d", num)}, "", nil
}

// Rows are the desired rows of security group sp: its Port_Group, which
// refers to its ports (rows of their networks' units) by name, and its
// ACLs.
func (sp *SecurityGroupPlan) Rows() []Row {
	rows := make([]Row, 0, 1+len(sp.ACLs))
	pg := Row{Model: sp.PortGroup}
	for _, p := range sp.Ports {
		pg.Refs = append(pg.Refs, Ref{Column: "ports", Key: p})
	}
	rows = append(rows, pg)
	for _, a := range sp.ACLs {
		rows = append(rows, Row{Model: a, Parent: sp.PortGroup.Name})
	}
	return rows
}
