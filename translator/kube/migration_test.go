package kube

import (
	"context"
	"errors"
	"strings"
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
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"

	"github.com/kubevirt-ovn/kubevirt-ovn/translator"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/manifest"
)

// vmim is a VirtualMachineInstanceMigration of vm-a with uid and phase.
func vmim(name, uid, phase string) *unstructured.Unstructured {
	u := object("VirtualMachineInstanceMigration", name, map[string]any{"vmiName": "vm-a"})
	u.SetNamespace("default")
	u.SetUID(types.UID(uid))
	u.Object["status"] = map[string]any{"phase": phase}
	return u
}

// targetPod is the target virt-launcher pod of migration uid, scheduled
// on node ("" not yet), with what a pod has beside (the informer drops
// it).
func targetPod(name, uid, node, phase string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": name, "namespace": "default",
			"labels": map[string]any{MigrationJobLabel: uid, "kubevirt.io": "virt-launcher"}},
		"spec":   map[string]any{"containers": []any{map[string]any{"name": "compute", "image": "virt-launcher"}}},
		"status": map[string]any{"phase": phase},
	}}
	if node != "" {
		_ = unstructured.SetNestedField(u.Object, node, "spec", "nodeName")
	}
	return u
}

// vmiMigrating is vm-a on node with status.migrationState state (nil:
// none).
func vmiMigrating(node string, state map[string]any) *unstructured.Unstructured {
	u := vmiObject("vm-a", "")
	_ = unstructured.SetNestedField(u.Object, node, "status", "nodeName")
	if state != nil {
		_ = unstructured.SetNestedMap(u.Object, state, "status", "migrationState")
	}
	return u
}

// migrationSource starts a source with net-a and objs; binding is vm-a's
// port's binding as the input plans it now.
func migrationSource(t *testing.T, objs ...runtime.Object) (func() map[string]string, *Source, *dynamicfake.FakeDynamicClient) {
	netA := nad("net-a", map[string]any{"network-config": `{"type": "GENEVE", "cidr": "10.10.0.0/24", "gatewayIp": "10.10.0.1"}`})
	netA.Object["spec"] = map[string]any{"config": `{"cniVersion": "0.3.1", "type": "kubevirt-ovn", "name": "net-a"}`}
	s, client, _, _ := startRecording(t, append([]runtime.Object{netA}, objs...)...)
	port := translator.VMPortName("net-a", "default", "vm-a", "eth1")
	return func() map[string]string {
		up := s.Input().Plan(translator.Unit{Kind: translator.KindNetwork, Name: "net-a"}, "test", nil)
		require.NotNil(t, up.Network)
		for _, p := range up.Network.Ports {
			if p.Name == port {
				return p.Options
			}
		}
		return nil
	}, s, client
}

// bound is a port's options on nodes: one, or source and target with
// the activation strategy.
func bound(nodes string) map[string]string {
	if strings.Contains(nodes, ",") {
		return map[string]string{"requested-chassis": nodes, "activation-strategy": translator.ActivationStrategy}
	}
	return map[string]string{"requested-chassis": nodes}
}

