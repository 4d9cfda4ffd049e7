package kube

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/tools/record"

	"github.com/kubevirt-ovn/kubevirt-ovn/translator"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/controller"
)

func router(name string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kubevirt.io/v1", "kind": "VirtualRouter",
		"metadata": map[string]any{"name": name, "generation": int64(3)},
		"spec": map[string]any{"enableSnat": true, "internal": []any{"net-a"},
			"external": map[string]any{"ip": "172.16.0.100", "network": "public"}},
	}}
}

func startSource(t *testing.T, objs ...runtime.Object) (*Source, *dynamicfake.FakeDynamicClient, *record.FakeRecorder) {
	t.Helper()
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		RouterGVR: "VirtualRouterList", NADGVR: "NetworkAttachmentDefinitionList", VMIGVR: "VirtualMachineInstanceList", FloatingIPGVR: "FloatingIpList",
		SecurityGroupGVR: "SecurityGroupList", SecurityGroupRuleGVR: "SecurityGroupRuleList", LoadBalancerGVR: "LoadBalancerList", VMGVR: "VirtualMachineList", VMIMGVR: "VirtualMachineInstanceMigrationList", PodGVR: "PodList",
	}, objs...)
	rec := record.NewFakeRecorder(10)
	s := NewSource(client, 0, rec, logr.Discard())
	require.NoError(t, s.Notify(func([]translator.Unit) {}))
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	s.Start(ctx)
	require.Eventually(t, s.HasSynced, settle, 10*time.Millisecond)
	return s, client, rec
}

func status(t *testing.T, c *dynamicfake.FakeDynamicClient, name string) map[string]any {
	t.Helper()
	u, err := c.Resource(RouterGVR).Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(t, err)
	st, _, _ := unstructured.NestedMap(u.Object, "status")
	return st
}

func TestReportWritesStatusAndEvents(t *testing.T) {
	s, client, rec := startSource(t, router("r1"))
	ctx := context.Background()

	bad := &translator.InputError{Kind: translator.ObjVirtualRouter, Object: "r1", Field: "spec.external.ip", Msg: "198.18.0.5 is outside network public (172.16.0.0/24)"}
	require.NoError(t, s.Report(ctx, "r1", controller.RouterStatus{Generation: 3, Err: bad}))
	st := status(t, client, "r1")
	assert.Equal(t, int64(3), st["observedGeneration"])
	conds := st["conditions"].([]any)
	ready := conds[0].(map[string]any)
	assert.Equal(t, "Ready", ready["type"])
	assert.Equal(t, "False", ready["status"])
	assert.Equal(t, "InvalidSpec", ready["reason"])
	assert.Equal(t, bad.Error(), ready["message"])
	assert.Equal(t, "Warning InvalidSpec "+bad.Error(), <-rec.Events)

	// Ready, Realized, gateway and SNAT IP.
	require.Eventually(t, func() bool {
		u, _ := s.current("r1")
		return u != nil && u.Object["status"] != nil
	}, settle, 10*time.Millisecond)
	ok := controller.RouterStatus{Generation: 3, Realized: true, Gateway: []string{"gw1", "gw2"}, SNATIP: "172.16.0.100"}
	require.NoError(t, s.Report(ctx, "r1", ok))
	st = status(t, client, "r1")
	assert.Equal(t, "172.16.0.100", st["snatIP"])
	assert.Equal(t, map[string]any{"primary": "gw1", "candidates": []any{"gw2"}}, st["gateway"])
	for _, c := range st["conditions"].([]any) {
		assert.Equal(t, "True", c.(map[string]any)["status"], c)
	}

	// A gateway change is an event.
	require.Eventually(t, func() bool {
		u, _ := s.current("r1")
		ip, _, _ := unstructured.NestedString(u.Object, "status", "snatIP")
		return ip == "172.16.0.100"
	}, settle, 10*time.Millisecond)
	moved := ok
	moved.Gateway, moved.GatewayChanged = []string{"gw2", "gw1"}, true
	require.NoError(t, s.Report(ctx, "r1", moved))
	assert.Equal(t, "Normal GatewayChanged gateway chassis is now gw2", <-rec.Events)

	// The same status again writes nothing and says nothing.
	require.Eventually(t, func() bool {
		u, _ := s.current("r1")
		p, _, _ := unstructured.NestedString(u.Object, "status", "gateway", "primary")
		return p == "gw2"
	}, settle, 10*time.Millisecond)
	before := len(client.Actions())
	require.NoError(t, s.Report(ctx, "r1", controller.RouterStatus{Generation: 3, Realized: true, Gateway: []string{"gw2", "gw1"}, SNATIP: "172.16.0.100"}))
	assert.Len(t, client.Actions(), before, "an unchanged status is not written")
	select {
	case e := <-rec.Events:
		t.Errorf("unexpected event %q", e)
	default:
	}
}

