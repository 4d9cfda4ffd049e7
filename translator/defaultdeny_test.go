package translator

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubevirt-ovn/kubevirt-ovn/nbmodel"
)

func TestNetworkPortGroupName(t *testing.T) {
	assert.Equal(t, "kv_net_net1", NetworkPortGroupName("net1"))
	dashed := NetworkPortGroupName("net-a")
	assert.Regexp(t, `^kv_net_net_a\.[0-9a-f]{8}$`, dashed)
	assert.NotEqual(t, dashed, NetworkPortGroupName("net_a"))
	// Never a security group's name, whatever the two are called.
	for _, s := range []string{"net-a", "net_a", "x", "net_x", "sg_net_a"} {
		for _, g := range []string{"net-a", "net_a", "x", "net_x", "_net_x", "net_net_a"} {
			assert.NotEqual(t, PortGroupName(g), NetworkPortGroupName(s), "%s/%s", s, g)
		}
		assert.Regexp(t, `^[a-zA-Z_.][a-zA-Z_.0-9]*$`, NetworkPortGroupName(s))
	}
}

// TestDefaultDenyPlan: with --default-deny each network plans a Port_Group
// of its VM ports (not the localnet port) with the base ACLs of a security
// group, its own gateway in the ping ACL; without it nothing.
func TestDefaultDenyPlan(t *testing.T) {
	s := examplesSnapshot()
	s.VMs = append(s.VMs, VMInterface{Namespace: "default", VMI: "vm-c", Interface: "eth1", Network: "net-a", NetworkNamespace: "default", MAC: "50:54:00:00:00:07", IP: "10.10.0.7", Node: "hv1"},
		// An address another VM has: no port, so not in the group.
		VMInterface{Namespace: "default", VMI: "vm-d", Interface: "eth1", Network: "net-a", NetworkNamespace: "default", MAC: "50:54:00:00:00:08", IP: "10.10.0.7", Node: "hv1"})
	s.Networks = append(s.Networks, Network{Name: "flat-vms", Namespace: "default", Type: NetworkFlat, PhysicalNetworkName: "physnet2", CIDR: "10.40.0.0/24"})
	s.VMs = append(s.VMs, VMInterface{Namespace: "default", VMI: "vm-e", Interface: "eth1", Network: "flat-vms", NetworkNamespace: "default", MAC: "50:54:00:00:00:09", IP: "10.40.0.9", Node: "hv1"})

	in := NewInputFrom(s)
	netA := Unit{Kind: KindNetwork, Name: "net-a"}
	assert.Nil(t, in.Plan(netA, testInstance, nil).Network.DefaultDeny, "off by default")

	assert.Equal(t, []Unit{{KindNetwork, "flat-vms"}, {KindNetwork, "net-a"}, {KindNetwork, "net-b"}, {KindNetwork, "public"}}, in.SetDefaultDeny(true))
	assert.Nil(t, in.SetDefaultDeny(true), "no change, no unit")

	np := in.Plan(netA, testInstance, nil).Network
	require.NotNil(t, np)
	dp := np.DefaultDeny
	require.NotNil(t, dp)
	pg := NetworkPortGroupName("net-a")
	assert.Equal(t, pg, dp.PortGroup.Name)
	assert.Equal(t, "net-a", dp.PortGroup.ExternalIDs[KeyDefaultDeny])
	assert.True(t, OwnedBy(dp.PortGroup.ExternalIDs, testInstance, netA))
	assert.Equal(t, []string{VMPortName("net-a", "default", "vm-a", "eth1"), VMPortName("net-a", "default", "vm-c", "eth1")}, dp.Ports)
	byKey := map[string]*nbmodel.ACL{}
	for _, a := range dp.ACLs {
		byKey[a.ExternalIDs[KeySecurityACL]] = a
		assert.True(t, OwnedBy(a.ExternalIDs, testInstance, netA))
	}
	assert.Len(t, dp.ACLs, 4)
	assert.Equal(t, &nbmodel.ACL{Direction: "from-lport", Priority: SGDropPriority, Action: "drop", Match: "inport == @" + pg + " && ip"}, withoutIDs(byKey["base/drop-egress"]))
	assert.Equal(t, &nbmodel.ACL{Direction: "to-lport", Priority: SGDropPriority, Action: "drop", Match: "outport == @" + pg + " && ip"}, withoutIDs(byKey["base/drop-ingress"]))
	assert.Equal(t, &nbmodel.ACL{Direction: "from-lport", Priority: SGBasePriority, Action: "allow-related", Match: "inport == @" + pg + " && ip4 && udp.src == 68 && udp.dst == 67"}, withoutIDs(byKey["base/dhcp"]))
	assert.Equal(t, &nbmodel.ACL{Direction: "from-lport", Priority: SGBasePriority, Action: "allow-related", Match: "inport == @" + pg + " && ip4.dst == 10.10.0.1 && icmp4 && icmp4.type == 8"}, withoutIDs(byKey["base/ping-gateway"]))

	// The rows: the group after the ports it refers to, its ACLs under it.
	rows := np.Rows()
	tail := rows[len(rows)-5:]
	assert.Equal(t, pg, tail[0].Model.(*nbmodel.PortGroup).Name)
	assert.Equal(t, []Ref{{Column: "ports", Key: dp.Ports[0]}, {Column: "ports", Key: dp.Ports[1]}}, tail[0].Refs)
	for _, r := range tail[1:] {
		assert.Equal(t, pg, r.Parent)
	}

	// A network without a gateway: no ping ACL; the localnet port is no
	// VM port.
	flat := in.Plan(Unit{KindNetwork, "flat-vms"}, testInstance, nil).Network.DefaultDeny
	require.NotNil(t, flat)
	assert.Equal(t, []string{VMPortName("flat-vms", "default", "vm-e", "eth1")}, flat.Ports)
	assert.Len(t, flat.ACLs, 3)
	// A network without VMs still has its (empty) group.
	pub := in.Plan(Unit{KindNetwork, "public"}, testInstance, nil).Network.DefaultDeny
	require.NotNil(t, pub)
	assert.Empty(t, pub.Ports)

	// Off again: the networks re-plan without a group.
	assert.Len(t, in.SetDefaultDeny(false), 4)
	assert.Nil(t, in.Plan(netA, testInstance, nil).Network.DefaultDeny)
}

