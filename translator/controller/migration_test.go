package controller

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/kubevirt-ovn/kubevirt-ovn/nbmodel"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator"
)

// vmEvents records VMI Events as "namespace/name type reason: message".
type vmEvents struct {
	Status
	got []string
}

func (e *vmEvents) VMIEvent(namespace, name, eventType, reason, message string) {
	e.got = append(e.got, namespace+"/"+name+" "+eventType+" "+reason+": "+message)
}

func (e *vmEvents) take() []string {
	out := e.got
	e.got = nil
	return out
}

// A migrating port's committed plans become the VMI's Events, each once:
// bound on both chassis, collapsed onto its target, rolled back onto its
// source; a note on a migration not followed, once while it holds.
func TestMigrationEvents(t *testing.T) {
	ev := &vmEvents{}
	c := &Controller{status: ev, dual: map[string]dualPort{}, vmNotes: map[string]map[translator.VMNote]bool{}}
	plan := func(opts map[string]string, notes ...translator.VMNote) *translator.NetworkPlan {
		return &translator.NetworkPlan{Name: "net-a", VMNotes: notes, Ports: []*nbmodel.LogicalSwitchPort{
			{Name: "kv-net-a_default_vm-a_eth1", Options: opts, ExternalIDs: map[string]string{translator.KeyVMI: "default/vm-a"}},
			{Name: "net-a-localnet"},
		}}
	}
	dual := map[string]string{"requested-chassis": "hv1,hv2", "activation-strategy": "rarp"}
	c.migrationEvents(plan(map[string]string{"requested-chassis": "hv1"}))
	assert.Empty(t, ev.take(), "one chassis, no migration")
	c.migrationEvents(plan(dual))
	assert.Equal(t, []string{"default/vm-a Normal MigrationBound: port kv-net-a_default_vm-a_eth1 bound on hv1 (source) and hv2 (target), blocked on hv2 until the VM's RARP there"}, ev.take())
	c.migrationEvents(plan(dual))
	assert.Empty(t, ev.take(), "said once")
	c.migrationEvents(plan(map[string]string{"requested-chassis": "hv2"}))
	assert.Equal(t, []string{"default/vm-a Normal MigrationCollapsed: port kv-net-a_default_vm-a_eth1 on hv2 alone: the VM runs on its target"}, ev.take())
	c.migrationEvents(plan(map[string]string{"requested-chassis": "hv2"}))
	assert.Empty(t, ev.take())

	// Back, without the activation strategy, and rolled back.
	c.migrationEvents(plan(map[string]string{"requested-chassis": "hv2,hv1"}))
	assert.Equal(t, []string{"default/vm-a Normal MigrationBound: port kv-net-a_default_vm-a_eth1 bound on hv2 (source) and hv1 (target), both receiving until the migration completes (no activation strategy)"}, ev.take())
	c.migrationEvents(plan(map[string]string{"requested-chassis": "hv2"}))
	assert.Equal(t, []string{"default/vm-a Warning MigrationRolledBack: port kv-net-a_default_vm-a_eth1 back on hv2 alone: the migration to hv1 failed, was aborted or lost its target"}, ev.take())

	note := translator.VMNote{VMI: "default/vm-a", Text: "VirtualMachineInstance default/vm-a interface eth1: status.migrationState.targetNode hv9 is no chassis"}
	c.migrationEvents(plan(map[string]string{"requested-chassis": "hv2"}, note))
	assert.Equal(t, []string{"default/vm-a Warning MigrationNotFollowed: " + note.Text}, ev.take())
	c.migrationEvents(plan(map[string]string{"requested-chassis": "hv2"}, note))
	assert.Empty(t, ev.take(), "a note once while it holds")
	c.migrationEvents(plan(map[string]string{"requested-chassis": "hv2"}))
	c.migrationEvents(plan(map[string]string{"requested-chassis": "hv2"}, note))
	assert.Len(t, ev.take(), 1, "again once it came back")

	risk := translator.VMNote{VMI: "default/vm-a", Text: "VirtualMachineInstance default/vm-a interface eth1: OVN 25.03.0 may never show its dual binding", Reason: translator.ReasonMigrationAtRisk}
	c.migrationEvents(plan(dual, risk))
	assert.Equal(t, []string{"default/vm-a Normal MigrationBound: port kv-net-a_default_vm-a_eth1 bound on hv1 (source) and hv2 (target), blocked on hv2 until the VM's RARP there",
		"default/vm-a Warning MigrationAtRisk: " + risk.Text}, ev.take())

	// A zone agent says nothing: the central view is the allocator's.
	c.zone = "hv1"
	c.migrationEvents(plan(dual))
	assert.Empty(t, ev.take())
}
