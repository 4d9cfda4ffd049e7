package translator

import (
	"bytes"
	"encoding/json"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubevirt-ovn/kubevirt-ovn/nbmodel"
)

// zoneRowNames lists a zone's rows as "Table name[ -> refs]", sorted.
func zoneRowNames(zr *ZoneRows) []string {
	if zr == nil {
		return nil
	}
	var out []string
	for _, r := range zr.Rows {
		var s string
		switch m := r.Model.(type) {
		case *nbmodel.PortGroup:
			s = "PG " + m.Name
		case *nbmodel.ACL:
			s = "ACL " + m.ExternalIDs[KeySecurityACL]
		case *nbmodel.AddressSet:
			s = "AS " + m.Name + " " + strings.Join(m.Addresses, ",")
		case *nbmodel.LoadBalancer:
			s = "LB " + m.Name
		case *nbmodel.LoadBalancerHealthCheck:
			s = "HC " + r.Parent + " " + m.Vip
		case *nbmodel.LogicalSwitch:
			s = "LS " + m.Name
		case *nbmodel.LogicalRouter:
			s = "LR " + m.Name
		default:
			continue
		}
		var refs []string
		for _, ref := range r.Refs {
			if ref.Column == "ports" || ref.Column == "load_balancer" {
				refs = append(refs, ref.Key)
			}
		}
		if len(refs) > 0 {
			s += " -> " + strings.Join(refs, ",")
		}
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// zoneSGInput is zoneInput with vm1 (net-a, zone hv1) in group web and
// vm2 (net-b, zone hv2) in group client; web admits UDP 90 from client's
// members, client lets everything out.
func zoneSGInput(zoned bool) *Input {
	in := NewInput()
	in.Set("nets", Objects{Networks: []Network{publicNet(), netA(), netB()}})
	in.Set("r1", Objects{Routers: []Router{{Name: "r1", EnableSNAT: true, Gateway: "gw1", Internal: []string{"net-a", "net-b"},
		External: &External{Network: "public", IP: "172.16.0.10"}}}})
	in.Set("vms", Objects{VMs: []VMInterface{
		{Namespace: "default", VMI: "vm1", Interface: "eth0", Network: "net-a", NetworkNamespace: "default", MAC: "02:00:00:00:00:01", IP: "10.10.0.5", Node: "node-hv1", SecurityGroups: "web"},
		{Namespace: "default", VMI: "vm2", Interface: "eth0", Network: "net-b", NetworkNamespace: "default", MAC: "02:00:00:00:00:02", IP: "10.20.0.5", Node: "hv2", SecurityGroups: "client"},
	}})
	p := 90
	in.Set("sgs", Objects{SecurityGroups: []SecurityGroup{
		{Name: "web", ID: "web", Rules: []SecurityGroupRule{{ID: "from-clients", Direction: "ingress", Protocol: "udp", PortRangeMin: &p, RemoteGroupID: "client"}}},
		{Name: "client", ID: "client", Rules: []SecurityGroupRule{{ID: "out", Direction: "egress"}}},
	}})
	chassis := zoneChassis()
	if !zoned {
		for i := range chassis {
			chassis[i].Zone = ""
		}
	}
	in.SetChassis(chassis, true)
	return in
}

// TestZoneSecurityGroupRows: in interconnect mode a group's Port_Group and
// ACLs are in the zones holding its members' ports, with those members
// only; a group named as remote group has an Address_Set of its members
// in every zone, where the groups naming it have members, and the rules
// match that set, not OVN's per-zone $<pg>_ip4. Central mode is as before.
func TestZoneSecurityGroupRows(t *testing.T) {
	in := zoneSGInput(true)
	web := in.Plan(Unit{KindSecurityGroup, "web"}, testInstance, nil)
	require.Empty(t, web.Errs)
	require.NotNil(t, web.SecurityGroup)
	sp := web.SecurityGroup
	assert.Equal(t, []string{"hv1"}, sortedKeys(sp.Zones), "web's only member is in zone hv1")
	assert.Equal(t, []string{
		"ACL base/dhcp", "ACL base/drop-egress", "ACL base/drop-ingress", "ACL base/ping-gateway", "ACL rule/from-clients",
		"PG kv_sg_web -> kv-net-a_default_vm1_eth0",
	}, zoneRowNames(sp.Zones["hv1"]))
	assert.Nil(t, sp.AddressSet, "no rule names web as its remote group")
	i := slices.IndexFunc(sp.ACLs, func(a *nbmodel.ACL) bool { return a.ExternalIDs[KeySecurityACL] == "rule/from-clients" })
	require.GreaterOrEqual(t, i, 0)
	assert.Equal(t, "outport == @kv_sg_web && ip4 && ip4.src == $kv_sgaddr_client_ip4 && udp && udp.dst == 90", sp.ACLs[i].Match)

	client := in.Plan(Unit{KindSecurityGroup, "client"}, testInstance, nil)
	require.Empty(t, client.Errs)
	cp := client.SecurityGroup
	assert.Equal(t, []string{"hv1", "hv2"}, sortedKeys(cp.Zones))
	assert.Equal(t, []string{"AS kv_sgaddr_client_ip4 10.20.0.5"}, zoneRowNames(cp.Zones["hv1"]),
		"zone hv1 has web's member, whose rule matches client's addresses: the set, no Port_Group")
	assert.Equal(t, []string{"ACL base/dhcp", "ACL base/drop-egress", "ACL base/drop-ingress", "ACL base/ping-gateway", "ACL rule/out",
		"PG kv_sg_client -> kv-net-b_default_vm2_eth0"}, zoneRowNames(cp.Zones["hv2"]))
	require.NotNil(t, cp.AddressSet)
	assert.Equal(t, "client", cp.AddressSet.ExternalIDs[KeySecurityGroup])
	assert.Equal(t, OwnerIDs(testInstance, Unit{KindSecurityGroup, "client"})[KeyOwner], cp.AddressSet.ExternalIDs[KeyOwner])

	// Central mode: OVN's address set of the Port_Group, no zones.
	central := zoneSGInput(false)
	require.False(t, central.Zoned())
	web = central.Plan(Unit{KindSecurityGroup, "web"}, testInstance, nil)
	require.NotNil(t, web.SecurityGroup)
	assert.Nil(t, web.SecurityGroup.Zones)
	assert.Contains(t, web.SecurityGroup.ACLs[i].Match, "ip4.src == $kv_sg_client_ip4")
	assert.Nil(t, central.Plan(Unit{KindSecurityGroup, "client"}, testInstance, nil).SecurityGroup.AddressSet)
}

// TestZoneSecurityGroupAffects: where a remote group's Address_Set lives
// follows the members of the groups naming it, so their changes re-plan
// it; a rule naming a group re-plans that group too.
func TestZoneSecurityGroupAffects(t *testing.T) {
	in := zoneSGInput(true)
	// vm1 (web's member) moves to zone gw2: client's set moves with it.
	affected := in.Set("vms", Objects{VMs: []VMInterface{
		{Namespace: "default", VMI: "vm1", Interface: "eth0", Network: "net-a", NetworkNamespace: "default", MAC: "02:00:00:00:00:01", IP: "10.10.0.5", Node: "gw2", SecurityGroups: "web"},
		{Namespace: "default", VMI: "vm2", Interface: "eth0", Network: "net-b", NetworkNamespace: "default", MAC: "02:00:00:00:00:02", IP: "10.20.0.5", Node: "hv2", SecurityGroups: "client"},
	}})
	assert.Contains(t, affected, Unit{KindSecurityGroup, "web"})
	assert.Contains(t, affected, Unit{KindSecurityGroup, "client"}, "web's rule names client: its set's zones follow web's members")
	cp := in.Plan(Unit{KindSecurityGroup, "client"}, testInstance, nil).SecurityGroup
	assert.Equal(t, []string{"gw2", "hv2"}, sortedKeys(cp.Zones))

	// A rule naming another remote group re-plans both.
	in.Set("more", Objects{SecurityGroups: []SecurityGroup{{Name: "admin", ID: "admin"}}})
	affected = in.Set("rules", Objects{SecurityGroupRules: []SecurityGroupRule{{Name: "web-admin", ID: "web-admin", SecurityGroupID: "web", Direction: "ingress", RemoteGroupID: "admin"}}})
	assert.Contains(t, affected, Unit{KindSecurityGroup, "web"})
	assert.Contains(t, affected, Unit{KindSecurityGroup, "admin"})
	ap := in.Plan(Unit{KindSecurityGroup, "admin"}, testInstance, nil).SecurityGroup
	assert.Equal(t, []string{"AS kv_sgaddr_admin_ip4 "}, zoneRowNames(ap.Zones["gw2"]), "an empty set where web's member is")

}

// TestZoneLoadBalancerRows: a router's load balancer rows (VIP and
// floating IP keys, health checks) are in its home zone, referenced from
// the router there; the switch's rows in every zone of the network's
// switch, referenced from the switch there. A health check on a FLAT or
// VLAN network is an error of the load balancer in interconnect mode.
func TestZoneLoadBalancerRows(t *testing.T) {
	s := lbSnapshot()
	s.Chassis = zoneChassis()
	lb := webLB()
	lb.HealthCheck = &LBHealthCheck{SourceIP: "10.10.0.250"}
	s.LoadBalancers = []LoadBalancer{lb}
	s.ChassisKnown = true
	in := NewInputFrom(s)
	require.True(t, in.Zoned())

	r1 := in.Plan(Unit{KindRouter, "r1"}, testInstance, nil)
	require.Empty(t, r1.Errs)
	require.Len(t, r1.LoadBalancers, 1)
	assert.True(t, r1.LoadBalancers[0].Ready, r1.LoadBalancers[0].Reason)
	home := ""
	for z, zr := range r1.Router.Zones {
		if slices.ContainsFunc(zr.Rows, func(r Row) bool { _, ok := r.Model.(*nbmodel.LogicalRouter); return ok }) {
			home = z
		}
	}
	require.NotEmpty(t, home)
	rows := zoneRowNames(r1.Router.Zones[home])
	assert.Contains(t, rows, "LR kv-r1 -> kv-lb-web_tcp")
	assert.Contains(t, rows, "LB kv-lb-web_tcp")
	assert.Contains(t, rows, "HC kv-lb-web_tcp 10.10.0.100:80")
	for z, zr := range r1.Router.Zones {
		if z != home {
			assert.NotContains(t, strings.Join(zoneRowNames(zr), " "), "LB ", "zone %s holds no router load balancer", z)
		}
	}
	router := r1.Router.LoadBalancers[0]
	assert.Len(t, router.IPPortMappings, 2, "every member mapped: OVN leaves a health-checked member without a mapping out of the VIP")

	na := in.Plan(Unit{KindNetwork, "net-a"}, testInstance, nil)
	require.Empty(t, na.Errs)
	require.NotEmpty(t, na.Network.Zones)
	for z, zr := range na.Network.Zones {
		rows := zoneRowNames(zr)
		assert.Contains(t, rows, "LS kv-net-a -> kv-lb-web_tcp_switch", z)
		assert.Contains(t, rows, "LB kv-lb-web_tcp_switch", z)
		assert.Contains(t, rows, "HC kv-lb-web_tcp_switch 10.10.0.100:80", z)
	}
	assert.Contains(t, na.Network.Zones, home, "the router's home zone holds the switch too")

	// A health check on a VLAN network: the load balancer's error.
	vlan := Network{Name: "vlan-a", Namespace: "default", Type: NetworkVLAN, SegmentID: "100", PhysicalNetworkName: "physnet1", CIDR: "192.0.2.0/24", GatewayIP: "192.0.2.1"}
	s.Networks = append(s.Networks, vlan)
	s.Routers[0].Internal = append(s.Routers[0].Internal, vlan.Name)
	bad := lb
	bad.Name, bad.ID, bad.Network, bad.VIP, bad.Members = "vlan-lb", "vlan-lb", vlan.Name, "192.0.2.200", nil
	bad.HealthCheck = &LBHealthCheck{SourceIP: "192.0.2.250"}
	s.LoadBalancers = append(s.LoadBalancers, bad)
	in = NewInputFrom(s)
	r1 = in.Plan(Unit{KindRouter, "r1"}, testInstance, nil)
	require.Empty(t, r1.Errs)
	i := slices.IndexFunc(r1.LoadBalancers, func(st LoadBalancerStatus) bool { return st.Name == "vlan-lb" })
	require.GreaterOrEqual(t, i, 0)
	assert.False(t, r1.LoadBalancers[i].Ready)
	assert.Equal(t, "LoadBalancer vlan-lb: spec.healthCheck is not supported on VLAN network vlan-a in interconnect mode: its VM ports exist only in their own zone, and OVN leaves a health-checked member whose port a zone lacks out of the VIP there", r1.LoadBalancers[i].Reason)
	assert.NotContains(t, strings.Join(zoneRowNames(r1.Router.Zones[home]), " "), "vlan-lb")
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TestZoneSecurityGroupWaitsForChassis: with no zone's chassis known, a
// group is planned nowhere and its rows are left as they are (waiting),
// like a network's.
// A member live migrating to another zone's node has its port in that
// zone's Port_Group too, from the plan after its migration starts: the
// memo of the group's members counts the migration target (it kept the
// member as it was, and the target's zone got no port, until the soak
// found it).
func TestZoneSecurityGroupMemberMigrating(t *testing.T) {
	in := zoneSGInput(true)
	// web has a member on another network too: its memo of members
	// outlives vm1's change.
	vm3 := VMInterface{Namespace: "default", VMI: "vm3", Interface: "eth0", Network: "net-b", NetworkNamespace: "default", MAC: "02:00:00:00:00:03", IP: "10.20.0.7", Node: "node-hv1", SecurityGroups: "web"}
	in.Set("vm3", Objects{VMs: []VMInterface{vm3}})
	web := Unit{KindSecurityGroup, "web"}
	sp := in.Plan(web, testInstance, nil).SecurityGroup
	require.Equal(t, []string{"hv1"}, sortedKeys(sp.Zones))

	affected := in.Set("vms", Objects{VMs: []VMInterface{
		{Namespace: "default", VMI: "vm1", Interface: "eth0", Network: "net-a", NetworkNamespace: "default", MAC: "02:00:00:00:00:01", IP: "10.10.0.5", Node: "node-hv1", SecurityGroups: "web",
			MigrationTarget: "hv2", MigrationUID: "m1"},
		{Namespace: "default", VMI: "vm2", Interface: "eth0", Network: "net-b", NetworkNamespace: "default", MAC: "02:00:00:00:00:02", IP: "10.20.0.5", Node: "hv2", SecurityGroups: "client"},
	}})
	require.Contains(t, affected, web)
	sp = in.Plan(web, testInstance, nil).SecurityGroup
	assert.Equal(t, []string{"hv1", "hv2"}, sortedKeys(sp.Zones), "the migration's target zone holds vm1's port too")
	assert.Contains(t, zoneRowNames(sp.Zones["hv2"]), "PG kv_sg_web -> kv-net-a_default_vm1_eth0")
}

func TestZoneSecurityGroupWaitsForChassis(t *testing.T) {
	p := Build(&Snapshot{Networks: []Network{netA()}, SecurityGroups: []SecurityGroup{{Name: "web", ID: "web"}},
		Interconnect: true, ChassisKnown: true}, testInstance)
	assert.Empty(t, p.SecurityGroups)
	u := Unit{KindSecurityGroup, "web"}
	require.Len(t, p.Failed[u], 1)
	var ie *InputError
	require.ErrorAs(t, p.Failed[u][0], &ie)
	assert.Equal(t, ReasonWaiting, ie.Reason)
	assert.Equal(t, ObjSecurityGroup, ie.Kind)
	assert.Equal(t, "web", ie.Object)
}

// TestGoldenZonesSecurityGroupsAndLoadBalancers keeps the whole
// interconnect plan of zoneSGInput's groups and of a load balancer on
// net-a (members in zones hv1 and hv2) reviewable: the groups' plans with
// their zone rows, and every zone's load balancer rows of net-a, r1 and
// net-b (r1's other internal network: its rows for web, with health checks
// in hv2 where a member is, without in gw1 where none is).
func TestGoldenZonesSecurityGroupsAndLoadBalancers(t *testing.T) {
	in := zoneSGInput(true)
	in.Set("vm3", Objects{VMs: []VMInterface{{Namespace: "default", VMI: "vm3", Interface: "eth0", Network: "net-a", NetworkNamespace: "default",
		MAC: "02:00:00:00:00:03", IP: "10.10.0.6", Node: "hv2", SecurityGroups: "client"}}})
	lb := webLB()
	lb.Members = []string{"10.10.0.5", "10.10.0.6"}
	lb.HealthCheck = &LBHealthCheck{SourceIP: "10.10.0.250"}
	in.Set("lbs", Objects{LoadBalancers: []LoadBalancer{lb}})
	out := struct {
		SecurityGroups []*SecurityGroupPlan
		LoadBalancers  map[string]map[string][]string // unit -> zone -> rows
	}{LoadBalancers: map[string]map[string][]string{}}
	for _, g := range []string{"client", "web"} {
		up := in.Plan(Unit{KindSecurityGroup, g}, testInstance, nil)
		require.Empty(t, up.Errs)
		out.SecurityGroups = append(out.SecurityGroups, up.SecurityGroup)
	}
	for _, u := range []Unit{{KindNetwork, "net-a"}, {KindNetwork, "net-b"}, {KindRouter, "r1"}} {
		up := in.Plan(u, testInstance, nil)
		require.Empty(t, up.Errs)
		var zones map[string]*ZoneRows
		if up.Network != nil {
			zones = up.Network.Zones
		} else {
			zones = up.Router.Zones
		}
		view := map[string][]string{}
		for z, zr := range zones {
			for _, r := range zoneRowNames(zr) {
				if strings.HasPrefix(r, "LB ") || strings.HasPrefix(r, "HC ") || strings.Contains(r, "-> kv-lb-") {
					view[z] = append(view[z], r)
				}
			}
		}
		out.LoadBalancers[string(u.Kind)+" "+u.Name] = view
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	require.NoError(t, enc.Encode(out))
	path := filepath.Join("testdata", "zones-sglb.plan.golden")
	if *update {
		require.NoError(t, os.WriteFile(path, buf.Bytes(), 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run go test ./translator -run TestGoldenZonesSecurityGroupsAndLoadBalancers -update to create it")
	assert.Equal(t, string(want), buf.String())
}

// siblingZoneRows are network net-b's rows in each zone for load balancer
// web's tcp row: its VIPs, its ip_port_mappings and its health checks'
// VIPs; and whether net-b's switch there refers to it.
type siblingZoneRow struct {
	Vips     map[string]string
	Mappings map[string]string
	Checks   []string
	Owner    string
	Referred bool
}

func siblingZoneRows(t *testing.T, np *NetworkPlan, name string) map[string]siblingZoneRow {
	t.Helper()
	out := map[string]siblingZoneRow{}
	for z, zr := range np.Zones {
		var r siblingZoneRow
		found := false
		for _, row := range zr.Rows {
			switch m := row.Model.(type) {
			case *nbmodel.LogicalSwitch:
				r.Referred = slices.Contains(row.Refs, Ref{Column: "load_balancer", Key: name})
			case *nbmodel.LoadBalancer:
				if m.Name == name {
					found = true
					r.Vips, r.Mappings, r.Owner = m.Vips, m.IPPortMappings, m.ExternalIDs[KeyOwner]
				}
			case *nbmodel.LoadBalancerHealthCheck:
				if row.Parent == name {
					r.Checks = append(r.Checks, m.Vip)
				}
			}
		}
		if found {
			out[z] = r
		}
	}
	return out
}

// TestZoneSiblingLoadBalancerRows: in interconnect mode net-b, r1's other
// internal network, has its rows for web (on net-a) in every zone of its
// switch, owned by net-b and referred to by its switch there: the router's
// home zone gw1, hv2 (vm-b, and vm-a2, a member) and gw2 (vm-d; no net-a
// there). Where a member's port is local (hv2) the row has the health
// checks and ip_port_mappings of net-a's own rows; where none is, the
// members' ports may be missing from the zone's NB (gw2 has no net-a
// switch), and ovn-northd would leave every health-checked member out of
// the VIP, so the row has neither. A member offline in its own zone is
// left out of every other zone's row, kept in its own (OVN takes it out
// there). A second plan is the same, the incremental plan is the whole
// one, and a member moving to another zone moves the health checks.
func TestZoneSiblingLoadBalancerRows(t *testing.T) {
	s := lbSnapshot()
	s.Chassis, s.ChassisKnown = zoneChassis(), true
	s.VMs = append(s.VMs, VMInterface{Namespace: "default", VMI: "vm-d", Interface: "eth1", Network: "net-b", NetworkNamespace: "default",
		MAC: "50:54:00:00:00:18", IP: "10.20.0.8", Node: "gw2"})
	lb := webLB()
	lb.HealthCheck = &LBHealthCheck{SourceIP: "10.10.0.250"}
	s.LoadBalancers = []LoadBalancer{lb}
	in := NewInputFrom(s)
	require.True(t, in.Zoned())
	const name = "kv-lb-web_tcp_from_net-b"
	portA, portA2 := VMPortName("net-a", "default", "vm-a", "eth1"), VMPortName("net-a", "default", "vm-a2", "eth1")
	both := map[string]string{"10.10.0.100:80": "10.10.0.5:80,10.10.0.6:80"}
	mappings := map[string]string{"10.10.0.5": portA + ":10.10.0.250", "10.10.0.6": portA2 + ":10.10.0.250"}
	checked := siblingZoneRow{Vips: both, Mappings: mappings, Checks: []string{"10.10.0.100:80"}, Owner: "net-b", Referred: true}
	unchecked := siblingZoneRow{Vips: both, Owner: "net-b", Referred: true}

	plan := func(in *Input) *NetworkPlan {
		t.Helper()
		up := in.Plan(Unit{KindNetwork, "net-b"}, testInstance, nil)
		require.Empty(t, up.Errs)
		return up.Network
	}
	np := plan(in)
	assert.Equal(t, map[string]siblingZoneRow{"gw1": unchecked, "gw2": unchecked, "hv2": checked}, siblingZoneRows(t, np, name))
	assert.Equal(t, np, plan(in), "a second plan is the same")
	netA := in.Plan(Unit{KindNetwork, "net-a"}, testInstance, nil).Network
	assert.NotContains(t, netA.Zones, "gw2", "no net-a switch in gw2: its members' ports are not in gw2's NB")

	// The central plan's row has the same VIPs and members.
	central := lbSnapshot()
	central.LoadBalancers = s.LoadBalancers
	cnp := NewInputFrom(central).Plan(Unit{KindNetwork, "net-b"}, testInstance, nil).Network
	i := slices.IndexFunc(cnp.LoadBalancers, func(lb *nbmodel.LoadBalancer) bool { return lb.Name == name })
	require.GreaterOrEqual(t, i, 0)
	assert.Equal(t, both, cnp.LoadBalancers[i].Vips)

	// vm-a2 (hv2) goes offline in its zone: out of gw1's and gw2's rows,
	// kept in hv2's, where OVN takes it out itself.
	netB := Unit{KindNetwork, "net-b"}
	assert.Contains(t, in.SetOfflineMembers("hv2", []OfflineMember{{Port: portA2, IP: "10.10.0.6", Protocol: "tcp", PortNum: 80}}), netB)
	onlyA := map[string]string{"10.10.0.100:80": "10.10.0.5:80"}
	rows := siblingZoneRows(t, plan(in), name)
	assert.Equal(t, onlyA, rows["gw1"].Vips)
	assert.Equal(t, onlyA, rows["gw2"].Vips)
	assert.Equal(t, both, rows["hv2"].Vips)
	// A stale offline from a zone where the port does not live counts
	// for nothing; vm-a (hv1) offline in hv1 leaves every zone of net-b.
	assert.Contains(t, in.SetOfflineMembers("hv1", []OfflineMember{{Port: portA, IP: "10.10.0.5", Protocol: "tcp", PortNum: 80}}), netB)
	rows = siblingZoneRows(t, plan(in), name)
	assert.Equal(t, map[string]string{"10.10.0.100:80": ""}, rows["gw2"].Vips)
	assert.Equal(t, map[string]string{"10.10.0.100:80": "10.10.0.6:80"}, rows["hv2"].Vips)
	in.SetOfflineMembers("hv1", nil)
	in.SetOfflineMembers("hv2", nil)
	assert.Equal(t, map[string]siblingZoneRow{"gw1": unchecked, "gw2": unchecked, "hv2": checked}, siblingZoneRows(t, plan(in), name))

	// vm-a2 moves to hv1: hv2 holds no member any more, and loses the
	// health checks; the incremental plan is the whole one.
	for i := range s.VMs {
		if s.VMs[i].VMI == "vm-a2" {
			s.VMs[i].Node = "hv1"
		}
	}
	affected := in.Set("snapshot", Objects{Routers: s.Routers, Networks: s.Networks, VMs: s.VMs, FloatingIPs: s.FloatingIPs, LoadBalancers: s.LoadBalancers})
	assert.Contains(t, affected, netB)
	np = plan(in)
	assert.Equal(t, map[string]siblingZoneRow{"gw1": unchecked, "gw2": unchecked, "hv2": unchecked}, siblingZoneRows(t, np, name))
	assert.Equal(t, plan(NewInputFrom(s)), np, "incremental == whole")
}

// TestSecurityGroupDualStack: members on dual-stack networks: the base
// ACLs let DHCPv6 out and ping both gateways; an IPv6 rule naming a
// remote group matches OVN's $<pg>_ip6 centrally, and in interconnect
// mode an Address_Set of every member's IPv6 addresses beside the IPv4
// one, only while an IPv6 rule names the group.
func TestSecurityGroupDualStack(t *testing.T) {
	for _, zoned := range []bool{false, true} {
		in := zoneSGInput(zoned)
		in.Set("nets", Objects{Networks: []Network{publicNet(), dualStack(netA()), dualStack(netB())}})
		web := in.Plan(Unit{KindSecurityGroup, "web"}, testInstance, nil).SecurityGroup
		require.NotNil(t, web)
		byKey := map[string]string{}
		for _, a := range web.ACLs {
			byKey[a.ExternalIDs[KeySecurityACL]] = a.Match
		}
		assert.Equal(t, "inport == @kv_sg_web && ip6 && udp.src == 546 && udp.dst == 547", byKey["base/dhcp6"])
		assert.Equal(t, "inport == @kv_sg_web && ((ip4.dst == 10.10.0.1 && icmp4 && icmp4.type == 8) || (ip6.dst == fd00:10::1 && icmp6 && icmp6.type == 128))", byKey["base/ping-gateway"])

		cp := in.Plan(Unit{KindSecurityGroup, "client"}, testInstance, nil).SecurityGroup
		require.NotNil(t, cp)
		assert.Nil(t, cp.AddressSet6, "no IPv6 rule names client yet")

		p := 90
		in.Set("sgs", Objects{SecurityGroups: []SecurityGroup{
			{Name: "web", ID: "web", Rules: []SecurityGroupRule{
				{ID: "from-clients", Direction: "ingress", Protocol: "udp", PortRangeMin: &p, RemoteGroupID: "client"},
				{ID: "from-clients6", Direction: "ingress", EtherType: "IPv6", Protocol: "udp", PortRangeMin: &p, RemoteGroupID: "client"},
			}},
			{Name: "client", ID: "client", Rules: []SecurityGroupRule{{ID: "out", Direction: "egress"}, {ID: "out6", Direction: "egress", EtherType: "IPv6"}}},
		}})
		web = in.Plan(Unit{KindSecurityGroup, "web"}, testInstance, nil).SecurityGroup
		byKey = map[string]string{}
		for _, a := range web.ACLs {
			byKey[a.ExternalIDs[KeySecurityACL]] = a.Match
		}
		cp = in.Plan(Unit{KindSecurityGroup, "client"}, testInstance, nil).SecurityGroup
		if !zoned {
			assert.Equal(t, "outport == @kv_sg_web && ip6 && ip6.src == $kv_sg_client_ip6 && udp && udp.dst == 90", byKey["rule/from-clients6"])
			assert.Nil(t, cp.AddressSet6)
			continue
		}
		assert.Equal(t, "outport == @kv_sg_web && ip6 && ip6.src == $kv_sgaddr_client_ip6 && udp && udp.dst == 90", byKey["rule/from-clients6"])
		require.NotNil(t, cp.AddressSet6)
		v6 := SLAACAddress(netip.MustParsePrefix("fd00:20::/64"), "02:00:00:00:00:02").String()
		assert.Equal(t, []string{"10.20.0.5"}, cp.AddressSet.Addresses)
		assert.Equal(t, []string{v6}, cp.AddressSet6.Addresses)
		assert.Equal(t, []string{"AS kv_sgaddr_client_ip4 10.20.0.5", "AS kv_sgaddr_client_ip6 " + v6}, zoneRowNames(cp.Zones["hv1"]),
			"zone hv1 has web's member, whose rules match client's addresses of both families")
	}
}
