package translator

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubevirt-ovn/kubevirt-ovn/nbmodel"
)

// zoneChassis is ovn-kubernetes' layout: one zone per node; gw1 and gw2
// are gateways mapping physnet1.
func zoneChassis() []Chassis {
	return []Chassis{
		{Name: "gw1", Hostname: "node-gw1", Gateway: true, Physnets: []string{"physnet1"}, Zone: "gw1"},
		{Name: "gw2", Hostname: "node-gw2", Gateway: true, Physnets: []string{"physnet1"}, Zone: "gw2"},
		{Name: "hv1", Hostname: "node-hv1", Zone: "hv1"},
		{Name: "hv2", Hostname: "node-hv2", Zone: "hv2"},
	}
}

func zoneInput() *Input {
	in := NewInput()
	in.Set("nets", Objects{Networks: []Network{publicNet(), netA(), netB()}})
	in.Set("r1", Objects{Routers: []Router{{Name: "r1", EnableSNAT: true, Gateway: "gw1", Internal: []string{"net-a", "net-b"},
		External: &External{Network: "public", IP: "172.16.0.10"}}}})
	in.Set("vms", Objects{VMs: []VMInterface{
		{Namespace: "default", VMI: "vm1", Interface: "eth0", Network: "net-a", NetworkNamespace: "default", MAC: "02:00:00:00:00:01", IP: "10.10.0.5", Node: "node-hv1"},
		{Namespace: "default", VMI: "vm2", Interface: "eth0", Network: "net-b", NetworkNamespace: "default", MAC: "02:00:00:00:00:02", IP: "10.20.0.5", Node: "hv2"},
	}})
	in.SetChassis(zoneChassis(), true)
	return in
}

// zoneView is what one unit's rows in one zone look like: table/name ->
// type and requested chassis, for asserting.
func zoneView(zr *ZoneRows) map[string]string {
	out := map[string]string{}
	if zr == nil {
		return out
	}
	for _, r := range zr.Rows {
		switch m := r.Model.(type) {
		case *nbmodel.LogicalSwitch:
			out["LS "+m.Name] = "key=" + m.OtherConfig[KeyTunnel]
		case *nbmodel.LogicalSwitchPort:
			out["LSP "+m.Name] = fmt.Sprintf("%s@%s", m.Type, m.Options["requested-chassis"])
		case *nbmodel.LogicalRouter:
			out["LR "+m.Name] = m.Options["chassis"]
		case *nbmodel.GatewayChassis:
			out["GC "+m.Name] = m.ChassisName
		case *nbmodel.NAT:
			out["NAT "+m.LogicalIP] = m.ExternalIP
		case *nbmodel.DHCPOptions:
			out["DHCP "+m.ExternalIDs[KeyDHCPNetwork]] = m.Cidr
		}
		for _, ref := range r.Refs {
			out["ref "+ref.Column+" "+r.Model.(*nbmodel.LogicalSwitchPort).Name] = ref.Key
		}
	}
	return out
}

