package translator

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMonitorConditionBug: the releases between 23.09.0 and the fix of
// their series, from a release or a northd_internal_version.
func TestMonitorConditionBug(t *testing.T) {
	for _, tc := range []struct {
		release string
		bug     bool
		fixed   string
	}{
		{"", false, ""}, {"garbage", false, ""}, {"22.03.8", false, ""},
		{"23.03.1-20.27.0-70.6", false, ""}, {"23.06.4", false, ""},
		{"23.09.0", true, "26.03.0"}, {"24.03.6", true, "24.03.7"}, {"24.03.7", false, ""},
		{"24.09.3", true, "26.03.0"}, {"25.03.0-21.1.0-72.8", true, "25.03.2"}, {"25.03.1", true, "25.03.2"},
		{"25.03.2", false, ""}, {"25.09.0", true, "25.09.1"}, {"25.09.1", false, ""},
		{"26.03.0", false, ""}, {"26.03.1", false, ""}, {"26.09.0", false, ""},
	} {
		bug, fixed := MonitorConditionBug(tc.release)
		assert.Equal(t, tc.bug, bug, tc.release)
		assert.Equal(t, tc.fixed, fixed, tc.release)
	}
}

// TestStaleGatewayBug: releases before 23.09.1 and 24.03.0 (and an
// unknown one) keep a moved gateway port's flows; later ones do not.
func TestStaleGatewayBug(t *testing.T) {
	for release, bug := range map[string]bool{
		"": true, "garbage": true, "22.03.8": true, "23.03.1-20.27.0-70.6": true, "23.06.4": true,
		"23.09.0": true, "23.09.1": false, "24.03.0": false, "25.03.0-21.1.0-72.8": false, "26.03.1": false,
	} {
		assert.Equal(t, bug, StaleGatewayBug(release), release)
	}
}

// TestMigrationAtRisk: on an OVN with the monitor-condition bug, a
// migrating port keeps its dual binding with a note naming the target and
// what to do, unless the target's ovn-controller monitors all of the SB;
// a fixed release or the end of the migration has none.
func TestMigrationAtRisk(t *testing.T) {
	vm := VMInterface{Namespace: "default", VMI: "vm1", Interface: "eth1", Network: "net-a", NetworkNamespace: "default", MAC: "50:54:00:00:00:05", IP: "10.10.0.5",
		Node: "hv1", MigrationTarget: "hv2", MigrationUID: "uid-1"}
	netAUnit := Unit{Kind: KindNetwork, Name: "net-a"}
	in := NewInput()
	in.Set("s", Objects{Networks: []Network{netA()}, VMs: []VMInterface{vm}})
	in.SetChassis([]Chassis{{Name: "hv1"}, {Name: "hv2"}}, true)
	plan := func() ([]VMNote, map[string]string) {
		up := in.Plan(netAUnit, testInstance, nil)
		require.Len(t, up.Network.Ports, 1)
		return up.Network.VMNotes, up.Network.Ports[0].Options
	}
	dual := map[string]string{"requested-chassis": "hv1,hv2", "activation-strategy": "rarp"}
	assert.Empty(t, in.SetOVNRelease("23.03.1"), "not affected: nothing to plan again")
	notes, opts := plan()
	assert.Empty(t, notes)
	assert.Equal(t, dual, opts)

	assert.Equal(t, []Unit{netAUnit}, in.SetOVNRelease("25.03.0"))
	notes, opts = plan()
	assert.Equal(t, dual, opts, "the dual binding is written all the same")
	assert.Equal(t, []VMNote{{VMI: "default/vm1", Reason: ReasonMigrationAtRisk,
		Text: "VirtualMachineInstance default/vm1 interface eth1: OVN 25.03.0 may never show its dual binding to hv2's ovn-controller if the target pod's interface was plugged there first (fixed in 25.03.2): the port would then move to hv2 only when the migration completes. Set external_ids:ovn-monitor-all=true in the Open_vSwitch table of every chassis, or upgrade OVN"}}, notes)

	in.SetChassis([]Chassis{{Name: "hv1"}, {Name: "hv2", MonitorAll: true}}, true)
	notes, _ = plan()
	assert.Empty(t, notes, "the target monitors all of the SB")

	in.SetChassis([]Chassis{{Name: "hv1"}, {Name: "hv2"}}, true)
	assert.Empty(t, in.SetOVNRelease("25.03.1"), "still affected")
	assert.Equal(t, []Unit{netAUnit}, in.SetOVNRelease("25.03.2"))
	notes, _ = plan()
	assert.Empty(t, notes, "fixed")

	in.SetOVNRelease("25.03.0")
	done := vm
	done.Node, done.MigrationTarget, done.MigrationUID = "hv2", "", ""
	in.Set("s", Objects{Networks: []Network{netA()}, VMs: []VMInterface{done}})
	notes, _ = plan()
	assert.Empty(t, notes, "no migration")
}

// TestIPv6HealthChecks: releases from 23.03.0 (and an unknown one) probe
// IPv6 members; older ones do not.
func TestIPv6HealthChecks(t *testing.T) {
	for release, ok := range map[string]bool{
		"": true, "garbage": true, "22.03.8": false, "22.12.9": false, "23.03.0": true,
		"23.03.1-20.27.0-70.6": true, "26.03.1": true,
	} {
		assert.Equal(t, ok, IPv6HealthChecks(release), release)
	}
}
