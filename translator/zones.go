package translator

import (
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/ovn-kubernetes/libovsdb/model"

	"github.com/kubevirt-ovn/kubevirt-ovn/nbmodel"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/gateways"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/tunnelkeys"
)

// Interconnect mode: one NB per zone, as ovn-kubernetes runs OVN. It is on
// when the chassis given to SetChassis carry a Zone. Then every unit's
// plan also says, per zone, which rows that zone's NB holds (ZoneRows):
//   - A router lives in its home zone: the zone of its primary gateway
//     chassis; a router without a gateway (no SNAT) in the zone of a chassis
//     chosen by a hash of its name, where it is bound as a gateway router
//     (options:chassis), so that traffic from other zones has somewhere to
//     arrive. Its Gateway_Chassis are the chassis of its order in its home
//     zone: BFD cannot fail over to another zone; when its primary chassis
//     goes, the scheduler picks the next and the router moves.
//   - A network's switch exists in the zones of its VM interfaces (their
//     node's chassis) and of the routers attached to it, with the same
//     other_config:requested-tnl-key everywhere.
//   - A VM port is a normal port in its node's zone and a type=remote port
//     (same addresses, options:requested-chassis=its chassis) in the
//     network's other zones; a router's switch-side port likewise, bound to
//     the router's home chassis. Every port of ours on a switch carries the
//     same options:requested-tnl-key in every zone. A FLAT or VLAN
//     network's zones meet on the physical network instead, through their
//     localnet ports: its ports have no remote twins.
//   - A router's load balancer rows are in its home zone; its network's
//     switch's load balancer rows wherever the switch is, and so are the
//     rows of the switches of the router's other internal networks for
//     them (lbsiblings.go).
//   - A security group's Port_Group and ACLs are in the zones of its
//     members' own ports, with those ports; a group named as remote group
//     has an Address_Set of all its members where the naming groups have
//     members (zoneSecurityGroup, securitygroup.go).
//
// Tunnel keys come from package tunnelkeys (tunnelkeys.go): each unit's
// plan takes the keys of its switch and ports, the same in every zone,
// kept while the switch or port exists (also across restarts: before the
// first allocation the keys the NBs hold are adopted). A key a foreign
// datapath requests (SetForeignKeys: another tool's rows in a zone's NB,
// ovn-kubernetes' NADs) is never taken, and a switch of ours holding one
// moves. When a range runs out the unit fails and its rows stay.

// A follower (a zone agent in a cluster) plans from what an allocator
// decided instead of deciding: its routers' gateway orders and every
// tunnel key come from its Held (HeldGateways, and KeyHolder lookups); a
// unit whose decisions are not there yet fails with ReasonWaiting, and its
// rows are left as they are until they are.

// KeyHolder looks tunnel keys up one at a time, 0 for none. A follower's
// Held implements it.
type KeyHolder interface {
	HeldSwitchKey(sw string) int
	HeldPortKey(port string) int
}

// ReasonWaiting is the reason of a follower's unit whose allocations are
// not made yet.
const ReasonWaiting = "WaitingForAllocation"

// SetFollower makes in plan as a follower (see KeyHolder); a follower is
// in interconnect mode (SetInterconnect).
func (in *Input) SetFollower(follow bool) {
	in.SetInterconnect()
	in.mu.Lock()
	defer in.mu.Unlock()
	in.follow = follow
}

// SetFollowerZone names the one zone a follower writes (a zone agent's).
// Then a network its zone holds no row of is planned without waiting for
// its tunnel keys: every agent sees every VM's change, and only the agents
// of the network's zones need the allocator's keys for it; the others
// would fail and retry with backoff until the allocator had written them,
// for nothing.
func (in *Input) SetFollowerZone(zone string) {
	in.SetFollower(true)
	in.mu.Lock()
	defer in.mu.Unlock()
	in.followZone = zone
}

// SetInterconnect puts in in interconnect mode whatever the chassis say:
// with no zone known yet, nothing is planned anywhere rather than rows
// for one central NB.
func (in *Input) SetInterconnect() {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.interconnect, in.zoned = true, true
	if in.keys == nil {
		in.keys = newTunnelKeys()
	}
}

// KeyTunnel is the option (LSP options, Logical_Switch other_config) that
// asks ovn-northd for a tunnel key.
const KeyTunnel = "requested-tnl-key"

