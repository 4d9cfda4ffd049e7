package kube

import (
	"context"
	"maps"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kubevirt-ovn/kubevirt-ovn/translator"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/controller"
)

// The condition of a VirtualRouter whose networks' tunnel keys collide in
// some zone (interconnect mode), and its reason.
const (
	ConditionTunnelKeys      = "TunnelKeys"
	ReasonTunnelKeyCollision = "TunnelKeyCollision"
)

var _ controller.KeyStatus = (*Source)(nil)

// keyState is what TunnelKeys was told: by router, by zone.
type keyState struct {
	mu sync.Mutex
	by map[string]map[string][]translator.KeyMismatch
}

// set records zone's mismatches of router and returns the router's
// mismatches in every zone, by zone.
func (k *keyState) set(router, zone string, ms []translator.KeyMismatch) []translator.KeyMismatch {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.by == nil {
		k.by = map[string]map[string][]translator.KeyMismatch{}
	}
	if k.by[router] == nil {
		k.by[router] = map[string][]translator.KeyMismatch{}
	}
	if len(ms) == 0 {
		delete(k.by[router], zone)
	} else {
		k.by[router][zone] = ms
	}
	var all []translator.KeyMismatch
	for _, z := range slices.Sorted(maps.Keys(k.by[router])) {
		all = append(all, k.by[router][z]...)
	}
	if len(all) == 0 {
		delete(k.by, router)
	}
	return all
}

// TunnelKeys implements controller.KeyStatus: the router's TunnelKeys
// condition is False, reason TunnelKeyCollision, naming every collision of
// its networks in the zones this process checks, and True once there is
// none; a new collision is also a Warning Event.
func (s *Source) TunnelKeys(ctx context.Context, router, zone string, ms []translator.KeyMismatch) error {
	all := s.keys.set(router, zone, ms)
	u, err := s.current(router)
	if err != nil || u == nil {
		return err
	}
	conds := conditionsOf(u)
	old := meta.FindStatusCondition(conds, ConditionTunnelKeys)
	// What it said before: SetStatusCondition changes old in place.
	var oldMessage string
	if old != nil {
		oldMessage = old.Message
		if old.Status != metav1.ConditionFalse {
			oldMessage = ""
		}
	}
	cond := metav1.Condition{Type: ConditionTunnelKeys, Status: metav1.ConditionTrue, Reason: "Match", ObservedGeneration: u.GetGeneration(),
		Message: "every zone's ovn-northd gave the switches and ports of the router's networks the tunnel keys they request"}
	if len(all) > 0 {
		lines := make([]string, 0, len(all))
		for _, m := range all {
			lines = append(lines, m.String())
		}
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, ReasonTunnelKeyCollision, strings.Join(lines, "\n")
	}
	if old == nil && len(all) == 0 {
		// Never collided: nothing to say.
		return nil
	}
	if !meta.SetStatusCondition(&conds, cond) {
		return nil
	}
	raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&struct {
		Conditions []metav1.Condition `json:"conditions"`
	}{conds})
	if err != nil {
		return err
	}
	u = u.DeepCopy()
	if err := unstructured.SetNestedSlice(u.Object, raw["conditions"].([]any), "status", "conditions"); err != nil {
		return err
	}
	if _, err := s.client.Resource(RouterGVR).UpdateStatus(ctx, u, metav1.UpdateOptions{}); err != nil {
		return ignoreGone(err)
	}
	if s.recorder != nil && len(all) > 0 {
		for _, m := range all {
			if !strings.Contains(oldMessage, m.String()) {
				s.recorder.Event(u, corev1.EventTypeWarning, ReasonTunnelKeyCollision, m.String())
			}
		}
	}
	return nil
}
