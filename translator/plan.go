package translator

import (
	"cmp"
	"errors"
	"fmt"
	"hash/fnv"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/kubevirt-ovn/kubevirt-ovn/nbmodel"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/gateways"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/tunnelkeys"
)

// SNATPortRange is the source port range SNAT uses (the seed's 1025-65535).
const SNATPortRange = "1025-65535"

// Plan is the desired state of every unit of the input: the rows each network
// and each router should own. Units whose input is invalid are in Failed and
// their existing rows are left as they are.
type Plan struct {
	Networks []NetworkPlan
	Routers  []RouterPlan
	// Failed lists the units whose input is invalid, with every reason.
	Failed map[Unit][]error
	// Errors is every input error in a stable order, including VM interface
	// errors that leave only that interface's port as it was.
	Errors []error
	// Notes are the networks' KeyNotes.
	Notes []string
	// FloatingIPs are the status of every floating IP, by router, then
	// name.
	FloatingIPs []FloatingIPStatus `json:",omitempty"`
	// SecurityGroups are the planned security groups, by spec.id.
	SecurityGroups []SecurityGroupPlan `json:",omitempty"`
	// LoadBalancers are the status of every load balancer a router
	// plans, by router, then name.
	LoadBalancers []LoadBalancerStatus `json:",omitempty"`
}

// NetworkPlan is the desired rows of one network.
type NetworkPlan struct {
	Name   string
	Switch *nbmodel.LogicalSwitch
	// Ports are the localnet port and the VM ports, sorted by name.
	Ports []*nbmodel.LogicalSwitchPort
	// KeepPorts names VM ports whose input is invalid: an existing row of
	// that name is left as it is rather than deleted.
	KeepPorts []string
	// VMErrors say why, one per port in KeepPorts.
	VMErrors []error `json:"-"`
	// DHCP is the network's DHCP options, which its VM ports refer to;
	// nil for a network without gatewayIp (no DHCP).
	DHCP *nbmodel.DHCPOptions `json:",omitempty"`
	// DHCPv6 is its DHCPv6 options, nil unless its ipv6AddressMode is
	// dhcpv6-stateful or dhcpv6-stateless.
	DHCPv6 *nbmodel.DHCPOptions `json:",omitempty"`
	// LoadBalancers are the Load_Balancer rows its switch refers to, one
	// per protocol of each of its valid load balancers, sorted by name
	// (loadbalancer.go).
	LoadBalancers []*nbmodel.LoadBalancer `json:",omitempty"`
	// LBHealthChecks are their health checks, by row, then VIP.
	LBHealthChecks []LBHealthCheckRow `json:",omitempty"`
	// DefaultDeny is its default-deny Port_Group of its VM ports, with
	// --default-deny (nil without).
	DefaultDeny *DefaultDenyPlan `json:",omitempty"`
	// Zones are the rows of each zone's NB in interconnect mode (nil
	// otherwise); a zone without an entry holds none of them.
	Zones map[string]*ZoneRows `json:",omitempty"`
	// Keys are its switch's and ports' tunnel keys in interconnect mode.
	Keys TunnelKeys `json:"-"`
	// KeyNotes say, once, that its switch moved to another tunnel key
	// (a collision with a foreign datapath, a key out of range).
	KeyNotes []string `json:"-"`
	// VMNotes say what of a VM interface's migration is not followed (a
	// target that is no chassis): its port stays on its source.
	VMNotes []VMNote `json:"-"`
}

// VMNote is a note on a VM interface of VMI (namespace/name): why its
// migration is not followed, or, with Reason ReasonMigrationAtRisk, may
// not be.
type VMNote struct {
	VMI    string
	Text   string
	Reason string
}

// RouterPlan is the desired rows of one router.
type RouterPlan struct {
	Name   string
	Router *nbmodel.LogicalRouter
	// Ports are the router's ports: one per internal network and the
	// gateway port, sorted by name.
	Ports []*nbmodel.LogicalRouterPort
	// GatewayChassis belong to the gateway port, highest priority first.
	GatewayChassis []*nbmodel.GatewayChassis
	// SwitchPorts are the router-type ports on network switches.
	SwitchPorts []SwitchPort
	NATs        []*nbmodel.NAT
	Routes      []*nbmodel.LogicalRouterStaticRoute
	MACBindings []*nbmodel.StaticMACBinding
	// Policies let out only the floating IPs' fixed addresses of a router
	// with enableSnat false (floatingip.go), highest priority first.
	Policies []*nbmodel.LogicalRouterPolicy `json:",omitempty"`
	// LoadBalancers are the load balancers of its internal networks, one
	// row per protocol, sorted by name; the router refers to them.
	LoadBalancers []*nbmodel.LoadBalancer `json:",omitempty"`
	// LBHealthChecks are their health checks, by row, then VIP.
	LBHealthChecks []LBHealthCheckRow `json:",omitempty"`
	// Gateway is the chassis chosen to be active and its failover order.
	Gateway *GatewayChoice
	// SNATIP is the router's SNAT IP, empty without an external network.
	SNATIP string
	// Zones are the rows of each zone's NB in interconnect mode (nil
	// otherwise); a zone without an entry holds none of them.
	Zones map[string]*ZoneRows `json:",omitempty"`
	// Keys are its switch's and ports' tunnel keys in interconnect mode.
	Keys TunnelKeys `json:"-"`
	// Notes say what of its declaration was ignored (enableSnat or a peer
	// router without an external network), as ONOS ignored it.
	Notes []string `json:",omitempty"`
}

// SwitchPort is a router-owned port on the switch of Network.
type SwitchPort struct {
	Network string
	Port    *nbmodel.LogicalSwitchPort
}

// GatewayChoice is the elected gateway chassis and the failover candidates,
// in priority order (Chassis[0] is the primary).
type GatewayChoice struct {
	Chassis []string
}

// network is a validated network.
type network struct {
	*Network
	prefix  netip.Prefix
	gateway netip.Addr // invalid when the network has no gatewayIp
	// prefix6 and gateway6 are its IPv6 side (ipv6Cidr, ipv6GatewayIp),
	// invalid when it has none.
	prefix6  netip.Prefix
	gateway6 netip.Addr
	// mode6 is its IPv6 address mode (IPv6SLAAC, IPv6DHCPv6Stateless,
	// IPv6DHCPv6Stateful).
	mode6   string
	segment int
	// pool is the ipPool's first and last address; invalid without one.
	// Informational (IPPool): it fences no VM address. pool6 is
	// ipv6Pool's.
	poolStart, poolEnd   netip.Addr
	pool6Start, pool6End netip.Addr
}

// UnitPlan is the plan of one unit.
type UnitPlan struct {
	Unit Unit
	// Network is the network's plan when it is declared once and valid.
	Network *NetworkPlan
	// Router is the router's plan when it is declared once and valid.
	Router *RouterPlan
	// SecurityGroup is the group's plan when it is declared once; its
	// rules' own errors are in it.
	SecurityGroup *SecurityGroupPlan
	// Errs say why the unit's input is invalid, sorted by message: its rows
	// are left as they are. A network that did not decode from one source
	// but is valid in another has both Errs and Network, as in Plan.
	Errs []error
	// Neither Network, Router nor Errs: the unit is not in the input and
	// its rows go.

	// Generation is the router's metadata.generation when the router is
	// declared (also when invalid), of its first declaration by creation
	// time.
	Generation int64
	// InInput is true when the unit is declared in the input, valid or not.
	InInput bool
	// FloatingIPs are the status of the floating IPs that name the router
	// (also when the router is invalid or not declared), by name.
	FloatingIPs []FloatingIPStatus
	// LoadBalancers are the status of the load balancers on the router's
	// internal networks when the router is planned, by name; for a network
	// that no router has as an internal network, of the load balancers on
	// it.
	LoadBalancers []LoadBalancerStatus
	// Affected are other units to plan again because this plan changed a
	// decision theirs read: in interconnect mode, a router whose plan has
	// another primary gateway than its last one (an order kubevirt-ovn
	// rebalance wrote, adopted; a zone agent following the allocator's
	// new decision) moved its home zone, which its networks' zones follow
	// (and its own rows, in every zone).
	Affected []Unit
}