// ZoneRows are the rows one zone's NB holds of a unit in interconnect mode,
// parents first, and the switch ports left as they are there.
type ZoneRows struct {
	Rows []Row
	Keep []string
}

// TunnelKeys are the tunnel keys our rows request in the NB(s): by switch
// name, and by switch port name.
type TunnelKeys struct {
	Switches map[string]int
	Ports    map[string]int
}

// node is a chassis by name or hostname.
type node struct {
	chassis, zone string
}

// Zoned says whether the input is in interconnect mode.
func (in *Input) Zoned() bool {
	in.mu.RLock()
	defer in.mu.RUnlock()
	return in.zoned
}

// Zones lists the zones of the chassis, sorted.
func (in *Input) Zones() []string {
	in.mu.RLock()
	defer in.mu.RUnlock()
	return slices.Clone(in.zones)
}

// setNodes records every chassis's zone (SetChassis's part) and says
// whether any chassis or zone changed. Callers hold in.mu (write).
func (in *Input) setNodes(chassis []Chassis) bool {
	nodes := map[string]node{}
	zones := set[string]{}
	for _, c := range chassis {
		if c.Zone == "" {
			continue
		}
		zones.add(c.Zone)
		nodes[c.Name] = node{c.Name, c.Zone}
	}
	for _, c := range chassis {
		if _, taken := nodes[c.Hostname]; c.Zone != "" && c.Hostname != "" && !taken {
			nodes[c.Hostname] = node{c.Name, c.Zone}
		}
	}
	if maps.Equal(nodes, in.nodes) {
		return false
	}
	in.nodes = nodes
	in.zones = slices.Sorted(maps.Keys(zones))
	var names []string
	for key, nd := range nodes {
		if key == nd.chassis { // not a hostname
			names = append(names, key)
		}
	}
	slices.Sort(names)
	in.chassisNames = names
	in.zoned = len(zones) > 0 || in.interconnect
	if in.zoned && in.keys == nil {
		in.keys = newTunnelKeys()
	}
	return true
}

// homeOf is the chassis router name lives on in interconnect mode, as
// another unit's plan (a network's) sees it: its primary gateway chassis
// when it has a gateway (as assigned, else as the NB holds it), else
// hashedHome; "" when there is none. It never re-decides the router's
// standing assignment (adopting what the NB holds is its own plan's, in
// zoneRouter's caller). Callers hold in.mu (read).
func (in *Input) homeOf(name string, held Held) string {
	if decls := in.routers[name]; len(decls) == 1 {
		for d := range decls {
			if n, ok := in.need(d); ok {
				if primary, err := in.primaryOf(d, n, held); err == nil && primary != "" {
					return primary
				}
				if order := held.HeldGateways(name); len(order) > 0 {
					if _, ok := in.nodes[order[0]]; ok {
						return order[0]
					}
				}
				return ""
			}
		}
	}
	return in.hashedHome(name)
}

// hashedHome is the chassis a router without gateway lives on: one of
// every zone's chassis, chosen by a hash of its name, "" when there is
// none. Callers hold in.mu (read).
func (in *Input) hashedHome(name string) string {
	return gateways.ByHash(name, in.chassisNames)
}

// networkZones are the zones network's switch exists in: those of its VM
// interfaces' nodes and of the homes of the routers attached to it.
// Callers hold in.mu (read).
func (in *Input) networkZones(network string, held Held) (_ set[string], settled bool) {
	out := set[string]{}
	n, ok := in.validNetwork(network)
	if !ok {
		return out, true
	}
	for d := range in.vms[network] {
		if nd, ok := in.nodes[d.Node]; ok && d.NetworkNamespace == n.Namespace {
			out.add(nd.zone)
			// A migration's target zone has the port while it runs.
			if nt, ok := in.nodes[d.MigrationTarget]; ok {
				out.add(nt.zone)
			}
		}
	}
	routers := set[string]{}
	for d := range in.internalClaims[network] {
		routers.add(d.Name)
	}
	for d := range in.externalDecls[network] {
		routers.add(d.Name)
	}
	settled = true
	for _, r := range slices.Sorted(maps.Keys(routers)) {
		home := in.homeOf(r, held)
		if home == "" || in.nodes[home].zone == "" {
			settled = false
			continue
		}
		out.add(in.nodes[home].zone)
	}
	return out, settled
}

