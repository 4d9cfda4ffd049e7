package nb

import (
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