// Build computes the desired rows of every network and router in s. It is a
// pure function: the same snapshot and instance give the same plan.
func Build(s *Snapshot, instance string) *Plan {
	in := NewInputFrom(s)
	p := &Plan{Failed: map[Unit][]error{}}
	for _, u := range in.Units() {
		up := in.Plan(u, instance, s.Held)
		if up.Network != nil {
			p.Networks = append(p.Networks, *up.Network)
			p.Errors = append(p.Errors, up.Network.VMErrors...)
			p.Notes = append(p.Notes, up.Network.KeyNotes...)
			for _, n := range up.Network.VMNotes {
				p.Notes = append(p.Notes, n.Text)
			}
		}
		if up.Router != nil {
			p.Routers = append(p.Routers, *up.Router)
			p.Notes = append(p.Notes, up.Router.Notes...)
		}
		if sp := up.SecurityGroup; sp != nil {
			p.SecurityGroups = append(p.SecurityGroups, *sp)
			p.Errors = append(p.Errors, sp.RuleErrors...)
			p.Notes = append(p.Notes, sp.Notes...)
		}
		p.FloatingIPs = append(p.FloatingIPs, up.FloatingIPs...)
		p.LoadBalancers = append(p.LoadBalancers, up.LoadBalancers...)
		for _, st := range up.LoadBalancers {
			if st.Err != nil {
				p.Errors = append(p.Errors, st.Err)
			} else if st.Ready && st.Reason != "" {
				p.Notes = append(p.Notes, fmt.Sprintf("%s %s: %s", ObjLoadBalancer, st.Name, st.Reason))
			}
		}
		for _, st := range up.FloatingIPs {
			if st.Err != nil {
				p.Errors = append(p.Errors, st.Err)
			}
		}
		if len(up.Errs) > 0 {
			p.Failed[u] = up.Errs
			p.Errors = append(p.Errors, up.Errs...)
		}
	}
	slices.SortStableFunc(p.Errors, byMessage)
	p.Errors = slices.CompactFunc(p.Errors, func(a, b error) bool { return a.Error() == b.Error() })
	return p
}

func byMessage(a, b error) int { return strings.Compare(a.Error(), b.Error()) }

// Plan plans unit u from the current input; held says who holds claims in
// the NB now (nil: nobody). It reads u's objects and the claims u competes
// for, not the whole input.
func (in *Input) Plan(u Unit, instance string, held Held) UnitPlan {
	if held == nil {
		held = noClaims{}
	}
	in.mu.RLock()
	defer in.mu.RUnlock()
	up := UnitPlan{Unit: u}
	if err := in.invalidErr(u); err != nil {
		up.InInput = true
		up.Errs = append(up.Errs, err)
	}
	switch u.Kind {
	case KindNetwork:
		in.planNetwork(&up, instance, held)
	case KindRouter:
		in.planRouter(&up, instance, held)
		if in.zoned && in.homes.moved(u.Name, up) {
			// The router's primary gateway changed under its own plan
			// (it adopted an order kubevirt-ovn rebalance wrote; a zone
			// agent follows the allocator's new decision): its home
			// zone moved, and with it its networks' zones and its
			// remote ports elsewhere; its own rows move to a zone whose
			// controller may not have planned it.
			affected := set[Unit]{u: {}}
			in.zoneAffected(affected)
			up.Affected = sortedUnits(affected)
		}
	case KindSecurityGroup:
		in.planSecurityGroup(&up, instance, held)
	}
	if in.zoned && !up.InInput {
		in.keys.Release(u)
	}
	if in.zoned && up.InInput && len(in.nodes) == 0 && len(up.Errs) == 0 {
		// No zone's chassis are known (yet): where rows go is unknown,
		// and the rows there are left as they are.
		up.Network, up.Router, up.SecurityGroup = nil, nil, nil
		kind := ObjNAD
		switch u.Kind {
		case KindRouter:
			kind = ObjVirtualRouter
		case KindSecurityGroup:
			kind = ObjSecurityGroup
		}
		up.Errs = append(up.Errs, &InputError{Kind: kind, Object: u.Name, Msg: "waits: no zone's Southbound lists a chassis yet", Reason: ReasonWaiting})
	}
	if u.Kind == KindRouter {
		in.finishFloatingIPs(&up)
	}
	slices.SortStableFunc(up.Errs, byMessage)
	return up
}

// planNetwork validates network up.Unit and plans its switch and ports. A
// network name declared in two namespaces is an error of each declaration.
func (in *Input) planNetwork(up *UnitPlan, instance string, held Held) {
	name := up.Unit.Name
	defs := make([]*networkDecl, 0, len(in.networks[name]))
	for d := range in.networks[name] {
		defs = append(defs, d)
	}
	if len(defs) == 0 {
		return
	}
	up.InInput = true
	slices.SortFunc(defs, func(a, b *networkDecl) int { return a.pos.compare(b.pos) })
	if len(defs) > 1 {
		var where []string
		for _, d := range defs {
			where = append(where, d.Namespace)
		}
		slices.Sort(where)
		for _, d := range defs {
			up.Errs = append(up.Errs, networkErr(&d.Network, "metadata.name", "%s is defined in namespaces %s; network names must be unique", name, strings.Join(where, ", ")))
		}
		return
	}
	n := defs[0].valid
	if n == nil {
		up.Errs = append(up.Errs, defs[0].errs...)
		return
	}
	if sw := SwitchName(name); hostsHas(in.nodeHosts, sw) {
		// ovn-kubernetes names each node's Logical_Switch after the node:
		// it would add its ports to ours, update it, and delete it when
		// it takes the switch for a stale node's.
		up.Errs = append(up.Errs, networkErr(&defs[0].Network, "metadata.name",
			"%q makes switch %s, which is also the name of a node (a chassis's hostname): ovn-kubernetes names each node's Logical_Switch after the node, so the two would be one switch; rename the network", name, sw))
		return
	}

	var zones set[string]
	if in.zoned {
		var settled bool
		zones, settled = in.networkZones(name, held)
		if in.follow && in.followZone != "" && settled && !zones.has(in.followZone) {
			// Nothing of it in the follower's zone (SetFollowerZone): no
			// rows, no keys, and none of its VM ports built. Every zone
			// agent plans every network at its start and resyncs; a
			// router whose home is not decided yet might bring it here.
			up.Network = &NetworkPlan{Name: name, Zones: map[string]*ZoneRows{}}
			return
		}
		if in.follow {
			// A switch without its key from the allocator waits
			// (takeKeys) before its VM ports are built: before the
			// allocator's first decisions every agent plans every
			// network so.
			if _, _, err := in.takeKeys(Unit{Kind: KindNetwork, Name: name}, []tunnelkeys.Ref{{Switch: SwitchName(name)}}, held); err != nil {
				up.Errs = append(up.Errs, err)
				up.LoadBalancers = in.routerlessLoadBalancers(n)
				return
			}
		}
	}
	// The VM interfaces on this network, as a snapshot lists them.
	vmDecls := make([]*vmDecl, 0, len(in.vms[name]))
	for d := range in.vms[name] {
		if d.NetworkNamespace == n.Namespace {
			vmDecls = append(vmDecls, d)
		}
	}
	slices.SortFunc(vmDecls, func(a, b *vmDecl) int { return a.pos.compare(b.pos) })
	vms := make([]*VMInterface, len(vmDecls))
	for i, d := range vmDecls {
		vms[i] = &d.VMInterface
	}
	up.Network = networkPlan(n, vms, instance, held, in.binder())
	up.Network.LoadBalancers, up.Network.LBHealthChecks = in.switchLoadBalancers(n, instance)
	in.withSiblingLoadBalancers(up.Network, n, instance)
	up.LoadBalancers = in.routerlessLoadBalancers(n)
	if in.defaultDeny {
		up.Network.DefaultDeny = defaultDenyPlan(n, up.Network.Ports, instance)
	}
	if in.zoned {
		if err := in.zoneNetwork(up.Network, vms, zones, held); err != nil {
			up.Errs = append(up.Errs, err)
			up.Network = nil
		}
	}
}

// networkPlan plans the switch of valid network n and its ports, for the VM
// interfaces vms on it, bound to their chassis by binder.
func networkPlan(n *network, vms []*VMInterface, instance string, held Held, binder portBinder) *NetworkPlan {
	name := n.Name
	u := Unit{Kind: KindNetwork, Name: name}
	np := &NetworkPlan{
		Name:   name,
		Switch: &nbmodel.LogicalSwitch{Name: SwitchName(name), ExternalIDs: SwitchIDs(instance, u)},
		DHCP:   dhcpOptions(n, instance),
		DHCPv6: dhcpv6Options(n, instance),
	}
	if n.Type == NetworkFlat || n.Type == NetworkVLAN {
		ln := &nbmodel.LogicalSwitchPort{
			Name:        LocalnetPortName(name),
			Type:        "localnet",
			Addresses:   []string{"unknown"},
			Options:     map[string]string{"network_name": n.PhysicalNetworkName},
			ExternalIDs: OwnerIDs(instance, u),
		}
		if n.PhysicalNetworkName == "" {
			ln.Options["network_name"] = name
		}
		if n.Type == NetworkVLAN {
			tag := n.segment
			ln.Tag = &tag
		}
		np.Ports = append(np.Ports, ln)
	}

	for _, vp := range planVMPorts(vms, n, held) {
		if vp.err != nil {
			np.KeepPorts = append(np.KeepPorts, vp.port)
			np.VMErrors = append(np.VMErrors, vp.err)
			continue
		}
		addr := strings.Join(slices.DeleteFunc(append([]string{vp.mac, vp.ip}, vp.ip6...), func(s string) bool { return s == "" }), " ")
		security := strings.Join(append([]string{addr}, vp.ll6...), " ")
		ids := OwnerIDs(instance, u)
		ids[KeyVMI] = vp.Namespace + "/" + vp.VMI
		opts, note := binder.binding(vp.VMInterface, vp.port)
		if note != "" {
			np.VMNotes = append(np.VMNotes, VMNote{VMI: vp.Namespace + "/" + vp.VMI, Text: note})
		}
		if risk := binder.risk(vp.VMInterface, opts); risk != "" {
			np.VMNotes = append(np.VMNotes, VMNote{VMI: vp.Namespace + "/" + vp.VMI, Text: risk, Reason: ReasonMigrationAtRisk})
		}
		np.Ports = append(np.Ports, &nbmodel.LogicalSwitchPort{
			Name:         vp.port,
			Addresses:    []string{addr},
			PortSecurity: []string{security},
			Options:      opts,
			ExternalIDs:  ids,
		})
	}
	slices.SortFunc(np.Ports, func(a, b *nbmodel.LogicalSwitchPort) int { return strings.Compare(a.Name, b.Name) })
	slices.Sort(np.KeepPorts)
	return np
}