func TestZonePlanPutsEachRowInItsZone(t *testing.T) {
	in := zoneInput()
	require.True(t, in.Zoned())
	assert.Equal(t, []string{"gw1", "gw2", "hv1", "hv2"}, in.Zones())

	r1 := in.Plan(Unit{KindRouter, "r1"}, testInstance, nil)
	require.Empty(t, r1.Errs)
	require.NotNil(t, r1.Router)
	assert.Equal(t, []string{"gw1", "gw2"}, r1.Router.Gateway.Chassis)
	gw1 := zoneView(r1.Router.Zones["gw1"])
	assert.Equal(t, "", gw1["LR kv-r1"], "a router with a gateway port is no gateway router")
	assert.Equal(t, "gw1", gw1["GC kv-rtoe-r1_gw1"])
	assert.NotContains(t, gw1, "GC kv-rtoe-r1_gw2", "gw2 is another zone's chassis")
	assert.Equal(t, "172.16.0.10", gw1["NAT 10.10.0.0/24"])
	assert.Equal(t, "router@", gw1["LSP kv-stor-net-a_r1"])
	assert.Equal(t, map[string]string{"LSP kv-stor-net-a_r1": "remote@gw1"}, zoneView(r1.Router.Zones["hv1"]))
	assert.Equal(t, map[string]string{"LSP kv-stor-net-b_r1": "remote@gw1"}, zoneView(r1.Router.Zones["hv2"]))
	assert.Nil(t, r1.Router.Zones["gw2"])

	netA := in.Plan(Unit{KindNetwork, "net-a"}, testInstance, nil)
	require.Empty(t, netA.Errs)
	assert.Equal(t, []string{"gw1", "hv1"}, slices.Sorted(maps.Keys(netA.Network.Zones)))
	vm1 := VMPortName("net-a", "default", "vm1", "eth0")
	assert.Equal(t, "@hv1", zoneView(netA.Network.Zones["hv1"])["LSP "+vm1], "node-hv1 is chassis hv1's hostname: the chassis is named")
	assert.Equal(t, "remote@hv1", zoneView(netA.Network.Zones["gw1"])["LSP "+vm1])
	assert.Equal(t, zoneView(netA.Network.Zones["gw1"])["LS kv-net-a"], zoneView(netA.Network.Zones["hv1"])["LS kv-net-a"])
	// The DHCP options go wherever the switch does; the VM port refers to
	// them in its own zone, its remote twin does not.
	for _, z := range []string{"gw1", "hv1"} {
		assert.Equal(t, "10.10.0.0/24", zoneView(netA.Network.Zones[z])["DHCP net-a"], z)
	}
	assert.Equal(t, "net-a", zoneView(netA.Network.Zones["hv1"])["ref dhcpv4_options "+vm1])
	assert.NotContains(t, zoneView(netA.Network.Zones["gw1"]), "ref dhcpv4_options "+vm1)

	// The same key in every zone, and different switches and ports have
	// different keys.
	keys := map[string]string{}
	for _, u := range in.Units() {
		up := in.Plan(u, testInstance, nil)
		zones := map[string]*ZoneRows{}
		if up.Network != nil {
			zones = up.Network.Zones
		} else if up.Router != nil {
			zones = up.Router.Zones
		}
		perSwitch := map[string]string{}
		for _, zr := range zones {
			for _, r := range zr.Rows {
				var name, key string
				switch m := r.Model.(type) {
				case *nbmodel.LogicalSwitch:
					name, key = m.Name, "dp "+m.OtherConfig[KeyTunnel]
				case *nbmodel.LogicalSwitchPort:
					name, key = m.Name, r.Parent+" "+m.Options[KeyTunnel]
				default:
					continue
				}
				require.NotEqual(t, "", key)
				if k, ok := keys[name]; ok {
					assert.Equal(t, k, key, "%s has one key in every zone", name)
				}
				keys[name] = key
				if other, ok := perSwitch[key]; ok && other != name {
					t.Errorf("%s and %s share key %s", name, other, key)
				}
				perSwitch[key] = name
			}
		}
	}
	assert.Equal(t, fmt.Sprintf("dp %d", MaxDatapathKey-2), keys["kv-public"]+"", "switch keys come down from the top, networks by name")
}

// plannedKeys plans every unit and returns each switch's and port's key.
func plannedKeys(t *testing.T, in *Input, held Held) TunnelKeys {
	t.Helper()
	out := TunnelKeys{Switches: map[string]int{}, Ports: map[string]int{}}
	for _, u := range in.Units() {
		up := in.Plan(u, testInstance, held)
		require.Empty(t, up.Errs)
		zones := map[string]*ZoneRows{}
		if up.Network != nil {
			zones = up.Network.Zones
		} else if up.Router != nil {
			zones = up.Router.Zones
		}
		for _, zr := range zones {
			for _, r := range zr.Rows {
				switch m := r.Model.(type) {
				case *nbmodel.LogicalSwitch:
					out.Switches[m.Name], _ = strconv.Atoi(m.OtherConfig[KeyTunnel])
				case *nbmodel.LogicalSwitchPort:
					out.Ports[m.Name], _ = strconv.Atoi(m.Options[KeyTunnel])
				}
			}
		}
	}
	return out
}

