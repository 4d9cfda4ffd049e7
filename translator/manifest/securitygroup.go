package manifest

import (
	"encoding/json"
	"fmt"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubevirt-ovn/kubevirt-ovn/translator"
)

// Security group kinds (kubevirt.io/v1, plurals securitygroups and
// securitygrouprules, cluster-scoped) and the VM annotation binding a VM's
// ports to groups.
const (
	KindSecurityGroup     = "SecurityGroup"
	KindSecurityGroupRule = "SecurityGroupRule"
	// SecurityGroupsAnnotation is ONOS kubevirt-networking's annotation of
	// a VM's template (KubeVirt copies it onto the VMI): a JSON list of
	// security group spec.ids every port of the VM joins.
	SecurityGroupsAnnotation = "securityGroups"
)

// SecurityGroup is the kubevirt.io/v1 SecurityGroup object.
type SecurityGroup struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              SecurityGroupSpec `json:"spec"`
}

// SecurityGroupSpec is the group as ONOS accepted it: id and name
// required; rules optional (ONOS applied them only at creation; here they
// are as mutable as SecurityGroupRule objects).
type SecurityGroupSpec struct {
	ID          string                  `json:"id,omitempty"`
	Name        string                  `json:"name,omitempty"`
	Description string                  `json:"description,omitempty"`
	Rules       []SecurityGroupRuleSpec `json:"rules,omitempty"`
}

// SecurityGroupRule is the kubevirt.io/v1 SecurityGroupRule object.
type SecurityGroupRule struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              SecurityGroupRuleSpec `json:"spec"`
}

// SecurityGroupRuleSpec is a rule as ONOS accepted it: protocol by name or
// number, ports as numbers (or strings holding one).
type SecurityGroupRuleSpec struct {
	ID              string     `json:"id,omitempty"`
	SecurityGroupID string     `json:"securityGroupId,omitempty"`
	Direction       string     `json:"direction,omitempty"`
	EtherType       string     `json:"etherType,omitempty"`
	Protocol        flexString `json:"protocol,omitempty"`
	PortRangeMin    flexString `json:"portRangeMin,omitempty"`
	PortRangeMax    flexString `json:"portRangeMax,omitempty"`
	RemoteIPPrefix  string     `json:"remoteIpPrefix,omitempty"`
	RemoteGroupID   string     `json:"remoteGroupId,omitempty"`
}

func (s *Set) addSecurityGroup(where string, raw json.RawMessage) error {
	var g SecurityGroup
	if err := json.Unmarshal(raw, &g); err != nil {
		return decodeErr(where, KindSecurityGroup, g.Name, err)
	}
	sg, err := SecurityGroupFrom(&g)
	if err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	s.Objects.SecurityGroups = append(s.Objects.SecurityGroups, sg)
	return nil
}

func (s *Set) addSecurityGroupRule(where string, raw json.RawMessage) error {
	var r SecurityGroupRule
	if err := json.Unmarshal(raw, &r); err != nil {
		return decodeErr(where, KindSecurityGroupRule, r.Name, err)
	}
	rule, err := SecurityGroupRuleFrom(&r)
	if err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	s.Objects.SecurityGroupRules = append(s.Objects.SecurityGroupRules, rule)
	return nil
}

// SecurityGroupFrom converts a SecurityGroup object to the translator's
// input. metadata.name and spec.id are required: spec.id names the
// group's unit. The rules' fields are checked when planning.
func SecurityGroupFrom(obj *SecurityGroup) (translator.SecurityGroup, error) {
	switch {
	case obj.Name == "":
		return translator.SecurityGroup{}, &translator.InputError{Kind: translator.ObjSecurityGroup, Object: "(unnamed)", Field: "metadata.name", Msg: "is empty"}
	case obj.Spec.ID == "":
		return translator.SecurityGroup{}, &translator.InputError{Kind: translator.ObjSecurityGroup, Object: obj.Name, Field: "spec.id", Msg: "is required"}
	}
	g := translator.SecurityGroup{
		Name:        obj.Name,
		ID:          obj.Spec.ID,
		DisplayName: obj.Spec.Name,
		Description: obj.Spec.Description,
		Generation:  obj.Generation,
	}
	for i := range obj.Spec.Rules {
		r, err := ruleFrom(&obj.Spec.Rules[i])
		if err != nil {
			return translator.SecurityGroup{}, &translator.InputError{Kind: translator.ObjSecurityGroup, Object: obj.Name,
				Field: fmt.Sprintf("spec.rules[%d].%s", i, err.Field), Msg: err.Msg}
		}
		if r.SecurityGroupID == "" {
			r.SecurityGroupID = g.ID
		}
		g.Rules = append(g.Rules, r)
	}
	return g, nil
}