// DHCPLeaseTime is the lease DHCP offers, in seconds: a day, as Neutron's
// default. ONOS offered infinite leases; a finite one makes a VM renew,
// and a renewal picks up a change of the network's options.
const DHCPLeaseTime = 86400

// dhcpOptions are the DHCP options of valid network n, nil when it has no
// gatewayIp: OVN answers DHCP from a server_id in the subnet, and Neutron
// too offers no DHCP without a gateway (or a DHCP port's address).
//
// The router option (3) is the gateway only with defaultRoute. Host
// routes are option 121, with the default route appended with
// defaultRoute: an RFC 3442 client ignores option 3 when 121 is present.
// DNS servers are the network's IPv4 dnses only (no public fallback, as
// ONOS had), the MTU the network's when DHCP can carry it (68 or more).
func dhcpOptions(n *network, instance string) *nbmodel.DHCPOptions {
	if !n.gateway.IsValid() {
		return nil
	}
	gw := n.gateway.String()
	opts := map[string]string{
		"server_id":  gw,
		"server_mac": DHCPServerMAC(n.Name),
		"lease_time": strconv.Itoa(DHCPLeaseTime),
	}
	if n.DefaultRoute {
		opts["router"] = gw
	}
	var dns []string
	for _, d := range n.DNSes {
		if a, err := netip.ParseAddr(d); err == nil && a.Is4() {
			dns = append(dns, a.String())
		}
	}
	if len(dns) > 0 {
		opts["dns_server"] = "{" + strings.Join(dns, ", ") + "}"
	}
	if n.MTU >= 68 {
		opts["mtu"] = strconv.Itoa(n.MTU)
	}
	if slices.ContainsFunc(n.HostRoutes, func(hr HostRoute) bool { return hr.Destination != "" }) {
		var routes []string
		hasDefault := false
		for _, hr := range n.HostRoutes {
			if hr.Destination == "" {
				continue
			}
			dst, _ := parseRoutePrefix(hr.Destination)
			nh := "0.0.0.0" // on-link (RFC 3442)
			if a, err := parseIPv4(hr.Nexthop); err == nil {
				nh = a.String()
			}
			hasDefault = hasDefault || dst.Bits() == 0
			routes = append(routes, dst.String()+","+nh)
		}
		if n.DefaultRoute && !hasDefault {
			routes = append(routes, "0.0.0.0/0,"+gw)
		}
		opts["classless_static_route"] = "{" + strings.Join(routes, ", ") + "}"
	}
	ids := OwnerIDs(instance, Unit{Kind: KindNetwork, Name: n.Name})
	ids[KeyDHCPNetwork] = n.Name
	return &nbmodel.DHCPOptions{Cidr: n.prefix.String(), Options: opts, ExternalIDs: ids}
}

// IPv6 address modes (network-config ipv6AddressMode).
const (
	IPv6SLAAC           = "slaac"
	IPv6DHCPv6Stateless = "dhcpv6-stateless"
	IPv6DHCPv6Stateful  = "dhcpv6-stateful"
)

// DHCPv6Key is the KeyDHCPNetwork value of network's DHCPv6 options: its
// name and "/ipv6" (a name of Kubernetes' has no '/').
func DHCPv6Key(network string) string { return network + "/ipv6" }

// dhcpv6Options are the DHCPv6 options of valid network n, nil unless its
// address mode is a DHCPv6 one: the server's DUID from DHCPServerMAC, the
// network's IPv6 DNS servers, and dhcpv6_stateless in stateless mode (OVN
// then answers information requests only; stateful, it offers the port's
// first IPv6 address in ipv6Cidr).
func dhcpv6Options(n *network, instance string) *nbmodel.DHCPOptions {
	if !n.prefix6.IsValid() || n.mode6 == IPv6SLAAC {
		return nil
	}
	opts := map[string]string{"server_id": DHCPServerMAC(n.Name)}
	if dns := ipv6DNS(n); len(dns) > 0 {
		opts["dns_server"] = "{" + strings.Join(dns, ", ") + "}"
	}
	if n.mode6 == IPv6DHCPv6Stateless {
		opts["dhcpv6_stateless"] = "true"
	}
	ids := OwnerIDs(instance, Unit{Kind: KindNetwork, Name: n.Name})
	ids[KeyDHCPNetwork] = DHCPv6Key(n.Name)
	return &nbmodel.DHCPOptions{Cidr: n.prefix6.String(), Options: opts, ExternalIDs: ids}
}

// ipv6DNS are the IPv6 addresses among network n's dnses.
func ipv6DNS(n *network) []string {
	var dns []string
	for _, d := range n.DNSes {
		if a, err := netip.ParseAddr(d); err == nil && a.Is6() && !a.Is4In6() {
			dns = append(dns, a.String())
		}
	}
	return dns
}

// DHCPServerMAC is the source MAC of network's DHCP replies: locally
// administered, stable, from the network's name (not a router's MAC: a
// network may have no router, and a router of the network's name would
// have this MAC too if it were derived alike).
func DHCPServerMAC(network string) string {
	h := fnv.New64a()
	h.Write([]byte("dhcp " + network))
	s := h.Sum64()
	return fmt.Sprintf("0a:%02x:%02x:%02x:%02x:%02x", byte(s>>32), byte(s>>24), byte(s>>16), byte(s>>8), byte(s))
}

// VMPortAddresses reads a VM port's addresses column as planVMPorts
// writes it, "MAC [IPv4] [IPv6...]": its MAC and its addresses.
func VMPortAddresses(p *nbmodel.LogicalSwitchPort) (string, []netip.Addr) {
	if len(p.Addresses) == 0 {
		return "", nil
	}
	f := strings.Fields(p.Addresses[0])
	if len(f) == 0 {
		return "", nil
	}
	var out []netip.Addr
	for _, s := range f[1:] {
		if a, err := netip.ParseAddr(s); err == nil {
			out = append(out, a)
		}
	}
	return f[0], out
}

// KeyVMI is the external_ids key naming the VirtualMachineInstance
// (namespace/name) of a VM port.
const KeyVMI = "kubevirt-ovn/vmi"

// KeyDHCPNetwork is the external_ids key naming the network of a
// DHCP_Options row: the row's identity (its CIDR is not unique across
// routers).
const KeyDHCPNetwork = "kubevirt-ovn/network"