func TestZoneKeysSurviveRestartAndInputChanges(t *testing.T) {
	first := plannedKeys(t, zoneInput(), nil)

	// A restart with other input order: the NB's keys are adopted.
	in := NewInput()
	in.Set("vms", Objects{VMs: []VMInterface{
		{Namespace: "default", VMI: "vm0", Interface: "eth0", Network: "net-a", NetworkNamespace: "default", MAC: "02:00:00:00:00:09", IP: "10.10.0.9", Node: "hv2"},
		{Namespace: "default", VMI: "vm1", Interface: "eth0", Network: "net-a", NetworkNamespace: "default", MAC: "02:00:00:00:00:01", IP: "10.10.0.5", Node: "node-hv1"},
		{Namespace: "default", VMI: "vm2", Interface: "eth0", Network: "net-b", NetworkNamespace: "default", MAC: "02:00:00:00:00:02", IP: "10.20.0.5", Node: "hv2"},
	}})
	in.Set("nets", Objects{Networks: []Network{netB(), netA(), publicNet()}})
	in.Set("r1", Objects{Routers: []Router{{Name: "r1", EnableSNAT: true, Gateway: "gw1", Internal: []string{"net-a", "net-b"},
		External: &External{Network: "public", IP: "172.16.0.10"}}}})
	in.SetChassis(zoneChassis(), true)
	again := plannedKeys(t, in, Claims{Keys: first})
	for name, k := range first.Switches {
		assert.Equal(t, k, again.Switches[name], name)
	}
	for name, k := range first.Ports {
		assert.Equal(t, k, again.Ports[name], name)
	}
	vm0 := VMPortName("net-a", "default", "vm0", "eth0")
	require.NotZero(t, again.Ports[vm0])
	for name, k := range first.Ports {
		assert.NotEqual(t, k, again.Ports[vm0], "the new port does not take %s's key", name)
	}

	// A port that goes frees its key, which is not handed out again at
	// once.
	vm1 := VMPortName("net-a", "default", "vm1", "eth0")
	in.Set("vms", Objects{VMs: []VMInterface{
		{Namespace: "default", VMI: "vm0", Interface: "eth0", Network: "net-a", NetworkNamespace: "default", MAC: "02:00:00:00:00:09", IP: "10.10.0.9", Node: "hv2"},
		{Namespace: "default", VMI: "vm3", Interface: "eth0", Network: "net-a", NetworkNamespace: "default", MAC: "02:00:00:00:00:03", IP: "10.10.0.3", Node: "hv2"},
	}})
	third := plannedKeys(t, in, nil)
	assert.Zero(t, third.Ports[vm1])
	vm3 := VMPortName("net-a", "default", "vm3", "eth0")
	assert.NotEqual(t, first.Ports[vm1], third.Ports[vm3])
	assert.Equal(t, again.Ports[vm0], third.Ports[vm0])
}

func TestZoneVMOnUnknownNodeFailsAlone(t *testing.T) {
	in := zoneInput()
	in.Set("late", Objects{VMs: []VMInterface{{Namespace: "default", VMI: "vm9", Interface: "eth0", Network: "net-a",
		NetworkNamespace: "default", MAC: "02:00:00:00:00:99", IP: "10.10.0.99", Node: "node-nowhere"}}})
	up := in.Plan(Unit{KindNetwork, "net-a"}, testInstance, nil)
	require.NotNil(t, up.Network)
	vm9 := VMPortName("net-a", "default", "vm9", "eth0")
	assert.Equal(t, []string{vm9}, up.Network.KeepPorts)
	require.Len(t, up.Network.VMErrors, 1)
	assert.Contains(t, up.Network.VMErrors[0].Error(), `status.nodeName node "node-nowhere" is no chassis of any zone`)
	assert.Equal(t, "@hv1", zoneView(up.Network.Zones["hv1"])["LSP "+VMPortName("net-a", "default", "vm1", "eth0")])
	assert.Equal(t, []string{vm9}, up.Network.Zones["hv1"].Keep)

	// Addresses declared before the VMI is scheduled: no node yet.
	in.Set("late", Objects{VMs: []VMInterface{{Namespace: "default", VMI: "vm9", Interface: "eth0", Network: "net-a",
		NetworkNamespace: "default", MAC: "02:00:00:00:00:99", IP: "10.10.0.99", IPField: "metadata.annotations[interfaces][net-a].ipAddress"}}})
	up = in.Plan(Unit{KindNetwork, "net-a"}, testInstance, nil)
	require.Len(t, up.Network.VMErrors, 1)
	assert.Equal(t, "VirtualMachineInstance default/vm9: status.nodeName is not set yet: the port waits until the VMI is scheduled (interconnect mode writes it into its node's zone)", up.Network.VMErrors[0].Error())
	assert.Equal(t, []string{vm9}, up.Network.KeepPorts)
}

