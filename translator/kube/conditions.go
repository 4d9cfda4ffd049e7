package kube

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// ObjectState is what a controller of kubevirt-ovn wrote in an object's
// status: its Ready and Realized conditions ("" when it has none: the
// object was never reconciled), Ready's reason and message (the error
// that keeps it out, when False).
type ObjectState struct {
	// Name is metadata.name (namespace/name for a namespaced kind); ID
	// the spec.id of a floating IP or a security group, spec.name of a
	// load balancer.
	Name, ID        string
	Ready, Realized string
	Reason, Message string
}

// ObjectStates are the cluster's objects of each kind kubevirt-ovn
// reports on, with their states.
type ObjectStates struct {
	Routers, FloatingIPs, SecurityGroups, LoadBalancers []ObjectState
}

// ReadObjectStates lists the VirtualRouters, FloatingIps, SecurityGroups
// and LoadBalancers of the cluster. A kind the API server does not serve
// (an optional CRD not installed) has none.
func ReadObjectStates(ctx context.Context, dyn dynamic.Interface) (ObjectStates, error) {
	var s ObjectStates
	for _, k := range []struct {
		gvr schema.GroupVersionResource
		to  *[]ObjectState
		id  []string
	}{
		{RouterGVR, &s.Routers, nil},
		{FloatingIPGVR, &s.FloatingIPs, []string{"spec", "id"}},
		{SecurityGroupGVR, &s.SecurityGroups, []string{"spec", "id"}},
		{LoadBalancerGVR, &s.LoadBalancers, []string{"spec", "name"}},
	} {
		list, err := dyn.Resource(k.gvr).List(ctx, metav1.ListOptions{})
		if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
			continue
		}
		if err != nil {
			return s, fmt.Errorf("listing %s: %w", k.gvr.Resource, err)
		}
		for i := range list.Items {
			*k.to = append(*k.to, objectState(&list.Items[i], k.id))
		}
	}
	return s, nil
}

func objectState(u *unstructured.Unstructured, idPath []string) ObjectState {
	st := ObjectState{Name: u.GetName()}
	if ns := u.GetNamespace(); ns != "" {
		st.Name = ns + "/" + st.Name
	}
	if idPath != nil {
		st.ID, _, _ = unstructured.NestedString(u.Object, idPath...)
	}
	conds := conditionsOf(u)
	if c := meta.FindStatusCondition(conds, ConditionReady); c != nil {
		st.Ready, st.Reason, st.Message = string(c.Status), c.Reason, c.Message
	}
	if c := meta.FindStatusCondition(conds, ConditionRealized); c != nil {
		st.Realized = string(c.Status)
	}
	return st
}