func TestFinalizerAddedAndRemoved(t *testing.T) {
	s, client, _ := startSource(t, router("r1"))
	ctx := context.Background()
	require.NoError(t, s.Prepare(ctx, "r1"))
	u, err := client.Resource(RouterGVR).Get(ctx, "r1", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, []string{Finalizer}, u.GetFinalizers())

	require.Eventually(t, func() bool {
		cur, _ := s.current("r1")
		return cur != nil && len(cur.GetFinalizers()) == 1
	}, settle, 10*time.Millisecond)
	require.NoError(t, s.Removed(ctx, "r1"))
	u, err = client.Resource(RouterGVR).Get(ctx, "r1", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Empty(t, u.GetFinalizers())
	assert.NoError(t, s.Removed(ctx, "gone"), "a router already gone is fine")
}

func TestInputSkipsDeletingRoutersAndReportsUndecodable(t *testing.T) {
	deleting := router("old")
	now := metav1.Now()
	deleting.SetDeletionTimestamp(&now)
	deleting.SetFinalizers([]string{Finalizer})
	broken := router("broken")
	broken.Object["spec"].(map[string]any)["enableSnat"] = "yes"
	s, _, _ := startSource(t, router("r1"), deleting, broken)
	in := s.Input()
	assert.Equal(t, []translator.Unit{{Kind: translator.KindRouter, Name: "broken"}, {Kind: translator.KindRouter, Name: "r1"}}, in.Units(),
		"the router being deleted is not in the input")
	r1 := in.Plan(translator.Unit{Kind: translator.KindRouter, Name: "r1"}, "test", nil)
	assert.True(t, r1.InInput)
	assert.Equal(t, int64(3), r1.Generation)
	bad := in.Plan(translator.Unit{Kind: translator.KindRouter, Name: "broken"}, "test", nil)
	require.Len(t, bad.Errs, 1)
	err := bad.Errs[0]
	var ie *translator.InputError
	assert.True(t, errors.As(err, &ie))
	assert.Contains(t, err.Error(), "VirtualRouter broken")
}

func nad(name string, ann map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "k8s.cni.cncf.io/v1", "kind": "NetworkAttachmentDefinition",
		"metadata": map[string]any{"name": name, "namespace": "default", "annotations": ann},
		"spec":     map[string]any{"config": `{"cniVersion": "0.3.1", "type": "ovn-k8s-cni-overlay", "name": "` + name + `"}`},
	}}
}

func TestNADAnnotationsGiveOVNKubernetesKeys(t *testing.T) {
	keys := nadForeignKeys(nad("l2", map[string]any{OVNKNetworkIDAnnotation: "3", OVNKTunnelKeysAnnotation: "[16711686,16715779]"}))
	assert.Equal(t, []translator.ForeignKey{
		{Key: 16711686, Holder: "ovn-kubernetes network 3's transit switch"},
		{Key: 16711686, Holder: "ovn-kubernetes' k8s.ovn.org/tunnel-keys"},
		{Key: 16715779, Holder: "ovn-kubernetes' k8s.ovn.org/tunnel-keys"},
	}, keys)
	assert.Empty(t, nadForeignKeys(nad("plain", nil)))
	assert.Empty(t, nadForeignKeys(nad("bad", map[string]any{OVNKNetworkIDAnnotation: "x", OVNKTunnelKeysAnnotation: "{"})))
}

