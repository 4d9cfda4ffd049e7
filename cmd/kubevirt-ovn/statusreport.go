package main

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"

	"sigs.k8s.io/yaml"

	"github.com/kubevirt-ovn/kubevirt-ovn/translator"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/gatewaystate"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/kube"
)

// statusReport is what `kubevirt-ovn status` prints: as text, or as JSON
// or YAML for tools (-o), the same fields either way.
type statusReport struct {
	// OVNRelease is ovn-northd's release ("" unknown).
	OVNRelease string         `json:"ovnRelease,omitempty"`
	Routers    []routerStatus `json:"routers"`
	// FloatingIPs, SecurityGroups and LoadBalancers are the objects whose
	// rows the NB holds and, with --kubeconfig, those of the cluster.
	FloatingIPs    []fipStatus `json:"floatingIPs,omitempty"`
	SecurityGroups []sgStatus  `json:"securityGroups,omitempty"`
	LoadBalancers  []lbStatus  `json:"loadBalancers,omitempty"`
	// GatewayChassis are the SB's gateway chassis with their loads.
	GatewayChassis []chassisStatus `json:"gatewayChassis"`
	// Migrations are the VM ports bound to two chassis now.
	Migrations []migrationStatus `json:"migrations,omitempty"`
	// MigrationRisk is set on an OVN whose ovn-controller may miss a
	// migration's dual binding (translator.MonitorConditionBug).
	MigrationRisk *migrationRisk `json:"migrationRisk,omitempty"`
}

// objectState is an object's Ready and Realized (True, False or
// Unknown) and the error that keeps it out. Without the cluster's
// objects (--kubeconfig) Ready is True for an object whose rows the NB
// holds and Realized says whether the chassis have every commit
// (NB_Global hv_cfg against nb_cfg); with them, they are the conditions
// kubevirt-ovn's controller wrote.
type objectState struct {
	Ready    string `json:"ready"`
	Realized string `json:"realized"`
	Error    string `json:"error,omitempty"`
}

type routerStatus struct {
	Name string `json:"name"`
	objectState
	SNATIP string `json:"snatIP,omitempty"`
	// Primary is the first of its gateway chassis, Pinned when its
	// spec.gateway names it; Failover the others, in order.
	Primary  string   `json:"primary"`
	Pinned   bool     `json:"pinned,omitempty"`
	Failover []string `json:"failover,omitempty"`
	// Active is the chassis its gateway port is bound to now ("": none),
	// FailedOver when that is not the primary.
	Active     string `json:"active,omitempty"`
	FailedOver bool   `json:"failedOver,omitempty"`
	// UpstreamRoutes are the routes the upstream router needs for its
	// routed internal IPv6 (no NAT66).
	UpstreamRoutes []upstreamRoute `json:"upstreamRoutes,omitempty"`
}

// fipStatus is a floating IP: its address, the fixed IP it maps, the
// router, the VM port or load balancer it is bound to, and the chassis
// involved (its router's active gateway, its VM's).
type fipStatus struct {
	ID   string `json:"id"`
	Name string `json:"name,omitempty"`
	objectState
	Address      string   `json:"address,omitempty"`
	FixedIP      string   `json:"fixedIP,omitempty"`
	Router       string   `json:"router,omitempty"`
	Port         string   `json:"port,omitempty"`
	LoadBalancer string   `json:"loadBalancer,omitempty"`
	Chassis      []string `json:"chassis,omitempty"`
}

// sgStatus is a security group: its member ports, its rules, and the
// chassis its members are bound to.
type sgStatus struct {
	ID   string `json:"id"`
	Name string `json:"name,omitempty"`
	objectState
	Members []string `json:"members,omitempty"`
	Rules   int      `json:"rules"`
	Chassis []string `json:"chassis,omitempty"`
}

// lbStatus is a load balancer: its VIPs, members (those failing their
// health check too), router, and the chassis involved (its router's
// active gateway, its members').
type lbStatus struct {
	Name string `json:"name"`
	objectState
	Router  string   `json:"router,omitempty"`
	VIPs    []string `json:"vips,omitempty"`
	Members []string `json:"members,omitempty"`
	Offline []string `json:"offline,omitempty"`
	Chassis []string `json:"chassis,omitempty"`
}

type upstreamRoute struct {
	Prefix string `json:"prefix"`
	Via    string `json:"via"`
}

type chassisStatus struct {
	Name string `json:"name"`
	// Primaries and Active count the routers whose order puts the
	// chassis first and those whose gateway port is bound to it now.
	Primaries int      `json:"primaries"`
	Active    int      `json:"active"`
	Physnets  []string `json:"physicalNetworks,omitempty"`
}

type migrationStatus struct {
	Port   string `json:"port"`
	VMI    string `json:"vmi"`
	Source string `json:"source"`
	Target string `json:"target"`
	// BlockedUntilRARP: the target receives nothing until the VM's RARP
	// there (activation-strategy=rarp); Activated are the chassis the SB
	// says the port was activated on.
	BlockedUntilRARP bool     `json:"blockedUntilRARP"`
	Activated        []string `json:"activated,omitempty"`
}

type migrationRisk struct {
	FixedIn string `json:"fixedIn"`
	// Chassis are those not monitoring all of the SB
	// (ovn-monitor-all=true), exposed to it.
	Chassis []string `json:"chassis"`
}