// zonedRouterOnNetA is an interconnect input: router r2 with SNAT on
// net-a, a VM of net-a on hv1, and zoneChassis.
func zonedRouterOnNetA() *Input {
	in := NewInput()
	in.Set("nets", Objects{Networks: []Network{publicNet(), netA()}})
	in.Set("r2", Objects{Routers: []Router{{Name: "r2", EnableSNAT: true, Internal: []string{"net-a"},
		External: &External{Network: "public", IP: "172.16.0.20"}}}})
	in.Set("vms", Objects{VMs: []VMInterface{{Namespace: "default", VMI: "vm1", Interface: "eth0", Network: "net-a",
		NetworkNamespace: "default", MAC: "02:00:00:00:00:01", IP: "10.10.0.5", Node: "hv1"}}})
	in.SetChassis(zoneChassis(), true)
	return in
}

func TestZoneRouterMovesWithItsPrimary(t *testing.T) {
	in := zonedRouterOnNetA()
	up := in.Plan(Unit{KindRouter, "r2"}, testInstance, nil)
	require.NotNil(t, up.Router)
	home := up.Router.Gateway.Chassis[0]
	other := map[string]string{"gw1": "gw2", "gw2": "gw1"}[home]
	require.Contains(t, up.Router.Zones, home)
	port := up.Router.Zones["hv1"].Rows[0].Model.(*nbmodel.LogicalSwitchPort)
	key := port.Options[KeyTunnel]

	// The primary's chassis goes: every unit is planned again, the router
	// moves to the other gateway's zone, its remote port in hv1 follows
	// it, and keeps its key.
	var left []Chassis
	for _, c := range zoneChassis() {
		if c.Name != home {
			left = append(left, c)
		}
	}
	affected := in.SetChassis(left, true)
	assert.Contains(t, affected, Unit{KindRouter, "r2"})
	assert.Contains(t, affected, Unit{KindNetwork, "net-a"})
	up = in.Plan(Unit{KindRouter, "r2"}, testInstance, nil)
	require.NotNil(t, up.Router)
	assert.Equal(t, []string{other}, up.Router.Gateway.Chassis)
	assert.NotContains(t, up.Router.Zones, home)
	assert.Equal(t, "remote@"+other, zoneView(up.Router.Zones["hv1"])["LSP kv-stor-net-a_r2"])
	assert.Equal(t, key, up.Router.Zones["hv1"].Rows[0].Model.(*nbmodel.LogicalSwitchPort).Options[KeyTunnel])
	na := in.Plan(Unit{KindNetwork, "net-a"}, testInstance, nil)
	assert.ElementsMatch(t, []string{"hv1", other}, slices.Collect(maps.Keys(na.Network.Zones)))
}

// A router that adopts a gateway order with another primary (kubevirt-ovn
// rebalance wrote it to the NB) moves to that primary's zone; its plan
// names the units to plan again, its networks, whose zones follow it.
func TestZoneRouterAdoptingAMoveReplansItsNetworks(t *testing.T) {
	in := zonedRouterOnNetA()
	r2 := Unit{KindRouter, "r2"}
	up := in.Plan(r2, testInstance, nil)
	require.NotNil(t, up.Router)
	home := up.Router.Gateway.Chassis[0]
	other := map[string]string{"gw1": "gw2", "gw2": "gw1"}[home]
	assert.Empty(t, up.Affected)
	na := in.Plan(Unit{KindNetwork, "net-a"}, testInstance, nil)
	require.ElementsMatch(t, []string{"hv1", home}, slices.Collect(maps.Keys(na.Network.Zones)))

	moved := Claims{Gateways: map[string][]string{"r2": {other, home}}}
	up = in.Plan(r2, testInstance, moved)
	require.NotNil(t, up.Router)
	assert.Equal(t, []string{other, home}, up.Router.Gateway.Chassis, "the NB's order adopted")
	assert.Equal(t, []Unit{{KindNetwork, "net-a"}, {KindNetwork, "public"}, r2}, up.Affected)
	na = in.Plan(Unit{KindNetwork, "net-a"}, testInstance, moved)
	assert.ElementsMatch(t, []string{"hv1", other}, slices.Collect(maps.Keys(na.Network.Zones)), "net-a follows its router")

	up = in.Plan(r2, testInstance, moved)
	assert.Empty(t, up.Affected, "planned again: nothing moved")
}

