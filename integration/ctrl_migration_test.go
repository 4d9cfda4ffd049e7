package integration

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubevirt-ovn/kubevirt-ovn/integration/sandbox"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/kube"
)

var eventGVR = schema.GroupVersionResource{Version: "v1", Resource: "events"}

// startTarget creates migration name of vm-a and its target virt-launcher
// pod, scheduled on node (no kubelet runs it: it stays Pending, as while
// its CNI waits), and plugs the pod's interface there as its CNI does
// (on hv2; a node that is no chassis has nothing to plug). It returns the
// pod's name.
func startTarget(t *testing.T, e *env, k *kubeAPI, name, node string) string {
	t.Helper()
	ctx := context.Background()
	vmim := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstanceMigration",
		"metadata": map[string]any{"name": name, "namespace": "default"},
		"spec":     map[string]any{"vmiName": "vm-a"},
		"status":   map[string]any{"phase": "Scheduling"},
	}}
	created, err := k.dyn.Resource(kube.VMIMGVR).Namespace("default").Create(ctx, vmim, metav1.CreateOptions{})
	require.NoError(t, err)
	pod := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": "virt-launcher-vm-a-" + name, "namespace": "default",
			"labels": map[string]any{kube.MigrationJobLabel: string(created.GetUID()), "kubevirt.io": "virt-launcher"}},
		"spec": map[string]any{"nodeName": node, "containers": []any{map[string]any{"name": "compute", "image": "virt-launcher"}}},
	}}
	_, err = k.dyn.Resource(kube.PodGVR).Namespace("default").Create(ctx, pod, metav1.CreateOptions{})
	require.NoError(t, err)
	if node == "hv2" {
		require.NoError(t, e.l.AddVMPort("hv2", vmADst, vmAPort))
	}
	return pod.GetName()
}

// installed says whether ovn-controller on hv2 marked the target pod's
// interface ovn-installed: what a CNI waits for before its ADD returns.
func installed(e *env) bool {
	out, err := e.l.Exec("hv2", "ovs-vsctl", "--if-exists", "get", "Interface", vmADst, "external_ids:ovn-installed")
	return err == nil && strings.TrimSpace(out) == `"true"`
}

// vmAOptions is vm-a's port's options, "" while it has no port.
func vmAOptions(t *testing.T, e *env) string {
	return strings.TrimSpace(nbctl(t, e.l, "--bare", "--columns=options", "find", "Logical_Switch_Port", "name="+vmAPort))
}

// waitEvent waits for an Event of vm-a with reason and returns its
// message.
func waitEvent(t *testing.T, k *kubeAPI, reason string) string {
	t.Helper()
	var msg string
	require.NoError(t, sandbox.Poll(60*time.Second, "Event "+reason+" on vm-a", func() (bool, error) {
		list, err := k.dyn.Resource(eventGVR).Namespace("default").List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.name=vm-a,reason=" + reason})
		if err != nil || len(list.Items) == 0 {
			return false, nil
		}
		msg, _, _ = unstructured.NestedString(list.Items[0].Object, "message")
		return true, nil
	}))
	return msg
}

