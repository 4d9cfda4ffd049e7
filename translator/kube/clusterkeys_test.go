package kube

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"

	"github.com/kubevirt-ovn/kubevirt-ovn/translator"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/controller"
)

// events collects what a FakeRecorder records.
type events struct {
	mu  sync.Mutex
	all []string
}

// settle is how long a test waits for a condition that follows from a
// write through the API server, informers and workers: it returns as soon
// as the condition holds, and is generous for a loaded machine (CI
// failed at 10 s while other tests ran beside it).
const settle = 60 * time.Second

func collectEvents(t *testing.T, rec *record.FakeRecorder) *events {
	e := &events{}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case ev := <-rec.Events:
				e.mu.Lock()
				e.all = append(e.all, ev)
				e.mu.Unlock()
			}
		}
	}()
	return e
}

// of are the events recorded with reason.
func (e *events) of(reason string) []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []string
	for _, ev := range e.all {
		if strings.Contains(ev, " "+reason+" ") {
			out = append(out, ev)
		}
	}
	return out
}

// In a cluster, the zone agents publish their zones' tunnel key
// collisions in their OVNZones and the allocator reports them on the
// routers attached to the network: a TunnelKeys condition, False with one
// line per collision (its zone, switch or port, requested and actual
// keys), a Warning Event per new collision and none on a resync, True once
// no zone publishes any. A router on other networks gets no condition.
func TestAllocatorReportsZonesKeyCollisions(t *testing.T) {
	const ns = "kubevirt-ovn"
	geneve := func(name, cidr string) *unstructured.Unstructured {
		return nad(name, map[string]any{"network-config": `{"type": "GENEVE", "cidr": "` + cidr + `", "gatewayIp": "` + strings.TrimSuffix(cidr, "0/24") + `1"}`})
	}
	public := nad("public", map[string]any{"network-config": `{"type": "FLAT", "physicalNetworkName": "physnet1", "cidr": "172.16.0.0/24", "gatewayIp": "172.16.0.1"}`})
	r2 := router("r2")
	r2.Object["spec"] = map[string]any{"enableSnat": true, "internal": []any{"net-b"},
		"external": map[string]any{"ip": "172.16.0.101", "network": "public"}}
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		RouterGVR: "VirtualRouterList", NADGVR: "NetworkAttachmentDefinitionList", VMIGVR: "VirtualMachineInstanceList", FloatingIPGVR: "FloatingIpList",
		SecurityGroupGVR: "SecurityGroupList", SecurityGroupRuleGVR: "SecurityGroupRuleList", LoadBalancerGVR: "LoadBalancerList", VMGVR: "VirtualMachineList", VMIMGVR: "VirtualMachineInstanceMigrationList", PodGVR: "PodList",
		ZoneGVR: "OVNZoneList", AllocationGVR: "OVNAllocationList",
	}, router("r1"), r2)
	// Two writers of r1's status (its Ready condition, its TunnelKeys
	// condition), each from its informer's copy: an API server refuses
	// the staler write, which is retried, and so must the fake.
	refuseStaleUpdates(client)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	for _, n := range []*unstructured.Unstructured{geneve("net-a", "10.10.0.0/24"), geneve("net-b", "10.20.0.0/24"), public} {
		_, err := client.Resource(NADGVR).Namespace("default").Create(ctx, n, metav1.CreateOptions{})
		require.NoError(t, err)
	}

	// The agents' side: each publishes its zone.
	agents := NewStore(client, nil, ns, 0, logr.Discard())
	agents.Start(ctx)
	require.Eventually(t, agents.HasSynced, settle, 10*time.Millisecond)
	chassis := func(name string) []translator.Chassis {
		return []translator.Chassis{{Name: name, Hostname: name, Gateway: true, Physnets: []string{"physnet1"}}}
	}
	publish := func(zone string, ms ...translator.KeyMismatch) {
		t.Helper()
		require.Eventually(t, func() bool {
			return agents.PublishZone(ctx, zone, "", controller.ZoneState{Chassis: chassis(zone), Collisions: ms}) == nil
		}, settle, 10*time.Millisecond) // the informer may lag our last write
	}
	publish("hv1")
	publish("hv2")

	// The allocator's side.
	rec := record.NewFakeRecorder(100)
	evs := collectEvents(t, rec)
	source := NewSource(client, 0, rec, logr.Discard())
	source.SetAllocator()
	source.Input().SetInterconnect()
	store := NewStore(client, nil, ns, 0, logr.Discard())
	alloc := controller.NewAllocator(source, store, source, controller.Options{Instance: "test", Workers: 2, Log: logr.Discard()})
	require.NoError(t, source.Notify(alloc.EnqueueUnits))
	store.Notify(func(u translator.Unit) { alloc.EnqueueUnits([]translator.Unit{u}) }, alloc.ChassisChanged)
	source.Start(ctx)
	store.Start(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = alloc.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	cond := func(name string) map[string]any { return condition(status(t, client, name), ConditionTunnelKeys) }
	require.Eventually(t, func() bool {
		r := condition(status(t, client, "r1"), ConditionReady)
		return r != nil && r["reason"] == "Allocated"
	}, settle, 10*time.Millisecond, "r1 allocated")
	assert.Nil(t, cond("r1"), "no collision, no condition")

	sw := translator.KeyMismatch{Zone: "hv1", KeyRequest: translator.KeyRequest{Network: "net-a", Switch: "kv-net-a", SwitchUUID: "dropped", Key: 16711679},
		Actual: 7, Holder: "foreign-sw"}
	port := translator.KeyMismatch{Zone: "hv2", KeyRequest: translator.KeyRequest{Network: "net-a", Switch: "kv-net-a", Port: "kv-net-a_default_vm-a_eth1", Key: 32767},
		Actual: 100}
	publish("hv1", sw)

	// What the OVNZone says.
	z, err := client.Resource(ZoneGVR).Namespace(ns).Get(ctx, "zone-hv1", metav1.GetOptions{})
	require.NoError(t, err)
	got, _, _ := unstructured.NestedSlice(z.Object, "spec", "keyCollisions")
	assert.Equal(t, []any{map[string]any{"network": "net-a", "switch": "kv-net-a", "requested": int64(16711679), "actual": int64(7), "holder": "foreign-sw"}}, got)

	sw.SwitchUUID = "" // not published: the zone's NB's business
	waitMessage := func(name, status, message string) {
		t.Helper()
		require.Eventually(t, func() bool {
			c := cond(name)
			return c != nil && c["status"] == status && c["message"] == message
		}, settle, 10*time.Millisecond, "%s's TunnelKeys condition %s: %q; have %v", name, status, message, cond(name))
	}
	waitMessage("r1", "False", sw.String())
	assert.Equal(t, ReasonTunnelKeyCollision, cond("r1")["reason"])
	assert.Contains(t, sw.String(), "zone hv1: switch kv-net-a of network net-a requests tunnel key 16711679 but the SB gave it 7: another datapath (foreign-sw)")
	require.Eventually(t, func() bool { return len(evs.of(ReasonTunnelKeyCollision)) == 1 }, settle, 10*time.Millisecond)
	assert.Equal(t, []string{"Warning TunnelKeyCollision " + sw.String()}, evs.of(ReasonTunnelKeyCollision))

	// Another zone's collision on the same network: both named, one new
	// Event.
	publish("hv2", port)
	waitMessage("r1", "False", sw.String()+"\n"+port.String())
	require.Eventually(t, func() bool { return len(evs.of(ReasonTunnelKeyCollision)) >= 2 }, settle, 10*time.Millisecond)
	require.Len(t, evs.of(ReasonTunnelKeyCollision), 2, "%q", evs.of(ReasonTunnelKeyCollision))
	assert.Equal(t, "Warning TunnelKeyCollision "+port.String(), evs.of(ReasonTunnelKeyCollision)[1])

	// A resync (every unit, the zones read again) records nothing new
	// (counted at the end, once later changes have been reported).
	alloc.ChassisChanged()
	alloc.EnqueueUnits(source.Input().Units())
	assert.Nil(t, cond("r2"), "r2 is on no colliding network")

	// Gone in hv1, then in hv2: True.
	publish("hv1")
	waitMessage("r1", "False", port.String())
	publish("hv2")
	require.Eventually(t, func() bool {
		c := cond("r1")
		return c != nil && c["status"] == "True" && c["reason"] == "Match"
	}, settle, 10*time.Millisecond)
	assert.Len(t, evs.of(ReasonTunnelKeyCollision), 2, "one Event per collision, none on a resync or when it clears")
	assert.Nil(t, cond("r2"))
	assert.True(t, slices.ContainsFunc(store.Chassis(), func(c translator.Chassis) bool { return c.Zone == "hv2" }))
	assert.Empty(t, store.KeyCollisions())
}