// allocatorDecisions plans every unit of leader (an allocator's input) and
// returns what the allocator records (gateway orders, tunnel keys), with
// the plans.
func allocatorDecisions(t *testing.T, leader *Input) (Claims, map[Unit]UnitPlan) {
	t.Helper()
	decided := Claims{Gateways: map[string][]string{}, Keys: TunnelKeys{Switches: map[string]int{}, Ports: map[string]int{}}}
	plans := map[Unit]UnitPlan{}
	for _, u := range leader.Units() {
		up := leader.Plan(u, testInstance, nil)
		require.Empty(t, up.Errs)
		plans[u] = up
		keys := TunnelKeys{}
		if up.Network != nil {
			keys = up.Network.Keys
		} else {
			keys = up.Router.Keys
			decided.Gateways[u.Name] = up.Router.Gateway.Chassis
		}
		maps.Copy(decided.Keys.Switches, keys.Switches)
		maps.Copy(decided.Keys.Ports, keys.Ports)
	}
	return decided, plans
}

// A zone agent (a follower) plans a router from the allocator's decision;
// when the allocator moves the router to another gateway, the router's
// plan in the agent names its networks to plan again: the agent's zone
// may hold a switch only the router's old home needed.
func TestZoneFollowerRouterMovedReplansItsNetworks(t *testing.T) {
	decided, _ := allocatorDecisions(t, zonedRouterOnNetA())
	follower := zonedRouterOnNetA()
	follower.SetFollower(true)
	r2 := Unit{KindRouter, "r2"}
	up := follower.Plan(r2, testInstance, decided)
	require.Empty(t, up.Errs)
	assert.Empty(t, up.Affected)
	home := up.Router.Gateway.Chassis[0]
	other := map[string]string{"gw1": "gw2", "gw2": "gw1"}[home]

	decided.Gateways["r2"] = []string{other}
	up = follower.Plan(r2, testInstance, decided)
	require.Empty(t, up.Errs)
	assert.Equal(t, []Unit{{KindNetwork, "net-a"}, {KindNetwork, "public"}, r2}, up.Affected, "the allocator moved r2")
	na := follower.Plan(Unit{KindNetwork, "net-a"}, testInstance, decided)
	assert.NotContains(t, na.Network.Zones, home, "net-a leaves r2's old home")
	assert.Empty(t, follower.Plan(r2, testInstance, decided).Affected, "planned again: nothing moved")
}

// TestZoneFollowerPlansWhatTheAllocatorDecided: a follower (a zone agent)
// decides nothing: without the allocator's decisions its units wait; with
// them it plans exactly the allocator's rows.
func TestZoneFollowerPlansWhatTheAllocatorDecided(t *testing.T) {
	leader := zoneInput()
	decided, plans := allocatorDecisions(t, leader)

	follower := zoneInput()
	follower.SetFollower(true)
	for _, u := range follower.Units() {
		up := follower.Plan(u, testInstance, nil)
		require.NotEmpty(t, up.Errs, "%s plans without the allocator's decisions", u)
		var ie *InputError
		require.ErrorAs(t, up.Errs[0], &ie)
		assert.Equal(t, ReasonWaiting, ie.Reason, "%s: %v", u, up.Errs)
	}
	for _, u := range follower.Units() {
		up := follower.Plan(u, testInstance, decided)
		require.Empty(t, up.Errs)
		want := plans[u]
		if up.Network != nil {
			assert.Equal(t, want.Network.Zones, up.Network.Zones, "%s", u)
		} else {
			assert.Equal(t, want.Router.Zones, up.Router.Zones, "%s", u)
		}
	}
}

// TestZonePhysicalNetworkHasNoRemoteTwins: the zones of a FLAT network
// meet on the physical network: a router's port on it and a VM's are in
// their own zone only.
func TestZonePhysicalNetworkHasNoRemoteTwins(t *testing.T) {
	in := zoneInput()
	in.Set("r2", Objects{Routers: []Router{{Name: "r2", EnableSNAT: true, Gateway: "gw2",
		External: &External{Network: "public", IP: "172.16.0.20"}}}})
	in.Set("vm-p", Objects{VMs: []VMInterface{{Namespace: "default", VMI: "vm-p", Interface: "eth0", Network: "public",
		NetworkNamespace: "default", MAC: "02:00:00:00:00:99", IP: "172.16.0.99", Node: "hv1"}}})
	pub := in.Plan(Unit{KindNetwork, "public"}, testInstance, nil)
	require.Empty(t, pub.Errs)
	assert.ElementsMatch(t, []string{"gw1", "gw2", "hv1"}, slices.Collect(maps.Keys(pub.Network.Zones)))
	vmP := VMPortName("public", "default", "vm-p", "eth0")
	assert.Equal(t, map[string]string{"LS kv-public": zoneView(pub.Network.Zones["gw1"])["LS kv-public"], "LSP kv-ln-public": "localnet@", "DHCP public": "172.16.0.0/24"},
		zoneView(pub.Network.Zones["gw1"]), "no remote twin of vm-p")
	assert.Equal(t, "@hv1", zoneView(pub.Network.Zones["hv1"])["LSP "+vmP])
	for _, r := range []string{"r1", "r2"} {
		up := in.Plan(Unit{KindRouter, r}, testInstance, nil)
		require.Empty(t, up.Errs)
		home := up.Router.Gateway.Chassis[0] // its zone's name too
		for z, zr := range up.Router.Zones {
			if z != home {
				assert.NotContains(t, zoneView(zr), "LSP kv-etor-"+r, "%s has no twin of its port on public in zone %s", r, z)
			}
		}
		assert.Equal(t, "router@", zoneView(up.Router.Zones[home])["LSP kv-etor-"+r])
	}
}