func validateNetwork(in *Network) (*network, []error) {
	n := &network{Network: in}
	var errs []error
	if msg := badName(in.Name, validation.IsDNS1123Subdomain); msg != "" {
		errs = append(errs, networkErr(in, "metadata.name", "%s", msg))
	}
	if msg := badName(in.Namespace, validation.IsDNS1123Label); msg != "" {
		errs = append(errs, networkErr(in, "metadata.namespace", "%s", msg))
	}
	switch t := NetworkType(strings.ToUpper(string(in.Type))); t {
	case NetworkFlat, NetworkVLAN, NetworkVXLAN, NetworkGeneve, NetworkGRE, NetworkSTT:
		cp := *in
		cp.Type = t
		n.Network = &cp
	case "":
		errs = append(errs, networkErr(in, "network-config.type", "is missing; one of FLAT, VLAN, VXLAN, GENEVE, GRE, STT"))
	default:
		errs = append(errs, networkErr(in, "network-config.type", "%q is not one of FLAT, VLAN, VXLAN, GENEVE, GRE, STT", in.Type))
	}
	// A network with an ipv6Cidr and no cidr is IPv6-only (kubevirt-ovn's;
	// ONOS networks all had a cidr).
	var pfx netip.Prefix
	if in.CIDR != "" || in.IPv6CIDR == "" {
		var err error
		if pfx, err = parseIPv4Prefix(in.CIDR); err != nil {
			errs = append(errs, networkErr(in, "network-config.cidr", "%v", err))
		}
	}
	n.prefix = pfx
	switch {
	case in.CIDR == "" && in.IPv6CIDR != "" && in.GatewayIP != "":
		errs = append(errs, networkErr(in, "network-config.gatewayIp", "is set without network-config.cidr"))
	case in.CIDR == "" && in.IPv6CIDR != "" && in.IPPool != nil:
		errs = append(errs, networkErr(in, "network-config.ipPool", "is set without network-config.cidr"))
	case in.GatewayIP != "":
		gw, err := parseIPv4(in.GatewayIP)
		switch {
		case err != nil:
			errs = append(errs, networkErr(in, "network-config.gatewayIp", "%v", err))
		case pfx.IsValid() && !hostIn(pfx, gw):
			errs = append(errs, networkErr(in, "network-config.gatewayIp", "%s is not a host address of cidr %s", gw, pfx))
		default:
			n.gateway = gw
		}
	}
	if in.IPv6CIDR != "" {
		n.prefix6, errs = validateIPv6(in, errs)
		if in.IPv6GatewayIP != "" && n.prefix6.IsValid() {
			gw, err := netip.ParseAddr(in.IPv6GatewayIP)
			switch {
			case err != nil || !gw.Is6() || gw.Is4In6() || gw.Zone() != "":
				errs = append(errs, networkErr(in, "network-config.ipv6GatewayIp", "%q is not an IPv6 address", in.IPv6GatewayIP))
			case !n.prefix6.Contains(gw) || gw == n.prefix6.Addr():
				errs = append(errs, networkErr(in, "network-config.ipv6GatewayIp", "%s is not a host address of ipv6Cidr %s", gw, n.prefix6))
			default:
				n.gateway6 = gw
			}
		}
	} else if in.IPv6GatewayIP != "" {
		errs = append(errs, networkErr(in, "network-config.ipv6GatewayIp", "is set without network-config.ipv6Cidr"))
	}
	switch m := strings.ToLower(strings.TrimSpace(in.IPv6AddressMode)); {
	case in.IPv6AddressMode != "" && in.IPv6CIDR == "":
		errs = append(errs, networkErr(in, "network-config.ipv6AddressMode", "is set without network-config.ipv6Cidr"))
	case m == "" || m == IPv6SLAAC:
		n.mode6 = IPv6SLAAC
	case m == IPv6DHCPv6Stateless || m == IPv6DHCPv6Stateful:
		n.mode6 = m
	default:
		errs = append(errs, networkErr(in, "network-config.ipv6AddressMode", "%q is none of slaac, dhcpv6-stateless, dhcpv6-stateful", in.IPv6AddressMode))
	}
	if in.MTU < 0 || in.MTU > 65535 {
		errs = append(errs, networkErr(in, "network-config.mtu", "%d is not between 0 and 65535", in.MTU))
	}
	// segmentId is read for a VLAN network only, its VLAN ID: FLAT
	// networks have none (ONOS never read it) and OVN allocates overlay
	// tunnel keys itself, so whatever it holds there is ignored.
	if n.Type == NetworkVLAN {
		seg, segErr := parseUint(in.SegmentID)
		switch {
		case in.SegmentID == "":
			errs = append(errs, networkErr(in, "network-config.segmentId", "is required for a VLAN network (the 802.1Q VLAN ID)"))
		case segErr != nil:
			errs = append(errs, networkErr(in, "network-config.segmentId", "%q is not a number", in.SegmentID))
		case seg < 1 || seg > 4094:
			errs = append(errs, networkErr(in, "network-config.segmentId", "%s is not a VLAN ID (1-4094)", in.SegmentID))
		default:
			n.segment = seg
		}
	}
	if in.PhysicalNetworkName != "" && n.Type != NetworkFlat && n.Type != NetworkVLAN {
		errs = append(errs, networkErr(in, "network-config.physicalNetworkName", "is only meaningful for FLAT and VLAN networks, not %s", n.Type))
	}
	if in.IPPool != nil && pfx.IsValid() {
		n.poolStart, n.poolEnd, errs = checkPool(in, "ipPool", "cidr", in.IPPool, pfx, parseIPv4, errs)
	}
	switch {
	case in.IPv6Pool != nil && in.IPv6CIDR == "":
		errs = append(errs, networkErr(in, "network-config.ipv6Pool", "is set without network-config.ipv6Cidr"))
	case in.IPv6Pool != nil && n.prefix6.IsValid():
		n.pool6Start, n.pool6End, errs = checkPool(in, "ipv6Pool", "ipv6Cidr", in.IPv6Pool, n.prefix6, parseIPv6Host, errs)
	}
	// A host route without a destination, and an empty DNS server, are
	// skipped, as ONOS skipped them.
	for i, hr := range in.HostRoutes {
		if hr.Destination == "" {
			continue
		}
		if _, err := parseRoutePrefix(hr.Destination); err != nil {
			errs = append(errs, networkErr(in, fmt.Sprintf("network-config.hostRoutes[%d].destination", i), "%v", err))
		}
		if hr.Nexthop != "" {
			if _, err := parseIPv4(hr.Nexthop); err != nil {
				errs = append(errs, networkErr(in, fmt.Sprintf("network-config.hostRoutes[%d].nexthop", i), "%v", err))
			}
		}
	}
	for i, d := range in.DNSes {
		if d == "" {
			continue
		}
		if _, err := netip.ParseAddr(d); err != nil {
			errs = append(errs, networkErr(in, fmt.Sprintf("network-config.dnses[%d]", i), "%q is not an IP address", d))
		}
	}
	return n, errs
}

// checkPool checks network in's pool p (its field, the name of the
// field of its prefix pfx, the address parser of the family): both ends
// are addresses of the family inside pfx, in order. It returns them, or
// invalid ones with an error appended to errs.
func checkPool(in *Network, field, pfxField string, p *IPPool, pfx netip.Prefix, parse func(string) (netip.Addr, error), errs []error) (netip.Addr, netip.Addr, []error) {
	field = "network-config." + field
	start, err1 := parse(p.Start)
	end, err2 := parse(p.End)
	switch {
	case err1 != nil:
		return netip.Addr{}, netip.Addr{}, append(errs, networkErr(in, field+".start", "%v", err1))
	case err2 != nil:
		return netip.Addr{}, netip.Addr{}, append(errs, networkErr(in, field+".end", "%v", err2))
	case !pfx.Contains(start) || !pfx.Contains(end):
		return netip.Addr{}, netip.Addr{}, append(errs, networkErr(in, field, "%s-%s is not inside %s %s", start, end, pfxField, pfx))
	case end.Less(start):
		return netip.Addr{}, netip.Addr{}, append(errs, networkErr(in, field, "start %s is after end %s", start, end))
	}
	return start, end, errs
}

// validateIPv6 parses in's ipv6Cidr: an IPv6 /64, the prefix length
// SLAAC derives addresses in (RFC 4862 with RFC 4291's 64-bit interface
// identifiers); an error is appended to errs.
func validateIPv6(in *Network, errs []error) (netip.Prefix, []error) {
	p, err := netip.ParsePrefix(in.IPv6CIDR)
	switch {
	case err != nil:
		return netip.Prefix{}, append(errs, networkErr(in, "network-config.ipv6Cidr", "%q is not a CIDR", in.IPv6CIDR))
	case !p.Addr().Is6() || p.Addr().Is4In6() || p.Addr().Zone() != "":
		return netip.Prefix{}, append(errs, networkErr(in, "network-config.ipv6Cidr", "%s is not an IPv6 CIDR", in.IPv6CIDR))
	case p.Bits() != 64:
		return netip.Prefix{}, append(errs, networkErr(in, "network-config.ipv6Cidr", "%s is a /%d: VMs configure their address by SLAAC, which needs a /64", in.IPv6CIDR, p.Bits()))
	case p.Addr().IsLinkLocalUnicast() || p.Addr().IsMulticast() || p.Addr().IsLoopback():
		return netip.Prefix{}, append(errs, networkErr(in, "network-config.ipv6Cidr", "%s is not a unicast prefix a network can route", in.IPv6CIDR))
	}
	return p.Masked(), errs
}

// SLAACAddress is the address SLAAC gives an interface of MAC mac (as
// parseMAC returns it) in /64 prefix: the prefix and the modified EUI-64
// interface identifier of the MAC (RFC 4291 appendix A), what OVN's port
// security and a guest using EUI-64 addresses derive alike.
func SLAACAddress(prefix netip.Prefix, mac string) netip.Addr {
	hw, err := net.ParseMAC(mac)
	if err != nil || len(hw) != 6 {
		return netip.Addr{}
	}
	b := prefix.Addr().As16()
	b[8], b[9], b[10] = hw[0]^0x02, hw[1], hw[2]
	b[11], b[12] = 0xff, 0xfe
	b[13], b[14], b[15] = hw[3], hw[4], hw[5]
	return netip.AddrFrom16(b)
}

