package kube

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
)

// The resources kubevirt-ovn reads where the API server serves them: the
// kinds of deploy/common beside VirtualRouter, and KubeVirt's
// VirtualMachine.
var (
	// SecurityGroupGVR and SecurityGroupRuleGVR are ONOS
	// kubevirt-networking's security groups and their rules
	// (deploy/common/crd-securitygroup.yaml).
	SecurityGroupGVR     = schema.GroupVersionResource{Group: "kubevirt.io", Version: "v1", Resource: "securitygroups"}
	SecurityGroupRuleGVR = schema.GroupVersionResource{Group: "kubevirt.io", Version: "v1", Resource: "securitygrouprules"}
	// LoadBalancerGVR is ONOS kubevirt-networking's load balancer
	// (deploy/common/crd-loadbalancer.yaml).
	LoadBalancerGVR = schema.GroupVersionResource{Group: "kubevirt.io", Version: "v1", Resource: "loadbalancers"}
	// VMGVR is KubeVirt's VirtualMachine, whose template's
	// securityGroups annotation binds its VMI's ports (vm.go).
	VMGVR = schema.GroupVersionResource{Group: "kubevirt.io", Version: "v1", Resource: "virtualmachines"}
)

// Indexes of the security group informers.
const (
	// byGroupID indexes SecurityGroups by spec.id and SecurityGroupRules
	// by spec.securityGroupId: the objects whose status a group's
	// reconcile says.
	byGroupID = "groupID"
)

// watchOptional prepares the informers of the optional resources the API
// server serves. A cluster upgraded without one of deploy/common's CRDs
// still has its routers reconciled, without that kind, and says so; a
// cluster without KubeVirt's VirtualMachine CRD binds security groups
// from the VMIs' annotation.
func (s *Source) watchOptional() {
	for _, o := range []struct {
		gvr     schema.GroupVersionResource
		into    *cache.SharedIndexInformer
		missing string
	}{
		{FloatingIPGVR, &s.fips, "floating IPs are not read; apply deploy/common/crd-floatingip.yaml and restart kubevirt-ovn"},
		{SecurityGroupGVR, &s.sgs, "security groups are not read; apply deploy/common/crd-securitygroup.yaml and restart kubevirt-ovn"},
		{SecurityGroupRuleGVR, &s.sgRules, "security group rules are not read; apply deploy/common/crd-securitygroup.yaml and restart kubevirt-ovn"},
		{LoadBalancerGVR, &s.lbs, "load balancers are not read; apply deploy/common/crd-loadbalancer.yaml and restart kubevirt-ovn"},
		{VMGVR, &s.vms, "a VM's securityGroups annotation is read from its VMI, where KubeVirt copied it when the VM started: a live change on the VirtualMachine is not followed"},
	} {
		if s.served(o.gvr, o.missing) {
			*o.into = s.factory.ForResource(o.gvr).Informer()
			_ = (*o.into).SetTransform(dropManagedFields) // slim.go
		}
	}
	index := func(inf cache.SharedIndexInformer, field string) {
		if inf == nil {
			return
		}
		// Before Start: an informer takes indexers only then.
		_ = inf.AddIndexers(cache.Indexers{byGroupID: func(obj any) ([]string, error) {
			u, ok := asUnstructured(obj)
			if !ok {
				return nil, nil
			}
			if id, _, _ := unstructured.NestedString(u.Object, "spec", field); id != "" {
				return []string{id}, nil
			}
			return nil, nil
		}})
	}
	index(s.sgs, "id")
	index(s.sgRules, "securityGroupId")
	if s.vms != nil {
		_ = s.vms.SetTransform(vmBindingOnly)
	}
}

// served says whether the API server serves gvr to kubevirt-ovn; when it
// does not, or kubevirt-ovn may not list it (its RBAC not updated with
// the binary: an informer that cannot list would keep the start waiting
// for ever), it logs what that leaves out (missing). Any other error is
// the informer's to retry.
func (s *Source) served(gvr schema.GroupVersionResource, missing string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := s.client.Resource(gvr).List(ctx, metav1.ListOptions{Limit: 1})
	switch {
	case apierrors.IsNotFound(err):
		s.log.Info("the API server does not serve " + gvr.Resource + "." + gvr.Group + ": " + missing)
		return false
	case apierrors.IsForbidden(err):
		s.log.Info("kubevirt-ovn may not list "+gvr.Resource+"."+gvr.Group+" (apply the RBAC of deploy/ and restart kubevirt-ovn): "+missing, "error", err.Error())
		return false
	}
	return true
}
