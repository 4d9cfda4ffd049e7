package translator

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubevirt-ovn/kubevirt-ovn/nbmodel"
)

// TestVMPortBinding: a VM port requests its node's chassis (by name, a
// hostname mapped to its chassis's name, or the node's name without an
// SB); while a migration runs, the source then the target, with the rarp
// activation strategy; a target that is no chassis, or the source, moves
// nothing.
func TestVMPortBinding(t *testing.T) {
	chassis := nodeChassis([]Chassis{{Name: "hv1", Hostname: "node-1"}, {Name: "4f2a", Hostname: "node-2"}})
	tests := []struct {
		name    string
		v       VMInterface
		chassis map[string]string
		want    map[string]string
		note    string
	}{
		{name: "not scheduled: nothing", v: VMInterface{}, chassis: chassis},
		{name: "by chassis name", v: VMInterface{Node: "hv1"}, chassis: chassis, want: map[string]string{"requested-chassis": "hv1"}},
		{name: "by hostname: the chassis's name", v: VMInterface{Node: "node-2"}, chassis: chassis, want: map[string]string{"requested-chassis": "4f2a"}},
		{name: "without an SB: the node's name", v: VMInterface{Node: "node-2"}, want: map[string]string{"requested-chassis": "node-2"}},
		{name: "on a node that is no chassis yet: its name", v: VMInterface{Node: "node-9"}, chassis: chassis, want: map[string]string{"requested-chassis": "node-9"}},
		{name: "migrating: source, target, rarp", v: VMInterface{Node: "node-1", MigrationTarget: "node-2"}, chassis: chassis,
			want: map[string]string{"requested-chassis": "hv1,4f2a", "activation-strategy": "rarp"}},
		{name: "migrating without an SB", v: VMInterface{Node: "node-1", MigrationTarget: "node-2"},
			want: map[string]string{"requested-chassis": "node-1,node-2", "activation-strategy": "rarp"}},
		{name: "migrating to a node that is no chassis: stays", v: VMInterface{Namespace: "ns", VMI: "vm", Interface: "eth1", Node: "node-1", MigrationTarget: "node-9"}, chassis: chassis,
			want: map[string]string{"requested-chassis": "hv1"},
			note: "VirtualMachineInstance ns/vm interface eth1: status.migrationState.targetNode node-9 is no chassis (hostname or chassis name in the Southbound): its port stays on hv1"},
		{name: "migrating, a VM that sends no RARP: both chassis, no activation", v: VMInterface{Node: "node-1", MigrationTarget: "node-2", NoActivation: true}, chassis: chassis,
			want: map[string]string{"requested-chassis": "hv1,4f2a"}},
		{name: "migrating to its own chassis: stays", v: VMInterface{Node: "node-1", MigrationTarget: "hv1"}, chassis: chassis, want: map[string]string{"requested-chassis": "hv1"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, note := vmPortBinding(&tc.v, tc.chassis)
			assert.Equal(t, tc.want, got)
			assert.Equal(t, tc.note, note)
		})
	}
}