// NetworkInZone says whether network's switch is in zone (networkZones):
// the zone of one of its VM interfaces' nodes, or of one of its routers'
// homes; true while a router of it has no home yet, which may bring it
// there. A zone agent leaves a network that is not, and whose rows its NB
// does not hold, alone: every agent sees every VM's change.
func (in *Input) NetworkInZone(network, zone string, held Held) bool {
	in.mu.RLock()
	defer in.mu.RUnlock()
	zones, settled := in.networkZones(network, held)
	return !settled || zones.has(zone)
}

// RouterInZone says whether router has rows in zone (zoneRouter): its
// home's zone, and the other zones of its overlay networks (its ports'
// remote twins); true while that is not settled (no home yet, a
// declaration in conflict).
func (in *Input) RouterInZone(router, zone string, held Held) bool {
	in.mu.RLock()
	defer in.mu.RUnlock()
	decls := in.routers[router]
	if len(decls) == 0 {
		return false
	}
	if len(decls) > 1 {
		return true
	}
	home := in.homeOf(router, held)
	if home == "" || in.nodes[home].zone == "" || in.nodes[home].zone == zone {
		return true
	}
	for d := range decls {
		networks := slices.Clone(d.Internal)
		if d.External != nil {
			networks = append(networks, d.External.Network)
		}
		for _, n := range networks {
			if nw, ok := in.validNetwork(n); ok && (nw.Type == NetworkFlat || nw.Type == NetworkVLAN) {
				continue
			}
			if zones, settled := in.networkZones(n, held); !settled || zones.has(zone) {
				return true
			}
		}
	}
	return false
}

// zoneNetwork fills np.Zones, the network's zones (networkZones) being
// zones. A VM interface whose node is no chassis of a zone gets an error,
// and its port is left as it is.
func (in *Input) zoneNetwork(np *NetworkPlan, vms []*VMInterface, zones set[string], held Held) error {
	sw := np.Switch.Name
	vmNode := map[string]*VMInterface{}
	for _, v := range vms {
		vmNode[VMPortName(np.Name, v.Namespace, v.VMI, v.Interface)] = v
	}
	var ports []*nbmodel.LogicalSwitchPort
	for _, p := range np.Ports {
		v := vmNode[p.Name]
		if v == nil || in.nodes[v.Node].zone != "" {
			ports = append(ports, p)
			continue
		}
		np.KeepPorts = append(np.KeepPorts, p.Name)
		if v.Node == "" {
			// Addresses declared before the VMI is scheduled: which
			// zone's NB its port goes to is not known yet.
			np.VMErrors = append(np.VMErrors, vmErr(v, "status.nodeName", "is not set yet: the port waits until the VMI is scheduled (interconnect mode writes it into its node's zone)"))
			continue
		}
		np.VMErrors = append(np.VMErrors, vmErr(v, "status.nodeName", "node %q is no chassis of any zone (hostname or chassis name in a zone's Southbound)", v.Node))
	}
	np.Ports = ports
	slices.Sort(np.KeepPorts)
	if dp := np.DefaultDeny; dp != nil {
		dp.Ports = dp.Ports[:0]
		for _, p := range ports {
			if p.Type == "" {
				dp.Ports = append(dp.Ports, p.Name)
			}
		}
	}

	refs := []tunnelkeys.Ref{{Switch: sw}}
	for _, p := range np.Ports {
		refs = append(refs, tunnelkeys.Ref{Switch: sw, Port: p.Name})
	}
	// A FLAT or VLAN network's zones meet on the physical network, through
	// their localnet ports: its ports get no remote twins (a frame would
	// reach them twice).
	physical := slices.ContainsFunc(np.Ports, func(p *nbmodel.LogicalSwitchPort) bool { return p.Type == "localnet" })
	keys, notes, err := in.takeKeys(Unit{Kind: KindNetwork, Name: np.Name}, refs, held)
	if err != nil {
		return err
	}
	np.Keys, np.KeyNotes = keysOf(keys), notes
	np.Zones = map[string]*ZoneRows{}
	for z := range zones {
		zr := &ZoneRows{Keep: np.KeepPorts}
		ls := model.Clone(np.Switch).(*nbmodel.LogicalSwitch)
		ls.OtherConfig = map[string]string{KeyTunnel: strconv.Itoa(keys[tunnelkeys.Ref{Switch: sw}])}
		// The switch's load balancers go wherever it does: a VM in any
		// zone reaches a VIP through its own zone's switch.
		zr.Rows = append(zr.Rows, in.withZoneLoadBalancers(Row{Model: ls}, np.Name, np.LoadBalancers, np.LBHealthChecks, z)...)
		// The DHCP options go wherever the switch does: a VM port refers
		// to them in its own zone's NB.
		if np.DHCP != nil {
			zr.Rows = append(zr.Rows, Row{Model: model.Clone(np.DHCP)})
		}
		if np.DHCPv6 != nil {
			zr.Rows = append(zr.Rows, Row{Model: model.Clone(np.DHCPv6)})
		}
		var local []string // the zone's own VM ports
		for _, p := range np.Ports {
			key := keys[tunnelkeys.Ref{Switch: sw, Port: p.Name}]
			if v := vmNode[p.Name]; v != nil {
				zp, remote := in.zonePort(p, v, z)
				if remote && !physical {
					zr.Rows = append(zr.Rows, Row{Model: remotePort(p, p.Addresses, zp.Options["requested-chassis"], key), Parent: sw})
				}
				if remote {
					continue
				}
				p = zp
			}
			zr.Rows = append(zr.Rows, np.portRow(withKey(p, key)))
			if p.Type == "" {
				local = append(local, p.Name)
			}
		}
		// A zone's default-deny group holds its own VM ports: a packet's
		// from-lport ACLs run in its sender's zone, its to-lport ACLs in
		// the zone of the port it leaves by.
		if np.DefaultDeny != nil {
			zr.Rows = append(zr.Rows, np.DefaultDeny.rows(local)...)
		}
		np.Zones[z] = zr
	}
	return nil
}

