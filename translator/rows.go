package translator

import (
	"github.com/ovn-kubernetes/libovsdb/model"

	"github.com/kubevirt-ovn/kubevirt-ovn/nbmodel"
)

// Row is one desired NB row of a unit: an nbmodel row without UUID and the
// rows it refers to, each named by its key (its name, for the tables that
// have one): for a row that lives in a parent's column (a port in its
// switch, a NAT in its router), that parent; and the rows its reference
// columns point at (a port's DHCP options, a root row several units
// share). Which table and column each is in, and how a key becomes a UUID,
// is the NB layer's registry's business (translator/nb).
type Row struct {
	Model model.Model
	// Parent is the parent row's key; "" for a root row.
	Parent string
	// Refs are the rows the reference columns of Model point at; a column
	// holding a set has one Ref per row.
	Refs []Ref `json:",omitempty"`
}

// Ref names the row a reference column of a Row points at.
type Ref struct {
	Column string
	Key    string
}

// Rows are the desired rows of network np, parents first.
func (np *NetworkPlan) Rows() []Row {
	rows := make([]Row, 0, 2+len(np.Ports)+len(np.LoadBalancers))
	sw := Row{Model: np.Switch}
	for _, lb := range np.LoadBalancers {
		sw.Refs = append(sw.Refs, Ref{Column: "load_balancer", Key: lb.Name})
	}
	rows = append(rows, sw)
	for _, lb := range np.LoadBalancers {
		rows = append(rows, Row{Model: lb})
	}
	for _, hc := range np.LBHealthChecks {
		rows = append(rows, Row{Model: hc.Row, Parent: hc.LoadBalancer})
	}
	if np.DHCP != nil {
		rows = append(rows, Row{Model: np.DHCP})
	}
	if np.DHCPv6 != nil {
		rows = append(rows, Row{Model: np.DHCPv6})
	}
	for _, p := range np.Ports {
		rows = append(rows, np.portRow(p))
	}
	if np.DefaultDeny != nil {
		rows = append(rows, np.DefaultDeny.Rows()...)
	}
	return rows
}

// portRow is the row of port p of np's switch: a VM port (a port of no
// type; not the localnet port, not a remote twin) refers to the network's
// DHCP options, by the network's name (their key), and to its DHCPv6
// options (DHCPv6Key).
func (np *NetworkPlan) portRow(p *nbmodel.LogicalSwitchPort) Row {
	r := Row{Model: p, Parent: np.Switch.Name}
	if p.Type != "" {
		return r
	}
	if np.DHCP != nil {
		r.Refs = append(r.Refs, Ref{Column: "dhcpv4_options", Key: np.Name})
	}
	if np.DHCPv6 != nil {
		r.Refs = append(r.Refs, Ref{Column: "dhcpv6_options", Key: DHCPv6Key(np.Name)})
	}
	return r
}

// Rows are the desired rows of router rp, parents first. The router's ports
// on network switches hang from those switches, which their networks own.
func (rp *RouterPlan) Rows() []Row {
	n := 1 + len(rp.Ports) + len(rp.GatewayChassis) + len(rp.NATs) + len(rp.Routes) + len(rp.SwitchPorts) + len(rp.MACBindings) + len(rp.Policies) + len(rp.LoadBalancers)
	rows := make([]Row, 0, n)
	lr := rp.Router.Name
	router := Row{Model: rp.Router}
	for _, lb := range rp.LoadBalancers {
		router.Refs = append(router.Refs, Ref{Column: "load_balancer", Key: lb.Name})
	}
	rows = append(rows, router)
	for _, lb := range rp.LoadBalancers {
		rows = append(rows, Row{Model: lb})
	}
	for _, hc := range rp.LBHealthChecks {
		rows = append(rows, Row{Model: hc.Row, Parent: hc.LoadBalancer})
	}
	for _, p := range rp.Ports {
		rows = append(rows, Row{Model: p, Parent: lr})
	}
	gwp := GatewayPortName(rp.Name)
	for _, g := range rp.GatewayChassis {
		rows = append(rows, Row{Model: g, Parent: gwp})
	}
	for _, nat := range rp.NATs {
		rows = append(rows, Row{Model: nat, Parent: lr})
	}
	for _, r := range rp.Routes {
		rows = append(rows, Row{Model: r, Parent: lr})
	}
	for _, p := range rp.Policies {
		rows = append(rows, Row{Model: p, Parent: lr})
	}
	for _, sp := range rp.SwitchPorts {
		rows = append(rows, Row{Model: sp.Port, Parent: SwitchName(sp.Network)})
	}
	for _, b := range rp.MACBindings {
		rows = append(rows, Row{Model: b})
	}
	return rows
}
