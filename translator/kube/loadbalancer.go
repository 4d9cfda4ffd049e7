package kube

import (
	"context"
	"errors"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kubevirt-ovn/kubevirt-ovn/translator"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/manifest"
)

// lbObjects converts a load balancer. The CRD's schema requires what
// manifest.LoadBalancerFrom needs (spec.networkId, ports that are
// numbers): one that still does not convert is skipped and logged (no
// router plans it, none could report it).
func (s *Source) lbObjects(u *unstructured.Unstructured) translator.Objects {
	var obj manifest.LoadBalancer
	err := decodeJSON(u, &obj)
	var lb translator.LoadBalancer
	if err == nil {
		lb, err = manifest.LoadBalancerFrom(&obj)
	}
	if err != nil {
		s.log.Info("skipping a load balancer that does not convert", "loadBalancer", u.GetName(), "error", err.Error())
		return translator.Objects{}
	}
	return translator.Objects{LoadBalancers: []translator.LoadBalancer{lb}}
}

// ReportLoadBalancers writes each load balancer's status when it changed
// (Ready, the router whose rows hold it, the floating IPs on its VIP, or
// its error), and a Warning event when it stops being Ready for a new
// reason. A load balancer no longer in the cache is skipped.
func (s *Source) ReportLoadBalancers(ctx context.Context, sts []translator.LoadBalancerStatus) error {
	if s.lbs == nil {
		return nil
	}
	var errs []error
	for _, st := range sts {
		obj, ok, err := s.lbs.GetStore().GetByKey(st.Name)
		if err != nil || !ok {
			continue
		}
		u, ok := asUnstructured(obj)
		if !ok {
			continue
		}
		ready := metav1.Condition{Type: ConditionReady, Status: metav1.ConditionTrue, Reason: "Committed",
			Message: "its Load_Balancer rows are committed to the OVN Northbound database"}
		if s.allocator {
			ready.Reason, ready.Message = "Planned", "planned; the kubevirt-ovn agents write its rows (its router's home zone, and each zone of its network's switch)"
		}
		if st.Ready && st.Reason != "" {
			ready.Message += "; " + st.Reason
		}
		if !st.Ready {
			ready.Status, ready.Reason, ready.Message = metav1.ConditionFalse, "NotPlanned", st.Reason
			if st.Err != nil {
				ready.Reason = reasonOf(st.Err)
			}
		}
		fields := map[string]any{}
		if st.Router != "" {
			fields["router"] = st.Router
		}
		if st.Ready && len(st.FloatingIPs) > 0 {
			fips := make([]any, len(st.FloatingIPs))
			for i, f := range st.FloatingIPs {
				fips[i] = f
			}
			fields["floatingIps"] = fips
		}
		if err := s.writeReady(ctx, LoadBalancerGVR, u, st.Generation, ready, fields); err != nil {
			errs = append(errs, fmt.Errorf("load balancer %s: %w", st.Name, err))
		}
	}
	return errors.Join(errs...)
}
