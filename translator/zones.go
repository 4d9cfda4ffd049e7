package translator

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/ovn-kubernetes/libovsdb/model"

	"github.com/kubevirt-ovn/kubevirt-ovn/nbmodel"
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
//
// Tunnel keys are allocated here, kept while the switch or port exists
// (also across restarts: before the first allocation the keys the NBs hold
// are adopted), and are never reused while a row holding them may still
// exist. Datapath keys are taken downward from MaxDatapathKey, the top of
// the range in which ovn-northd allocates a zone's own datapaths upward
// from 1 (a requested key wins over its own allocation), below OVN's global
// range, which ovn-ic and ovn-kubernetes allocate (see MaxDatapathKey). A
// key a foreign datapath requests (SetForeignKeys: another tool's rows in a
// zone's NB, ovn-kubernetes' NADs) is never taken, and a switch of ours
// holding one moves. A held key outside the range, an older kubevirt-ovn's,
// is replaced once. Port keys are taken downward from MaxPortKey on our own
// switches (ovn-northd allocates a datapath's other ports upward from 1).

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

// ReasonTunnelKeysExhausted is the reason of a unit that needs a tunnel
// key when a range has none left: its rows stay as they are.
const ReasonTunnelKeysExhausted = "TunnelKeysExhausted"

