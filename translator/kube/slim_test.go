package kube

import (
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"testing"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"

	"github.com/kubevirt-ovn/kubevirt-ovn/translator"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/manifest"
)

// runningVMI is testdata/vmi-running.json: a VMI as KubeVirt 1.x keeps a
// running, once migrated VM with a pod network and one of ours, with
// what the API server adds (managedFields of virt-controller and
// virt-handler, a kubectl last-applied-configuration annotation).
func runningVMI(t testing.TB) *unstructured.Unstructured {
	t.Helper()
	raw, err := os.ReadFile("testdata/vmi-running.json")
	require.NoError(t, err)
	u := &unstructured.Unstructured{}
	require.NoError(t, u.UnmarshalJSON(raw))
	return u
}

// The VMI informer keeps of a VMI what its conversion reads: the same
// interfaces come out of the kept record as of the whole object, in every
// case the conversion tells apart; and nothing else is kept.
func TestSlimVMIKeepsWhatTheConversionReads(t *testing.T) {
	set := func(v any, path ...string) func(*unstructured.Unstructured) {
		return func(u *unstructured.Unstructured) {
			require.NoError(t, unstructured.SetNestedField(u.Object, v, path...))
		}
	}
	annotate := func(key, value string) func(*unstructured.Unstructured) {
		return func(u *unstructured.Unstructured) {
			a := u.GetAnnotations()
			a[key] = value
			u.SetAnnotations(a)
		}
	}
	cases := map[string][]func(*unstructured.Unstructured){
		"as KubeVirt keeps it": nil,
		"migrating":            {set(map[string]any{"migrationUid": "m2", "sourceNode": "worker-3", "targetNode": "worker-4"}, "status", "migrationState")},
		"migration aborted":    {set(map[string]any{"migrationUid": "m3", "sourceNode": "worker-3", "targetNode": "worker-4", "abortStatus": "Succeeded"}, "status", "migrationState")},
		"no activation":        {annotate(manifest.MigrationActivationAnnotation, "none")},
		"bad activation":       {annotate(manifest.MigrationActivationAnnotation, "sometimes")},
		"bad interfaces":       {annotate(manifest.InterfacesAnnotation, "{")},
		"bad groups":           {annotate(manifest.SecurityGroupsAnnotation, "sg-web")},
		"no annotations":       {func(u *unstructured.Unstructured) { u.SetAnnotations(nil) }},
		"MAC from status only": {func(u *unstructured.Unstructured) {
			ifaces, _, _ := unstructured.NestedSlice(u.Object, "spec", "domain", "devices", "interfaces")
			delete(ifaces[1].(map[string]any), "macAddress")
			require.NoError(t, unstructured.SetNestedSlice(u.Object, ifaces, "spec", "domain", "devices", "interfaces"))
		}},
		"IPv6 from the guest": {set([]any{map[string]any{"name": "eth1", "mac": "02:00:00:14:00:11",
			"ipAddress": "10.20.0.17", "ipAddresses": []any{"10.20.0.17", "fd20::11", "fe80::ff:fe14:11"}}}, "status", "interfaces")},
		"not scheduled":          {func(u *unstructured.Unstructured) { unstructured.RemoveNestedField(u.Object, "status") }},
		"network of a namespace": {set([]any{map[string]any{"name": "eth1", "multus": map[string]any{"networkName": "shared/tenant-net"}}}, "spec", "networks")},
	}
	if len(fixtureInterfaces(t)) == 0 {
		t.Fatal("the fixture has no interface of ours: the comparisons below would prove nothing")
	}
	s := &Source{log: logr.Discard()}
	for name, edits := range cases {
		t.Run(name, func(t *testing.T) {
			u := runningVMI(t)
			for _, edit := range edits {
				edit(u)
			}
			var whole manifest.VirtualMachineInstance
			require.NoError(t, k8sruntime.DefaultUnstructuredConverter.FromUnstructured(u.DeepCopy().Object, &whole))
			want, _ := manifest.VMInterfacesFrom(&whole)

			kept, err := slimVMI(u.DeepCopy())
			require.NoError(t, err)
			rec := kept.(*vmiRecord)
			assert.Equal(t, want, s.vmiObjects(rec).VMs)
			again, err := slimVMI(rec)
			require.NoError(t, err)
			assert.Same(t, rec, again, "idempotent, as client-go asks of a transform")

			assert.Empty(t, rec.ManagedFields)
			assert.Empty(t, rec.Labels)
			assert.Empty(t, rec.OwnerReferences)
			assert.Empty(t, rec.Finalizers)
			for key := range rec.Annotations {
				assert.Contains(t, manifest.VMIAnnotations, key)
			}
			assert.Equal(t, u.GetResourceVersion(), rec.ResourceVersion)
			assert.Equal(t, u.GetUID(), rec.UID)
		})
	}
}

// fixtureInterfaces is the fixture's interfaces as converted whole.
func fixtureInterfaces(t *testing.T) []translator.VMInterface {
	var whole manifest.VirtualMachineInstance
	require.NoError(t, k8sruntime.DefaultUnstructuredConverter.FromUnstructured(runningVMI(t).Object, &whole))
	out, _ := manifest.VMInterfacesFrom(&whole)
	return out
}

