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
)

// A zone agent plans nothing until its own zone's chassis are published:
// the other zones' alone do not make it synced.
func TestAgentSourceWaitsForItsZonesChassis(t *testing.T) {
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		RouterGVR: "VirtualRouterList", NADGVR: "NetworkAttachmentDefinitionList", VMIGVR: "VirtualMachineInstanceList", FloatingIPGVR: "FloatingIpList",
		SecurityGroupGVR: "SecurityGroupList", SecurityGroupRuleGVR: "SecurityGroupRuleList", LoadBalancerGVR: "LoadBalancerList", VMGVR: "VirtualMachineList",
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
	require.Eventually(t, func() bool { return source.HasSynced() && store.HasSynced() }, 5*time.Second, 10*time.Millisecond)

	publish := func(zone string) {
		t.Helper()
		require.NoError(t, store.PublishZone(ctx, zone, "", []translator.Chassis{{Name: zone, Zone: zone}}, nil, nil))
	}
	publish("hv2")
	require.Eventually(t, func() bool { return len(store.Chassis()) == 1 }, 5*time.Second, 10*time.Millisecond)
	assert.False(t, agent.HasSynced(), "another zone's chassis only")
	publish("hv1")
	require.Eventually(t, agent.HasSynced, 5*time.Second, 10*time.Millisecond, "synced once its own chassis are listed")
}
