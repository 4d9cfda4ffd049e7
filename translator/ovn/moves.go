package ovn

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ovn-kubernetes/libovsdb/client"

	"github.com/kubevirt-ovn/kubevirt-ovn/nbmodel/sbmodel"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/nb"
)

// MoveWait is how long FinishMoves waits for moved gateway ports to be
// bound on their new chassis before it nudges anyway.
const MoveWait = 30 * time.Second

// IsChassis says whether the SB has a chassis named name.
func IsChassis(ctx context.Context, sb client.Client, name string) bool {
	return sb != nil && sb.Get(ctx, &sbmodel.Chassis{Name: name}) == nil
}

// FinishMoves completes gateway moves already committed to the NB (router
// -> new primary chassis): it waits until the SB has each gateway port
// bound on its new chassis (at most MoveWait), then nudges the chassis once
// (nb.NudgeBFD) so that an old gateway whose ovn-controller kept the
// port's flows drops them. It returns the routers not bound in time (the
// nudge is sent anyway) and the nudge's error.
func FinishMoves(ctx context.Context, nbc, sb client.Client, moves map[string]string) ([]string, error) {
	if len(moves) == 0 {
		return nil, nil
	}
	deadline := time.Now().Add(MoveWait)
	var late []string
	for {
		late = late[:0]
		for r, ch := range moves {
			if ActiveGateway(ctx, sb, r) != ch {
				late = append(late, r)
			}
		}
		if len(late) == 0 || time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(20 * time.Millisecond):
		}
	}
	slices.Sort(late)
	if err := nb.NudgeBFD(ctx, nbc); err != nil {
		return late, fmt.Errorf("nudging the chassis after %d gateway moves: %w", len(moves), err)
	}
	return late, nil
}

// DescribeLate says which moved gateway ports were not bound in time.
func DescribeLate(late []string, moves map[string]string) string {
	parts := make([]string, 0, len(late))
	for _, r := range late {
		parts = append(parts, r+" -> "+moves[r])
	}
	return fmt.Sprintf("gateway ports not bound on their new chassis within %s: %s", MoveWait, strings.Join(parts, ", "))
}