// waitBound waits until vm-a's port is bound on nodes.
func waitBound(t *testing.T, binding func() map[string]string, what, nodes string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !assert.ObjectsAreEqual(bound(nodes), binding()) {
		if time.Now().After(deadline) {
			require.Equal(t, bound(nodes), binding(), what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// In a cluster the dual binding is written as soon as the migration's
// target pod is scheduled, before the VMI names the target (the pod's
// CNI waits for ovn-installed there); the VMI's migrationState has the
// last word once it names the migration; the target pod gone collapses
// the port onto its source, as does the migration Failed; a new
// migration after a completed one starts from its own target pod.
func TestMigrationStartsFromItsTargetPod(t *testing.T) {
	binding, s, c := migrationSource(t, vmiMigrating("hv1", nil))
	ctx := context.Background()
	vmims, pods, vmis := c.Resource(VMIMGVR).Namespace("default"), c.Resource(PodGVR).Namespace("default"), c.Resource(VMIGVR).Namespace("default")
	waitBound(t, binding, "vm-a on hv1", "hv1")

	_, err := vmims.Create(ctx, vmim("mig-1", "m1", "Pending"), metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = pods.Create(ctx, targetPod("virt-launcher-vm-a-x", "m1", "", "Pending"), metav1.CreateOptions{})
	require.NoError(t, err)
	// Not scheduled yet: nothing moves (a fence: the VMI's next event).
	_, err = vmis.Update(ctx, vmiMigrating("hv1", map[string]any{"mode": "PreCopy"}), metav1.UpdateOptions{})
	require.NoError(t, err)
	waitBound(t, binding, "migration pending, target not scheduled", "hv1")

	_, err = pods.Update(ctx, targetPod("virt-launcher-vm-a-x", "m1", "hv2", "Pending"), metav1.UpdateOptions{})
	require.NoError(t, err)
	waitBound(t, binding, "target pod scheduled on hv2, before its CNI ran and before the VMI names it", "hv1,hv2")
	obj, ok, err := s.pods.GetStore().GetByKey("default/virt-launcher-vm-a-x")
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, map[string]any{"nodeName": "hv2"}, obj.(*unstructured.Unstructured).Object["spec"], "the informer keeps of a pod its node, phase and migration")
	assert.Equal(t, map[string]string{MigrationJobLabel: "m1"}, obj.(*unstructured.Unstructured).GetLabels())

	_, err = vmis.Update(ctx, vmiMigrating("hv1", map[string]any{"sourceNode": "hv1", "targetNode": "hv2", "migrationUid": "m1"}), metav1.UpdateOptions{})
	require.NoError(t, err)
	waitBound(t, binding, "the VMI names the migration", "hv1,hv2")

	// A migration of a VMI that is not ours (none of that name): nothing
	// else moves.
	ghost := vmim("mig-ghost", "g1", "Scheduling")
	_ = unstructured.SetNestedField(ghost.Object, "vm-ghost", "spec", "vmiName")
	_, err = vmims.Create(ctx, ghost, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = pods.Create(ctx, targetPod("virt-launcher-vm-ghost-x", "g1", "hv3", "Pending"), metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { _, ok, _ := s.pods.GetStore().GetByKey("default/virt-launcher-vm-ghost-x"); return ok }, settle, 10*time.Millisecond)
	waitBound(t, binding, "a migration of another VMI", "hv1,hv2")

	// The target pod deleted mid-way: back onto the source.
	require.NoError(t, pods.Delete(ctx, "virt-launcher-vm-a-x", metav1.DeleteOptions{}))
	waitBound(t, binding, "target pod gone", "hv1")
	_, err = vmims.Update(ctx, vmim("mig-1", "m1", "Failed"), metav1.UpdateOptions{})
	require.NoError(t, err)
	waitBound(t, binding, "migration Failed", "hv1")

	// A second migration, which completes; then a third starts from its
	// pod while the VMI still shows the second.
	_, err = vmims.Create(ctx, vmim("mig-2", "m2", "Scheduling"), metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = pods.Create(ctx, targetPod("virt-launcher-vm-a-y", "m2", "hv2", "Pending"), metav1.CreateOptions{})
	require.NoError(t, err)
	waitBound(t, binding, "second migration's target scheduled", "hv1,hv2")
	_, err = vmims.Update(ctx, vmim("mig-2", "m2", "Failed"), metav1.UpdateOptions{})
	require.NoError(t, err)
	waitBound(t, binding, "second migration Failed before the VMI names it", "hv1")
}

// followMigration's cases, each the VMI status and what the cluster says.
func TestFollowMigration(t *testing.T) {
	running := func(target string) *migrationRun {
		return &migrationRun{uid: "m2", target: target, podsKnown: true}
	}
	for _, tc := range []struct {
		name       string
		state      *manifest.VMIMigrationState
		run        *migrationRun
		node, want string // want: the migration's target, "" none
	}{
		{name: "no migration", node: "hv1"},
		{name: "target pod not scheduled yet", run: running(""), node: "hv1"},
		{name: "target pod scheduled: the target before the VMI names it", run: running("hv2"), node: "hv1", want: "hv2"},
		{name: "the VMI names it too", state: &manifest.VMIMigrationState{SourceNode: "hv1", TargetNode: "hv2", MigrationUID: "m2"}, run: running("hv2"), node: "hv1", want: "hv2"},
		{name: "the VMI names it, its target pod gone", state: &manifest.VMIMigrationState{SourceNode: "hv1", TargetNode: "hv2", MigrationUID: "m2"}, run: running(""), node: "hv1"},
		{name: "the VMI names it, pods not watched", state: &manifest.VMIMigrationState{SourceNode: "hv1", TargetNode: "hv2", MigrationUID: "m2"}, run: &migrationRun{uid: "m2"}, node: "hv1", want: "hv2"},
		{name: "Failed", state: &manifest.VMIMigrationState{SourceNode: "hv1", TargetNode: "hv2", MigrationUID: "m2"}, run: &migrationRun{uid: "m2", failed: true, final: true, target: "hv2", podsKnown: true}, node: "hv1"},
		{name: "completed: the VMI's word", state: &manifest.VMIMigrationState{SourceNode: "hv1", TargetNode: "hv2", MigrationUID: "m2", Completed: true}, run: &migrationRun{uid: "m2", final: true, podsKnown: true}, node: "hv2"},
		{name: "an older migration's state, a new one scheduled", state: &manifest.VMIMigrationState{SourceNode: "hv1", TargetNode: "hv2", MigrationUID: "m1", Completed: true}, run: running("hv3"), node: "hv2", want: "hv3"},
		{name: "a Failed migration the VMI does not name", state: &manifest.VMIMigrationState{SourceNode: "hv1", TargetNode: "hv2", MigrationUID: "m1", Completed: true}, run: &migrationRun{uid: "m2", failed: true, final: true, target: "hv3", podsKnown: true}, node: "hv2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := manifest.VirtualMachineInstanceStatus{NodeName: "hv1", MigrationState: tc.state}
			if tc.state != nil && tc.state.Completed {
				st.NodeName = tc.state.TargetNode
			}
			followMigration(&st, tc.run)
			vmi := manifest.VirtualMachineInstance{Status: st}
			vmi.Name, vmi.Namespace = "vm-a", "default"
			vmi.Spec.Networks = []manifest.VMINetwork{{Name: "eth1", Multus: &manifest.MultusNetwork{NetworkName: "net-a"}}}
			vmi.Status.Interfaces = []manifest.VMIInterfaceStatus{{Name: "eth1", MAC: "50:54:00:00:00:05", IPAddress: "10.10.0.5"}}
			ifaces, _ := manifest.VMInterfacesFrom(&vmi)
			require.Len(t, ifaces, 1)
			assert.Equal(t, tc.node, ifaces[0].Node)
			assert.Equal(t, tc.want, ifaces[0].MigrationTarget)
		})
	}
}

// Pods kubevirt-ovn may not list (RBAC not updated with the binary): the
// VMI's migrationState alone moves the port, and the start is not kept
// waiting.
func TestMigrationWithoutPods(t *testing.T) {
	netA := nad("net-a", map[string]any{"network-config": `{"type": "GENEVE", "cidr": "10.10.0.0/24", "gatewayIp": "10.10.0.1"}`})
	netA.Object["spec"] = map[string]any{"config": `{"cniVersion": "0.3.1", "type": "kubevirt-ovn", "name": "net-a"}`}
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		RouterGVR: "VirtualRouterList", NADGVR: "NetworkAttachmentDefinitionList", VMIGVR: "VirtualMachineInstanceList", FloatingIPGVR: "FloatingIpList",
		SecurityGroupGVR: "SecurityGroupList", SecurityGroupRuleGVR: "SecurityGroupRuleList", LoadBalancerGVR: "LoadBalancerList", VMGVR: "VirtualMachineList", VMIMGVR: "VirtualMachineInstanceMigrationList", PodGVR: "PodList",
	}, vmiMigrating("hv1", nil), vmim("mig-1", "m1", "Scheduling"), targetPod("virt-launcher-vm-a-x", "m1", "hv2", "Pending"))
	_, err := client.Resource(NADGVR).Namespace("default").Create(context.Background(), netA, metav1.CreateOptions{})
	require.NoError(t, err)
	client.PrependReactor("list", PodGVR.Resource, func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(PodGVR.GroupResource(), "", errors.New("RBAC"))
	})
	s := NewSource(client, 0, record.NewFakeRecorder(10), logr.Discard())
	require.NoError(t, s.Notify(func([]translator.Unit) {}))
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	s.Start(ctx)
	require.Eventually(t, s.HasSynced, settle, 10*time.Millisecond)
	assert.Nil(t, s.pods)
	assert.NotNil(t, s.vmims)
	port := translator.VMPortName("net-a", "default", "vm-a", "eth1")
	up := s.Input().Plan(translator.Unit{Kind: translator.KindNetwork, Name: "net-a"}, "test", nil)
	require.NotNil(t, up.Network)
	var opts map[string]string
	for _, p := range up.Network.Ports {
		if p.Name == port {
			opts = p.Options
		}
	}
	assert.Equal(t, bound("hv1"), opts, "the target pod unknown: the VMI's status alone")
}
