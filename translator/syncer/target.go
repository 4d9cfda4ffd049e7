package syncer

import (
	"context"
	"fmt"
	"strings"
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
	// foreign are the keys datapaths not ours request in the zone's NB.
	foreign []translator.ForeignKey
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
// failed (res) are not checked. A switch whose requested key no datapath
// holds, but which has another one, is nudged once (nb.NudgeRequestedKey:
// ovn-northd from 25.09 on gives a freed key only to a row that changes)
// and checked again; note says so.
func checkZoneKeys(ctx context.Context, t *target, plan *translator.Plan, res *kvnb.SyncResult, instance string, wait time.Duration, note func(string)) ([]translator.KeyMismatch, error) {
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
	ms := translator.CheckTunnelKeys(t.Zone, want, keys)
	defer func() { stuckForeign(t, keys, note) }()
	nudged := 0
	for _, m := range ms {
		if m.Port != "" || !m.Free || m.SwitchUUID == "" {
			continue
		}
		if err := kvnb.NudgeRequestedKey(ctx, t.nbc, m.SwitchUUID, m.Key); err != nil {
			return ms, err
		}
		nudged++
		if note != nil {
			note(fmt.Sprintf("%sswitch %s: its tunnel key %d was free but ovn-northd had given it %d (it gives a freed key only to a row that changes, from OVN 25.09 on): other_config:requested-tnl-key rewritten with the same value", t.Label(), m.Switch, m.Key, m.Actual))
		}
	}
	if nudged == 0 {
		return ms, nil
	}
	if err := ovn.WaitNorthd(wctx, t.nbc); err != nil {
		return ms, err
	}
	if keys, err = ovn.ReadSBKeys(ctx, t.sbc, ports); err != nil {
		return ms, err
	}
	return translator.CheckTunnelKeys(t.Zone, want, keys), nil
}

// stuckForeign says, to note, which datapath not ours in t's zone has
// another key than the one it requests although no datapath holds that
// key: one whose key ours held and gave up (a collision moves ours). From
// OVN 25.09 on ovn-northd gives a freed key only to a row that changes;
// the row is not ours to touch, so it is said with what to do.
func stuckForeign(t *target, keys translator.SBKeys, note func(string)) {
	if note == nil {
		return
	}
	byName := map[string][]translator.SBDatapath{}
	held := map[int]bool{}
	for _, dp := range keys.Datapaths {
		byName[dp.Name] = append(byName[dp.Name], dp)
		held[dp.Key] = true
	}
	for _, f := range t.foreign {
		_, name, ok := strings.Cut(f.Holder, " ")
		if !ok || len(byName[name]) != 1 || held[f.Key] {
			continue
		}
		note(fmt.Sprintf("%s%s requests tunnel key %d, which no datapath holds, but ovn-northd left it on %d (from OVN 25.09 on it gives a freed key only to a row that changes): its cross-zone traffic breaks until that row changes or ovn-northd recomputes (ovn-appctl -t ovn-northd inc-engine/recompute in this zone)",
			t.Label(), f.Holder, f.Key, byName[name][0].Key))
	}
}