// vmIPv6 are the IPv6 addresses of v's port on network n (none on an
// IPv4-only network), MAC mac: the addresses its interfaces annotation
// declares or status reports in its ipv6Cidr, else the SLAAC address of
// its MAC, sorted; and the link-local addresses status reports, which
// port security must let through besides (a guest with stable-privacy
// addresses has no EUI-64 link-local address, the one OVN allows by
// itself). DHCPv6 stateful offers the first.
func vmIPv6(v *VMInterface, n *network, mac string) (global, linkLocal []string) {
	if !n.prefix6.IsValid() {
		return nil, nil
	}
	var reported []string
	if v.IPv6 != "" {
		reported = strings.Split(v.IPv6, ",")
	}
	for _, s := range reported {
		a, err := netip.ParseAddr(s)
		if err != nil || !a.Is6() || a.Is4In6() {
			continue
		}
		a = a.WithZone("")
		switch {
		case a.IsLinkLocalUnicast():
			linkLocal = append(linkLocal, a.String())
		case n.prefix6.Contains(a) && a != n.gateway6 && a != n.prefix6.Addr():
			global = append(global, a.String())
		}
	}
	slices.Sort(global)
	slices.Sort(linkLocal)
	global, linkLocal = slices.Compact(global), slices.Compact(linkLocal)
	switch eui := SLAACAddress(n.prefix6, mac).String(); {
	case n.mode6 == IPv6DHCPv6Stateful && v.IPv6Field != "" && len(global) > 0:
		// A declared address is the one an IPAM gave the port: DHCPv6
		// offers it, and nothing else is the port's.
	case n.mode6 == IPv6DHCPv6Stateful:
		// DHCPv6 offers the first address in ipv6Cidr: the EUI-64 one,
		// whatever else the guest reports.
		global = slices.DeleteFunc(global, func(a string) bool { return a == eui })
		global = append([]string{eui}, global...)
	case len(global) == 0:
		global = []string{eui}
	}
	return global, linkLocal
}

// vmPort is a VM interface's port on a network: its name and address, or
// why it cannot have one.
type vmPort struct {
	*VMInterface
	port    string
	mac, ip string
	// ip6 are its IPv6 addresses, ll6 the link-local ones its port
	// security allows besides (vmIPv6).
	ip6, ll6 []string
	err      error
}

// planVMPorts validates the VM interfaces of network n. A MAC or an IP
// belongs to one port of a network: the port the NB shows holding it
// (held, by "network MAC" and "network IP") keeps it, else the first by
// port name; the other interfaces get an error and their ports stay as
// they are.
func planVMPorts(vms []*VMInterface, n *network, held Held) []vmPort {
	out := make([]vmPort, 0, len(vms))
	for _, v := range vms {
		vp := vmPort{VMInterface: v, port: VMPortName(n.Name, v.Namespace, v.VMI, v.Interface)}
		vp.mac, vp.ip, vp.err = validateVM(v, n)
		if vp.err == errNoIPv4 {
			continue // no port yet
		}
		if vp.err == nil {
			vp.ip6, vp.ll6 = vmIPv6(v, n, vp.mac)
		}
		out = append(out, vp)
	}
	slices.SortFunc(out, func(a, b vmPort) int { return strings.Compare(a.port, b.port) })

	// An address's key is "network MAC" or "network IP", as in held.
	type address struct{ key, field, kind, value string }
	addresses := func(vp *vmPort) []address {
		out := []address{{n.Name + " " + vp.mac, vp.macField(), "MAC", vp.mac}}
		if vp.ip != "" {
			out = append(out, address{n.Name + " " + vp.ip, vp.ipField(), "IP", vp.ip})
		}
		for _, a := range vp.ip6 {
			out = append(out, address{n.Name + " " + a, "status.interfaces[" + vp.Interface + "].ipAddresses", "IPv6 address", a})
		}
		return out
	}
	owner := map[string]*vmPort{}
	for i := range out {
		if vp := &out[i]; vp.err == nil {
			for _, a := range addresses(vp) {
				if held.HeldVMAddress(n.Name, a.value) == vp.port {
					owner[a.key] = vp
				}
			}
		}
	}
	for i := range out {
		vp := &out[i]
		if vp.err != nil {
			continue
		}
		for _, a := range addresses(vp) {
			if o, ok := owner[a.key]; ok && o != vp {
				vp.err = vmErr(vp.VMInterface, a.field, "%s is already the %s of %s %s/%s interface %s on network %s",
					a.value, a.kind, ObjVMI, o.Namespace, o.VMI, o.Interface, n.Name)
				break
			}
		}
		if vp.err == nil {
			for _, a := range addresses(vp) {
				owner[a.key] = vp
			}
		}
	}
	return out
}

// macField and ipField name where v's MAC and IP were read.
func (v *VMInterface) macField() string {
	if v.MACField != "" {
		return v.MACField
	}
	return "status.interfaces[" + v.Interface + "].mac"
}

func (v *VMInterface) ipField() string {
	if v.IPField != "" {
		return v.IPField
	}
	return "status.interfaces[" + v.Interface + "].ipAddress"
}

// validateVM checks a VM interface against its network and returns the MAC
// and IP of its port. A declared address (VMInterface.MACField, IPField)
// that status reports otherwise is an error naming both. Any host address
// of the network's CIDR but its gateway is the port's, wherever it lies
// relative to the network's ipPool: ONOS allocated nothing from the pool,
// and operators keep static addresses outside the dynamic range.
func validateVM(v *VMInterface, n *network) (mac, ip string, err error) {
	if msg := badName(v.Namespace, validation.IsDNS1123Label); msg != "" {
		return "", "", vmErr(v, "metadata.namespace", "%s", msg)
	}
	if msg := badName(v.VMI, validation.IsDNS1123Subdomain); msg != "" {
		return "", "", vmErr(v, "metadata.name", "%s", msg)
	}
	if msg := badName(v.Interface, isInterfaceName); msg != "" {
		return "", "", vmErr(v, "spec.networks[].name", "%s", msg)
	}
	macField, ipField := v.macField(), v.ipField()
	mac, err = parseMAC(v.MAC)
	if err != nil {
		return "", "", vmErr(v, macField, "%v", err)
	}
	if v.StatusMAC != "" {
		if st, err := parseMAC(v.StatusMAC); err != nil || st != mac {
			return "", "", vmErr(v, macField, "%s differs from status.interfaces[%s].mac %s", mac, v.Interface, v.StatusMAC)
		}
	}
	if !n.prefix.IsValid() {
		// IPv6-only: its addresses are vmIPv6's.
		if v.IPField != "" && v.IP != "" {
			return "", "", vmErr(v, ipField, "%s is declared but network %s is IPv6-only (no cidr)", v.IP, n.Name)
		}
		return mac, "", checkDeclaredIPv6(v, n)
	}
	if v.IP == "" {
		return "", "", errNoIPv4
	}
	addr, err := parseIPv4(v.IP)
	if err != nil {
		return "", "", vmErr(v, ipField, "%v", err)
	}
	if v.StatusIP != "" {
		if st, err := netip.ParseAddr(v.StatusIP); err != nil || st != addr {
			return "", "", vmErr(v, ipField, "%s differs from status.interfaces[%s].ipAddress %s", addr, v.Interface, v.StatusIP)
		}
	}
	if !hostIn(n.prefix, addr) {
		return "", "", vmErr(v, ipField, "%s is outside network %s (%s)", addr, n.Name, n.prefix)
	}
	if n.gateway.IsValid() && addr == n.gateway {
		return "", "", vmErr(v, ipField, "%s is the gateway IP of network %s", addr, n.Name)
	}
	return mac, addr.String(), checkDeclaredIPv6(v, n)
}

// errNoIPv4 is validateVM's answer for an interface on a network with a
// cidr that has no IPv4 address yet (neither declared nor in status): it
// has no port until it has one, and that is no error.
var errNoIPv4 = errors.New("no IPv4 address yet")

// checkDeclaredIPv6 checks the IPv6 addresses v's interfaces annotation
// declares, if any, against network n.
func checkDeclaredIPv6(v *VMInterface, n *network) error {
	if v.IPv6Field != "" {
		for _, s := range strings.Split(v.IPv6, ",") {
			a, err := netip.ParseAddr(s)
			switch {
			case err != nil || !a.Is6() || a.Is4In6() || a.Zone() != "":
				return vmErr(v, v.IPv6Field, "%q is not an IPv6 address", s)
			case a.IsLinkLocalUnicast():
				continue // status's, for port security
			case !n.prefix6.IsValid():
				return vmErr(v, v.IPv6Field, "%s is declared but network %s has no ipv6Cidr", a, n.Name)
			case !n.prefix6.Contains(a) || a == n.prefix6.Addr():
				return vmErr(v, v.IPv6Field, "%s is outside network %s's ipv6Cidr %s", a, n.Name, n.prefix6)
			case a == n.gateway6:
				return vmErr(v, v.IPv6Field, "%s is the ipv6GatewayIp of network %s", a, n.Name)
			}
		}
	}
	return nil
}