// The allocator's source counts the keys ovn-kubernetes' NADs record as
// taken: with one in kubevirt-ovn's range (none is today; the ranges may
// change), our network's switch does not get it.
func TestAllocatorSourceTakesNoOVNKubernetesKey(t *testing.T) {
	ours := nad("net-a", map[string]any{"network-config": `{"type": "GENEVE", "cidr": "10.10.0.0/24", "gatewayIp": "10.10.0.1"}`})
	ovnk := nad("l2", map[string]any{OVNKTunnelKeysAnnotation: fmt.Sprintf("[%d]", translator.MaxDatapathKey)})
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		RouterGVR: "VirtualRouterList", NADGVR: "NetworkAttachmentDefinitionList", VMIGVR: "VirtualMachineInstanceList", FloatingIPGVR: "FloatingIpList",
		SecurityGroupGVR: "SecurityGroupList", SecurityGroupRuleGVR: "SecurityGroupRuleList", LoadBalancerGVR: "LoadBalancerList", VMGVR: "VirtualMachineList", VMIMGVR: "VirtualMachineInstanceMigrationList", PodGVR: "PodList",
	})
	for _, n := range []*unstructured.Unstructured{ours, ovnk} {
		_, err := client.Resource(NADGVR).Namespace("default").Create(context.Background(), n, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	s := NewSource(client, 0, nil, logr.Discard())
	s.SetAllocator()
	s.Input().SetInterconnect()
	require.NoError(t, s.Notify(func([]translator.Unit) {}))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s.Start(ctx)
	require.Eventually(t, s.HasSynced, settle, 10*time.Millisecond)
	s.Input().SetChassis([]translator.Chassis{{Name: "hv1", Zone: "hv1"}}, true)
	up := s.Input().Plan(translator.Unit{Kind: translator.KindNetwork, Name: "net-a"}, "test", nil)
	require.Empty(t, up.Errs)
	require.NotNil(t, up.Network)
	assert.Equal(t, translator.MaxDatapathKey-1, up.Network.Keys.Switches["kv-net-a"])
}

func TestOVNZoneCarriesForeignKeys(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"zone": "hv1",
		"chassis":     []any{map[string]any{"name": "hv1"}},
		"foreignKeys": []any{map[string]any{"key": int64(16711680), "holder": "Logical_Switch squatter"}}}}}
	z, err := decodeZone(u)
	require.NoError(t, err)
	assert.Equal(t, "hv1", z.zone)
	assert.Equal(t, []translator.ForeignKey{{Key: 16711680, Holder: "Logical_Switch squatter"}}, z.foreign)
}

// TestVMIObjectsReadDeclaredAddresses: a VMI as the informer keeps it
// (slimVMI of the API server's object) gives its interface's IP from the interfaces annotation
// and its MAC from the spec before status has either.
func TestVMIObjectsReadDeclaredAddresses(t *testing.T) {
	vmi := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
		"metadata": map[string]any{"name": "vm", "namespace": "tenant",
			"annotations": map[string]any{"interfaces": `[{"network": "net-a", "ipAddress": "10.10.0.5"}]`}},
		"spec": map[string]any{
			"domain": map[string]any{"cpu": map[string]any{"cores": int64(1)}, "devices": map[string]any{
				"interfaces": []any{map[string]any{"name": "eth1", "bridge": map[string]any{}, "macAddress": "50:54:00:00:00:05"}}}},
			"networks": []any{map[string]any{"name": "eth1", "multus": map[string]any{"networkName": "net-a"}}},
		},
		"status": map[string]any{"nodeName": "hv1"},
	}}
	s := &Source{log: logr.Discard()}
	rec, err := slimVMI(vmi)
	require.NoError(t, err)
	assert.Equal(t, []translator.VMInterface{{
		Namespace: "tenant", VMI: "vm", Interface: "eth1", Network: "net-a", NetworkNamespace: "tenant",
		MAC: "50:54:00:00:00:05", IP: "10.10.0.5", Node: "hv1",
		MACField: "spec.domain.devices.interfaces[eth1].macAddress",
		IPField:  "metadata.annotations[interfaces][net-a].ipAddress",
	}}, s.vmiObjects(rec.(*vmiRecord)).VMs)
}