// TestZoneNoChassisKnownLeavesRows: in interconnect mode with no zone's
// chassis known (an SB just restarted, agents not published yet), units
// wait and their rows stay, rather than being removed from every zone.
func TestZoneNoChassisKnownLeavesRows(t *testing.T) {
	p := Build(&Snapshot{Networks: []Network{netA()}, Interconnect: true, ChassisKnown: true}, testInstance)
	assert.Empty(t, p.Networks)
	require.Len(t, p.Failed[Unit{KindNetwork, "net-a"}], 1)
	var ie *InputError
	require.ErrorAs(t, p.Failed[Unit{KindNetwork, "net-a"}][0], &ie)
	assert.Equal(t, ReasonWaiting, ie.Reason)
}

// TestZoneNetworkPlanLeavesRoutersGateways: a network's plan asks where
// its routers live; it never re-decides their gateways. Adopting another
// writer's move in the NB (kubevirt-ovn rebalance) is the router's own
// plan's.
func TestZoneNetworkPlanLeavesRoutersGateways(t *testing.T) {
	in := zonedRouterOnNetA()
	up := in.Plan(Unit{KindRouter, "r2"}, testInstance, nil)
	require.Empty(t, up.Errs)
	order := up.Router.Gateway.Chassis
	require.Len(t, order, 2)
	moved := Claims{Gateways: map[string][]string{"r2": {order[1], order[0]}}}

	na := in.Plan(Unit{KindNetwork, "net-a"}, testInstance, moved)
	require.Empty(t, na.Errs)
	assert.ElementsMatch(t, []string{"hv1", order[0]}, slices.Collect(maps.Keys(na.Network.Zones)), "r2 lives where it was assigned")
	up = in.Plan(Unit{KindRouter, "r2"}, testInstance, nil)
	assert.Equal(t, order, up.Router.Gateway.Chassis, "the network's plan changed nothing of r2's")

	up = in.Plan(Unit{KindRouter, "r2"}, testInstance, moved)
	assert.Equal(t, []string{order[1], order[0]}, up.Router.Gateway.Chassis, "r2's own plan adopts the move")
	na = in.Plan(Unit{KindNetwork, "net-a"}, testInstance, moved)
	assert.ElementsMatch(t, []string{"hv1", order[1]}, slices.Collect(maps.Keys(na.Network.Zones)))
}

// TestZoneBuildIsDeterministic: routers first needed by their network's
// plan are assigned in name order, whatever order the input's maps give.
func TestZoneBuildIsDeterministic(t *testing.T) {
	s := &Snapshot{Interconnect: true, Chassis: zoneChassis(), ChassisKnown: true, Networks: []Network{publicNet()}}
	for i := range 8 {
		s.Routers = append(s.Routers, Router{Name: fmt.Sprintf("r%d", i), EnableSNAT: true,
			External: &External{Network: "public", IP: fmt.Sprintf("172.16.0.%d", 10+i)}})
	}
	assigned := func() map[string][]string {
		out := map[string][]string{}
		for _, rp := range Build(s, testInstance).Routers {
			out[rp.Name] = rp.Gateway.Chassis
		}
		return out
	}
	first := assigned()
	require.Len(t, first, 8)
	for range 20 {
		require.Equal(t, first, assigned())
	}
}