// TestMigrationPlansThePort: the network's plan follows a VMI's migration
// through its phases; the chassis' names coming or changing re-plan only
// the networks whose VMs they move.
func TestMigrationPlansThePort(t *testing.T) {
	vm := VMInterface{Namespace: "default", VMI: "vm1", Interface: "eth1", Network: "net-a", NetworkNamespace: "default", MAC: "50:54:00:00:00:05", IP: "10.10.0.5", Node: "node-1"}
	other := VMInterface{Namespace: "default", VMI: "vm2", Interface: "eth1", Network: "net-b", NetworkNamespace: "default", MAC: "50:54:00:00:00:06", IP: "10.20.0.6", Node: "node-3"}
	in := NewInput()
	in.Set("nets", Objects{Networks: []Network{netA(), netB()}})
	in.Set("vms", Objects{VMs: []VMInterface{vm, other}})
	netAUnit := Unit{Kind: KindNetwork, Name: "net-a"}
	options := func() map[string]string {
		up := in.Plan(netAUnit, testInstance, nil)
		require.NotNil(t, up.Network)
		for _, p := range up.Network.Ports {
			if p.Name == VMPortName("net-a", "default", "vm1", "eth1") {
				return p.Options
			}
		}
		require.FailNow(t, "no port of vm1")
		return nil
	}
	assert.Equal(t, map[string]string{"requested-chassis": "node-1"}, options(), "no SB: the node's name")

	ch := []Chassis{{Name: "hv1", Hostname: "node-1"}, {Name: "hv2", Hostname: "node-2"}, {Name: "hv3", Hostname: "node-3"}}
	assert.ElementsMatch(t, []Unit{netAUnit, {Kind: KindNetwork, Name: "net-b"}}, in.SetChassis(ch, true), "the SB names every VM's chassis")
	assert.Equal(t, map[string]string{"requested-chassis": "hv1"}, options())
	assert.Empty(t, in.SetChassis(ch, true), "the same chassis again")

	running := vm
	running.MigrationTarget, running.MigrationUID = "node-2", "uid-1"
	assert.Equal(t, []Unit{netAUnit}, in.Set("vms", Objects{VMs: []VMInterface{running, other}}))
	assert.Equal(t, map[string]string{"requested-chassis": "hv1,hv2", "activation-strategy": "rarp"}, options())

	// The target's chassis renamed (ovn-kubernetes names chassis by
	// UUID): only the migrating VM's network.
	ch2 := []Chassis{{Name: "hv1", Hostname: "node-1"}, {Name: "c0ffee", Hostname: "node-2"}, {Name: "hv3", Hostname: "node-3"}}
	assert.Equal(t, []Unit{netAUnit}, in.SetChassis(ch2, true))
	assert.Equal(t, map[string]string{"requested-chassis": "hv1,c0ffee", "activation-strategy": "rarp"}, options())

	done := vm
	done.Node = "node-2" // completed
	in.Set("vms", Objects{VMs: []VMInterface{done, other}})
	assert.Equal(t, map[string]string{"requested-chassis": "c0ffee"}, options(), "completed: the target alone")
}

// TestZoneMigration: in interconnect mode a migration within a zone gets
// its dual binding there; one to another zone makes the target zone's
// twin a normal port bound to the source (remote there) and the target,
// keeps the source's zone on the source and the other zones' twins on
// the source; activated in the target's zone, or completed, the port is
// the target zone's alone, every other zone's twin bound to the target.
// The tunnel key never changes.
func TestZoneMigration(t *testing.T) {
	in := zoneInput()
	ch := append(zoneChassis(), Chassis{Name: "hv1b", Hostname: "node-hv1b", Zone: "hv1"})
	in.SetChassis(ch, true)
	vm1 := VMInterface{Namespace: "default", VMI: "vm1", Interface: "eth0", Network: "net-a", NetworkNamespace: "default", MAC: "02:00:00:00:00:01", IP: "10.10.0.5", Node: "node-hv1"}
	port := VMPortName("net-a", "default", "vm1", "eth0")
	view := func() (map[string]string, map[string]string) {
		t.Helper()
		up := in.Plan(Unit{KindNetwork, "net-a"}, testInstance, nil)
		require.Empty(t, up.Errs)
		out, keys := map[string]string{}, map[string]string{}
		for z, zr := range up.Network.Zones {
			for _, r := range zr.Rows {
				if p, ok := r.Model.(*nbmodel.LogicalSwitchPort); ok && p.Name == port {
					out[z] = fmt.Sprintf("%s@%s/%s", p.Type, p.Options["requested-chassis"], p.Options["activation-strategy"])
					keys[z] = p.Options[KeyTunnel]
				}
			}
		}
		return out, keys
	}

	vm1.MigrationTarget, vm1.MigrationUID = "node-hv1b", "uid-1"
	in.Set("vms", Objects{VMs: []VMInterface{vm1}})
	got, _ := view()
	assert.Equal(t, map[string]string{"hv1": "@hv1,hv1b/rarp", "gw1": "remote@hv1/"}, got, "within zone hv1: both chassis there")

	vm1.MigrationTarget, vm1.MigrationUID = "node-hv2", "uid-2"
	in.Set("vms", Objects{VMs: []VMInterface{vm1}})
	got, keys := view()
	assert.Equal(t, map[string]string{"hv1": "@hv1/", "hv2": "@hv1,hv2/rarp", "gw1": "remote@hv1/"}, got, "to zone hv2: bound to both there, the source elsewhere")
	key := keys["hv1"]
	assert.Equal(t, map[string]string{"hv1": key, "hv2": key, "gw1": key}, keys, "one tunnel key in every zone")

	// Activated in zone hv2: the target's everywhere.
	assert.NotEmpty(t, in.SetActivated("net-a", port, []string{"hv2"}))
	got, keys = view()
	assert.Equal(t, map[string]string{"hv1": "remote@hv2/", "hv2": "@hv2/", "gw1": "remote@hv2/"}, got, "activated on hv2")
	assert.Equal(t, map[string]string{"hv1": key, "hv2": key, "gw1": key}, keys)

	// Completed: the same, from the VMI.
	vm1.Node, vm1.MigrationTarget, vm1.MigrationUID = "node-hv2", "", ""
	in.Set("vms", Objects{VMs: []VMInterface{vm1}})
	in.SetActivated("net-a", port, nil)
	got, _ = view()
	assert.Equal(t, map[string]string{"hv2": "@hv2/", "gw1": "remote@hv2/"}, got, "completed: zone hv1 has no port of net-a left")
}

