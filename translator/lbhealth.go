package translator

import (
	"maps"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/ovn-kubernetes/libovsdb/model"

	"github.com/kubevirt-ovn/kubevirt-ovn/nbmodel"
)

// Health checks in interconnect mode. Every zone's load balancer rows map
// each member to its port (its local port or its type=remote twin), so
// every zone's SB has a Service_Monitor per member, but only the member's
// own zone probes it: a remote twin's monitor never gets a status and OVN
// keeps that member in rotation there. So the zones tell each other: each
// zone's SB reader gives the members its own health checks find offline
// (SetOfflineMembers), and in every other zone's rows such a member is
// left out of the VIP's backends, router rows and switch rows alike. Its
// own zone's rows stay as planned: OVN takes it out there, and its
// monitor there keeps probing, so that it comes back everywhere when it
// answers again.

// OfflineMember is a load balancer member whose health check a zone's SB
// says is offline: the Service_Monitor's logical port, address, port and
// protocol (tcp, udp).
type OfflineMember struct {
	Port     string
	IP       string
	Protocol string
	PortNum  int
}

// SetOfflineMembers records the members zone's own health checks find
// offline (nil: none), replacing what zone said before, and returns the
// units holding a load balancer with a member whose state changed:
// the members' networks and the routers on them (lbMembers), not every
// unit.
func (in *Input) SetOfflineMembers(zone string, down []OfflineMember) []Unit {
	in.mu.Lock()
	defer in.mu.Unlock()
	affected := set[Unit]{}
	in.setOffline(zone, down, affected)
	return sortedUnits(affected)
}

// SetAllOfflineMembers is SetOfflineMembers of every zone at once (a zone
// agent's view of every zone's OVNZone): a zone missing from byZone has
// none.
func (in *Input) SetAllOfflineMembers(byZone map[string][]OfflineMember) []Unit {
	in.mu.Lock()
	defer in.mu.Unlock()
	affected := set[Unit]{}
	for zone := range in.lbDown {
		if _, ok := byZone[zone]; !ok {
			in.setOffline(zone, nil, affected)
		}
	}
	for zone, down := range byZone {
		in.setOffline(zone, down, affected)
	}
	return sortedUnits(affected)
}

// setOffline is SetOfflineMembers adding to affected. Callers hold in.mu
// (write).
func (in *Input) setOffline(zone string, down []OfflineMember, affected set[Unit]) {
	now := set[OfflineMember]{}
	for _, m := range down {
		m.IP = normalizeIP(m.IP)
		now.add(m)
	}
	before := in.lbDown[zone]
	changed := set[string]{}
	for m := range now {
		if _, ok := before[m]; !ok {
			changed.add(m.IP)
		}
	}
	for m := range before {
		if _, ok := now[m]; !ok {
			changed.add(m.IP)
		}
	}
	if len(now) == 0 {
		delete(in.lbDown, zone)
	} else {
		in.lbDown[zone] = now
	}
	for ip := range changed {
		for d := range in.lbMembers[ip] {
			in.affectedByLoadBalancer(d, affected)
		}
	}
}

// addLBMembers and removeLBMembers keep lbMembers, the load balancers by
// normalized member address.
func (in *Input) addLBMembers(d *lbDecl) {
	for _, m := range d.Members {
		addTo(in.lbMembers, normalizeIP(m), d)
	}
}

func (in *Input) removeLBMembers(d *lbDecl) {
	for _, m := range d.Members {
		removeFrom(in.lbMembers, normalizeIP(m), d)
	}
}

// zoneLB is load balancer row lb as zone's NB holds it: without the
// backends that another zone, the one of their port, says are offline
// (a copy), or lb itself when there are none. With every backend of a
// VIP gone the VIP has none, and --lb-reject-empty rejects as with no
// members. Callers hold in.mu (read).
func (in *Input) zoneLB(lb *nbmodel.LoadBalancer, zone string) *nbmodel.LoadBalancer {
	if len(in.lbDown) == 0 || lb.Protocol == nil || len(lb.IPPortMappings) == 0 {
		return lb
	}
	proto := *lb.Protocol
	var out *nbmodel.LoadBalancer
	for _, vip := range slices.Sorted(maps.Keys(lb.Vips)) {
		backends := strings.Split(lb.Vips[vip], ",")
		kept := backends[:0:0]
		for _, b := range backends {
			if b != "" && !in.offlineElsewhere(lb, b, proto, zone) {
				kept = append(kept, b)
			}
		}
		if len(kept) == len(backends) {
			continue
		}
		if out == nil {
			out = model.Clone(lb).(*nbmodel.LoadBalancer)
		}
		out.Vips[vip] = strings.Join(kept, ",")
		if len(kept) == 0 && in.rejectEmptyLB {
			if out.Options == nil {
				out.Options = map[string]string{}
			}
			out.Options["reject"] = "true"
		}
	}
	if out == nil {
		return lb
	}
	return out
}

// offlineElsewhere says whether backend "ip:port" ("[ip]:port" for IPv6)
// of lb is offline in the zone of its port, when that is not zone. Only
// the zone where the port lives counts: a monitor's status elsewhere (a
// VM moved away) is stale. Callers hold in.mu (read).
func (in *Input) offlineElsewhere(lb *nbmodel.LoadBalancer, backend, proto, zone string) bool {
	ip, ps, err := net.SplitHostPort(backend)
	if err != nil {
		return false
	}
	portNum, err := strconv.Atoi(ps)
	if err != nil {
		return false
	}
	lsp, _, _ := strings.Cut(lb.IPPortMappings[mappingAddr(ip)], ":")
	if lsp == "" {
		return false
	}
	m := OfflineMember{Port: lsp, IP: ip, Protocol: proto, PortNum: portNum}
	for z, down := range in.lbDown {
		if z == zone {
			continue
		}
		if _, ok := down[m]; ok && in.portZone(lb, ip, lsp) == z {
			return true
		}
	}
	return false
}

// portZone is the zone of the node of VM port lsp with address ip (an
// IPv6 one with or without brackets) on the network of lb's load
// balancer, "" when unknown. Callers hold in.mu (read).
func (in *Input) portZone(lb *nbmodel.LoadBalancer, ip, lsp string) string {
	addr, err := netip.ParseAddr(strings.Trim(ip, "[]"))
	if err != nil {
		return ""
	}
	for d := range in.lbNames[lb.ExternalIDs[KeyLoadBalancer]] {
		for _, v := range in.vmsWithAddrOn(d.Network, addr) {
			if VMPortName(d.Network, v.Namespace, v.VMI, v.Interface) == lsp {
				return in.nodes[v.Node].zone
			}
		}
	}
	return ""
}
