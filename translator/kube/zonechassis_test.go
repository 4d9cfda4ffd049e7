package kube

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	"github.com/kubevirt-ovn/kubevirt-ovn/translator"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/controller"
)

// A chassis that two zones' agents publish as local stays in the zone
// that published it first, even when the later zone sorts first, and the
// later claim is refused with an error naming the chassis and both zones:
// the allocator (and every agent) plans with one zone per chassis instead
// of letting the later zone silently win.
func TestStoreRefusesTheLaterZonesClaimOnAChassis(t *testing.T) {
	const ns = "kubevirt-ovn"
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		ZoneGVR: "OVNZoneList", AllocationGVR: "OVNAllocationList",
	})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	var mu sync.Mutex
	var logged []string
	log := funcr.New(func(prefix, args string) {
		mu.Lock()
		defer mu.Unlock()
		logged = append(logged, args)
	}, funcr.Options{})
	store := NewStore(client, nil, ns, 0, log)
	store.Start(ctx)
	require.Eventually(t, store.HasSynced, settle, 10*time.Millisecond)

	chassis := func(zone string, names ...string) []translator.Chassis {
		var out []translator.Chassis
		for _, n := range names {
			out = append(out, translator.Chassis{Name: n, Hostname: n, Zone: zone})
		}
		return out
	}
	publish := func(zone string, names ...string) {
		t.Helper()
		require.NoError(t, store.PublishZone(ctx, zone, "", controller.ZoneState{Chassis: chassis(zone, names...)}))
		require.Eventually(t, func() bool {
			for _, c := range store.Chassis() {
				if c.Zone == zone {
					return true
				}
			}
			return false
		}, settle, 10*time.Millisecond, "zone %s in the store", zone)
	}
	publish("zone-b", "hv1", "hv2")
	assert.Equal(t, chassis("zone-b", "hv1", "hv2"), store.Chassis())

	publish("zone-a", "hv1", "hv3")
	want := append(chassis("zone-a", "hv3"), chassis("zone-b", "hv1", "hv2")...)
	assert.Equal(t, want, store.Chassis(), "hv1 stays in zone-b, which had it first")

	mu.Lock()
	defer mu.Unlock()
	found := false
	for _, l := range logged {
		if strings.Contains(l, "chassis hv1 is a local chassis of zones zone-b and zone-a") && strings.Contains(l, `"zone"="zone-a"`) {
			found = true
		}
	}
	assert.True(t, found, "an error names the chassis, both zones and the refused one: %q", logged)
}
