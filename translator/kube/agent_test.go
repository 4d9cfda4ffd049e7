package kube

import (
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	"github.com/kubevirt-ovn/kubevirt-ovn/translator"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/controller"
)

// A zone agent plans nothing until its own zone's chassis are published:
// the other zones' alone do not make it synced.
func TestAgentSourceWaitsForItsZonesChassis(t *testing.T) {
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		RouterGVR: "VirtualRouterList", NADGVR: "NetworkAttachmentDefinitionList", VMIGVR: "VirtualMachineInstanceList", FloatingIPGVR: "FloatingIpList",
		SecurityGroupGVR: "SecurityGroupList", SecurityGroupRuleGVR: "SecurityGroupRuleList", LoadBalancerGVR: "LoadBalancerList", VMGVR: "VirtualMachineList", VMIMGVR: "VirtualMachineInstanceMigrationList", PodGVR: "PodList",
		ZoneGVR: "OVNZoneList", AllocationGVR: "OVNAllocationList",
	})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	source := NewSource(client, 0, nil, logr.Discard())
	store := NewStore(client, nil, "kubevirt-ovn", 0, logr.Discard())
	require.NoError(t, source.Notify(func([]translator.Unit) {}))
	agent := NewAgentSource(source, store, "hv1")
	assert.False(t, agent.HasSynced(), "nothing listed yet")
	source.Start(ctx)
	store.Start(ctx)
	require.Eventually(t, func() bool { return source.HasSynced() && store.HasSynced() }, settle, 10*time.Millisecond)

	publish := func(zone string) {
		t.Helper()
		require.NoError(t, store.PublishZone(ctx, zone, "", controller.ZoneState{Chassis: []translator.Chassis{{Name: zone, Zone: zone}}}))
	}
	publish("hv2")
	require.Eventually(t, func() bool { return len(store.Chassis()) == 1 }, settle, 10*time.Millisecond)
	assert.False(t, agent.HasSynced(), "another zone's chassis only")
	publish("hv1")
	require.Eventually(t, agent.HasSynced, settle, 10*time.Millisecond, "synced once its own chassis are listed")
}

// A zone's offline load balancer members go through its OVNZone to every
// agent's store, and go when the zone publishes none; the zone's object
// changing is what makes the agents re-read them (onZones).
func TestStoreOfflineMembersThroughOVNZones(t *testing.T) {
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		ZoneGVR: "OVNZoneList", AllocationGVR: "OVNAllocationList",
	})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	store := NewStore(client, nil, "kubevirt-ovn", 0, logr.Discard())
	changed := make(chan struct{}, 10)
	store.Notify(func(translator.Unit) {}, func() { changed <- struct{}{} })
	store.Start(ctx)
	require.Eventually(t, store.HasSynced, settle, 10*time.Millisecond)

	c := translator.OfflineMember{Port: "kv-net-a_default_vm-c_eth1", IP: "10.10.0.7", Protocol: "tcp", PortNum: 8080}
	hv2 := []translator.Chassis{{Name: "hv2", Zone: "hv2"}}
	act := translator.PortActivation{Network: "net-a", Port: "kv-net-a_default_vm-a_eth1", Chassis: []string{"hv2"}}
	require.NoError(t, store.PublishZone(ctx, "hv2", "", controller.ZoneState{Chassis: hv2, Offline: []translator.OfflineMember{c}, Activated: []translator.PortActivation{act}}))
	require.NoError(t, store.PublishZone(ctx, "hv1", "", controller.ZoneState{Chassis: []translator.Chassis{{Name: "hv1", Zone: "hv1"}}}))
	require.Eventually(t, func() bool { return len(store.OfflineMembers()) == 2 }, settle, 10*time.Millisecond)
	assert.Equal(t, map[string][]translator.OfflineMember{"hv2": {c}, "hv1": nil}, store.OfflineMembers())
	assert.Equal(t, map[string][]translator.PortActivation{"hv2": {act}, "hv1": nil}, store.Activations(), "a migrating port activated in zone hv2")

	for len(changed) > 0 {
		<-changed
	}
	require.NoError(t, store.PublishZone(ctx, "hv2", "", controller.ZoneState{Chassis: hv2}))
	require.Eventually(t, func() bool { return len(store.OfflineMembers()["hv2"]) == 0 }, settle, 10*time.Millisecond)
	select {
	case <-changed:
	case <-time.After(5 * time.Second):
		require.FailNow(t, "no zone change notified")
	}
}
