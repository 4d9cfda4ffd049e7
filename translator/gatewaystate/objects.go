package gatewaystate

import (
	"context"
	"net"
	"net/netip"
	"slices"
	"strings"

	"github.com/ovn-kubernetes/libovsdb/client"

	"github.com/kubevirt-ovn/kubevirt-ovn/nbmodel"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator"
)

// FloatingIP is a floating IP whose rows the NB holds: a NAT row of its
// router, or, on a load balancer's VIP, that load balancer's rows.
type FloatingIP struct {
	ID, Address, FixedIP string
	Router               string
	// Port is the VM port it is bound to; LoadBalancer the load balancer
	// whose VIP it exposes.
	Port, LoadBalancer string
}

// SecurityGroup is a security group whose Port_Group the NB holds.
type SecurityGroup struct {
	ID string
	// Ports are its members' VM ports; Rules counts its rules' ACLs (not
	// the base ones every group has).
	Ports []string
	Rules int
}

// LoadBalancer is a load balancer whose rows the NB holds.
type LoadBalancer struct {
	Name string
	// Router is the router whose rows hold it ("" on switches only).
	Router string
	// VIPs are its VIP:ports, its floating IPs' included; Members its
	// members (ip:port), Offline those failing their health check now,
	// MemberPorts the VM ports that have its members' addresses.
	VIPs, Members, Offline, MemberPorts []string
}

// readObjects fills s's floating IPs, security groups and load balancers
// from the NB rows in nbc's cache, and the VM ports their members are.
func (s *State) readObjects(ctx context.Context, nbc client.Client, offline map[string]bool) error {
	var ports []*nbmodel.LogicalSwitchPort
	var nats []*nbmodel.NAT
	var routers []*nbmodel.LogicalRouter
	var pgs []*nbmodel.PortGroup
	var acls []*nbmodel.ACL
	var lbs []*nbmodel.LoadBalancer
	for _, l := range []any{&ports, &nats, &routers, &pgs, &acls, &lbs} {
		if err := nbc.List(ctx, l); err != nil && err != client.ErrNotFound {
			return err
		}
	}
	mine := func(ids map[string]string) bool { return ids[translator.KeyManagedBy] == s.instance }
	portOf := map[netip.Addr]string{} // a VM port's address -> the port
	portName := map[string]string{}   // UUID -> name
	for _, p := range ports {
		portName[p.UUID] = p.Name
		if !mine(p.ExternalIDs) || p.ExternalIDs[translator.KeyVMI] == "" {
			continue
		}
		_, addrs := translator.VMPortAddresses(p)
		for _, a := range addrs {
			portOf[a] = p.Name
		}
	}
	natRouter := map[string]string{}
	for _, r := range routers {
		if mine(r.ExternalIDs) && r.ExternalIDs[translator.KeyOwnerKind] == string(translator.KindRouter) {
			s.RouterNames = append(s.RouterNames, r.ExternalIDs[translator.KeyOwner])
		}
		for _, u := range r.Nat {
			natRouter[u] = r.ExternalIDs[translator.KeyOwner]
		}
	}
	for _, n := range nats {
		id := n.ExternalIDs[translator.KeyFloatingIP]
		if !mine(n.ExternalIDs) || id == "" {
			continue
		}
		f := FloatingIP{ID: id, Address: n.ExternalIP, FixedIP: n.LogicalIP, Router: natRouter[n.UUID]}
		if a, err := netip.ParseAddr(n.LogicalIP); err == nil {
			f.Port = portOf[a]
		}
		s.FloatingIPs = append(s.FloatingIPs, f)
	}
	acl := map[string]*nbmodel.ACL{}
	for _, a := range acls {
		acl[a.UUID] = a
	}
	for _, pg := range pgs {
		id := pg.ExternalIDs[translator.KeySecurityGroup]
		if !mine(pg.ExternalIDs) || id == "" {
			continue
		}
		g := SecurityGroup{ID: id}
		for _, u := range pg.Ports {
			g.Ports = append(g.Ports, portName[u])
		}
		slices.Sort(g.Ports)
		for _, u := range pg.ACLs {
			if a := acl[u]; a != nil && strings.HasPrefix(a.ExternalIDs[translator.KeySecurityACL], "rule/") {
				g.Rules++
			}
		}
		s.SecurityGroups = append(s.SecurityGroups, g)
	}
	byName := map[string]*LoadBalancer{}
	for _, row := range lbs {
		name := row.ExternalIDs[translator.KeyLoadBalancer]
		if !mine(row.ExternalIDs) || name == "" {
			continue
		}
		lb := byName[name]
		if lb == nil {
			lb = &LoadBalancer{Name: name}
			byName[name] = lb
		}
		if row.ExternalIDs[translator.KeyOwnerKind] == string(translator.KindRouter) {
			lb.Router = row.ExternalIDs[translator.KeyOwner]
			if id := row.ExternalIDs[translator.KeyFloatingIP]; id != "" {
				s.FloatingIPs = append(s.FloatingIPs, FloatingIP{ID: id, Address: row.ExternalIDs[translator.KeyFloatingIPAddress],
					FixedIP: row.ExternalIDs[translator.KeyLBVIP], Router: lb.Router, LoadBalancer: name})
			}
		}
		for vip, backends := range row.Vips {
			lb.VIPs = append(lb.VIPs, vip)
			for _, m := range strings.Split(backends, ",") {
				if m = strings.TrimSpace(m); m != "" {
					lb.Members = append(lb.Members, m)
				}
			}
		}
	}
	for _, lb := range byName {
		slices.Sort(lb.VIPs)
		lb.VIPs = slices.Compact(lb.VIPs)
		slices.Sort(lb.Members)
		lb.Members = slices.Compact(lb.Members)
		for _, m := range lb.Members {
			if offline[m] {
				lb.Offline = append(lb.Offline, m)
			}
			host, _, err := net.SplitHostPort(m)
			if a, perr := netip.ParseAddr(host); err == nil && perr == nil && portOf[a] != "" {
				lb.MemberPorts = append(lb.MemberPorts, portOf[a])
			}
		}
		slices.Sort(lb.MemberPorts)
		lb.MemberPorts = slices.Compact(lb.MemberPorts)
		s.LoadBalancers = append(s.LoadBalancers, *lb)
	}
	slices.Sort(s.RouterNames)
	slices.SortFunc(s.FloatingIPs, func(a, b FloatingIP) int { return strings.Compare(a.ID, b.ID) })
	slices.SortFunc(s.SecurityGroups, func(a, b SecurityGroup) int { return strings.Compare(a.ID, b.ID) })
	slices.SortFunc(s.LoadBalancers, func(a, b LoadBalancer) int { return strings.Compare(a.Name, b.Name) })
	return nil
}
