package kube

import (
	"context"
	"errors"
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

func floatingIP(name string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kubevirt.io/v1", "kind": "FloatingIp",
		"metadata": map[string]any{"name": name, "generation": int64(2)},
		"spec": map[string]any{"id": name, "routerName": "r1", "networkName": "public",
			"floatingIp": "172.16.0.150", "fixedIp": "10.10.0.5", "vmName": "vm-a"},
	}}
}

func fipStatus(t *testing.T, c *dynamicfake.FakeDynamicClient, name string) map[string]any {
	t.Helper()
	u, err := c.Resource(FloatingIPGVR).Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(t, err)
	st, _, _ := unstructured.NestedMap(u.Object, "status")
	return st
}

// The informer reads floating IPs into the input, and their status says
// Ready with the port and gateway, or why not with a Warning event; an
// unchanged status is not written again.
func TestFloatingIPsReadAndReported(t *testing.T) {
	s, client, rec := startSource(t, floatingIP("fip-1"))
	ctx := context.Background()
	// Read: the plan of the router it names (not declared) reports it.
	up := s.Input().Plan(translator.Unit{Kind: translator.KindRouter, Name: "r1"}, "test", nil)
	require.Len(t, up.FloatingIPs, 1)
	assert.Equal(t, "fip-1", up.FloatingIPs[0].Name)
	assert.Equal(t, int64(2), up.FloatingIPs[0].Generation)

	reason := "waiting for VM vm-a with 10.10.0.5 on a network of VirtualRouter r1"
	require.NoError(t, s.ReportFloatingIPs(ctx, []translator.FloatingIPStatus{{Name: "fip-1", ID: "fip-1", Generation: 2, Reason: reason}}))
	st := fipStatus(t, client, "fip-1")
	assert.Equal(t, int64(2), st["observedGeneration"])
	ready := st["conditions"].([]any)[0].(map[string]any)
	assert.Equal(t, "False", ready["status"])
	assert.Equal(t, reason, ready["message"])
	assert.Nil(t, st["port"])
	assert.Equal(t, "Warning NotBound "+reason, <-rec.Events)

	require.Eventually(t, func() bool {
		o, ok, _ := s.fips.GetStore().GetByKey("fip-1")
		return ok && o.(*unstructured.Unstructured).Object["status"] != nil
	}, settle, 10*time.Millisecond)
	bound := translator.FloatingIPStatus{Name: "fip-1", ID: "fip-1", Generation: 2, Ready: true, Port: "kv-net-a_default_vm-a_eth1", Gateway: "gw1"}
	require.NoError(t, s.ReportFloatingIPs(ctx, []translator.FloatingIPStatus{bound, {Name: "gone", Ready: true}}))
	st = fipStatus(t, client, "fip-1")
	assert.Equal(t, "kv-net-a_default_vm-a_eth1", st["port"])
	assert.Equal(t, "gw1", st["gateway"])
	assert.Equal(t, "True", st["conditions"].([]any)[0].(map[string]any)["status"])

	require.Eventually(t, func() bool {
		o, _, _ := s.fips.GetStore().GetByKey("fip-1")
		p, _, _ := unstructured.NestedString(o.(*unstructured.Unstructured).Object, "status", "port")
		return p != ""
	}, settle, 10*time.Millisecond)
	before := len(client.Actions())
	require.NoError(t, s.ReportFloatingIPs(ctx, []translator.FloatingIPStatus{bound}))
	assert.Len(t, client.Actions(), before, "an unchanged status is not written")
	select {
	case e := <-rec.Events:
		t.Errorf("unexpected event %q", e)
	default:
	}
}

// A cluster without the CRDs of deploy/common beside VirtualRouter, nor
// the right to list VirtualMachines: routers are still read, the other kinds are
// not watched, and reporting them is a no-op.
func TestOptionalKindsNotServed(t *testing.T) {
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		RouterGVR: "VirtualRouterList", NADGVR: "NetworkAttachmentDefinitionList", VMIGVR: "VirtualMachineInstanceList", FloatingIPGVR: "FloatingIpList",
		SecurityGroupGVR: "SecurityGroupList", SecurityGroupRuleGVR: "SecurityGroupRuleList", LoadBalancerGVR: "LoadBalancerList", VMGVR: "VirtualMachineList", VMIMGVR: "VirtualMachineInstanceMigrationList", PodGVR: "PodList",
	}, router("r1"))
	for _, gvr := range []schema.GroupVersionResource{FloatingIPGVR, SecurityGroupGVR, SecurityGroupRuleGVR, LoadBalancerGVR} {
		client.PrependReactor("list", gvr.Resource, func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewNotFound(gvr.GroupResource(), "")
		})
	}
	// Served, but RBAC not updated: the same, rather than a start that
	// waits for ever.
	client.PrependReactor("list", VMGVR.Resource, func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(VMGVR.GroupResource(), "", errors.New("RBAC"))
	})
	s := NewSource(client, 0, record.NewFakeRecorder(10), logr.Discard())
	require.NoError(t, s.Notify(func([]translator.Unit) {}))
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	s.Start(ctx)
	require.Eventually(t, s.HasSynced, settle, 10*time.Millisecond)
	assert.Len(t, s.Input().Routers(), 1)
	assert.Nil(t, s.fips)
	assert.Nil(t, s.sgs)
	assert.Nil(t, s.sgRules)
	assert.Nil(t, s.lbs)
	assert.Nil(t, s.vms)
	assert.NoError(t, s.ReportFloatingIPs(ctx, []translator.FloatingIPStatus{{Name: "fip-1", Ready: true}}))
	assert.NoError(t, s.ReportLoadBalancers(ctx, []translator.LoadBalancerStatus{{Name: "lb-1", Ready: true}}))
	assert.NoError(t, s.ReportSecurityGroup(ctx, controller.SecurityGroupStatus{ID: "sg-1"}))
}
