package kube

import (
	"cmp"
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"

	"github.com/kubevirt-ovn/kubevirt-ovn/translator"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/manifest"
)

// A VMI's status.migrationState names the target node only once the
// target virt-launcher pod runs, and that pod runs only after its CNI ADD,
// which (ovn-kubernetes', Kube-OVN's) waits for the interface's
// ovn-installed: a port bound to its source alone until then is never
// installed on the target, and the migration never starts (Kube-OVN's
// deadlock, kubeovn/kube-ovn#6823). So in a cluster the migration starts
// from KubeVirt's VirtualMachineInstanceMigration and its target pod
// (label kubevirt.io/migrationJobUID=<the migration's uid>): as soon as
// the scheduler put that pod on a node, the port is bound on both
// chassis, before the pod's CNI runs. The VMI's migrationState, once it
// names the migration, has the last word (completed, failed, aborted);
// a migration whose phase is Failed, or whose target pod is gone or
// ended, before the VMI says it completed, collapses onto the source.

// The resources a migration is read from.
var (
	// VMIMGVR is KubeVirt's VirtualMachineInstanceMigration.
	VMIMGVR = schema.GroupVersionResource{Group: "kubevirt.io", Version: "v1", Resource: "virtualmachineinstancemigrations"}
	// PodGVR is the target virt-launcher pods (MigrationJobLabel only).
	PodGVR = schema.GroupVersionResource{Version: "v1", Resource: "pods"}
)

// MigrationJobLabel is the label KubeVirt sets on a migration's target
// virt-launcher pod: the uid of its VirtualMachineInstanceMigration.
const MigrationJobLabel = "kubevirt.io/migrationJobUID"

// Indexes of the migration informers.
const (
	byVMI = "vmi" // VMIMs by namespace/spec.vmiName
	byUID = "uid" // VMIMs by uid; pods by MigrationJobLabel
)

// migrationRun is what the cluster says of one migration of a VMI.
type migrationRun struct {
	uid string
	// failed: the VMIM's phase is Failed.
	failed bool
	// final: its phase is Succeeded or Failed.
	final bool
	// target is the node of its target pod, once scheduled and while
	// that pod lives.
	target string
	// targetField names the pod's field target was read from.
	targetField string
	// podsKnown: the target pods are watched (the API server serves
	// them to kubevirt-ovn), so no live pod means the target is gone.
	podsKnown bool
}

// watchMigrations prepares the informers of migrations and their target
// pods, where the API server serves them to kubevirt-ovn; without them
// the migration follows the VMI's migrationState alone.
func (s *Source) watchMigrations() {
	if s.allocator {
		return // it binds no port
	}
	if !s.served(VMIMGVR, "a live migration's dual binding is written when the VMI's status.migrationState names its target, after the target pod started: a CNI that waits for ovn-installed on the target never lets it start") {
		return
	}
	s.vmims = s.factory.ForResource(VMIMGVR).Informer()
	_ = s.vmims.SetTransform(vmimOnly)
	_ = s.vmims.AddIndexers(cache.Indexers{
		byVMI: func(obj any) ([]string, error) {
			u, ok := asUnstructured(obj)
			if !ok {
				return nil, nil
			}
			name, _, _ := unstructured.NestedString(u.Object, "spec", "vmiName")
			return []string{u.GetNamespace() + "/" + name}, nil
		},
		byUID: func(obj any) ([]string, error) {
			u, ok := asUnstructured(obj)
			if !ok {
				return nil, nil
			}
			return []string{string(u.GetUID())}, nil
		},
	})
	if !s.served(PodGVR, "a live migration's dual binding is written when the VMI's status.migrationState names its target, after the target pod started: a CNI that waits for ovn-installed on the target never lets it start") {
		return
	}
	// Only the target pods of migrations, and only what is read of them.
	f := dynamicinformer.NewFilteredDynamicSharedInformerFactory(s.client, s.resync, metav1.NamespaceAll, func(o *metav1.ListOptions) {
		o.LabelSelector = MigrationJobLabel
	})
	s.podFactory = f
	s.pods = f.ForResource(PodGVR).Informer()
	_ = s.pods.SetTransform(targetPodOnly)
	_ = s.pods.AddIndexers(cache.Indexers{byUID: func(obj any) ([]string, error) {
		u, ok := asUnstructured(obj)
		if !ok {
			return nil, nil
		}
		return []string{u.GetNamespace() + "/" + u.GetLabels()[MigrationJobLabel]}, nil
	}})
}

// vmimOnly is the informer's transform of a migration: its identity, VMI
// and phase.
func vmimOnly(obj any) (any, error) {
	return keepFields(obj, []string{"spec", "vmiName"}, []string{"status", "phase"}), nil
}

// targetPodOnly is the informer's transform of a target pod: its
// identity, migration, node and phase (a pod's spec and status are large,
// and the label stays on the VM's pod after the migration).
func targetPodOnly(obj any) (any, error) {
	out := keepFields(obj, []string{"spec", "nodeName"}, []string{"status", "phase"})
	if u, ok := out.(*unstructured.Unstructured); ok {
		in, _ := asUnstructured(obj)
		u.SetLabels(map[string]string{MigrationJobLabel: in.GetLabels()[MigrationJobLabel]})
	}
	return out, nil
}