// TestDefaultDenyFollowsVMs: a VM's arrival and departure re-plan its
// network only, and the group follows.
func TestDefaultDenyFollowsVMs(t *testing.T) {
	s := examplesSnapshot()
	s.DefaultDeny = true
	in := NewInputFrom(s)
	vmC := VMInterface{Namespace: "default", VMI: "vm-c", Interface: "eth1", Network: "net-a", NetworkNamespace: "default", MAC: "50:54:00:00:00:07", IP: "10.10.0.7", Node: "hv1"}
	affected := in.Set("more", Objects{VMs: []VMInterface{vmC}})
	assert.Contains(t, affected, Unit{KindNetwork, "net-a"})
	assert.NotContains(t, affected, Unit{KindNetwork, "net-b"})
	dp := in.Plan(Unit{KindNetwork, "net-a"}, testInstance, nil).Network.DefaultDeny
	assert.Equal(t, []string{VMPortName("net-a", "default", "vm-a", "eth1"), VMPortName("net-a", "default", "vm-c", "eth1")}, dp.Ports)
	in.Set("more", Objects{})
	dp = in.Plan(Unit{KindNetwork, "net-a"}, testInstance, nil).Network.DefaultDeny
	assert.Equal(t, []string{VMPortName("net-a", "default", "vm-a", "eth1")}, dp.Ports)
}

