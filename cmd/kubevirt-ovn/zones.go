package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/ovn-kubernetes/libovsdb/client"

	"github.com/kubevirt-ovn/kubevirt-ovn/translator"
	kvnb "github.com/kubevirt-ovn/kubevirt-ovn/translator/nb"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/ovn"
)

// zoneFlags are the --zone flags: NAME=NB,SB, one per zone.
type zoneFlags []zoneFlag

type zoneFlag struct {
	name   string
	nb, sb string
}

func (z *zoneFlags) String() string {
	var out []string
	for _, f := range *z {
		out = append(out, f.name+"="+f.nb+","+f.sb)
	}
	return strings.Join(out, " ")
}

func (z *zoneFlags) Set(v string) error {
	name, eps, ok := strings.Cut(v, "=")
	nb, sb, ok2 := strings.Cut(eps, ",")
	if !ok || !ok2 || name == "" || nb == "" || sb == "" || strings.Contains(sb, ",") {
		return fmt.Errorf("%q is not NAME=NB,SB (one NB and one SB endpoint)", v)
	}
	for _, ep := range []string{nb, sb} {
		if strings.HasPrefix(ep, "ssl:") {
			return fmt.Errorf("%q: a zone's databases are reached over unix or tcp, not ssl", v)
		}
	}
	if slices.ContainsFunc(*z, func(f zoneFlag) bool { return f.name == name }) {
		return fmt.Errorf("zone %s is given twice", name)
	}
	*z = append(*z, zoneFlag{name, nb, sb})
	return nil
}

// targets are the zones' NB and SB, sorted by zone name.
func (z zoneFlags) targets() []*target {
	var out []*target
	for _, f := range z {
		out = append(out, &target{zone: f.name, nbEp: ovn.Endpoint{Address: f.nb}, sbEp: ovn.Endpoint{Address: f.sb}})
	}
	slices.SortFunc(out, func(a, b *target) int { return strings.Compare(a.zone, b.zone) })
	return out
}

// target is an NB kubevirt-ovn writes and the SB beside it: the central
// ones, or one zone's.
type target struct {
	zone       string // "" for the central NB
	nbEp, sbEp ovn.Endpoint
	nbc, sbc   client.Client
	read       func(context.Context) error
}

// label prefixes what is said about the target: "zone NAME: " or nothing.
func (t *target) label() string {
	if t.zone == "" {
		return ""
	}
	return "zone " + t.zone + ": "
}

// connect dials the NB and reads our rows once (a one-shot sync needs no
// monitor: it would send back every row it writes), and connects the SB.
func (t *target) connect(ctx context.Context, instance string, log logr.Logger) error {
	nbc, err := ovn.DialNB(ctx, t.nbEp, log)
	if err != nil {
		return fmt.Errorf("%s%w", t.label(), err)
	}
	t.nbc = nbc
	t.read = func(ctx context.Context) error { return ovn.ReadOwned(ctx, nbc, instance) }
	if err := t.read(ctx); err != nil {
		return fmt.Errorf("%s%w", t.label(), err)
	}
	if t.sbEp.Address == "" {
		return nil
	}
	if t.sbc, err = ovn.ConnectSB(ctx, t.sbEp, log); err != nil {
		return fmt.Errorf("%s%w", t.label(), err)
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

// chassisOf reads the chassis of every target's SB: all of the central
// SB's, or each zone's own (not its remote entries), marked with the zone.
// A chassis local to two zones is an error: its zone would be a guess.
func chassisOf(ctx context.Context, targets []*target) ([]translator.Chassis, bool, error) {
	var all []translator.Chassis
	known := false
	zoneOf := map[string]string{}
	for _, t := range targets {
		if t.sbc == nil {
			continue
		}
		known = true
		var chassis []translator.Chassis
		var err error
		if t.zone == "" {
			chassis, err = ovn.GatewayChassis(ctx, t.sbc)
		} else {
			chassis, err = ovn.ZoneChassis(ctx, t.sbc, t.zone)
		}
		if err != nil {
			return nil, false, fmt.Errorf("%s%w", t.label(), err)
		}
		for _, c := range chassis {
			if z, ok := zoneOf[c.Name]; ok {
				return nil, false, fmt.Errorf("chassis %s is a local chassis of zones %s and %s (not other_config:is-remote=true in either SB)", c.Name, z, t.zone)
			}
			zoneOf[c.Name] = t.zone
		}
		all = append(all, chassis...)
	}
	return all, known, nil
}

// checkZoneKeys compares, once tg's ovn-northd has processed the sync
// (within wait), the tunnel keys tg's SB gave our switches and ports with
// the keys plan's rows of tg's zone request; the rows of units whose
// commit failed (res) are not checked.
func checkZoneKeys(ctx context.Context, tg *target, plan *translator.Plan, res *kvnb.SyncResult, instance string, wait time.Duration) ([]translator.KeyMismatch, error) {
	failed := map[translator.Unit]bool{}
	for _, u := range res.Units {
		failed[u.Unit] = u.Err != nil
	}
	want := translator.RequestedKeys(plan, tg.zone, func(u translator.Unit) bool { return failed[u] })
	if len(want) == 0 {
		return nil, nil
	}
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	if err := ovn.WaitNorthd(wctx, tg.nbc); err != nil {
		return nil, err
	}
	uuids, err := ovn.OwnedSwitchUUIDs(ctx, tg.nbc, instance)
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
	keys, err := ovn.ReadSBKeys(ctx, tg.sbc, ports)
	if err != nil {
		return nil, err
	}
	return translator.CheckTunnelKeys(tg.zone, want, keys), nil
}
