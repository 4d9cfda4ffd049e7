package translator

import (
	"fmt"
	"slices"
	"strings"
)

// routerlessLoadBalancers is the status of the load balancers on valid
// network n when no router has n as an internal network: no router's unit
// reports them, so the network's does. A valid one is Ready (its switch's
// rows make the VIP work from inside the network) and says that it is
// reachable from there only; an invalid one has its own error. A router
// declaring n re-plans n (affectedByRouterSiblings), so the status moves
// to the router's unit as the router comes and back as it goes.
func (in *Input) routerlessLoadBalancers(n *network) []LoadBalancerStatus {
	if len(in.internalClaims[n.Name]) > 0 {
		return nil
	}
	var out []LoadBalancerStatus
	for _, d := range in.lbDecls(n.Name) {
		st := LoadBalancerStatus{Name: d.Name, Generation: d.Generation}
		if lb, err := in.checkLoadBalancer(d, n); err != nil {
			st.Reason, st.Err = err.Error(), err
		} else {
			st.Ready = true
			st.Reason = lb.reason(fmt.Sprintf("no router has network %s as an internal network: its VIP is reachable from inside the network only", n.Name))
		}
		out = append(out, st)
	}
	slices.SortStableFunc(out, func(a, b LoadBalancerStatus) int { return strings.Compare(a.Name, b.Name) })
	return out
}