// TestMigrationActivationCollapses: the SB showing the target activated
// (the VM's RARP seen there) collapses the port onto the target before
// the VMI says the migration completed, and keeps it there once northd
// clears the flag; a flag of another chassis, or of a port not migrating,
// changes nothing; the next migration starts from its dual binding again.
func TestMigrationActivationCollapses(t *testing.T) {
	vm := VMInterface{Namespace: "default", VMI: "vm1", Interface: "eth1", Network: "net-a", NetworkNamespace: "default", MAC: "50:54:00:00:00:05", IP: "10.10.0.5", Node: "node-1"}
	port := VMPortName("net-a", "default", "vm1", "eth1")
	netAUnit := Unit{Kind: KindNetwork, Name: "net-a"}
	in := NewInput()
	in.Set("nets", Objects{Networks: []Network{netA()}})
	in.SetChassis([]Chassis{{Name: "hv1", Hostname: "node-1"}, {Name: "hv2", Hostname: "node-2"}}, true)
	options := func() map[string]string {
		up := in.Plan(netAUnit, testInstance, nil)
		require.NotNil(t, up.Network)
		require.Len(t, up.Network.Ports, 1)
		return up.Network.Ports[0].Options
	}
	in.Set("vms", Objects{VMs: []VMInterface{vm}})
	assert.Empty(t, in.SetActivated("net-a", port, []string{"hv1"}), "not migrating")

	running := vm
	running.MigrationTarget, running.MigrationUID = "node-2", "uid-1"
	in.Set("vms", Objects{VMs: []VMInterface{running}})
	assert.Empty(t, in.SetActivated("net-a", port, nil))
	assert.Empty(t, in.SetActivated("net-a", port, []string{"hv9"}), "another chassis's flag")
	assert.Equal(t, map[string]string{"requested-chassis": "hv1,hv2", "activation-strategy": "rarp"}, options())

	assert.Equal(t, []Unit{netAUnit}, in.SetActivated("net-a", port, []string{"hv2"}))
	assert.Equal(t, map[string]string{"requested-chassis": "hv2"}, options(), "activated: the target alone")
	assert.Empty(t, in.SetActivated("net-a", port, []string{"hv2"}), "the same again")
	assert.Empty(t, in.SetActivated("net-a", port, nil), "northd cleared the flag")
	assert.Equal(t, map[string]string{"requested-chassis": "hv2"}, options(), "still on the target")

	// Completed, then a new migration back: dual again, not collapsed by
	// the old activation.
	done := vm
	done.Node = "node-2"
	in.Set("vms", Objects{VMs: []VMInterface{done}})
	assert.Empty(t, in.SetActivated("net-a", port, nil))
	assert.Empty(t, in.activated, "forgotten once the port does not migrate")
	back := done
	back.MigrationTarget, back.MigrationUID = "node-1", "uid-2"
	in.Set("vms", Objects{VMs: []VMInterface{back}})
	assert.Equal(t, map[string]string{"requested-chassis": "hv2,hv1", "activation-strategy": "rarp"}, options())

	// A migrationUid that changes mid-way: an activation of the old one
	// does not collapse the new one.
	assert.Equal(t, []Unit{netAUnit}, in.SetActivated("net-a", port, []string{"hv1"}))
	again := back
	again.MigrationUID = "uid-3"
	in.Set("vms", Objects{VMs: []VMInterface{again}})
	assert.Equal(t, map[string]string{"requested-chassis": "hv2,hv1", "activation-strategy": "rarp"}, options())
}