// router is a router that passed its own checks.
type router struct {
	*Router
	mac      string
	internal []*network
	ext      *network
	snat     netip.Addr
	peer     netip.Addr
	peerMAC  string
	// ext6 and peer6 are its and its peer's IPv6 addresses on the
	// external network (invalid: none).
	ext6, peer6 netip.Addr
	gateways    []string
	// fips are its floating IPs bound to a VM's address, by floating IP;
	// withFIPs: a floating IP names it (its gateway side stays without
	// SNAT).
	fips     []boundFIP
	withFIPs bool
	// lbs are the valid load balancers on its internal networks, by name.
	lbs []*plannedLB
	// notes say what of its declaration was ignored, as ONOS ignored it.
	notes []string
}

// planRouter validates router up.Unit, resolves its claims, has its
// gateways assigned and plans its rows (routerRows).
//
// Claims: an SNAT IP and an internal network belong to one router. The
// router the NB shows holding it keeps it while its input still makes the
// claim (the first claimant keeps it); otherwise the oldest router that
// names it gets it, by creation time, then name. A network that is some
// router's external network cannot be another's internal one. A router
// declared twice is ambiguous, and an undecodable one unknown: neither is
// planned nor takes part in a claim, and their rows are left as they are.
func (in *Input) planRouter(up *UnitPlan, instance string, held Held) {
	decls := in.routerDecls(up.Unit.Name)
	if len(decls) == 0 {
		return
	}
	up.InInput = true
	up.Generation = decls[0].Generation
	if len(up.Errs) > 0 {
		return // undecodable
	}
	r := decls[0]
	if len(decls) > 1 {
		up.Errs = append(up.Errs, routerErr(r.Name, "metadata.name", "is declared %d times", len(decls)))
		return
	}

	vr, errs := in.checkRouter(r, held)
	if vr != nil && vr.ext != nil && in.hasGateway(r) {
		n := gateways.Need{Physnet: physnetOf(vr.ext.Network), Pin: r.Gateway}
		if len(errs) > 0 {
			// Only a router whose plan can succeed takes a gateway: one
			// assigned to a router that fails would put its external
			// network's switch in a zone where nothing uses it
			// (homeOf). What is wrong with its gateway is said all the
			// same.
			if err := in.gatewayCheck(r.Name, n, held); err != nil {
				errs = append(errs, err)
			}
		} else {
			gws, err := in.gatewaysOf(r.Name, n, held)
			if err != nil {
				errs = append(errs, err)
			}
			vr.gateways = gws
		}
	}
	if len(errs) > 0 {
		up.Errs = append(up.Errs, errs...)
		return
	}
	up.LoadBalancers, vr.lbs = in.planLoadBalancers(vr)
	up.FloatingIPs, vr.fips = in.planFloatingIPs(vr, held)
	for i := range up.LoadBalancers {
		for _, lb := range vr.lbs {
			if lb.d.Name == up.LoadBalancers[i].Name && up.LoadBalancers[i].Ready {
				up.LoadBalancers[i].FloatingIPs = lb.fips
			}
		}
	}
	vr.withFIPs = len(in.fips[r.Name]) > 0
	rp := routerRows(vr, instance)
	rp.Notes = vr.notes
	loadBalancerRows(&rp, vr, func() map[string]string { return OwnerIDs(instance, up.Unit) }, in.rejectEmptyLB)
	if in.zoned {
		if err := in.zoneRouter(&rp, held); err != nil {
			up.Errs = append(up.Errs, err)
			return
		}
	}
	up.Router = &rp
}

// checkRouter is router r's validation on its own (validateRouter) and
// against the other routers' claims: a router it finds errors in is not
// planned. Callers hold in.mu (read).
func (in *Input) checkRouter(r *routerDecl, held Held) (*router, []error) {
	vr, errs := validateRouter(&r.Router, in.validNetwork)
	if r.snat != "" {
		if owner, ok := in.claimOwner(in.snatClaims[r.snat], held.HeldSNATIP(r.snat)); ok && owner != r.Name {
			errs = append(errs, routerErr(r.Name, "spec.external.ip", "%s is already the SNAT IP of VirtualRouter %s", r.External.IP, owner))
		}
	}
	if r.snat6 != "" {
		if owner, ok := in.claimOwner(in.snatClaims[r.snat6], held.HeldSNATIP(r.snat6)); ok && owner != r.Name {
			errs = append(errs, routerErr(r.Name, "spec.external.ipv6", "%s is already the external IPv6 address of VirtualRouter %s", r.External.IPv6, owner))
		}
	}
	for i, n := range r.Internal {
		field := fmt.Sprintf("spec.internal[%d]", i)
		if owner, ok := in.claimOwner(in.internalClaims[n], held.HeldInternal(n)); ok && owner != r.Name {
			errs = append(errs, routerErr(r.Name, field, "network %s is already an internal network of VirtualRouter %s", n, owner))
		}
		if owner, ok := in.firstExternal(n); ok {
			errs = append(errs, routerErr(r.Name, field, "network %s is the external network of VirtualRouter %s", n, owner))
		}
	}
	return vr, errs
}

// validateRouter checks router r on its own, against the valid networks
// (nets).
func validateRouter(r *Router, nets func(string) (*network, bool)) (*router, []error) {
	vr := &router{Router: r}
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, routerErr(r.Name, field, format, args...))
	}
	if r.Name == "" {
		return nil, []error{routerErr("(unnamed)", "metadata.name", "is empty")}
	}
	if msg := badName(r.Name, validation.IsDNS1123Subdomain); msg != "" {
		return nil, []error{routerErr(r.Name, "metadata.name", "%s", msg)}
	}
	if r.MAC != "" {
		mac, err := parseMAC(r.MAC)
		if err != nil {
			bad("spec.mac", "%v", err)
		}
		vr.mac = mac
	} else {
		vr.mac = derivedRouterMAC(r.Name)
	}

	seenNet := map[string]bool{}
	for i, name := range r.Internal {
		field := fmt.Sprintf("spec.internal[%d]", i)
		n, ok := nets(name)
		switch {
		case seenNet[name]:
			continue // one network, listed twice (ONOS kept a set)
		case !ok:
			bad(field, "network %s is unknown (no valid NetworkAttachmentDefinition with network-config of that name)", name)
			continue
		case !n.gateway.IsValid() && !n.prefix.IsValid() && !n.gateway6.IsValid():
			bad(field, "network %s has no ipv6GatewayIp for the router's port", name)
			continue
		case !n.gateway.IsValid() && n.prefix.IsValid():
			bad(field, "network %s has no gatewayIp for the router's port", name)
			continue
		}
		seenNet[name] = true
		for _, other := range vr.internal {
			if n.prefix.IsValid() && other.prefix.IsValid() && other.prefix.Overlaps(n.prefix) {
				bad(field, "network %s (%s) overlaps network %s (%s)", name, n.prefix, other.Name, other.prefix)
			}
			if n.prefix6.IsValid() && other.prefix6.IsValid() && other.prefix6.Overlaps(n.prefix6) {
				bad(field, "network %s (ipv6Cidr %s) overlaps network %s (ipv6Cidr %s)", name, n.prefix6, other.Name, other.prefix6)
			}
		}
		vr.internal = append(vr.internal, n)
	}

	if r.External != nil {
		ext, ok := nets(r.External.Network)
		switch {
		case r.External.Network == "":
			bad("spec.external.network", "is required with spec.external.ip")
		case !ok:
			bad("spec.external.network", "network %s is unknown (no valid NetworkAttachmentDefinition with network-config of that name)", r.External.Network)
		case seenNet[r.External.Network]:
			bad("spec.external.network", "network %s is also an internal network of this router", r.External.Network)
		default:
			vr.ext = ext
		}
		ip, err := parseIPv4(r.External.IP)
		switch {
		case err != nil:
			bad("spec.external.ip", "%v", err)
		case vr.ext != nil && !hostIn(vr.ext.prefix, ip):
			bad("spec.external.ip", "%s is outside network %s (%s)", ip, vr.ext.Name, vr.ext.prefix)
		case vr.ext != nil && ip == vr.ext.gateway:
			bad("spec.external.ip", "%s is the gatewayIp of network %s", ip, vr.ext.Name)
		default:
			vr.snat = ip
		}
		if r.External.IPv6 != "" {
			ip, err := parseIPv6Host(r.External.IPv6)
			switch {
			case err != nil:
				bad("spec.external.ipv6", "%v", err)
			case vr.ext != nil && !vr.ext.prefix6.IsValid():
				bad("spec.external.ipv6", "network %s has no ipv6Cidr", vr.ext.Name)
			case vr.ext != nil && (!vr.ext.prefix6.Contains(ip) || ip == vr.ext.prefix6.Addr()):
				bad("spec.external.ipv6", "%s is not a host address of network %s's ipv6Cidr %s", ip, vr.ext.Name, vr.ext.prefix6)
			case vr.ext != nil && ip == vr.ext.gateway6:
				bad("spec.external.ipv6", "%s is the ipv6GatewayIp of network %s", ip, vr.ext.Name)
			default:
				vr.ext6 = ip
			}
		}
	}
	if r.EnableIPv6SNAT && (r.External == nil || r.External.IPv6 == "") {
		bad("spec.enableIpv6Snat", "needs spec.external.ipv6, the address to SNAT to")
	}
	// Without an external network, SNAT and a peer router have nothing to
	// act on: the router routes between its internal networks, as ONOS's
	// did, and a note says what was ignored.
	if r.EnableSNAT && r.External == nil {
		vr.notes = append(vr.notes, fmt.Sprintf("%s %s: spec.enableSnat is ignored: the router has no spec.external network for the SNAT IP", ObjVirtualRouter, r.Name))
	}
	if pr := r.PeerRouter; pr != nil && pr.IPv6 != "" && r.External != nil {
		ip, err := parseIPv6Host(pr.IPv6)
		switch {
		case err != nil:
			bad("spec.peerRouter.ipv6", "%v", err)
		case r.External.IPv6 == "":
			bad("spec.peerRouter.ipv6", "needs spec.external.ipv6: the router reaches it from its own IPv6 address")
		case vr.ext != nil && vr.ext.prefix6.IsValid() && !vr.ext.prefix6.Contains(ip):
			bad("spec.peerRouter.ipv6", "%s is outside network %s's ipv6Cidr %s", ip, vr.ext.Name, vr.ext.prefix6)
		case ip == vr.ext6:
			bad("spec.peerRouter.ipv6", "%s is the router's own spec.external.ipv6", ip)
		default:
			vr.peer6 = ip
		}
	}
	if pr := r.PeerRouter; pr != nil && (pr.IP != "" || pr.MAC != "" || pr.IPv6 != "") && r.External == nil {
		vr.notes = append(vr.notes, fmt.Sprintf("%s %s: spec.peerRouter is ignored: the peer router is reached through the external network, and the router has no spec.external", ObjVirtualRouter, r.Name))
	} else if pr != nil && (pr.IP != "" || pr.MAC != "") {
		ip, err := parseIPv4(pr.IP)
		switch {
		case pr.IP == "":
			bad("spec.peerRouter.ip", "is required with spec.peerRouter.mac")
		case err != nil:
			bad("spec.peerRouter.ip", "%v", err)
		case vr.ext != nil && !hostIn(vr.ext.prefix, ip):
			bad("spec.peerRouter.ip", "%s is outside network %s (%s)", ip, vr.ext.Name, vr.ext.prefix)
		case vr.snat.IsValid() && ip == vr.snat:
			bad("spec.peerRouter.ip", "%s is the router's own SNAT IP", ip)
		default:
			vr.peer = ip
		}
		if pr.MAC != "" {
			mac, err := parseMAC(pr.MAC)
			if err != nil {
				bad("spec.peerRouter.mac", "%v", err)
			}
			vr.peerMAC = mac
		}
	}

	return vr, errs
}

