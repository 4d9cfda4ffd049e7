package translator

import (
	"context"
	"fmt"
	"net/netip"
	"strings"

	"github.com/ovn-kubernetes/libovsdb/client"

	"github.com/kubevirt-ovn/kubevirt-ovn/nbmodel"
)

// HeldClaims reads from the rows instance owns in c's cache who holds each
// SNAT IP, internal network and VM address now, for Snapshot.Held: the
// first claimant keeps what it holds.
func HeldClaims(ctx context.Context, c client.Client, instance string) (Claims, error) {
	held := Claims{SNATIPs: map[string]string{}, Internal: map[string]string{}, VMAddresses: map[string]string{}}
	lrps, err := ListManaged(ctx, c, instance, func(r *nbmodel.LogicalRouterPort) *map[string]string { return &r.ExternalIDs })
	if err != nil {
		return held, fmt.Errorf("reading owned router ports: %w", err)
	}
	for _, p := range lrps {
		u, ok := OwnerOf(p.ExternalIDs, instance)
		if !ok || u.Kind != KindRouter || p.Name != GatewayPortName(u.Name) || len(p.Networks) == 0 {
			continue
		}
		if pfx, err := netip.ParsePrefix(p.Networks[0]); err == nil {
			held.SNATIPs[pfx.Addr().String()] = u.Name
		}
	}
	lsps, err := ListManaged(ctx, c, instance, func(r *nbmodel.LogicalSwitchPort) *map[string]string { return &r.ExternalIDs })
	if err != nil {
		return held, fmt.Errorf("reading owned switch ports: %w", err)
	}
	for _, p := range lsps {
		u, ok := OwnerOf(p.ExternalIDs, instance)
		if !ok {
			continue
		}
		switch {
		case u.Kind == KindRouter:
			// kv-stor-<network>_<router>: the router's port on an internal
			// network.
			rest, ok := strings.CutPrefix(p.Name, NamePrefix+"stor-")
			if network, ok2 := strings.CutSuffix(rest, "_"+u.Name); ok && ok2 {
				held.Internal[network] = u.Name
			}
		case p.ExternalIDs[KeyVMI] != "" && len(p.Addresses) == 1:
			if f := strings.Fields(p.Addresses[0]); len(f) == 2 {
				held.VMAddresses[u.Name+" "+f[0]] = p.Name
				held.VMAddresses[u.Name+" "+f[1]] = p.Name
			}
		}
	}
	return held, nil
}