// A VMI whose fields do not convert is kept as such: it has no
// interfaces, and says why in the log.
func TestSlimVMIThatDoesNotConvert(t *testing.T) {
	u := runningVMI(t)
	require.NoError(t, unstructured.SetNestedField(u.Object, "eth1", "spec", "networks"))
	kept, err := slimVMI(u)
	require.NoError(t, err)
	rec := kept.(*vmiRecord)
	require.Error(t, rec.err)
	assert.Equal(t, "web-17", rec.Name)
	s := &Source{log: logr.Discard()}
	assert.Empty(t, s.vmiObjects(rec).VMs)
}

// Following a migration changes the converted status, never the record
// the informer shares: the same record converted again gives the same.
func TestVMIObjectsLeaveTheRecordAsItIs(t *testing.T) {
	vmi := vmiMigrating("hv1", map[string]any{"sourceNode": "hv1", "migrationUid": "m1"})
	binding, s, _ := migrationSource(t, vmi, vmim("mig-1", "m1", "Running"), targetPod("virt-launcher-vm-a-x", "m1", "hv2", "Running"))
	waitBound(t, binding, "the target from the migration's pod", "hv1,hv2")
	obj, ok, err := s.vmis.GetStore().GetByKey("default/vm-a")
	require.NoError(t, err)
	require.True(t, ok)
	rec := vmiOf(obj)
	require.NotNil(t, rec)
	require.NotNil(t, rec.Status.MigrationState)
	assert.Equal(t, "hv2", s.vmiObjects(rec).VMs[0].MigrationTarget)
	assert.Empty(t, rec.Status.MigrationState.TargetNode, "the informer's record as the API server had it")
}

// Every informer of the Kubernetes source keeps its objects without
// managedFields, and the VMIs as records.
func TestInformersKeepNoManagedFields(t *testing.T) {
	managed := []any{map[string]any{"manager": "kubectl", "operation": "Update", "apiVersion": "v1", "fieldsType": "FieldsV1",
		"fieldsV1": map[string]any{"f:spec": map[string]any{"f:enableSnat": map[string]any{}}}}}
	withManaged := func(u *unstructured.Unstructured) *unstructured.Unstructured {
		require.NoError(t, unstructured.SetNestedSlice(u.Object, managed, "metadata", "managedFields"))
		return u
	}
	netA := nad("tenant-net", map[string]any{"network-config": `{"type": "GENEVE", "cidr": "10.20.0.0/24", "gatewayIp": "10.20.0.1"}`})
	netA.SetNamespace("tenant-a")
	s, _, _, _ := startRecording(t, withManaged(router("r1")), withManaged(netA), runningVMI(t),
		withManaged(sgObject("sg-1", "sg-web")), withManaged(ruleObject("rule-1", "sg-web", int64(80), int64(80))))
	stores := map[string][]any{"routers": s.routers.GetStore().List(), "nads": s.nads.GetStore().List(),
		"security groups": s.sgs.GetStore().List(), "rules": s.sgRules.GetStore().List()}
	for what, objs := range stores {
		require.Len(t, objs, 1, what)
		_, found, _ := unstructured.NestedSlice(objs[0].(*unstructured.Unstructured).Object, "metadata", "managedFields")
		assert.False(t, found, what)
	}
	vmis := s.vmis.GetStore().List()
	require.Len(t, vmis, 1)
	rec := vmiOf(vmis[0])
	require.NotNil(t, rec)
	assert.Empty(t, rec.ManagedFields)
	up := s.Input().Plan(translator.Unit{Kind: translator.KindNetwork, Name: "tenant-net"}, "test", nil)
	require.NotNil(t, up.Network)
	port := translator.VMPortName("tenant-net", "tenant-a", "web-17", "eth1")
	found := false
	for _, p := range up.Network.Ports {
		found = found || p.Name == port
	}
	assert.True(t, found, "the VMI's port is planned from its record")
}

// BenchmarkVMIKept measures what the VMI informer keeps per VMI of the
// realistic fixture (testdata/vmi-running.json, 9 kB of JSON), and the CPU
// of keeping and converting it: the whole object as the API server sends
// it, against the record slimVMI keeps.
func BenchmarkVMIKept(b *testing.B) {
	raw, err := os.ReadFile("testdata/vmi-running.json")
	require.NoError(b, err)
	s := &Source{log: logr.Discard()}
	const n = 2000
	for _, slim := range []bool{false, true} {
		b.Run(fmt.Sprintf("slim=%v", slim), func(b *testing.B) {
			var keep []any
			var kept int64
			for range b.N {
				keep = nil
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				keep = make([]any, n)
				for i := range keep {
					u := &unstructured.Unstructured{}
					if err := json.Unmarshal(raw, &u.Object); err != nil {
						b.Fatal(err)
					}
					u.SetName(fmt.Sprintf("web-%d", i))
					if slim {
						rec, _ := slimVMI(u)
						keep[i] = rec
						_ = s.vmiObjects(rec.(*vmiRecord))
					} else {
						keep[i] = u
						var vmi manifest.VirtualMachineInstance
						_ = k8sruntime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &vmi)
						_, _ = manifest.VMInterfacesFrom(&vmi)
					}
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				kept = int64(after.HeapAlloc) - int64(before.HeapAlloc)
			}
			runtime.KeepAlive(keep)
			b.ReportMetric(float64(kept)/n, "B-kept/vmi")
		})
	}
}
