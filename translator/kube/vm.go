package kube

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kubevirt-ovn/kubevirt-ovn/translator"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/controller"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/manifest"
)

// ONOS read a VM's security groups from its VirtualMachine's template;
// KubeVirt copies the template's annotations onto the VMI only when the VM
// starts, so a live change on the VirtualMachine never reaches the VMI
// (Kube-OVN has had exactly these bugs: a group set on the template not
// applied, a group still applied after unbinding). Where a VirtualMachine
// of the VMI's namespace and name exists, its template's annotation is
// the binding of the VMI's ports (also when it has none: the VM was
// unbound); without one, the VMI's own annotation is.
//
// A VirtualMachine event reconverts only its VMI, and only when the
// binding changed, so the input says which groups the VMI's ports joined
// or left: the same path as a VMI's change, at the cost of one VMI. The
// informer keeps only what that needs of each VirtualMachine
// (vmBindingOnly).

// vmAnnotationPath is where the binding is in a VirtualMachine.
var vmAnnotationPath = []string{"spec", "template", "metadata", "annotations", manifest.SecurityGroupsAnnotation}

// vmBindingOnly is the informer's transform of a VirtualMachine: its
// identity and its template's securityGroups annotation, nothing else
// (thousands of VMs, each with a whole VMI spec in its template).
func vmBindingOnly(obj any) (any, error) {
	return keepFields(obj, vmAnnotationPath), nil
}

// vmBinding is a VirtualMachine's template annotation and whether it has
// one.
func vmBinding(u *unstructured.Unstructured) (string, bool) {
	v, ok, _ := unstructured.NestedString(u.Object, vmAnnotationPath...)
	return v, ok
}

// vmChanged reconverts the VMI of a VirtualMachine that came, went or
// whose binding changed (old nil: added; cur nil: deleted).
func (s *Source) vmChanged(old, cur any, enqueue func([]translator.Unit)) {
	o, _ := asUnstructured(old)
	c, _ := asUnstructured(cur)
	switch {
	case o != nil && c != nil:
		ov, oin := vmBinding(o)
		cv, cin := vmBinding(c)
		if ov == cv && oin == cin {
			return // a status or spec change: not the binding
		}
	case c == nil && o == nil:
		return
	case c == nil:
		c = o
	}
	s.setVMI(c.GetNamespace(), c.GetName(), enqueue)
}

// setVMI sets the interfaces of VMI namespace/name as the informers'
// stores hold it and its VirtualMachine now. The VMI's and the VM's
// handlers both call it, each after its store changed; holding vmiMu, the
// last call reads both stores after the last change, whichever handler
// makes it.
func (s *Source) setVMI(namespace, name string, enqueue func([]translator.Unit)) {
	s.vmiMu.Lock()
	defer s.vmiMu.Unlock()
	var objs translator.Objects
	if obj, ok, _ := s.vmis.GetStore().GetByKey(namespace + "/" + name); ok {
		if rec := vmiOf(obj); rec != nil && rec.DeletionTimestamp == nil {
			// A VMI being deleted is left out: its ports go.
			objs = s.vmiObjects(rec)
		}
	}
	enqueue(s.input.Set("VirtualMachineInstance/"+namespace+"/"+name, objs))
}

// vmGroups is the binding of VMI u's ports by its VirtualMachine, and
// whether it has one.
func (s *Source) vmGroups(namespace, name string) (string, bool) {
	if s.vms == nil {
		return "", false
	}
	obj, ok, _ := s.vms.GetStore().GetByKey(namespace + "/" + name)
	if !ok {
		return "", false
	}
	vm, ok := asUnstructured(obj)
	if !ok {
		return "", false
	}
	text, _ := vmBinding(vm)
	groups, err := manifest.ParseSecurityGroups(text)
	if err != nil {
		s.log.Info("a VirtualMachine's securityGroups annotation is not a JSON list of security group ids: its ports join no group",
			"vm", vm.GetNamespace()+"/"+vm.GetName(), "field", "spec.template.metadata.annotations["+manifest.SecurityGroupsAnnotation+"]", "error", err.Error())
	}
	return groups, true
}

// VMIEvent records an Event on VMI namespace/name (controller.VMEvents):
// what its ports went through during a live migration.
func (s *Source) VMIEvent(namespace, name, eventType, reason, message string) {
	if s.recorder == nil {
		return
	}
	ref := &corev1.ObjectReference{APIVersion: VMIGVR.GroupVersion().String(), Kind: "VirtualMachineInstance", Namespace: namespace, Name: name}
	if obj, ok, _ := s.vmis.GetStore().GetByKey(namespace + "/" + name); ok {
		if rec := vmiOf(obj); rec != nil {
			ref.UID, ref.ResourceVersion = rec.UID, rec.ResourceVersion
		}
	}
	s.recorder.Event(ref, eventType, reason, message)
}

var _ controller.VMEvents = (*Source)(nil)