// zoneRouter fills rp.Zones: everything in its home zone, its switch-side
// ports as remote ports in the other zones of their networks.
func (in *Input) zoneRouter(rp *RouterPlan, held Held) error {
	home := in.hashedHome(rp.Name)
	if rp.Gateway != nil {
		home = rp.Gateway.Chassis[0] // as its plan assigned it
	}
	if home == "" {
		return routerErr(rp.Name, "spec", "has no chassis to live on: no zone's SB has a chassis")
	}
	zone := in.nodes[home].zone
	if zone == "" {
		// A follower's gateway whose zone it does not know yet.
		err := routerErr(rp.Name, "gateway", "chassis %s is in no zone known yet", home)
		err.Reason = ReasonWaiting
		return err
	}
	var refs []tunnelkeys.Ref
	for _, sp := range rp.SwitchPorts {
		refs = append(refs, tunnelkeys.Ref{Switch: SwitchName(sp.Network), Port: sp.Port.Name})
	}
	keys, _, err := in.takeKeys(Unit{Kind: KindRouter, Name: rp.Name}, refs, held)
	if err != nil {
		return err
	}
	rp.Keys = keysOf(keys)

	local := &ZoneRows{}
	rp.Zones = map[string]*ZoneRows{zone: local}
	lr := rp.Router
	if rp.Gateway == nil {
		lr = model.Clone(lr).(*nbmodel.LogicalRouter)
		lr.Options["chassis"] = home
	}
	// Its load balancers (VIP and floating IP keys, health checks) are
	// its home zone's: the router balances on its gateway chassis.
	local.Rows = append(local.Rows, in.withZoneLoadBalancers(Row{Model: lr}, "", rp.LoadBalancers, rp.LBHealthChecks, zone)...)
	for _, p := range rp.Ports {
		local.Rows = append(local.Rows, Row{Model: p, Parent: lr.Name})
	}
	// Only the chassis of its home zone: the others are remote chassis
	// there. Their priorities stay those of the whole order.
	for _, g := range rp.GatewayChassis {
		if in.nodes[g.ChassisName].zone == zone {
			local.Rows = append(local.Rows, Row{Model: g, Parent: GatewayPortName(rp.Name)})
		}
	}
	for _, nat := range rp.NATs {
		local.Rows = append(local.Rows, Row{Model: nat, Parent: lr.Name})
	}
	for _, r := range rp.Routes {
		local.Rows = append(local.Rows, Row{Model: r, Parent: lr.Name})
	}
	for _, p := range rp.Policies {
		local.Rows = append(local.Rows, Row{Model: p, Parent: lr.Name})
	}
	lrps := map[string]*nbmodel.LogicalRouterPort{}
	for _, p := range rp.Ports {
		lrps[p.Name] = p
	}
	for _, sp := range rp.SwitchPorts {
		sw := SwitchName(sp.Network)
		key := keys[tunnelkeys.Ref{Switch: sw, Port: sp.Port.Name}]
		local.Rows = append(local.Rows, Row{Model: withKey(sp.Port, key), Parent: sw})
		if n, ok := in.validNetwork(sp.Network); !ok || n.Type == NetworkFlat || n.Type == NetworkVLAN {
			continue // zones meet on the physical network (zoneNetwork)
		}
		lrp := lrps[sp.Port.Options["router-port"]]
		addr := []string{lrp.MAC + " " + strings.Join(lrp.Networks, " ")}
		zones, _ := in.networkZones(sp.Network, held)
		for z := range zones {
			if z == zone {
				continue
			}
			if rp.Zones[z] == nil {
				rp.Zones[z] = &ZoneRows{}
			}
			rp.Zones[z].Rows = append(rp.Zones[z].Rows, Row{Model: remotePort(sp.Port, addr, home, key), Parent: sw})
		}
	}
	for _, b := range rp.MACBindings {
		local.Rows = append(local.Rows, Row{Model: b})
	}
	return nil
}