// newStatusReport is the report of state g and, when not nil, of the
// cluster's objects k.
func newStatusReport(g *gatewaystate.State, k *kube.ObjectStates) *statusReport {
	r := &statusReport{OVNRelease: g.Release, Routers: []routerStatus{}, GatewayChassis: []chassisStatus{}}
	nb := nbState(g)
	for _, a := range g.Routers {
		rs := routerStatus{Name: a.Router, objectState: nb, SNATIP: g.SNATIP[a.Router], Primary: a.Order[0], Pinned: a.Pinned,
			Failover: slices.Clone(a.Order[1:]), Active: g.Active[a.Router]}
		rs.FailedOver = rs.Active != "" && rs.Active != rs.Primary
		rs.UpstreamRoutes = upstreamRoutes(g, a.Router)
		r.Routers = append(r.Routers, rs)
	}
	// A router with routed IPv6 but no gateway order yet still needs its
	// upstream routes said.
	for _, name := range slices.Sorted(maps.Keys(g.Upstream)) {
		if !slices.ContainsFunc(r.Routers, func(rs routerStatus) bool { return rs.Name == name }) {
			r.Routers = append(r.Routers, routerStatus{Name: name, objectState: nb, SNATIP: g.SNATIP[name], UpstreamRoutes: upstreamRoutes(g, name)})
		}
	}
	for _, c := range g.Loads() {
		r.GatewayChassis = append(r.GatewayChassis, chassisStatus{Name: c.Name, Primaries: c.Primaries, Active: c.Active, Physnets: c.Physnets})
	}
	for _, m := range g.Migrations {
		r.Migrations = append(r.Migrations, migrationStatus{Port: m.Port, VMI: m.VMI, Source: m.Source, Target: m.Target, BlockedUntilRARP: m.Blocked, Activated: m.Activated})
	}
	r.addObjects(g, nb)
	if k != nil {
		r.merge(k)
	}
	if bug, fixed := translator.MonitorConditionBug(g.Release); bug {
		var exposed []string
		for _, c := range g.Chassis {
			if !c.MonitorAll {
				exposed = append(exposed, c.Name)
			}
		}
		if len(exposed) > 0 {
			r.MigrationRisk = &migrationRisk{FixedIn: fixed, Chassis: exposed}
		}
	}
	return r
}

// upstreamRoutes are the routes the upstream router needs for router's
// routed internal IPv6, none when it has none.
func upstreamRoutes(g *gatewaystate.State, router string) []upstreamRoute {
	var out []upstreamRoute
	u := g.Upstream[router]
	for _, p := range u.Prefixes {
		out = append(out, upstreamRoute{Prefix: p, Via: u.Via})
	}
	return out
}

// statusOutputs are the values of status -o.
var statusOutputs = []string{"text", "json", "yaml"}

// write prints r to w as output says (one of statusOutputs).
func (r *statusReport) write(w io.Writer, output string) error {
	switch output {
	case "json":
		b, err := json.MarshalIndent(r, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	case "yaml":
		b, err := yaml.Marshal(r)
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	}
	r.writeText(w)
	return nil
}

// writeText is the report as a person reads it.
func (r *statusReport) writeText(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ROUTER\tREADY\tREALIZED\tSNAT IP\tPRIMARY\tFAILOVER\tACTIVE\tERROR\t")
	for _, rs := range r.Routers {
		primary := dash(rs.Primary)
		if rs.Pinned {
			primary += " (spec.gateway)"
		}
		active := rs.Active
		switch {
		case rs.Primary == "":
			active = "-"
		case active == "":
			active = "- (not bound)"
		case rs.FailedOver:
			active += " (failed over)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", rs.Name, rs.Ready, rs.Realized, dash(rs.SNATIP), primary,
			dash(strings.Join(rs.Failover, ",")), active, dash(rs.Error))
	}
	tw.Flush()
	routed := slices.DeleteFunc(slices.Clone(r.Routers), func(rs routerStatus) bool { return len(rs.UpstreamRoutes) == 0 })
	if len(routed) > 0 {
		slices.SortFunc(routed, func(a, b routerStatus) int { return strings.Compare(a.Name, b.Name) })
		fmt.Fprintln(w)
		fmt.Fprintln(w, "IPv6 routed (no NAT66): routes the upstream router needs:")
		for _, rs := range routed {
			for _, u := range rs.UpstreamRoutes {
				fmt.Fprintf(w, "  %-20s %s via %s\n", rs.Name, u.Prefix, u.Via)
			}
		}
	}
	r.writeObjects(w)
	if len(r.GatewayChassis) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(w, "routers per gateway chassis (primary / active):")
	}
	for _, c := range r.GatewayChassis {
		physnets := strings.Join(c.Physnets, ",")
		if physnets == "" {
			physnets = "no physical network"
		}
		fmt.Fprintf(w, "  %-20s %d / %d   maps %s\n", c.Name, c.Primaries, c.Active, physnets)
	}
	if len(r.Migrations) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(w, "VM ports on two chassis (live migrations):")
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  PORT\tVMI\tSOURCE\tTARGET\tON THE TARGET\tACTIVATED ON\t")
		for _, m := range r.Migrations {
			on := "receives (no activation strategy)"
			if m.BlockedUntilRARP {
				on = "blocked until the VM's RARP there"
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\t\n", m.Port, m.VMI, m.Source, m.Target, on, dash(strings.Join(m.Activated, ",")))
		}
		tw.Flush()
	}
	if k := r.MigrationRisk; k != nil {
		fmt.Fprintln(w)
		fmt.Fprintf(w, "OVN %s (ovn-northd): a live migration's target whose interface was plugged before its dual\n"+
			"binding may never see it, and the VM is unreachable until the migration completes (fixed in\n"+
			"%s). Set external_ids:ovn-monitor-all=true in the Open_vSwitch table of these chassis, or\n"+
			"upgrade OVN: %s\n", r.OVNRelease, k.FixedIn, strings.Join(k.Chassis, ", "))
	}
}
