package nb

import (
	"net/netip"
	"slices"
	"strings"

	"github.com/ovn-kubernetes/libovsdb/client"

	"github.com/kubevirt-ovn/kubevirt-ovn/nbmodel"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator"
)

// Gateways reads from c's cache, for every router instance owns that has
// Gateway_Chassis rows, its gateway order as the NB holds it: the chassis
// by priority, whether its spec.gateway pins it (translator.KeyPinned on its
// gateway port) and
// the physical network its external switch's localnet port names ("" for
// an overlay external network). Sorted by router.
func Gateways(c client.Client, instance string) []translator.Assignment {
	gws := gateways{}
	pinned := map[string]bool{}
	extPort := map[string]string{} // kv-etor-<router> port UUID -> router
	var switches []*nbmodel.LogicalSwitch
	localnet := map[string]string{} // localnet port UUID -> network_name
	eachOwned(Default, c, instance, func(_ *Table, u translator.Unit, row any) {
		switch r := row.(type) {
		case *nbmodel.GatewayChassis:
			if u.Kind == translator.KindRouter {
				gws.set(u.Name, r.UUID, r)
			}
		case *nbmodel.LogicalRouterPort:
			if u.Kind == translator.KindRouter && r.Name == translator.GatewayPortName(u.Name) && r.ExternalIDs[translator.KeyPinned] == "true" {
				pinned[u.Name] = true
			}
		case *nbmodel.LogicalSwitchPort:
			switch {
			case u.Kind == translator.KindRouter && r.Name == translator.ExternalSwitchPortName(u.Name):
				extPort[r.UUID] = u.Name
			case r.Type == "localnet":
				localnet[r.UUID] = r.Options["network_name"]
			}
		case *nbmodel.LogicalSwitch:
			switches = append(switches, r)
		}
	})
	physnet := map[string]string{}
	for _, ls := range switches {
		net := ""
		for _, p := range ls.Ports {
			if n, ok := localnet[p]; ok {
				net = n
			}
		}
		for _, p := range ls.Ports {
			if r, ok := extPort[p]; ok {
				physnet[r] = net
			}
		}
	}
	out := make([]translator.Assignment, 0, len(gws))
	for r := range gws {
		out = append(out, translator.Assignment{Router: r, Physnet: physnet[r], Pinned: pinned[r], Order: gws.order(r)})
	}
	slices.SortFunc(out, func(a, b translator.Assignment) int { return strings.Compare(a.Router, b.Router) })
	return out
}

// Upstream is what an upstream router needs of one of our routers whose
// internal IPv6 is routed (no NAT66): a route to each prefix via the
// router's external IPv6 address.
type Upstream struct {
	Via      string
	Prefixes []string
}

// UpstreamRoutes reads, per router of instance in c's cache whose gateway
// port has an IPv6 address, the internal ipv6Cidrs of its router ports
// that no snat NAT row of it translates (those leave routed).
func UpstreamRoutes(c client.Client, instance string) map[string]Upstream {
	via := map[string]string{}
	prefixes := map[string][]string{}
	natted := map[string]map[string]bool{}
	eachOwned(Default, c, instance, func(_ *Table, u translator.Unit, row any) {
		if u.Kind != translator.KindRouter {
			return
		}
		switch r := row.(type) {
		case *nbmodel.LogicalRouterPort:
			for _, n := range r.Networks {
				pfx, err := netip.ParsePrefix(n)
				if err != nil || !pfx.Addr().Is6() {
					continue
				}
				if r.Name == translator.GatewayPortName(u.Name) {
					via[u.Name] = pfx.Addr().String()
				} else {
					prefixes[u.Name] = append(prefixes[u.Name], pfx.Masked().String())
				}
			}
		case *nbmodel.NAT:
			if r.Type != nbmodel.NATTypeSNAT {
				return
			}
			if pfx, err := netip.ParsePrefix(r.LogicalIP); err == nil && pfx.Addr().Is6() {
				if natted[u.Name] == nil {
					natted[u.Name] = map[string]bool{}
				}
				natted[u.Name][pfx.Masked().String()] = true
			}
		}
	})
	out := map[string]Upstream{}
	for r, v := range via {
		var routed []string
		for _, p := range prefixes[r] {
			if !natted[r][p] {
				routed = append(routed, p)
			}
		}
		if len(routed) > 0 {
			slices.Sort(routed)
			out[r] = Upstream{Via: v, Prefixes: slices.Compact(routed)}
		}
	}
	return out
}