// remotePort is port p of another zone: type=remote, bound to chassis.
func remotePort(p *nbmodel.LogicalSwitchPort, addresses []string, chassis string, key int) *nbmodel.LogicalSwitchPort {
	return &nbmodel.LogicalSwitchPort{
		Name:        p.Name,
		Type:        "remote",
		Addresses:   slices.Clone(addresses),
		Options:     map[string]string{"requested-chassis": chassis, KeyTunnel: strconv.Itoa(key)},
		ExternalIDs: maps.Clone(p.ExternalIDs),
	}
}

// withKey is a copy of p requesting tunnel key key.
func withKey(p *nbmodel.LogicalSwitchPort, key int) *nbmodel.LogicalSwitchPort {
	c := model.Clone(p).(*nbmodel.LogicalSwitchPort)
	if c.Options == nil {
		c.Options = map[string]string{}
	}
	c.Options[KeyTunnel] = strconv.Itoa(key)
	return c
}

// zoneAffected adds to affected what a change of its units changes in
// interconnect mode: a router's home decides its networks' zones, and a
// network's zones decide where its routers have remote ports (none on a
// FLAT or VLAN network: the routers sharing an external network are not
// re-planned for one router's change). Callers hold
// in.mu.
func (in *Input) zoneAffected(affected set[Unit]) {
	if !in.zoned {
		return
	}
	nets := set[string]{}
	for u := range affected {
		if u.Kind == KindNetwork {
			nets.add(u.Name)
			continue
		}
		for d := range in.routers[u.Name] {
			for _, n := range d.Internal {
				nets.add(n)
			}
			if d.External != nil {
				nets.add(d.External.Network)
			}
		}
	}
	for n := range nets {
		affected.add(Unit{Kind: KindNetwork, Name: n})
		if nw, ok := in.validNetwork(n); !ok || nw.Type == NetworkFlat || nw.Type == NetworkVLAN {
			// Its routers' ports have no remote twins (zoneRouter): its
			// zones changing changes none of them. Nor do they on a
			// network not declared (yet): its declaration's arrival
			// brings its routers back. (An informer's first adds bring
			// the routers before their networks at random: each router
			// brought every other router of its external network back,
			// a square in the cluster's routers at every agent's start.)
			continue
		}
		in.addRouterNames(affected, in.internalClaims[n])
		in.addRouterNames(affected, in.externalDecls[n])
	}
}

// RemotePorts are the type=remote ports plan puts in zone's NB, with the
// chassis each is bound to: on OVN before 23.09 the SB binding of each is
// the CMS's to set.
func RemotePorts(plan *Plan, zone string) map[string]string {
	out := map[string]string{}
	add := func(zr *ZoneRows) {
		if zr == nil {
			return
		}
		for _, r := range zr.Rows {
			if p, ok := r.Model.(*nbmodel.LogicalSwitchPort); ok {
				if ch, ok := RemoteBinding(p); ok {
					out[p.Name] = ch
				}
			}
		}
	}
	for i := range plan.Networks {
		add(plan.Networks[i].Zones[zone])
	}
	for i := range plan.Routers {
		add(plan.Routers[i].Zones[zone])
	}
	return out
}

// ZonesHeld is what the NBs of several zones hold, as one Held: a claim is
// the first zone's that has it; tunnel keys are every zone's, the first
// zone's where two disagree.
type ZonesHeld []Held