// TestDefaultDenyZones: in interconnect mode each zone of the switch has
// the group, holding the zone's own VM ports (not remote twins).
func TestDefaultDenyZones(t *testing.T) {
	in := zoneInput()
	in.SetDefaultDeny(true)
	up := in.Plan(Unit{KindNetwork, "net-a"}, testInstance, nil)
	require.Empty(t, up.Errs)
	pg := NetworkPortGroupName("net-a")
	vm1 := VMPortName("net-a", "default", "vm1", "eth0")
	groups := map[string][]Ref{}
	acls := map[string]int{}
	for z, zr := range up.Network.Zones {
		for _, r := range zr.Rows {
			switch m := r.Model.(type) {
			case *nbmodel.PortGroup:
				assert.Equal(t, pg, m.Name)
				groups[z] = r.Refs
			case *nbmodel.ACL:
				assert.Equal(t, pg, r.Parent)
				acls[z]++
			}
		}
	}
	assert.Equal(t, map[string][]Ref{"hv1": {{Column: "ports", Key: vm1}}, "gw1": nil}, groups)
	assert.Equal(t, map[string]int{"hv1": 4, "gw1": 4}, acls)
}

// TestGoldenDefaultDeny keeps the default-deny rows of the examples
// reviewable.
func TestGoldenDefaultDeny(t *testing.T) {
	s := examplesSnapshot()
	s.DefaultDeny = true
	p := Build(s, testInstance)
	require.Empty(t, p.Errors)
	require.Empty(t, p.Failed)
	groups := map[string]*DefaultDenyPlan{}
	for _, np := range p.Networks {
		require.NotNil(t, np.DefaultDeny, np.Name)
		groups[np.Name] = np.DefaultDeny
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	require.NoError(t, enc.Encode(groups))
	got := buf.Bytes()
	path := filepath.Join("testdata", "defaultdeny.plan.golden")
	if *update {
		require.NoError(t, os.WriteFile(path, got, 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run go test ./translator -run TestGoldenDefaultDeny -update to create it")
	assert.Equal(t, string(want), string(got))
}

// TestDefaultDenyDualStack: a network with an ipv6Cidr also lets a
// DHCPv6 request out and pings its IPv6 gateway (ICMPv6 echo); neighbor
// discovery needs no ACL (ovn-northd allows it ahead of every ACL). An
// IPv4 network's ACLs are as they were.
func TestDefaultDenyDualStack(t *testing.T) {
	s := examplesSnapshot()
	for i, n := range s.Networks {
		if n.Name == "net-a" {
			s.Networks[i] = dualStack(n)
		}
	}
	in := NewInputFrom(s)
	in.SetDefaultDeny(true)
	dp := in.Plan(Unit{Kind: KindNetwork, Name: "net-a"}, testInstance, nil).Network.DefaultDeny
	require.NotNil(t, dp)
	pg := NetworkPortGroupName("net-a")
	byKey := map[string]*nbmodel.ACL{}
	for _, a := range dp.ACLs {
		byKey[a.ExternalIDs[KeySecurityACL]] = a
	}
	assert.Len(t, dp.ACLs, 5)
	assert.Equal(t, &nbmodel.ACL{Direction: "from-lport", Priority: SGBasePriority, Action: "allow-related", Match: "inport == @" + pg + " && ip6 && udp.src == 546 && udp.dst == 547"}, withoutIDs(byKey["base/dhcp6"]))
	assert.Equal(t, "inport == @"+pg+" && ((ip4.dst == 10.10.0.1 && icmp4 && icmp4.type == 8) || (ip6.dst == fd00:10::1 && icmp6 && icmp6.type == 128))", byKey["base/ping-gateway"].Match)
	assert.Equal(t, "inport == @"+pg+" && ip", byKey["base/drop-egress"].Match, "ip is both families")

	b := in.Plan(Unit{Kind: KindNetwork, Name: "net-b"}, testInstance, nil).Network.DefaultDeny
	require.NotNil(t, b)
	assert.Len(t, b.ACLs, 4, "an IPv4 network: no DHCPv6 ACL")
}