// keepFields copies of an object its identity and the string fields at
// paths (an informer's transform: thousands of objects, each whole).
func keepFields(obj any, paths ...[]string) any {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj
	}
	out := &unstructured.Unstructured{Object: map[string]any{"apiVersion": u.GetAPIVersion(), "kind": u.GetKind()}}
	out.SetNamespace(u.GetNamespace())
	out.SetName(u.GetName())
	out.SetUID(u.GetUID())
	out.SetResourceVersion(u.GetResourceVersion())
	out.SetCreationTimestamp(u.GetCreationTimestamp())
	if t := u.GetDeletionTimestamp(); t != nil {
		out.SetDeletionTimestamp(t)
	}
	for _, p := range paths {
		if v, ok, _ := unstructured.NestedString(u.Object, p...); ok {
			_ = unstructured.SetNestedField(out.Object, v, p...)
		}
	}
	return out
}

// migrationChanged reconverts the VMI of a migration that came, changed
// or went.
func (s *Source) migrationChanged(obj any, enqueue func([]translator.Unit)) {
	u, ok := asUnstructured(obj)
	if !ok {
		return
	}
	if name, _, _ := unstructured.NestedString(u.Object, "spec", "vmiName"); name != "" {
		s.setVMI(u.GetNamespace(), name, enqueue)
	}
}

// targetPodChanged reconverts the VMI of the migration whose target pod
// came, changed (was scheduled, ended) or went.
func (s *Source) targetPodChanged(obj any, enqueue func([]translator.Unit)) {
	u, ok := asUnstructured(obj)
	if !ok || s.vmims == nil {
		return
	}
	objs, _ := s.vmims.GetIndexer().ByIndex(byUID, u.GetLabels()[MigrationJobLabel])
	for _, o := range objs {
		if m, ok := asUnstructured(o); ok && m.GetNamespace() == u.GetNamespace() {
			s.migrationChanged(m, enqueue)
		}
	}
}

// migrationOf is what the cluster says of the migration of VMI
// namespace/name that its migrationState names (uid), or else of the one
// that runs; nil when none is known.
func (s *Source) migrationOf(namespace, name, uid string) *migrationRun {
	if s.vmims == nil {
		return nil
	}
	objs, _ := s.vmims.GetIndexer().ByIndex(byVMI, namespace+"/"+name)
	var runs []*unstructured.Unstructured
	for _, o := range objs {
		if u, ok := asUnstructured(o); ok {
			runs = append(runs, u)
		}
	}
	if len(runs) == 0 {
		return nil
	}
	// The VMI's own migration while it runs, else the newest that runs
	// (KubeVirt runs one at a time; finished ones are kept for a while),
	// else the VMI's own, ended.
	slices.SortFunc(runs, func(a, b *unstructured.Unstructured) int {
		if c := b.GetCreationTimestamp().Compare(a.GetCreationTimestamp().Time); c != 0 {
			return c
		}
		return cmp.Compare(a.GetName(), b.GetName())
	})
	running := func(u *unstructured.Unstructured) bool {
		phase, _, _ := unstructured.NestedString(u.Object, "status", "phase")
		return phase != "Succeeded" && phase != "Failed" && u.GetDeletionTimestamp() == nil
	}
	own := slices.IndexFunc(runs, func(u *unstructured.Unstructured) bool { return uid != "" && string(u.GetUID()) == uid })
	pick := own
	if own < 0 || !running(runs[own]) {
		if i := slices.IndexFunc(runs, running); i >= 0 {
			pick = i
		}
	}
	if pick < 0 {
		return nil
	}
	u := runs[pick]
	phase, _, _ := unstructured.NestedString(u.Object, "status", "phase")
	run := &migrationRun{uid: string(u.GetUID()), failed: phase == "Failed", final: phase == "Succeeded" || phase == "Failed"}
	if s.pods == nil {
		return run
	}
	run.podsKnown = true
	pods, _ := s.pods.GetIndexer().ByIndex(byUID, namespace+"/"+run.uid)
	for _, o := range pods {
		p, ok := asUnstructured(o)
		if !ok || p.GetDeletionTimestamp() != nil {
			continue
		}
		if phase, _, _ := unstructured.NestedString(p.Object, "status", "phase"); phase == "Succeeded" || phase == "Failed" {
			continue
		}
		if node, _, _ := unstructured.NestedString(p.Object, "spec", "nodeName"); node != "" {
			run.target = node
			run.targetField = fmt.Sprintf("migration %s's target pod %s/%s spec.nodeName", u.GetName(), namespace, p.GetName())
		}
	}
	return run
}

// followMigration completes a VMI's status with what the cluster says of
// its migration (run; nil: nothing): a migration that runs and whose
// target pod is scheduled moves the port before the VMI names the target;
// one the VMI names ends, on the source, when its phase is Failed or its
// target pod is gone, unless the VMI already said how it ended.
func followMigration(st *manifest.VirtualMachineInstanceStatus, run *migrationRun) {
	if run == nil || st.NodeName == "" {
		return
	}
	ms := st.MigrationState
	if ms != nil && ms.MigrationUID == run.uid {
		if ms.Completed || ms.Failed || ms.AbortStatus == "Succeeded" {
			return
		}
		if run.failed || (run.podsKnown && run.target == "" && ms.TargetNode != "") {
			ms.Failed = true
			return
		}
		if ms.TargetNode == "" {
			ms.TargetNode, ms.TargetField = run.target, run.targetField
		}
		return
	}
	if run.final || run.target == "" {
		return
	}
	st.MigrationState = &manifest.VMIMigrationState{SourceNode: st.NodeName, TargetNode: run.target, MigrationUID: run.uid, TargetField: run.targetField}
}