// TestClusterMigrationStartsFromTheTargetPod: in a cluster (Kubernetes'
// own API server, which serves pods and Events), vm-a's port is bound on
// hv1 and hv2 as soon as its migration's target pod is scheduled on hv2,
// while the VMI does not name the migration yet: ovn-controller on hv2
// marks the pod's interface ovn-installed, which the target pod's CNI
// waits for before the pod can run (and only then would the VMI name the
// target), and nothing reaches hv2. The target pod deleted, the port is
// back on hv1. A second migration: the VM's RARP on hv2 collapses the port
// onto hv2 before the VMI says anything. A third, to a node that is no
// chassis, is not followed. Each step is an Event of vm-a.
func TestClusterMigrationStartsFromTheTargetPod(t *testing.T) {
	e := newOVN(t)
	k := startClusterAPI(t)
	startController(t, "a", "--nb", e.l.NBEndpoint(), "--sb", e.l.SBEndpoint(), "--kubeconfig", k.kubeconfig)
	ex := filepath.Join("..", "deploy", "examples")
	for _, f := range []string{"networks.yaml", "vmis.yaml", "router.yaml"} {
		k.apply(t, filepath.Join(ex, f))
	}
	waitNB(t, "vm-a's port on hv1", func() bool { return vmAOptions(t, e) == "requested-chassis=hv1" })
	e.ready("gw1", "hv1", "hv2")
	dst, src := e.vm("hv2", vmADst), e.vm("hv1", "vm-a")

	// The first migration: bound on both before its target pod runs.
	pod := startTarget(t, e, k, "migration-1", "hv2")
	waitNB(t, "vm-a's port on both chassis from its target pod", func() bool {
		return vmAOptions(t, e) == "activation-strategy=rarp requested-chassis=hv1,hv2"
	})
	e.waitBinding("hv2 bound as vm-a's additional chassis", binding{chassis: "hv1", additional: "hv2"})
	waitNB(t, "the target pod's interface ovn-installed on hv2", func() bool { return installed(e) })
	vmi, err := k.dyn.Resource(vmiGVR).Namespace("default").Get(context.Background(), "vm-a", metav1.GetOptions{})
	require.NoError(t, err)
	_, named, _ := unstructured.NestedMap(vmi.Object, "status", "migrationState")
	require.False(t, named, "the VMI does not name the migration: the pod did it")
	assert.Contains(t, waitEvent(t, k, "MigrationBound"), "bound on hv1 (source) and hv2 (target), blocked on hv2 until the VM's RARP there")
	skip := count(t, dst)
	e.toVMA(5721)
	waitFor(t, src, "vm-a's traffic at hv1 while the target pod waits", 0, toPort(5721))
	requireNone(t, dst, "vm-a's traffic at its target before the VM runs there", skip, toPort(5721))

	// The target pod gone (its CNI unplugs it): back on hv1 alone.
	require.NoError(t, k.dyn.Resource(kube.PodGVR).Namespace("default").Delete(context.Background(), pod, metav1.DeleteOptions{}))
	_, err = e.l.Exec("hv2", "ovs-vsctl", "del-port", "br-int", vmADst)
	require.NoError(t, err)
	waitNB(t, "vm-a's port back on hv1", func() bool { return vmAOptions(t, e) == "requested-chassis=hv1" })
	e.waitBinding("vm-a bound on hv1 alone", binding{chassis: "hv1"})
	assert.Contains(t, waitEvent(t, k, "MigrationRolledBack"), "back on hv1 alone: the migration to hv2 failed, was aborted or lost its target")
	k.change(t, kube.VMIMGVR, "default", "migration-1", func(u *unstructured.Unstructured) {
		require.NoError(t, unstructured.SetNestedField(u.Object, "Failed", "status", "phase"))
	})

	// The second: the VM's RARP on hv2 moves the port there, ahead of
	// the VMI.
	startTarget(t, e, k, "migration-2", "hv2")
	e.waitBinding("hv2 bound as vm-a's additional chassis again", binding{chassis: "hv1", additional: "hv2"})
	waitNB(t, "the second target pod's interface ovn-installed on hv2", func() bool { return installed(e) })
	e.announce()
	waitNB(t, "vm-a's port on hv2 alone after its RARP there", func() bool { return vmAOptions(t, e) == "requested-chassis=hv2" })
	e.waitBinding("vm-a bound on hv2", binding{chassis: "hv2"})
	nbctl(t, e.l, "--timeout=90", "--wait=hv", "sync") // every chassis has the collapse
	assert.Contains(t, waitEvent(t, k, "MigrationActivated"), "activated on hv2: the VM's RARP was seen there")
	assert.Contains(t, waitEvent(t, k, "MigrationCollapsed"), "on hv2 alone: the VM runs on its target")
	skip, skipSrc := count(t, dst), count(t, src)
	e.toVMA(5722)
	waitFor(t, dst, "vm-a's traffic at hv2 after the switch", skip, toPort(5722))
	requireNone(t, src, "vm-a's traffic at hv1 after the switch", skipSrc, toPort(5722))

	// virt-handler catches up: nothing moves.
	k.change(t, vmiGVR, "default", "vm-a", func(u *unstructured.Unstructured) {
		uid := ""
		if m, err := k.dyn.Resource(kube.VMIMGVR).Namespace("default").Get(context.Background(), "migration-2", metav1.GetOptions{}); err == nil {
			uid = string(m.GetUID())
		}
		require.NoError(t, unstructured.SetNestedField(u.Object, "hv2", "status", "nodeName"))
		require.NoError(t, unstructured.SetNestedMap(u.Object, map[string]any{"sourceNode": "hv1", "targetNode": "hv2", "migrationUid": uid, "completed": true}, "status", "migrationState"))
	})
	k.change(t, kube.VMIMGVR, "default", "migration-2", func(u *unstructured.Unstructured) {
		require.NoError(t, unstructured.SetNestedField(u.Object, "Succeeded", "status", "phase"))
	})
	waitNB(t, "vm-a's port stays on hv2", func() bool { return vmAOptions(t, e) == "requested-chassis=hv2" })

	// A migration to a node that is no chassis: a Warning on vm-a naming
	// the node, and the port stays where the VM runs.
	startTarget(t, e, k, "migration-3", "hv9")
	assert.Contains(t, waitEvent(t, k, "MigrationNotFollowed"), "migration migration-3's target pod default/virt-launcher-vm-a-migration-3 spec.nodeName hv9 is no chassis (hostname or chassis name in the Southbound): its port stays on hv2")
	assert.Equal(t, "requested-chassis=hv2", vmAOptions(t, e))
}