// A zone agent's follower plans a network its zone holds nothing of
// without waiting for the allocator's keys: every agent sees every VM's
// change, and an agent of another zone would fail and retry until the
// allocator wrote them. The agents of the network's zones still wait, and
// so does every agent while a router on the network has no home yet (it
// may bring the network into any zone).
func TestZoneFollowerOfAnotherZoneNeedsNoKeys(t *testing.T) {
	decided, plans := allocatorDecisions(t, zoneInput())
	require.NotContains(t, plans[Unit{KindNetwork, "net-a"}].Network.Zones, "hv2", "net-a lives in gw1 and hv1")
	gatewaysOnly := Claims{Gateways: decided.Gateways} // no key allocated yet
	follower := zoneInput()
	follower.SetFollowerZone("hv2")
	netA := follower.Plan(Unit{KindNetwork, "net-a"}, testInstance, gatewaysOnly)
	require.Empty(t, netA.Errs)
	assert.Empty(t, netA.Network.Zones)
	assert.Empty(t, netA.Network.Ports, "vm1's port on hv1 is not built in hv2's agent: every agent plans every network at its start")
	netB := follower.Plan(Unit{KindNetwork, "net-b"}, testInstance, gatewaysOnly)
	require.Len(t, netB.Errs, 1, "net-b has vm2 on hv2")
	var ie *InputError
	require.ErrorAs(t, netB.Errs[0], &ie)
	assert.Equal(t, ReasonWaiting, ie.Reason)
	require.Empty(t, follower.Plan(Unit{KindNetwork, "net-b"}, testInstance, decided).Errs)

	up := follower.Plan(Unit{KindNetwork, "net-a"}, testInstance, nil)
	require.Len(t, up.Errs, 1, "r1's gateway is not decided yet: net-a may come to hv2")
	require.ErrorAs(t, up.Errs[0], &ie)
	assert.Equal(t, ReasonWaiting, ie.Reason)
}

// In interconnect mode a router's change re-plans the routers of its
// networks only where their remote twins follow the network's zones: not
// on a FLAT or VLAN network, whose zones meet on the physical network. A
// thousand routers on one external network are not re-planned, in every
// zone, for one router's SNAT IP.
func TestZoneRouterChangeLeavesTheOtherRoutersOfItsExternalNetwork(t *testing.T) {
	in := zoneInput()
	netC := Network{Name: "net-c", Namespace: "default", Type: NetworkGeneve, CIDR: "10.30.0.0/24", GatewayIP: "10.30.0.1"}
	in.Set("nets", Objects{Networks: []Network{publicNet(), netA(), netB(), netC}})
	r2 := Router{Name: "r2", EnableSNAT: true, Gateway: "gw2", Internal: []string{"net-c"}, External: &External{Network: "public", IP: "172.16.0.20"}}
	in.Set("r2", Objects{Routers: []Router{r2}})
	r2.External.IP = "172.16.0.21"
	got := in.Set("r2", Objects{Routers: []Router{r2}})
	assert.Contains(t, got, Unit{KindRouter, "r2"})
	assert.Contains(t, got, Unit{KindNetwork, "public"}, "its home decides where public's switch is")
	assert.NotContains(t, got, Unit{KindRouter, "r1"}, "r1 has no remote twin on public")

	// On a GENEVE network the other routers' remote twins follow its zones.
	r3 := Router{Name: "r3", Gateway: "gw2", External: &External{Network: "net-c", IP: "10.30.0.30"}}
	in.Set("r3", Objects{Routers: []Router{r3}})
	require.Empty(t, in.Plan(Unit{KindRouter, "r3"}, testInstance, nil).Errs)
	r2.Gateway = "gw1"
	got = in.Set("r2", Objects{Routers: []Router{r2}})
	assert.Contains(t, got, Unit{KindRouter, "r3"}, "r3's port on net-c has twins in net-c's zones")
}

