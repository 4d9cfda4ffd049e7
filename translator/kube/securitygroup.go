package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubevirt-ovn/kubevirt-ovn/translator"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/controller"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/manifest"
)

// decodeJSON decodes u into a manifest type through JSON, as a manifest
// is read: its ports and protocols, numbers or strings, decode by their
// UnmarshalJSON, which the unstructured converter does not call.
func decodeJSON(u *unstructured.Unstructured, into any) error {
	b, err := json.Marshal(u.Object)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, into)
}

// sgObjects converts a SecurityGroup. One that does not convert fails the
// unit of its spec.id, which keeps its rows; without a spec.id (the CRD
// requires one) it is skipped.
func (s *Source) sgObjects(u *unstructured.Unstructured) translator.Objects {
	var obj manifest.SecurityGroup
	err := decodeJSON(u, &obj)
	var g translator.SecurityGroup
	if err == nil {
		g, err = manifest.SecurityGroupFrom(&obj)
	}
	if err != nil {
		return s.invalidGroup(u, translator.ObjSecurityGroup, "id", err)
	}
	return translator.Objects{SecurityGroups: []translator.SecurityGroup{g}}
}

// ruleObjects converts a SecurityGroupRule; one that does not convert
// fails its group's unit, as sgObjects.
func (s *Source) ruleObjects(u *unstructured.Unstructured) translator.Objects {
	var obj manifest.SecurityGroupRule
	err := decodeJSON(u, &obj)
	var r translator.SecurityGroupRule
	if err == nil {
		r, err = manifest.SecurityGroupRuleFrom(&obj)
	}
	if err != nil {
		return s.invalidGroup(u, translator.ObjSGRule, "securityGroupId", err)
	}
	return translator.Objects{SecurityGroupRules: []translator.SecurityGroupRule{r}}
}

// invalidGroup fails the group named by u's spec.<field> with err: its
// rows stay as they are (a rule that does not read must not look
// deleted), and the error names u.
func (s *Source) invalidGroup(u *unstructured.Unstructured, kind, field string, err error) translator.Objects {
	id, _, _ := unstructured.NestedString(u.Object, "spec", field)
	if id == "" {
		s.log.Info("skipping a "+kind+" without spec."+field, "name", u.GetName(), "error", err.Error())
		return translator.Objects{}
	}
	var in *translator.InputError
	if !errors.As(err, &in) {
		in = &translator.InputError{Kind: kind, Object: u.GetName(), Msg: err.Error()}
	}
	return translator.Objects{Invalid: map[translator.Unit]error{{Kind: translator.KindSecurityGroup, Name: id}: in}}
}

