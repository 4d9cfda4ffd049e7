package syncer

import (
	"context"
	"fmt"

	"github.com/ovn-kubernetes/libovsdb/client"

	"github.com/kubevirt-ovn/kubevirt-ovn/translator"
	kvnb "github.com/kubevirt-ovn/kubevirt-ovn/translator/nb"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/ovn"
)

// GatewayMoves are the routers whose gateway port res moved to another
// primary while the old one is still a chassis of sb (it may keep the
// port's flows): router -> new primary. before is each router's gateway
// order before the sync.
func GatewayMoves(ctx context.Context, sb client.Client, plan *translator.Plan, res *kvnb.SyncResult, before map[string][]string) map[string]string {
	failed := map[translator.Unit]bool{}
	for _, u := range res.Units {
		if u.Err != nil {
			failed[u.Unit] = true
		}
	}
	moves := map[string]string{}
	for _, rp := range plan.Routers {
		old := before[rp.Name]
		if rp.Gateway == nil || len(rp.Gateway.Chassis) == 0 || len(old) == 0 || failed[translator.Unit{Kind: translator.KindRouter, Name: rp.Name}] {
			continue
		}
		if now := rp.Gateway.Chassis[0]; now != old[0] && ovn.IsChassis(ctx, sb, old[0]) {
			moves[rp.Name] = now
		}
	}
	return moves
}

// FinishMoves waits for moved gateway ports to be bound on their new
// chassis and nudges the chassis (ovn.FinishMoves), saying what it did to
// note (may be nil).
func FinishMoves(ctx context.Context, nbc, sbc client.Client, moves map[string]string, note func(string)) {
	if len(moves) == 0 {
		return
	}
	say := func(format string, args ...any) {
		if note != nil {
			note(fmt.Sprintf(format, args...))
		}
	}
	late, err := ovn.FinishMoves(ctx, nbc, sbc, moves)
	if len(late) > 0 {
		say("%s", ovn.DescribeLate(late, moves))
	}
	if err != nil {
		say("%v; an old gateway may keep answering for a moved port until its ovn-controller recomputes", err)
		return
	}
	say("%d gateway ports moved and bound; NB_Global options:%s rewritten (same value) so that the old gateways drop their flows", len(moves), kvnb.BFDMultOption)
}