// Routers that arrive before their networks (an informer's first adds, in
// no order) do not bring each other back through a network not declared
// yet: at every zone agent's start that was a square in the cluster's
// routers. The network's declaration brings them back.
func TestZoneRoutersBeforeTheirNetworksLeaveEachOther(t *testing.T) {
	in := NewInput()
	in.SetChassis(zoneChassis(), true)
	r1 := Router{Name: "r1", Gateway: "gw1", Internal: []string{"net-a"}, External: &External{Network: "net-c", IP: "10.30.0.10"}}
	r2 := Router{Name: "r2", Gateway: "gw2", Internal: []string{"net-b"}, External: &External{Network: "net-c", IP: "10.30.0.20"}}
	in.Set("r1", Objects{Routers: []Router{r1}})
	got := in.Set("r2", Objects{Routers: []Router{r2}})
	assert.Contains(t, got, Unit{KindRouter, "r2"})
	assert.NotContains(t, got, Unit{KindRouter, "r1"}, "net-c is not declared: no twin of r1's port on it")

	netC := Network{Name: "net-c", Namespace: "default", Type: NetworkGeneve, CIDR: "10.30.0.0/24", GatewayIP: "10.30.0.1"}
	got = in.Set("nets", Objects{Networks: []Network{netA(), netB(), netC}})
	assert.Subset(t, got, []Unit{{KindRouter, "r1"}, {KindRouter, "r2"}}, "net-c's declaration brings its routers back")
}

// A router whose own plan fails (its SNAT IP outside its external
// network, or another router's) has no gateway: the allocator writes no
// decision for it, and a zone agent sees it without a home. A one-shot
// sync (`sync --dry-run` of a zoned cluster) schedules it all the same
// and put its external network's switch in a zone where nothing uses it,
// where the agents, rightly, had none. A router that had a gateway before
// (the NB holds its order) keeps the switch there: its rows are left as
// they are.
func TestZoneRouterThatFailsBringsItsNetworkNowhere(t *testing.T) {
	in := zoneInput()
	in.Set("bad", Objects{Routers: []Router{
		{Name: "outside", EnableSNAT: true, External: &External{Network: "public", IP: "198.18.0.5"}},
		{Name: "taken", EnableSNAT: true, External: &External{Network: "public", IP: "172.16.0.10"}},
	}})
	for _, r := range []string{"outside", "taken"} {
		require.NotEmpty(t, in.Plan(Unit{KindRouter, r}, testInstance, nil).Errs, r)
	}
	zones := func(held Held) []string {
		pub := in.Plan(Unit{KindNetwork, "public"}, testInstance, held)
		require.Empty(t, pub.Errs)
		return slices.Sorted(maps.Keys(pub.Network.Zones))
	}
	assert.Equal(t, []string{"gw1"}, zones(nil), "only r1 (on gw1) has a port on public")

	fresh := zoneInput() // a one-shot sync: the network planned first
	fresh.Set("bad", Objects{Routers: []Router{{Name: "outside", EnableSNAT: true, External: &External{Network: "public", IP: "198.18.0.5"}}}})
	pub := fresh.Plan(Unit{KindNetwork, "public"}, testInstance, nil)
	assert.Equal(t, []string{"gw1"}, slices.Sorted(maps.Keys(pub.Network.Zones)))

	had := zoneInput()
	had.Set("bad", Objects{Routers: []Router{{Name: "outside", EnableSNAT: true, External: &External{Network: "public", IP: "198.18.0.5"}}}})
	pub = had.Plan(Unit{KindNetwork, "public"}, testInstance, Claims{Gateways: map[string][]string{"outside": {"gw2", "gw1"}}})
	assert.Equal(t, []string{"gw1", "gw2"}, slices.Sorted(maps.Keys(pub.Network.Zones)), "outside's rows on gw2 are left as they are")
}

// A zone agent (a follower) plans a network whose switch has no key from
// the allocator yet to a wait, without building its VM ports: before the
// allocator's first decisions every agent plans every network of the
// cluster so, at its start.
func TestZoneFollowerWaitsForTheSwitchKeyCheaply(t *testing.T) {
	in := zoneInput()
	var vms []VMInterface
	for i := range 200 {
		vms = append(vms, VMInterface{Namespace: "default", VMI: fmt.Sprintf("vm-%d", i), Interface: "eth0", Network: "net-a", NetworkNamespace: "default",
			MAC: fmt.Sprintf("02:00:00:00:01:%02x", i), IP: fmt.Sprintf("10.10.0.%d", i+20), Node: "node-hv1"})
	}
	in.Set("many", Objects{VMs: vms})
	in.SetFollowerZone("hv1")
	netA := Unit{KindNetwork, "net-a"}
	up := in.Plan(netA, testInstance, Claims{})
	require.Len(t, up.Errs, 1)
	var ie *InputError
	require.ErrorAs(t, up.Errs[0], &ie)
	assert.Equal(t, ReasonWaiting, ie.Reason)
	allocs := testing.AllocsPerRun(5, func() { in.Plan(netA, testInstance, Claims{}) })
	assert.Less(t, allocs, 100.0, "no port of its 200 VMs built")
}
