package main

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/kubevirt-ovn/kubevirt-ovn/translator/gatewaystate"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/kube"
)

// The values of Ready and Realized.
const (
	condTrue    = "True"
	condFalse   = "False"
	condUnknown = "Unknown"
)

// nbState is the state of an object whose rows the NB holds, read from
// the NB alone: Ready (its rows are committed), Realized when the chassis
// have every commit (hv_cfg has reached nb_cfg), Unknown before any
// ovn-northd ran.
func nbState(g *gatewaystate.State) objectState {
	st := objectState{Ready: condTrue, Realized: condTrue}
	switch {
	case g.NBCfg < 0:
		st.Realized = condUnknown
	case g.HvCfg < g.NBCfg:
		st.Realized = condFalse
	}
	return st
}

// chassisOf are the distinct, non-empty chassis of cs, sorted.
func chassisOf(cs ...string) []string {
	out := slices.DeleteFunc(slices.Clone(cs), func(c string) bool { return c == "" })
	slices.Sort(out)
	return slices.Compact(out)
}

// addObjects adds the routers without a gateway, the floating IPs, the
// security groups and the load balancers whose rows the NB holds.
func (r *statusReport) addObjects(g *gatewaystate.State, nb objectState) {
	for _, name := range g.RouterNames {
		if !slices.ContainsFunc(r.Routers, func(rs routerStatus) bool { return rs.Name == name }) {
			r.Routers = append(r.Routers, routerStatus{Name: name, objectState: nb, SNATIP: g.SNATIP[name]})
		}
	}
	slices.SortFunc(r.Routers, func(a, b routerStatus) int { return strings.Compare(a.Name, b.Name) })
	for _, f := range g.FloatingIPs {
		r.FloatingIPs = append(r.FloatingIPs, fipStatus{ID: f.ID, objectState: nb, Address: f.Address, FixedIP: f.FixedIP,
			Router: f.Router, Port: f.Port, LoadBalancer: f.LoadBalancer, Chassis: chassisOf(g.Active[f.Router], g.Bound[f.Port])})
	}
	for _, sg := range g.SecurityGroups {
		var cs []string
		for _, p := range sg.Ports {
			cs = append(cs, g.Bound[p])
		}
		r.SecurityGroups = append(r.SecurityGroups, sgStatus{ID: sg.ID, objectState: nb, Members: sg.Ports, Rules: sg.Rules, Chassis: chassisOf(cs...)})
	}
	for _, lb := range g.LoadBalancers {
		cs := []string{g.Active[lb.Router]}
		for _, p := range lb.MemberPorts {
			cs = append(cs, g.Bound[p])
		}
		r.LoadBalancers = append(r.LoadBalancers, lbStatus{Name: lb.Name, objectState: nb, Router: lb.Router, VIPs: lb.VIPs,
			Members: lb.Members, Offline: lb.Offline, Chassis: chassisOf(cs...)})
	}
}

// fromCluster is an object's state as its conditions say: Ready and
// Realized as written (Unknown when never written), the error when not
// Ready. The NB's Realized stands for a kind without a Realized
// condition.
func fromCluster(st kube.ObjectState, nb objectState) objectState {
	out := objectState{Ready: cmp.Or(st.Ready, condUnknown), Realized: cmp.Or(st.Realized, nb.Realized)}
	if st.Ready != condTrue {
		out.Error = st.Message
	}
	if st.Ready == "" {
		out.Realized = condUnknown
		out.Error = "kubevirt-ovn has not reconciled it yet (no Ready condition)"
	}
	if out.Ready != condTrue && st.Realized == "" {
		out.Realized = condFalse
	}
	return out
}

// notInCluster is the state of an object whose rows the NB holds but the
// cluster does not have.
func notInCluster(kind, name string) objectState {
	return objectState{Ready: condUnknown, Realized: condUnknown,
		Error: fmt.Sprintf("no %s %s in the cluster: its rows are another source's, or wait for kubevirt-ovn to delete them", kind, name)}
}

