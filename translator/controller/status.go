package controller

import (
	"errors"
	"slices"
	"sync"

	"github.com/kubevirt-ovn/kubevirt-ovn/translator"
)

// statusOf is the status router plan up gives, err being why the router
// is not Ready when its input is valid (a failed transaction). The
// controller and the allocator both report it; what only the controller
// knows (Active, Realized) it adds.
func statusOf(up translator.UnitPlan, err error) RouterStatus {
	st := RouterStatus{Generation: up.Generation, Err: err}
	if len(up.Errs) > 0 {
		st.Err = errors.Join(up.Errs...)
		return st
	}
	if rp := up.Router; rp != nil {
		st.SNATIP = rp.SNATIP
		if rp.Gateway != nil {
			st.Gateway = slices.Clone(rp.Gateway.Chassis)
		}
	}
	return st
}

// floatingIPStatus is the floating IP status a router's plan gives, once
// its reconcile is done: a floating IP planned is not Ready when the
// router's rows failed to commit (err), and is answered on the chassis
// the gateway port is bound to (active) when that is known.
func floatingIPStatus(planned []translator.FloatingIPStatus, active string, err error) []translator.FloatingIPStatus {
	out := slices.Clone(planned)
	for i := range out {
		if out[i].Ready && err != nil {
			out[i].Ready, out[i].Reason = false, "its router's rows are not committed: "+err.Error()
		}
		if out[i].Ready && active != "" {
			out[i].Gateway = active
		}
	}
	return out
}

// loadBalancerStatus is the load balancer status a router's plan gives,
// once its reconcile is done: one planned is not Ready when the router's
// rows failed to commit (err).
func loadBalancerStatus(planned []translator.LoadBalancerStatus, err error) []translator.LoadBalancerStatus {
	out := slices.Clone(planned)
	for i := range out {
		if out[i].Ready && err != nil {
			out[i].Ready, out[i].Reason, out[i].Err = false, "its router's rows are not committed: "+err.Error(), err
		}
	}
	return out
}

// securityGroupStatus is the status security group plan up gives, err
// being why its rows are not committed.
func securityGroupStatus(up translator.UnitPlan, err error) SecurityGroupStatus {
	st := SecurityGroupStatus{ID: up.Unit.Name, Generation: up.Generation, Errs: up.Errs}
	if len(up.Errs) == 0 {
		st.Err = err
	}
	if sp := up.SecurityGroup; sp != nil {
		st.RuleErrors, st.Notes = sp.RuleErrors, sp.Notes
	}
	return st
}

// primaries are the primary gateways last reported per router, to say
// when one changed (a status's GatewayChanged, worth an Event).
type primaries struct {
	mu sync.Mutex
	by map[string]string
}

// note records st's primary and sets st.GatewayChanged when the router had
// another one.
func (p *primaries) note(router string, st *RouterStatus) {
	if len(st.Gateway) == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.by == nil {
		p.by = map[string]string{}
	}
	prev, ok := p.by[router]
	st.GatewayChanged = ok && prev != st.Gateway[0]
	p.by[router] = st.Gateway[0]
}

// forget drops a router no longer in the input.
func (p *primaries) forget(router string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.by, router)
}