// SetFollower makes in plan as a follower (see KeyHolder); a follower is
// in interconnect mode (SetInterconnect).
func (in *Input) SetFollower(follow bool) {
	in.SetInterconnect()
	in.mu.Lock()
	defer in.mu.Unlock()
	in.follow = follow
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

// Tunnel key ranges. OVN (lib/ovn-util.h) has 24-bit datapath keys:
// ovn-northd gives a zone's own datapaths keys in [1, 16711680]
// (OVN_MAX_DP_KEY_LOCAL, NB_Global options:max_tunid under Geneve), lowest
// free first, after every key a datapath requests; the 65535 keys above are
// global: ovn-ic allocates them upward from 16711682, ovn-kubernetes'
// transit switches request 16711683+network ID (up to 16715778) and its
// cluster-manager hands out the rest, [16715779, 16777215], upward. So
// kubevirt-ovn takes its datapath keys from the top of the local range
// downward, where nothing else requests keys and ovn-northd's own
// allocation, coming up from 1, arrives only past 16,646,144 datapaths in
// one zone (and a requested key wins over it anyway). 65,536 keys: as many
// as the global range holds, far more networks than one cluster declares.
// Port keys are 15 bits. Geneve carries them all; VXLAN does not (its
// datapath keys are 12 bits, max_tunid 4095 or 1023): interconnect mode
// refuses a zone whose NB_Global says so (ovn.ZoneKeys.CheckGeneve, where
// the zones' NBs are read).
const (
	MaxDatapathKey = 16711680 // OVN_MAX_DP_KEY_LOCAL
	MinDatapathKey = MaxDatapathKey - 65536 + 1
	MaxPortKey     = 1<<15 - 1
)

// SetForeignKeys records the datapath keys that datapaths not ours request
// in source (a zone's NB, a NAD of ovn-kubernetes, a zone agent's report):
// no switch of ours gets one of them, and a switch of ours that holds one
// moves to another key. It replaces what source said before; nil keys
// forget source. Call it before the first plan with every source known,
// and again whenever a source changes. It returns the units whose switch
// must move (their next plan says so in NetworkPlan.KeyNotes).
func (in *Input) SetForeignKeys(source string, keys []ForeignKey) []Unit {
	in.mu.Lock()
	if in.keys == nil {
		in.keys = newTunnelKeys()
	}
	k := in.keys
	in.mu.Unlock()
	return k.setForeign(source, keys)
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
	in.zoned = len(zones) > 0 || in.interconnect
	if in.zoned && in.keys == nil {
		in.keys = newTunnelKeys()
	}
	return true
}

// homeOf is the chassis router name lives on in interconnect mode: its
// primary gateway chassis when it has a gateway (as scheduled, else as the
// NB holds it), else one chosen by a hash of its name; "" when there is
// none. Callers hold in.mu (read).
func (in *Input) homeOf(name string, held Held) string {
	if decls := in.routers[name]; len(decls) == 1 {
		for d := range decls {
			if n, ok := in.need(d); ok {
				if order, err := in.gatewaysOf(name, n, held); err == nil && len(order) > 0 {
					return order[0]
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
	best, bestHash := "", uint64(0)
	for key, nd := range in.nodes {
		if key != nd.chassis {
			continue // a hostname
		}
		if h := rendezvous(name, nd.chassis); best == "" || h > bestHash || (h == bestHash && nd.chassis < best) {
			best, bestHash = nd.chassis, h
		}
	}
	return best
}

// networkZones are the zones network's switch exists in: those of its VM
// interfaces' nodes and of the homes of the routers attached to it.
// Callers hold in.mu (read).
func (in *Input) networkZones(network string, held Held) set[string] {
	out := set[string]{}
	n, ok := in.validNetwork(network)
	if !ok {
		return out
	}
	for d := range in.vms[network] {
		if nd, ok := in.nodes[d.Node]; ok && d.NetworkNamespace == n.Namespace {
			out.add(nd.zone)
		}
	}
	routers := set[string]{}
	for d := range in.internalClaims[network] {
		routers.add(d.Name)
	}
	for d := range in.externalDecls[network] {
		routers.add(d.Name)
	}
	for r := range routers {
		if home := in.homeOf(r, held); home != "" {
			out.add(in.nodes[home].zone)
		}
	}
	return out
}

// zoneNetwork fills np.Zones. A VM interface whose node is no chassis of a
// zone gets an error, and its port is left as it is.
func (in *Input) zoneNetwork(np *NetworkPlan, vms []*VMInterface, held Held) error {
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
		np.VMErrors = append(np.VMErrors, vmErr(v, "status.nodeName", "node %q is no chassis of any zone (hostname or chassis name in a zone's Southbound)", v.Node))
	}
	np.Ports = ports
	slices.Sort(np.KeepPorts)

	refs := []keyRef{{sw: sw}}
	for _, p := range np.Ports {
		refs = append(refs, keyRef{sw, p.Name})
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
	for z := range in.networkZones(np.Name, held) {
		zr := &ZoneRows{Keep: np.KeepPorts}
		ls := model.Clone(np.Switch).(*nbmodel.LogicalSwitch)
		ls.OtherConfig = map[string]string{KeyTunnel: strconv.Itoa(keys[keyRef{sw: sw}])}
		zr.Rows = append(zr.Rows, Row{Model: ls})
		for _, p := range np.Ports {
			key := keys[keyRef{sw, p.Name}]
			if v := vmNode[p.Name]; v != nil && in.nodes[v.Node].zone != z {
				if !physical {
					zr.Rows = append(zr.Rows, Row{Model: remotePort(p, p.Addresses, in.nodes[v.Node].chassis, key), Parent: sw})
				}
				continue
			}
			zr.Rows = append(zr.Rows, Row{Model: withKey(p, key), Parent: sw})
		}
		np.Zones[z] = zr
	}
	return nil
}

// zoneRouter fills rp.Zones: everything in its home zone, its switch-side
// ports as remote ports in the other zones of their networks.
func (in *Input) zoneRouter(rp *RouterPlan, held Held) error {
	home := in.homeOf(rp.Name, held)
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
	var refs []keyRef
	for _, sp := range rp.SwitchPorts {
		refs = append(refs, keyRef{SwitchName(sp.Network), sp.Port.Name})
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
	local.Rows = append(local.Rows, Row{Model: lr})
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
	lrps := map[string]*nbmodel.LogicalRouterPort{}
	for _, p := range rp.Ports {
		lrps[p.Name] = p
	}
	for _, sp := range rp.SwitchPorts {
		sw := SwitchName(sp.Network)
		key := keys[keyRef{sw, sp.Port.Name}]
		local.Rows = append(local.Rows, Row{Model: withKey(sp.Port, key), Parent: sw})
		if n, ok := in.validNetwork(sp.Network); !ok || n.Type == NetworkFlat || n.Type == NetworkVLAN {
			continue // zones meet on the physical network (zoneNetwork)
		}
		lrp := lrps[sp.Port.Options["router-port"]]
		addr := []string{lrp.MAC + " " + strings.Join(lrp.Networks, " ")}
		for z := range in.networkZones(sp.Network, held) {
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

// takeKeys are unit u's tunnel keys for refs: allocated (with notes on
// switches moved off a key), or a follower's from held.
func (in *Input) takeKeys(u Unit, refs []keyRef, held Held) (map[keyRef]int, []string, error) {
	kind := ObjVirtualRouter
	if u.Kind == KindNetwork {
		kind = ObjNAD
	}
	if !in.follow {
		keys, notes, err := in.keys.take(u, refs, held)
		if err != nil {
			return nil, nil, &InputError{Kind: kind, Object: u.Name, Field: "tunnel keys", Msg: err.Error(), Reason: ReasonTunnelKeysExhausted}
		}
		return keys, notes, nil
	}
	kh, _ := held.(KeyHolder)
	out := map[keyRef]int{}
	missing := 0
	for _, r := range refs {
		key := 0
		if kh != nil && r.port == "" {
			key = kh.HeldSwitchKey(r.sw)
		} else if kh != nil {
			key = kh.HeldPortKey(r.port)
		}
		if key == 0 {
			missing++
		}
		out[r] = key
	}
	if missing > 0 {
		return nil, nil, &InputError{Kind: kind, Object: u.Name, Field: "tunnel keys", Msg: fmt.Sprintf("%d of %d not allocated yet by the allocator", missing, len(refs)), Reason: ReasonWaiting}
	}
	return out, nil, nil
}

// keysOf are keys by switch and by port name.
func keysOf(keys map[keyRef]int) TunnelKeys {
	out := TunnelKeys{Switches: map[string]int{}, Ports: map[string]int{}}
	for r, k := range keys {
		if r.port == "" {
			out.Switches[r.sw] = k
		} else {
			out.Ports[r.port] = k
		}
	}
	return out
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
// network's zones decide where its routers have remote ports. Callers hold
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
			if p, ok := r.Model.(*nbmodel.LogicalSwitchPort); ok && p.Type == "remote" {
				out[p.Name] = p.Options["requested-chassis"]
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