// SecurityGroupRuleFrom converts a SecurityGroupRule object to the
// translator's input. metadata.name and spec.securityGroupId are
// required: the latter names the rule's unit.
func SecurityGroupRuleFrom(obj *SecurityGroupRule) (translator.SecurityGroupRule, error) {
	switch {
	case obj.Name == "":
		return translator.SecurityGroupRule{}, &translator.InputError{Kind: translator.ObjSGRule, Object: "(unnamed)", Field: "metadata.name", Msg: "is empty"}
	case obj.Spec.SecurityGroupID == "":
		return translator.SecurityGroupRule{}, &translator.InputError{Kind: translator.ObjSGRule, Object: obj.Name, Field: "spec.securityGroupId", Msg: "is required"}
	}
	r, err := ruleFrom(&obj.Spec)
	if err != nil {
		err.Kind, err.Object, err.Field = translator.ObjSGRule, obj.Name, "spec."+err.Field
		return translator.SecurityGroupRule{}, err
	}
	r.Name = obj.Name
	return r, nil
}

// ruleFrom converts a rule spec; its error's Field is relative to the spec.
func ruleFrom(spec *SecurityGroupRuleSpec) (translator.SecurityGroupRule, *translator.InputError) {
	r := translator.SecurityGroupRule{
		ID:              spec.ID,
		SecurityGroupID: spec.SecurityGroupID,
		Direction:       spec.Direction,
		EtherType:       spec.EtherType,
		Protocol:        string(spec.Protocol),
		RemoteIPPrefix:  spec.RemoteIPPrefix,
		RemoteGroupID:   spec.RemoteGroupID,
	}
	var err *translator.InputError
	if r.PortRangeMin, err = portOf("portRangeMin", spec.PortRangeMin); err != nil {
		return r, err
	}
	if r.PortRangeMax, err = portOf("portRangeMax", spec.PortRangeMax); err != nil {
		return r, err
	}
	return r, nil
}

// portOf is a port range bound: nil when absent.
func portOf(field string, v flexString) (*int, *translator.InputError) {
	if v == "" {
		return nil, nil
	}
	n, err := strconv.Atoi(string(v))
	if err != nil {
		return nil, &translator.InputError{Field: field, Msg: fmt.Sprintf("%q is not a number", string(v))}
	}
	return &n, nil
}

// securityGroupsOf reads the securityGroups annotation of a VMI: the
// VMInterface.SecurityGroups of its ports, and a note when it is not a
// JSON list of strings (its ports then join no group).
func securityGroupsOf(annotations map[string]string, ns, name string) (string, string) {
	text, ok := annotations[SecurityGroupsAnnotation]
	if !ok || text == "" {
		return "", ""
	}
	groups, err := ParseSecurityGroups(text)
	if err != nil {
		return "", fmt.Sprintf("%s %s/%s: metadata.annotations[%s] is not a JSON list of security group ids, ignored: %v", KindVMI, ns, name, SecurityGroupsAnnotation, err)
	}
	return groups, ""
}

// ParseSecurityGroups reads a securityGroups annotation's value (a JSON
// list of security group spec.ids) as VMInterface.SecurityGroups.
func ParseSecurityGroups(text string) (string, error) {
	if text == "" {
		return "", nil
	}
	var ids []string
	if err := json.Unmarshal([]byte(text), &ids); err != nil {
		return "", err
	}
	return translator.JoinGroups(ids), nil
}