// RAInterval is the longest time, in seconds, between the unsolicited
// router advertisements of an IPv6 network's router port (OVN's
// max_interval; it answers router solicitations at once): a VM that
// missed both still configures its address within it.
const RAInterval = 60

// raConfigs are the ipv6_ra_configs of the router port on valid network n,
// which has an IPv6 gateway: SLAAC, periodic advertisements, the
// network's MTU when IPv6 can carry it (1280 or more) and its IPv6 DNS
// server (RDNSS, RFC 8106: its first; OVN announces one).
func raConfigs(n *network) map[string]string {
	mode := map[string]string{IPv6DHCPv6Stateless: "dhcpv6_stateless", IPv6DHCPv6Stateful: "dhcpv6_stateful"}[n.mode6]
	ra := map[string]string{
		"address_mode":  cmp.Or(mode, "slaac"),
		"send_periodic": "true",
		"max_interval":  strconv.Itoa(RAInterval),
		"min_interval":  strconv.Itoa(RAInterval / 3),
	}
	if n.MTU >= 1280 {
		ra["mtu"] = strconv.Itoa(n.MTU)
	}
	if dns := ipv6DNS(n); len(dns) > 0 {
		ra["rdnss"] = dns[0]
	}
	return ra
}

// routerRows plans the rows of router r, which passed its checks and got
// its claims and gateways.
func routerRows(r *router, instance string) RouterPlan {
	u := Unit{Kind: KindRouter, Name: r.Name}
	ids := func() map[string]string { return OwnerIDs(instance, u) }
	rp := RouterPlan{Name: r.Name}

	lrIDs := ids()
	if r.Description != "" {
		lrIDs[KeyDescription] = r.Description
	}
	rp.Router = &nbmodel.LogicalRouter{
		Name: RouterName(r.Name),
		Options: map[string]string{
			"always_learn_from_arp_request": "false",
			"dynamic_neigh_routers":         "true",
		},
		ExternalIDs: lrIDs,
	}

	for _, n := range r.internal {
		lrp := RouterPortName(r.Name, n.Name)
		port := &nbmodel.LogicalRouterPort{
			Name:        lrp,
			MAC:         r.mac,
			ExternalIDs: ids(),
		}
		if n.gateway.IsValid() {
			port.Networks = []string{fmt.Sprintf("%s/%d", n.gateway, n.prefix.Bits())}
		}
		if n.gateway6.IsValid() {
			port.Networks = append(port.Networks, fmt.Sprintf("%s/%d", n.gateway6, n.prefix6.Bits()))
			port.Ipv6RaConfigs = raConfigs(n)
		}
		rp.Ports = append(rp.Ports, port)
		rp.SwitchPorts = append(rp.SwitchPorts, SwitchPort{Network: n.Name, Port: &nbmodel.LogicalSwitchPort{
			Name:        SwitchRouterPortName(n.Name, r.Name),
			Type:        "router",
			Addresses:   []string{"router"},
			Options:     map[string]string{"router-port": lrp},
			ExternalIDs: ids(),
		}})
	}

	// The external side exists with SNAT, as in the seed, which installs
	// the SNAT IP's ARP responder and the upstream rules only for a router
	// with enableSnat: without it nothing of the VMs is routed out through
	// the external network and the SNAT IP is not answered. A floating IP
	// naming the router keeps it without SNAT, as ONOS answered floating
	// IPs whatever enableSnat said (floatingip.go).
	if r.ext != nil && (r.EnableSNAT || r.withFIPs) {
		gwp := GatewayPortName(r.Name)
		rp.SNATIP = r.snat.String()
		gwIDs := ids()
		if r.Gateway != "" {
			gwIDs[KeyPinned] = "true"
		}
		gwNets := []string{fmt.Sprintf("%s/%d", r.snat, r.ext.prefix.Bits())}
		if r.ext6.IsValid() {
			gwNets = append(gwNets, fmt.Sprintf("%s/%d", r.ext6, r.ext.prefix6.Bits()))
		}
		rp.Ports = append(rp.Ports, &nbmodel.LogicalRouterPort{
			Name:        gwp,
			MAC:         snatMAC(r.snat),
			Networks:    gwNets,
			ExternalIDs: gwIDs,
		})
		rp.SwitchPorts = append(rp.SwitchPorts, SwitchPort{Network: r.ext.Name, Port: &nbmodel.LogicalSwitchPort{
			Name:      ExternalSwitchPortName(r.Name),
			Type:      "router",
			Addresses: []string{"router"},
			// nat-addresses=router: the gateway chassis answers ARP and sends
			// GARPs for the SNAT IP, also when the gateway moves.
			Options:     map[string]string{"router-port": gwp, "nat-addresses": "router"},
			ExternalIDs: ids(),
		}})
		rp.GatewayChassis = GatewayChassisRows(r.Name, r.gateways, instance)
		rp.Gateway = &GatewayChoice{Chassis: slices.Clone(r.gateways)}

		for _, n := range r.internal {
			if !r.EnableSNAT {
				break
			}
			if n.prefix.IsValid() {
				rp.NATs = append(rp.NATs, &nbmodel.NAT{
					Type:              nbmodel.NATTypeSNAT,
					ExternalIP:        r.snat.String(),
					LogicalIP:         n.prefix.String(),
					ExternalPortRange: SNATPortRange,
					ExternalIDs:       ids(),
				})
			}
			// NAT66 when asked; else IPv6 is routed.
			if r.EnableIPv6SNAT && r.ext6.IsValid() && n.prefix6.IsValid() {
				rp.NATs = append(rp.NATs, &nbmodel.NAT{
					Type:              nbmodel.NATTypeSNAT,
					ExternalIP:        r.ext6.String(),
					LogicalIP:         n.prefix6.String(),
					ExternalPortRange: SNATPortRange,
					ExternalIDs:       ids(),
				})
			}
		}

		floatingIPRows(&rp, r, ids)
		if r.peer.IsValid() {
			out := gwp
			rp.Routes = append(rp.Routes, &nbmodel.LogicalRouterStaticRoute{
				IPPrefix:    "0.0.0.0/0",
				Nexthop:     r.peer.String(),
				OutputPort:  &out,
				ExternalIDs: ids(),
			})
			if r.peerMAC != "" {
				rp.MACBindings = append(rp.MACBindings, &nbmodel.StaticMACBinding{
					LogicalPort:        gwp,
					IP:                 r.peer.String(),
					MAC:                r.peerMAC,
					OverrideDynamicMAC: true,
				})
			}
		}
		if r.peer6.IsValid() {
			out := gwp
			rp.Routes = append(rp.Routes, &nbmodel.LogicalRouterStaticRoute{
				IPPrefix:    "::/0",
				Nexthop:     r.peer6.String(),
				OutputPort:  &out,
				ExternalIDs: ids(),
			})
			if r.peerMAC != "" {
				rp.MACBindings = append(rp.MACBindings, &nbmodel.StaticMACBinding{
					LogicalPort:        gwp,
					IP:                 r.peer6.String(),
					MAC:                r.peerMAC,
					OverrideDynamicMAC: true,
				})
			}
		}
	}
	slices.SortFunc(rp.Ports, func(a, b *nbmodel.LogicalRouterPort) int { return strings.Compare(a.Name, b.Name) })
	slices.SortFunc(rp.SwitchPorts, func(a, b SwitchPort) int { return strings.Compare(a.Port.Name, b.Port.Name) })
	slices.SortFunc(rp.NATs, func(a, b *nbmodel.NAT) int {
		return cmp.Or(strings.Compare(b.Type, a.Type), strings.Compare(a.LogicalIP, b.LogicalIP), strings.Compare(a.ExternalIP, b.ExternalIP))
	})
	return rp
}