// merge sets each object's state from the cluster's objects k, and adds
// the objects the NB has no rows of (those kept out by an error).
func (r *statusReport) merge(k *kube.ObjectStates) {
	mergeKind(&r.Routers, k.Routers, "VirtualRouter",
		func(s *routerStatus) string { return s.Name }, func(o kube.ObjectState) string { return o.Name },
		func(s *routerStatus) *objectState { return &s.objectState },
		func(o kube.ObjectState) routerStatus { return routerStatus{Name: o.Name} })
	mergeKind(&r.FloatingIPs, k.FloatingIPs, "FloatingIp",
		func(s *fipStatus) string { return s.ID }, func(o kube.ObjectState) string { return o.ID },
		func(s *fipStatus) *objectState { return &s.objectState },
		func(o kube.ObjectState) fipStatus { return fipStatus{ID: o.ID} })
	mergeKind(&r.SecurityGroups, k.SecurityGroups, "SecurityGroup",
		func(s *sgStatus) string { return s.ID }, func(o kube.ObjectState) string { return o.ID },
		func(s *sgStatus) *objectState { return &s.objectState },
		func(o kube.ObjectState) sgStatus { return sgStatus{ID: o.ID} })
	mergeKind(&r.LoadBalancers, k.LoadBalancers, "LoadBalancer",
		func(s *lbStatus) string { return s.Name }, func(o kube.ObjectState) string { return o.Name },
		func(s *lbStatus) *objectState { return &s.objectState },
		func(o kube.ObjectState) lbStatus { return lbStatus{Name: o.Name} })
	for i := range r.FloatingIPs {
		r.FloatingIPs[i].Name = nameOf(k.FloatingIPs, r.FloatingIPs[i].ID)
	}
	for i := range r.SecurityGroups {
		r.SecurityGroups[i].Name = nameOf(k.SecurityGroups, r.SecurityGroups[i].ID)
	}
}

// nameOf is the metadata.name of the object of objs with spec.id id.
func nameOf(objs []kube.ObjectState, id string) string {
	for _, o := range objs {
		if o.ID == id && o.Name != id {
			return o.Name
		}
	}
	return ""
}

// mergeKind merges the cluster's objects of one kind into the report's:
// matched by key, the cluster's conditions replace the NB's state; an
// object only in the cluster is added, one only in the NB says so.
func mergeKind[S any](rows *[]S, objs []kube.ObjectState, kind string, key func(*S) string, objKey func(kube.ObjectState) string,
	state func(*S) *objectState, add func(kube.ObjectState) S) {
	seen := map[string]bool{}
	for _, o := range objs {
		k := objKey(o)
		seen[k] = true
		i := slices.IndexFunc(*rows, func(s S) bool { return key(&s) == k })
		if i < 0 {
			*rows = append(*rows, add(o))
			i = len(*rows) - 1
		}
		st := state(&(*rows)[i])
		*st = fromCluster(o, *st)
	}
	for i := range *rows {
		if k := key(&(*rows)[i]); !seen[k] {
			*state(&(*rows)[i]) = notInCluster(kind, k)
		}
	}
	slices.SortFunc(*rows, func(a, b S) int { return strings.Compare(key(&a), key(&b)) })
}

// dash is s on one line (an error of several lines joined by "; "), or
// "-" when empty.
func dash(s string) string {
	if s == "" {
		return "-"
	}
	return strings.ReplaceAll(strings.TrimSpace(s), "\n", "; ")
}

// writeObjects prints the floating IPs, security groups and load
// balancers, each kind that has any.
func (r *statusReport) writeObjects(w io.Writer) {
	if len(r.FloatingIPs) > 0 {
		fmt.Fprintln(w)
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "FLOATING IP\tREADY\tREALIZED\tADDRESS\tFIXED IP\tROUTER\tBOUND TO\tCHASSIS\tERROR\t")
		for _, f := range r.FloatingIPs {
			bound := f.Port
			if f.LoadBalancer != "" {
				bound = "load balancer " + f.LoadBalancer
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", f.ID, f.Ready, f.Realized, dash(f.Address), dash(f.FixedIP),
				dash(f.Router), dash(bound), dash(strings.Join(f.Chassis, ",")), dash(f.Error))
		}
		tw.Flush()
	}
	if len(r.SecurityGroups) > 0 {
		fmt.Fprintln(w)
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "SECURITY GROUP\tREADY\tREALIZED\tMEMBERS\tRULES\tCHASSIS\tERROR\t")
		for _, g := range r.SecurityGroups {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\t%s\t\n", g.ID, g.Ready, g.Realized, len(g.Members), g.Rules, dash(strings.Join(g.Chassis, ",")), dash(g.Error))
		}
		tw.Flush()
	}
	if len(r.LoadBalancers) > 0 {
		fmt.Fprintln(w)
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "LOAD BALANCER\tREADY\tREALIZED\tVIPS\tMEMBERS\tROUTER\tCHASSIS\tERROR\t")
		for _, lb := range r.LoadBalancers {
			members := strings.Join(lb.Members, ",")
			if len(lb.Offline) > 0 {
				members += " (offline: " + strings.Join(lb.Offline, ",") + ")"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", lb.Name, lb.Ready, lb.Realized, dash(strings.Join(lb.VIPs, ",")), dash(members),
				dash(lb.Router), dash(strings.Join(lb.Chassis, ",")), dash(lb.Error))
		}
		tw.Flush()
	}
}
