package syncer

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"github.com/ovn-kubernetes/libovsdb/client"

	"github.com/kubevirt-ovn/kubevirt-ovn/translator"
	kvnb "github.com/kubevirt-ovn/kubevirt-ovn/translator/nb"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/ovn"
)

// target is a Target being synced: its clients once connected.
type target struct {
	Target
	nbc, sbc client.Client
	read     func(context.Context) error
}

// connect dials the NB and reads our rows once (a one-shot sync needs no
// monitor: it would send back every row it writes), and connects the SB.
func (t *target) connect(ctx context.Context, instance string, log logr.Logger) error {
	nbc, err := ovn.DialNB(ctx, t.NB, log)
	if err != nil {
		return fmt.Errorf("%s%w", t.Label(), err)
	}
	t.nbc = nbc
	t.read = func(ctx context.Context) error { return ovn.ReadOwned(ctx, nbc, instance) }
	if err := t.read(ctx); err != nil {
		return fmt.Errorf("%s%w", t.Label(), err)
	}
	if t.SB.Address == "" {
		return nil
	}
	connect := ovn.ConnectSB
	if t.Zone != "" {
		// A zone's SB also holds the bindings of ours to bind (a
		// migration's target zone binds its port to the source,
		// RemoteBinding).
		connect = func(ctx context.Context, ep ovn.Endpoint, log logr.Logger) (client.Client, error) {
			return ovn.ConnectWatchSB(ctx, ep, instance, log)
		}
	}
	if t.sbc, err = connect(ctx, t.SB, log); err != nil {
		return fmt.Errorf("%s%w", t.Label(), err)
	}
	return nil
}

func (t *target) close() {
	if t.nbc != nil {
		t.nbc.Close()
	}
	if t.sbc != nil {
		t.sbc.Close()
	}
}

// checkZoneKeys compares, once t's ovn-northd has processed the sync
// (within wait), the tunnel keys t's SB gave our switches and ports with
// the keys plan's rows of t's zone request; the rows of units whose commit
// failed (res) are not checked.
func checkZoneKeys(ctx context.Context, t *target, plan *translator.Plan, res *kvnb.SyncResult, instance string, wait time.Duration) ([]translator.KeyMismatch, error) {
	failed := map[translator.Unit]bool{}
	for _, u := range res.Units {
		failed[u.Unit] = u.Err != nil
	}
	want := translator.RequestedKeys(plan, t.Zone, func(u translator.Unit) bool { return failed[u] })
	if len(want) == 0 {
		return nil, nil
	}
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	if err := ovn.WaitNorthd(wctx, t.nbc); err != nil {
		return nil, err
	}
	uuids, err := ovn.OwnedSwitchUUIDs(ctx, t.nbc, instance)
	if err != nil {
		return nil, err
	}
	var ports []string
	for i := range want {
		if want[i].Port == "" {
			want[i].SwitchUUID = uuids[want[i].Switch]
		} else {
			ports = append(ports, want[i].Port)
		}
	}
	keys, err := ovn.ReadSBKeys(ctx, t.sbc, ports)
	if err != nil {
		return nil, err
	}
	return translator.CheckTunnelKeys(t.Zone, want, keys), nil
}
