package translator

import (
	"net/netip"

	"github.com/ovn-kubernetes/libovsdb/model"

	"github.com/kubevirt-ovn/kubevirt-ovn/nbmodel"
)

// Default deny (--default-deny, ONOS parity: every VM port is closed
// unless a security group opens it). Each network's unit plans, besides
// its switch and ports, one Port_Group (NetworkPortGroupName) of its VM
// ports with the base ACLs a security group has (baseACLs): IP dropped
// both ways, a DHCP request (DHCPv6 too on an IPv6 network) and ping to
// the network's gateways allowed.
// OVN applies the ACLs of all the groups a port is in as one list by
// priority, so a security group's rules (SGRulePriority) still open what
// they allow. The group is the network's own, so it costs what the
// network's ports cost and depends on no other unit. Without the flag the
// network plans no group (and a sync deletes one it has).

// DefaultDenyPlan is a network's default-deny Port_Group and its ACLs.
type DefaultDenyPlan struct {
	PortGroup *nbmodel.PortGroup
	// Ports are the network's VM ports (LSP names), sorted.
	Ports []string
	// ACLs are the base ACLs, sorted by key (KeySecurityACL).
	ACLs []*nbmodel.ACL
}

// KeyDefaultDeny carries the network's name on its default-deny
// Port_Group.
const KeyDefaultDeny = "kubevirt-ovn/default-deny"

// defaultDenyPlan is the default-deny group of valid network n whose VM
// ports (ports of no type) are among ports.
func defaultDenyPlan(n *network, ports []*nbmodel.LogicalSwitchPort, instance string) *DefaultDenyPlan {
	u := Unit{Kind: KindNetwork, Name: n.Name}
	pg := NetworkPortGroupName(n.Name)
	pgIDs := PolicyIDs(instance, u)
	pgIDs[KeyDefaultDeny] = n.Name
	dp := &DefaultDenyPlan{PortGroup: &nbmodel.PortGroup{Name: pg, ExternalIDs: pgIDs}}
	for _, p := range ports {
		if p.Type == "" {
			dp.Ports = append(dp.Ports, p.Name)
		}
	}
	var gws []netip.Addr
	if n.gateway.IsValid() {
		gws = append(gws, n.gateway)
	}
	if n.gateway6.IsValid() {
		gws = append(gws, n.gateway6)
	}
	dp.ACLs = baseACLs(pg, gws, n.prefix6.IsValid(), func(key string) map[string]string {
		m := PolicyIDs(instance, u)
		m[KeySecurityACL] = key
		return m
	})
	return dp
}

// Rows are the Port_Group, referring to its ports, and its ACLs.
func (dp *DefaultDenyPlan) Rows() []Row {
	return dp.rows(dp.Ports)
}

// rows are dp's rows with ports as the group's ports (a zone's own).
func (dp *DefaultDenyPlan) rows(ports []string) []Row {
	rows := make([]Row, 0, 1+len(dp.ACLs))
	pg := Row{Model: model.Clone(dp.PortGroup)}
	for _, p := range ports {
		pg.Refs = append(pg.Refs, Ref{Column: "ports", Key: p})
	}
	rows = append(rows, pg)
	for _, a := range dp.ACLs {
		rows = append(rows, Row{Model: model.Clone(a), Parent: dp.PortGroup.Name})
	}
	return rows
}

// SetDefaultDeny says whether every VM port is default-deny (each
// network plans its DefaultDenyPlan); it returns the networks, whose
// plans change.
func (in *Input) SetDefaultDeny(deny bool) []Unit {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.defaultDeny == deny {
		return nil
	}
	in.defaultDeny = deny
	affected := set[Unit]{}
	for n := range in.networks {
		affected.add(Unit{Kind: KindNetwork, Name: n})
	}
	return sortedUnits(affected)
}
