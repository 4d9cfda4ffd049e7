package controller

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"

	tr "github.com/kubevirt-ovn/kubevirt-ovn/translator"
)

// A load balancer planned is not Ready when its router's rows failed to
// commit; its own error stays as it is.
func TestLoadBalancerStatusAfterCommit(t *testing.T) {
	bad := &tr.InputError{Kind: tr.ObjLoadBalancer, Object: "lb-b", Field: "spec.vip", Msg: "is required"}
	planned := []tr.LoadBalancerStatus{{Name: "lb-a", Ready: true, Router: "r1", FloatingIPs: []string{"172.16.0.60"}},
		{Name: "lb-b", Router: "r1", Reason: bad.Error(), Err: bad}}
	assert.Equal(t, planned, loadBalancerStatus(planned, nil))
	failed := errors.New("transaction refused")
	got := loadBalancerStatus(planned, failed)
	assert.False(t, got[0].Ready)
	assert.Equal(t, "its router's rows are not committed: transaction refused", got[0].Reason)
	assert.Equal(t, failed, got[0].Err)
	assert.Equal(t, planned[1], got[1])
	assert.True(t, planned[0].Ready, "the plan's statuses are not changed")
}

// A security group's status: its own errors (then a failed sync is
// theirs, not a commit's), its rules' errors and notes, or a failed
// commit.
func TestSecurityGroupStatusOfPlan(t *testing.T) {
	unit := tr.Unit{Kind: tr.KindSecurityGroup, Name: "sg-web"}
	rule := &tr.InputError{Kind: tr.ObjSGRule, Object: "sgr-1", Field: "spec.direction", Msg: `"up" is neither ingress nor egress`}
	up := tr.UnitPlan{Unit: unit, Generation: 3, InInput: true,
		SecurityGroup: &tr.SecurityGroupPlan{ID: "sg-web", RuleErrors: []error{rule}, Notes: []string{"IPv6"}}}
	failed := errors.New("transaction refused")
	assert.Equal(t, SecurityGroupStatus{ID: "sg-web", Generation: 3, RuleErrors: []error{rule}, Notes: []string{"IPv6"}, Err: failed},
		securityGroupStatus(up, failed))

	dup := &tr.InputError{Kind: tr.ObjSecurityGroup, Object: "sg-web", Field: "spec.id", Msg: "is declared twice"}
	invalid := tr.UnitPlan{Unit: unit, Generation: 3, InInput: true, Errs: []error{dup}}
	assert.Equal(t, SecurityGroupStatus{ID: "sg-web", Generation: 3, Errs: []error{dup}}, securityGroupStatus(invalid, dup))
}