// TestMigrationWithoutMultiChassis: on an OVN without multi-chassis port
// binding (22.03) a migrating port stays on its source, with a note, and
// moves once the migration completed; learning it re-plans only the
// networks of migrating VMs.
func TestMigrationWithoutMultiChassis(t *testing.T) {
	vm := VMInterface{Namespace: "default", VMI: "vm1", Interface: "eth1", Network: "net-a", NetworkNamespace: "default", MAC: "50:54:00:00:00:05", IP: "10.10.0.5",
		Node: "hv1", MigrationTarget: "hv2", MigrationUID: "uid-1"}
	other := VMInterface{Namespace: "default", VMI: "vm2", Interface: "eth1", Network: "net-b", NetworkNamespace: "default", MAC: "50:54:00:00:00:06", IP: "10.20.0.6", Node: "hv3"}
	netAUnit := Unit{Kind: KindNetwork, Name: "net-a"}
	in := NewInput()
	in.Set("s", Objects{Networks: []Network{netA(), netB()}, VMs: []VMInterface{vm, other}})
	assert.Equal(t, []Unit{netAUnit}, in.SetSingleChassis(true))
	assert.Empty(t, in.SetSingleChassis(true))
	up := in.Plan(netAUnit, testInstance, nil)
	require.Len(t, up.Network.Ports, 1)
	assert.Equal(t, map[string]string{"requested-chassis": "hv1"}, up.Network.Ports[0].Options)
	assert.Equal(t, []VMNote{{VMI: "default/vm1", Text: "VirtualMachineInstance default/vm1 interface eth1: this OVN has no multi-chassis port binding (before 22.06): its port stays on hv1 until status.migrationState says completed, then moves to hv2"}}, up.Network.VMNotes)

	done := vm
	done.Node, done.MigrationTarget, done.MigrationUID = "hv2", "", ""
	in.Set("s", Objects{Networks: []Network{netA(), netB()}, VMs: []VMInterface{done, other}})
	up = in.Plan(netAUnit, testInstance, nil)
	assert.Equal(t, map[string]string{"requested-chassis": "hv2"}, up.Network.Ports[0].Options)
	assert.Empty(t, up.Network.VMNotes)
}

// TestZoneMigrationSecurityGroups: a member migrating to another zone is
// in its group's Port_Group in the target's zone too, so the group's ACLs
// hold there from the dual binding on; completed, only there.
func TestZoneMigrationSecurityGroups(t *testing.T) {
	in := zoneSGInput(true)
	web := func() []string {
		t.Helper()
		up := in.Plan(Unit{KindSecurityGroup, "web"}, testInstance, nil)
		require.Empty(t, up.Errs)
		return sortedKeys(up.SecurityGroup.Zones)
	}
	require.Equal(t, []string{"hv1"}, web())
	vm1 := VMInterface{Namespace: "default", VMI: "vm1", Interface: "eth0", Network: "net-a", NetworkNamespace: "default", MAC: "02:00:00:00:00:01", IP: "10.10.0.5", Node: "node-hv1", SecurityGroups: "web"}
	vm2 := VMInterface{Namespace: "default", VMI: "vm2", Interface: "eth0", Network: "net-b", NetworkNamespace: "default", MAC: "02:00:00:00:00:02", IP: "10.20.0.5", Node: "hv2", SecurityGroups: "client"}
	moving := vm1
	moving.MigrationTarget, moving.MigrationUID = "node-hv2", "uid-1"
	units := in.Set("vms", Objects{VMs: []VMInterface{moving, vm2}})
	assert.Contains(t, units, Unit{KindSecurityGroup, "web"}, "the migration re-plans its groups")
	assert.Equal(t, []string{"hv1", "hv2"}, web())
	up := in.Plan(Unit{KindSecurityGroup, "web"}, testInstance, nil)
	assert.Contains(t, zoneRowNames(up.SecurityGroup.Zones["hv2"]), "PG kv_sg_web -> kv-net-a_default_vm1_eth0")
	done := vm1
	done.Node = "node-hv2"
	in.Set("vms", Objects{VMs: []VMInterface{done, vm2}})
	assert.Equal(t, []string{"hv2"}, web())
}
