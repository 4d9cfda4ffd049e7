package kube

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"

	"github.com/kubevirt-ovn/kubevirt-ovn/translator/manifest"
)

// What the informers keep. Every kubevirt-ovn process holds every object
// of the kinds it reads (a zone agent too: any VM's port may have a remote
// twin in its zone), so what an object costs in the informer's store is
// paid once per object per process, for the process's life.
//   - Every object loses metadata.managedFields: the API server's record
//     of who set which field, often the largest part of a small object,
//     read by nothing here. A status written back from such a copy keeps
//     the server's managedFields (the API server takes the live object's
//     when a request has none).
//   - A VirtualMachineInstance is kept as the fields its conversion
//     reads (manifest.VirtualMachineInstance, already typed), its identity
//     and the annotations VMInterfacesFrom reads: a VMI's domain spec,
//     volumes, conditions and guest information are most of it, and its
//     kubectl last-applied-configuration annotation can be all of it again.
//     Converting at once also spares the conversion on each event.

// dropManagedFields is an informer's transform that removes an object's
// managedFields. Idempotent, as client-go asks of a transform.
func dropManagedFields(obj any) (any, error) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		if md, ok := u.Object["metadata"].(map[string]any); ok {
			delete(md, "managedFields")
		}
	}
	return obj, nil
}

// vmiRecord is what the VMI informer keeps of a VirtualMachineInstance
// (slimVMI).
type vmiRecord struct {
	manifest.VirtualMachineInstance
	// err says why the VMI does not convert; it then has no interfaces.
	err error
}

// vmiBody is the part of a VMI converted from the API server's object.
type vmiBody struct {
	Spec   manifest.VirtualMachineInstanceSpec   `json:"spec"`
	Status manifest.VirtualMachineInstanceStatus `json:"status"`
}

// slimVMI is the VMI informer's transform: a *vmiRecord of an
// *unstructured.Unstructured. Idempotent.
func slimVMI(obj any) (any, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil
	}
	rec := &vmiRecord{}
	rec.TypeMeta = metav1.TypeMeta{APIVersion: u.GetAPIVersion(), Kind: u.GetKind()}
	rec.Namespace, rec.Name, rec.UID = u.GetNamespace(), u.GetName(), u.GetUID()
	rec.ResourceVersion, rec.Generation = u.GetResourceVersion(), u.GetGeneration()
	rec.CreationTimestamp, rec.DeletionTimestamp = u.GetCreationTimestamp(), u.GetDeletionTimestamp()
	if md, ok := u.Object["metadata"].(map[string]any); ok {
		annotations, _ := md["annotations"].(map[string]any)
		for _, key := range manifest.VMIAnnotations {
			if v, ok := annotations[key].(string); ok {
				if rec.Annotations == nil {
					rec.Annotations = map[string]string{}
				}
				rec.Annotations[key] = v
			}
		}
	}
	var body vmiBody
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &body); err != nil {
		rec.err = err
		return rec, nil
	}
	rec.Spec, rec.Status = body.Spec, body.Status
	return rec, nil
}

// vmiOf is the record an informer event or store lookup holds, nil for
// anything else.
func vmiOf(obj any) *vmiRecord {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	rec, _ := obj.(*vmiRecord)
	return rec
}