// snatMAC is the gateway port's MAC: 0a:58 followed by the SNAT IP's four
// bytes (the convention ovn-kubernetes uses), unique on the external network
// because SNAT IPs are.
// GatewayChassisRows are the Gateway_Chassis rows of router's gateway port
// for the chassis of order, highest priority first.
func GatewayChassisRows(router string, order []string, instance string) []*nbmodel.GatewayChassis {
	gwp := GatewayPortName(router)
	var out []*nbmodel.GatewayChassis
	for i, ch := range order {
		out = append(out, &nbmodel.GatewayChassis{
			Name:        GatewayChassisName(gwp, ch),
			ChassisName: ch,
			Priority:    len(order) - i,
			ExternalIDs: OwnerIDs(instance, Unit{Kind: KindRouter, Name: router}),
		})
	}
	return out
}

func snatMAC(ip netip.Addr) string {
	b := ip.As4()
	return fmt.Sprintf("0a:58:%02x:%02x:%02x:%02x", b[0], b[1], b[2], b[3])
}

// derivedRouterMAC is the MAC of a router whose spec has none: locally
// administered, stable, from the router's name.
func derivedRouterMAC(name string) string {
	h := fnv.New64a()
	h.Write([]byte(name))
	s := h.Sum64()
	return fmt.Sprintf("02:%02x:%02x:%02x:%02x:%02x", byte(s>>32), byte(s>>24), byte(s>>16), byte(s>>8), byte(s))
}

// badName says why name cannot be a Kubernetes object name as check
// defines it, "" when it can. Row names are built from these names with '_'
// between them (names.go), so a name that Kubernetes would refuse (an '_', a
// space, a '/', over 253 characters) could make two objects' rows one.
func badName(name string, check func(string) []string) string {
	if msgs := check(name); len(msgs) > 0 {
		return fmt.Sprintf("%q is not a valid name: %s", name, strings.Join(msgs, "; "))
	}
	return ""
}

// isInterfaceName checks a VMI network (interface) name. It is the last
// part of a VM port's name, so an '_' in it is unambiguous, but spaces,
// slashes and other characters have no place in an OVN port name.
func isInterfaceName(name string) []string {
	switch {
	case name == "":
		return []string{"must not be empty"}
	case len(name) > validation.DNS1123LabelMaxLength:
		return []string{validation.MaxLenError(validation.DNS1123LabelMaxLength)}
	case strings.IndexFunc(name, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.')
	}) >= 0:
		return []string{"must consist of letters, digits, '-', '_' and '.'"}
	}
	return nil
}

// parseIPv6Host reads an IPv6 unicast address that is no link-local
// one.
func parseIPv6Host(s string) (netip.Addr, error) {
	a, err := netip.ParseAddr(s)
	switch {
	case err != nil || !a.Is6() || a.Is4In6() || a.Zone() != "":
		return netip.Addr{}, fmt.Errorf("%q is not an IPv6 address", s)
	case a.IsLinkLocalUnicast() || a.IsMulticast() || a.IsUnspecified() || a.IsLoopback():
		return netip.Addr{}, fmt.Errorf("%s is not a unicast address a router can route", a)
	}
	return a, nil
}

func parseIPv4(s string) (netip.Addr, error) {
	if s == "" {
		return netip.Addr{}, errors.New("is empty")
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("%q is not an IP address", s)
	}
	if !a.Is4() {
		return netip.Addr{}, fmt.Errorf("%s is not an IPv4 address (only IPv4 is supported)", s)
	}
	return a, nil
}

// parseIPv4Prefix parses a CIDR. Like ONOS's IpPrefix, host bits are masked:
// 10.0.0.5/24 is 10.0.0.0/24.
func parseIPv4Prefix(s string) (netip.Prefix, error) {
	if s == "" {
		return netip.Prefix{}, errors.New("is empty")
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%q is not a CIDR", s)
	}
	if !p.Addr().Is4() {
		return netip.Prefix{}, fmt.Errorf("%s is not an IPv4 CIDR (only IPv4 is supported)", s)
	}
	if p.Bits() > 30 {
		return netip.Prefix{}, fmt.Errorf("%s leaves no room for a gateway and hosts (prefix longer than /30)", s)
	}
	return p.Masked(), nil
}

// parseRoutePrefix parses a route's destination: an IPv4 CIDR of any
// length (a /32 is one host, e.g. 169.254.169.254/32), host bits masked.
func parseRoutePrefix(s string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%q is not a CIDR", s)
	}
	if !p.Addr().Is4() {
		return netip.Prefix{}, fmt.Errorf("%s is not an IPv4 CIDR (only IPv4 is supported)", s)
	}
	return p.Masked(), nil
}

// hostIn reports whether ip is a host address of p: inside it, and neither
// its network nor its broadcast address (an IPv6 prefix has none).
func hostIn(p netip.Prefix, ip netip.Addr) bool {
	if !p.IsValid() || !p.Contains(ip) {
		return false
	}
	if ip == p.Addr() {
		return false
	}
	if ip.Is6() {
		return true // no broadcast address
	}
	b := p.Addr().As4()
	host := uint32(1)<<(32-p.Bits()) - 1
	bcast := (uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])) | host
	return ip != netip.AddrFrom4([4]byte{byte(bcast >> 24), byte(bcast >> 16), byte(bcast >> 8), byte(bcast)})
}

// parseMAC accepts a unicast Ethernet MAC and returns it in OVN's lower-case
// colon form.
func parseMAC(s string) (string, error) {
	if s == "" {
		return "", errors.New("is empty")
	}
	hw, err := net.ParseMAC(s)
	if err != nil || len(hw) != 6 {
		return "", fmt.Errorf("%q is not an Ethernet MAC address", s)
	}
	if hw[0]&1 == 1 {
		return "", fmt.Errorf("%s is a multicast MAC address", s)
	}
	if string(hw) == "\x00\x00\x00\x00\x00\x00" {
		return "", fmt.Errorf("%s is the zero MAC address", s)
	}
	return hw.String(), nil
}

func parseUint(s string) (int, error) {
	n, err := strconv.ParseUint(s, 10, 31)
	return int(n), err
}

func normalizeIP(s string) string {
	if a, err := netip.ParseAddr(s); err == nil {
		return a.String()
	}
	return s
}

// routerHomes are the primary gateway of each router's last plan, in
// interconnect mode: a plan with another one moved the router's home
// zone (UnitPlan.Affected). Plans run under the input's read lock, so
// these have a lock of their own.
type routerHomes struct {
	mu    sync.Mutex
	homes map[string]string
}

// moved records the primary gateway of up, router name's plan, and says
// whether the router had another one before. A router that is gone, or
// whose plan has no gateway, is forgotten.
func (h *routerHomes) moved(name string, up UnitPlan) bool {
	home := ""
	if rp := up.Router; rp != nil && rp.Gateway != nil && len(rp.Gateway.Chassis) > 0 {
		home = rp.Gateway.Chassis[0]
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	prev, seen := h.homes[name]
	switch {
	case home != "":
		if h.homes == nil {
			h.homes = map[string]string{}
		}
		h.homes[name] = home
	case !up.InInput || len(up.Errs) == 0:
		delete(h.homes, name)
	}
	return seen && home != "" && prev != home
}