// ReportSecurityGroup writes the status of the SecurityGroups and the
// SecurityGroupRules of group st.ID when it changed, and a Warning event
// when one stops being Ready for a new reason. A group is Ready when its
// rows are committed and every rule of it applied; else it says the
// group's error, or its rules' (each naming its rule). A rule is Ready
// when its ACL is committed; else it says its own error, or its group's
// state.
func (s *Source) ReportSecurityGroup(ctx context.Context, st controller.SecurityGroupStatus) error {
	var errs []error
	var groups []*unstructured.Unstructured
	if s.sgs != nil {
		groups = byIndex(s.sgs.GetIndexer().ByIndex(byGroupID, st.ID))
	}
	groupErrs := ofKind(st.Errs, translator.ObjSecurityGroup, "")
	for _, u := range groups {
		ready := metav1.Condition{Type: ConditionReady, Status: metav1.ConditionTrue, Reason: "Committed",
			Message: "its Port_Group and ACLs are committed to the OVN Northbound database"}
		if s.allocator {
			ready.Reason, ready.Message = "Planned", "planned; each zone's kubevirt-ovn agent writes its Port_Group and ACLs where its members are"
		}
		if len(st.Notes) > 0 {
			ready.Message += "; not applied: " + strings.Join(st.Notes, "; ")
		}
		own := ofKind(st.Errs, translator.ObjSecurityGroup, u.GetName())
		switch {
		case len(own) > 0:
			ready.Status, ready.Reason, ready.Message = metav1.ConditionFalse, reasonOf(own[0]), joinErrs(own)
		case len(st.Errs) > 0:
			// A rule that does not read fails the group.
			ready.Status, ready.Reason, ready.Message = metav1.ConditionFalse, reasonOf(st.Errs[0]), joinErrs(st.Errs)
		case st.Err != nil:
			ready.Status, ready.Reason, ready.Message = metav1.ConditionFalse, reasonOf(st.Err), "its rows are not committed: "+st.Err.Error()
		case len(st.RuleErrors) > 0:
			ready.Status, ready.Reason, ready.Message = metav1.ConditionFalse, "InvalidRule",
				"rules left as they are: "+joinErrs(st.RuleErrors)
		}
		gen := st.Generation
		if len(groups) > 1 {
			gen = 0 // the plan's is the first group's: each says its own
		}
		if err := s.writeReady(ctx, SecurityGroupGVR, u, gen, ready, nil); err != nil {
			errs = append(errs, fmt.Errorf("SecurityGroup %s: %w", u.GetName(), err))
		}
	}
	if s.sgRules == nil {
		return errors.Join(errs...)
	}
	for _, u := range byIndex(s.sgRules.GetIndexer().ByIndex(byGroupID, st.ID)) {
		ready := metav1.Condition{Type: ConditionReady, Status: metav1.ConditionTrue, Reason: "Committed",
			Message: "its ACL is committed to the OVN Northbound database"}
		if s.allocator {
			ready.Reason, ready.Message = "Planned", "planned; each zone's kubevirt-ovn agent writes its ACL where its group has members"
		}
		own := append(ofKind(st.Errs, translator.ObjSGRule, u.GetName()), ofKind(st.RuleErrors, translator.ObjSGRule, u.GetName())...)
		switch {
		case len(own) > 0:
			ready.Status, ready.Reason, ready.Message = metav1.ConditionFalse, reasonOf(own[0]), joinErrs(own)
		case len(groups) == 0:
			ready.Status, ready.Reason, ready.Message = metav1.ConditionFalse, "GroupNotDeclared",
				"no SecurityGroup has spec.id "+st.ID+": the rule plans nothing"
		case len(st.Errs) > 0:
			msg := joinErrs(groupErrs)
			if len(groupErrs) == 0 {
				msg = joinErrs(st.Errs)
			}
			ready.Status, ready.Reason, ready.Message = metav1.ConditionFalse, "GroupNotReady",
				"its SecurityGroup "+st.ID+" is left as it is: "+msg
		case st.Err != nil:
			ready.Status, ready.Reason, ready.Message = metav1.ConditionFalse, reasonOf(st.Err), "its group's rows are not committed: "+st.Err.Error()
		}
		if err := s.writeReady(ctx, SecurityGroupRuleGVR, u, 0, ready, nil); err != nil {
			errs = append(errs, fmt.Errorf("SecurityGroupRule %s: %w", u.GetName(), err))
		}
	}
	return errors.Join(errs...)
}

// ofKind are the input errors among errs about object name of kind ("":
// any of that kind).
func ofKind(errs []error, kind, name string) []error {
	var out []error
	for _, err := range errs {
		var in *translator.InputError
		if errors.As(err, &in) && in.Kind == kind && (name == "" || in.Object == name) {
			out = append(out, err)
		}
	}
	return out
}

func joinErrs(errs []error) string {
	msgs := make([]string, len(errs))
	for i, err := range errs {
		msgs[i] = err.Error()
	}
	return strings.Join(msgs, "; ")
}

// byIndex are the objects of an indexer's answer.
func byIndex(objs []any, _ error) []*unstructured.Unstructured {
	out := make([]*unstructured.Unstructured, 0, len(objs))
	for _, obj := range objs {
		if u, ok := asUnstructured(obj); ok {
			out = append(out, u)
		}
	}
	return out
}

// writeReady writes u's status through gvr's status subresource when it
// changed: the observed generation (gen, or u's when 0), the Ready
// condition and fields. When u stops being Ready, or is not for a new
// reason, it records a Warning event.
func (s *Source) writeReady(ctx context.Context, gvr schema.GroupVersionResource, u *unstructured.Unstructured, gen int64, ready metav1.Condition, fields map[string]any) error {
	if gen == 0 {
		gen = u.GetGeneration()
	}
	ready.ObservedGeneration = gen
	old, _, _ := unstructured.NestedMap(u.Object, "status")
	conds := conditionsOf(u)
	meta.SetStatusCondition(&conds, ready)
	status, err := statusOf(gen, conds)
	if err != nil {
		return err
	}
	maps.Copy(status, fields)
	if equality.Semantic.DeepEqual(old, status) {
		return nil
	}
	u = u.DeepCopy()
	u.Object["status"] = status
	if _, err := s.client.Resource(gvr).UpdateStatus(ctx, u, metav1.UpdateOptions{}); err != nil {
		return ignoreGone(err)
	}
	if oldMsg, _ := readyOf(old); s.recorder != nil && ready.Status != metav1.ConditionTrue && oldMsg != ready.Message {
		s.recorder.Event(u, corev1.EventTypeWarning, ready.Reason, ready.Message)
	}
	return nil
}