// HeldSNATIP implements Held.
func (z ZonesHeld) HeldSNATIP(ip string) string {
	return firstHeld(z, func(h Held) string { return h.HeldSNATIP(ip) })
}

// HeldInternal implements Held.
func (z ZonesHeld) HeldInternal(network string) string {
	return firstHeld(z, func(h Held) string { return h.HeldInternal(network) })
}

// HeldVMAddress implements Held.
func (z ZonesHeld) HeldVMAddress(network, addr string) string {
	return firstHeld(z, func(h Held) string { return h.HeldVMAddress(network, addr) })
}

// HeldFloatingIP implements Held.
func (z ZonesHeld) HeldFloatingIP(ip string) string {
	return firstHeld(z, func(h Held) string { return h.HeldFloatingIP(ip) })
}

// HeldFixedIP implements Held.
func (z ZonesHeld) HeldFixedIP(router, ip string) string {
	return firstHeld(z, func(h Held) string { return h.HeldFixedIP(router, ip) })
}

// HeldGateways implements Held: a router's Gateway_Chassis are in its home
// zone only.
func (z ZonesHeld) HeldGateways(router string) []string {
	for _, h := range z {
		if order := h.HeldGateways(router); len(order) > 0 {
			return order
		}
	}
	return nil
}

// HeldTunnelKeys implements Held.
func (z ZonesHeld) HeldTunnelKeys() TunnelKeys {
	out := TunnelKeys{Switches: map[string]int{}, Ports: map[string]int{}}
	for i := len(z) - 1; i >= 0; i-- {
		k := z[i].HeldTunnelKeys()
		maps.Copy(out.Switches, k.Switches)
		maps.Copy(out.Ports, k.Ports)
	}
	return out
}

// HeldSwitchKey implements KeyHolder: the first zone's that has it.
func (z ZonesHeld) HeldSwitchKey(sw string) int {
	for _, h := range z {
		if kh, ok := h.(KeyHolder); ok {
			if k := kh.HeldSwitchKey(sw); k != 0 {
				return k
			}
		}
	}
	return 0
}

// HeldPortKey implements KeyHolder: the first zone's that has it.
func (z ZonesHeld) HeldPortKey(port string) int {
	for _, h := range z {
		if kh, ok := h.(KeyHolder); ok {
			if k := kh.HeldPortKey(port); k != 0 {
				return k
			}
		}
	}
	return 0
}

func firstHeld(z ZonesHeld, get func(Held) string) string {
	for _, h := range z {
		if v := get(h); v != "" {
			return v
		}
	}
	return ""
}

// Allocation is what an allocator decides for one unit in a cluster whose
// OVN has one NB per zone, for the zone agents that follow it: a router's
// gateway order and the tunnel keys of the unit's switch and ports.
type Allocation struct {
	Gateways []string
	Keys     TunnelKeys
}

// Allocation is up's decisions; nil when up plans nothing (the unit is
// gone, or its input is invalid).
func (up *UnitPlan) Allocation() *Allocation {
	switch {
	case len(up.Errs) > 0:
		return nil
	case up.Network != nil:
		return &Allocation{Keys: up.Network.Keys}
	case up.Router != nil:
		a := &Allocation{Keys: up.Router.Keys}
		if up.Router.Gateway != nil {
			a.Gateways = slices.Clone(up.Router.Gateway.Chassis)
		}
		return a
	}
	return nil
}

// withZoneLoadBalancers is owner (network's switch's row, or with network
// "" a router's) referring to its load balancers lbs, then lbs' rows in
// zone z and their health checks (zoneSiblingLB).
func (in *Input) withZoneLoadBalancers(owner Row, network string, lbs []*nbmodel.LoadBalancer, hcs []LBHealthCheckRow, z string) []Row {
	for _, lb := range lbs {
		owner.Refs = append(owner.Refs, Ref{Column: "load_balancer", Key: lb.Name})
	}
	rows := []Row{owner}
	checked := set[string]{}
	for _, lb := range lbs {
		row, keep := in.zoneLB(lb, z), true
		if network != "" {
			row, keep = in.zoneSiblingLB(lb, network, z)
		}
		rows = append(rows, Row{Model: row})
		if keep {
			checked.add(lb.Name)
		}
	}
	for _, hc := range hcs {
		if _, ok := checked[hc.LoadBalancer]; ok {
			rows = append(rows, Row{Model: hc.Row, Parent: hc.LoadBalancer})
		}
	}
	return rows
}
