package kube

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kubevirt-ovn/kubevirt-ovn/translator"
)

// ReportFloatingIPs writes each floating IP's status when it changed
// (Ready, the VM port it is bound to, the gateway chassis it is answered
// on), and a Warning event when it stops being Ready for a new reason.
// A floating IP no longer in the cache is skipped.
func (s *Source) ReportFloatingIPs(ctx context.Context, sts []translator.FloatingIPStatus) error {
	var errs []error
	for _, st := range sts {
		if err := s.reportFloatingIP(ctx, st); err != nil {
			errs = append(errs, fmt.Errorf("floating IP %s: %w", st.Name, err))
		}
	}
	return errors.Join(errs...)
}

func (s *Source) reportFloatingIP(ctx context.Context, st translator.FloatingIPStatus) error {
	if s.fips == nil {
		return nil
	}
	obj, ok, err := s.fips.GetStore().GetByKey(st.Name)
	if err != nil || !ok {
		return err
	}
	u, ok := asUnstructured(obj)
	if !ok {
		return fmt.Errorf("unexpected object %T in the cache", obj)
	}
	gen := st.Generation
	if gen == 0 {
		gen = u.GetGeneration()
	}
	old, _, _ := unstructured.NestedMap(u.Object, "status")
	conds := conditionsOf(u)
	ready := metav1.Condition{Type: ConditionReady, Status: metav1.ConditionTrue, Reason: "Bound",
		Message: "its NAT row is committed on its router's gateway", ObservedGeneration: gen}
	if s.allocator {
		ready.Reason, ready.Message = "Allocated", "bound; the kubevirt-ovn agent of its router's home zone writes its NAT row"
	}
	if !st.Ready {
		// Its own bad input, or waiting (not associated, for its VM or its
		// router).
		ready.Status, ready.Reason, ready.Message = metav1.ConditionFalse, "NotBound", st.Reason
		if st.Err != nil {
			ready.Reason = reasonOf(st.Err)
		}
	}
	meta.SetStatusCondition(&conds, ready)
	status, err := statusOf(gen, conds)
	if err != nil {
		return err
	}
	if st.Ready && st.Port != "" {
		status["port"] = st.Port
	}
	if st.Ready && st.Gateway != "" {
		status["gateway"] = st.Gateway
	}
	if equality.Semantic.DeepEqual(old, status) {
		return nil
	}
	u = u.DeepCopy()
	u.Object["status"] = status
	if _, err := s.client.Resource(FloatingIPGVR).UpdateStatus(ctx, u, metav1.UpdateOptions{}); err != nil {
		return ignoreGone(err)
	}
	if oldMsg, _ := readyOf(old); s.recorder != nil && !st.Ready && oldMsg != ready.Message {
		s.recorder.Event(u, corev1.EventTypeWarning, ready.Reason, st.Reason)
	}
	return nil
}