// refuseStaleUpdates makes client answer an update from a stale copy with
// 409 Conflict, as an API server does: the fake's tracker keeps no
// resourceVersion on its objects, so every create and update gets one
// here. Its reactors run one at a time (the fake's lock).
func refuseStaleUpdates(client *dynamicfake.FakeDynamicClient) {
	version := 0
	stamp := func(obj runtime.Object) {
		if m, ok := obj.(metav1.Object); ok {
			version++
			m.SetResourceVersion(strconv.Itoa(version))
		}
	}
	client.PrependReactor("create", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		stamp(a.(k8stesting.CreateAction).GetObject())
		return false, nil, nil
	})
	client.PrependReactor("update", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		ua := a.(k8stesting.UpdateAction)
		obj, ok := ua.GetObject().(metav1.Object)
		if !ok {
			return false, nil, nil
		}
		cur, err := client.Tracker().Get(ua.GetResource(), ua.GetNamespace(), obj.GetName())
		if cm, ok := cur.(metav1.Object); err == nil && ok && obj.GetResourceVersion() != cm.GetResourceVersion() {
			return true, nil, apierrors.NewConflict(ua.GetResource().GroupResource(), obj.GetName(),
				errors.New("the object has been modified; please apply your changes to the latest version and try again"))
		}
		stamp(ua.GetObject())
		return false, nil, nil
	})
}
