package integration

import (
	"encoding/csv"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubevirt-ovn/kubevirt-ovn/integration/sandbox"
)

// If an ovn-kubernetes to come deletes a switch of ours anyway (its
// syncNodes no longer skipping our marker, say), the controller must put it
// back from its monitor at once: the same switch, the same ports, the same
// tunnel keys, so that the other zones' rows still agree with it.

var tnlKey = regexp.MustCompile(`requested-tnl-key="?(\d+)`)

// switchKeys reads, in zone, switch sw and the ports of ours on it: "<table>
// <name>" -> its requested-tnl-key ("" when none). Empty when the switch is
// not there.
func (e *zoneEnv) switchKeys(zone, sw string) map[string]string {
	e.t.Helper()
	zdb := e.z.Zone(zone)
	out := map[string]string{}
	ls := csvRows(e.t, nbctl(e.t, zdb, "--format=csv", "--no-headings", "--columns=other_config,ports", "find", "Logical_Switch", "name="+sw))
	if len(ls) == 0 {
		return out
	}
	out["Logical_Switch "+sw] = keyOf(ls[0][0])
	for _, p := range csvRows(e.t, nbctl(e.t, zdb, "--format=csv", "--no-headings", "--columns=_uuid,name,options", "find", "Logical_Switch_Port", "external_ids:kubevirt-ovn/managed-by=kubevirt-ovn")) {
		// A port row lives in the switch that holds it.
		if strings.Contains(ls[0][1], p[0]) {
			out["Logical_Switch_Port "+p[1]] = keyOf(p[2])
		}
	}
	return out
}

func csvRows(t *testing.T, s string) [][]string {
	t.Helper()
	rows, err := csv.NewReader(strings.NewReader(s)).ReadAll()
	require.NoError(t, err)
	return rows
}

func keyOf(column string) string {
	if m := tnlKey.FindStringSubmatch(column); m != nil {
		return m[1]
	}
	return ""
}

// switchUUID is switch sw's row in zone.
func (e *zoneEnv) switchUUID(zone, sw string) string {
	e.t.Helper()
	return strings.TrimSpace(nbctl(e.t, e.z.Zone(zone), "--bare", "--columns=_uuid", "find", "Logical_Switch", "name="+sw))
}

// deleteAsStaleNode deletes switch sw in zone as ovnkube-controller's
// syncNodes deletes a stale node's switch (the row; its ports go with it)
// and returns what the zone held of it before and when it was deleted.
func (e *zoneEnv) deleteAsStaleNode(zone, sw string) (map[string]string, time.Time) {
	e.t.Helper()
	before := e.switchKeys(zone, sw)
	require.Contains(e.t, before, "Logical_Switch "+sw)
	require.NotEmpty(e.t, before["Logical_Switch "+sw], "%s's requested-tnl-key in zone %s", sw, zone)
	require.Greater(e.t, len(before), 1, "%s's ports in zone %s", sw, zone)
	d, at := ovnkDeleteAsStaleNode(e.t, e.z.Zone(zone).Central, sw)
	require.Equal(e.t, []string{"syncNodes stale node: Logical_Switch " + sw}, d.Matched)
	return before, at
}

// TestZonesRunRecreatesSwitchDeletedAsStaleNode: under `run --from-file`
// with every zone, vm-a (zone hv1) leaves SNATed on gw1. In zone hv1,
// ovn-kubernetes deletes kv-net-a as syncNodes deletes a stale node's
// switch, its ports with it (vm-a's, router1's remote port). run recreates
// them from its monitor — a new row, the same names and tunnel keys — and
// vm-a's traffic leaves SNATed again, its reply comes back. Printed: the
// time from the delete to the rows back, and to the first packet out.
func TestZonesRunRecreatesSwitchDeletedAsStaleNode(t *testing.T) {
	e := newZoneEnv(t)
	startController(t, "zones", append([]string{"--from-file", e.manifests}, e.z.ZoneFlags()...)...)
	waitNB(t, "router1 in zone gw1, its remote port in zone hv1", func() bool {
		return e.owned("Logical_Router")["gw1"] == "kv-router1" &&
			strings.Contains(e.owned("Logical_Switch_Port")["hv1"], "kv-stor-net-a_router1")
	})
	e.ready("gw1")
	e.send("hv1", "vm-a", vmAMAC, vmAIP, 40301, 5301)
	waitFor(t, e.wire("gw1"), "vm-a's UDP (zone hv1) leaving SNATed on gw1", 0, snated(5301))

	old := e.switchUUID("hv1", "kv-net-a")
	skip := count(t, e.wire("gw1"))
	before, deleted := e.deleteAsStaleNode("hv1", "kv-net-a")
	// Probe, each probe its own flow (destination port), until the rows
	// are back as they were and a probe sent after that has left SNATed.
	// The first probe leaves right after the delete, possibly before
	// hv1's ovn-controller has dropped the switch: the outage is the time
	// from the delete to the first probe out after the last lost one.
	type probe struct {
		dport uint16
		seen  time.Duration // since the delete; 0: not seen
		out   seen
	}
	var probes []probe
	var back time.Duration
	afterBack := -1
	require.NoError(t, sandbox.Poll(60*time.Second, "kv-net-a back in zone hv1 and vm-a's UDP leaving SNATed on gw1", func() (bool, error) {
		p := probe{dport: uint16(5400 + len(probes))}
		e.send("hv1", "vm-a", vmAMAC, vmAIP, 40302, p.dport)
		probes = append(probes, p)
		ps, err := e.z.Capture("gw1", sandbox.ExternalPort)
		if err != nil {
			return false, err
		}
		for i := range probes {
			for _, s := range ps[min(skip, len(ps)):] {
				if probes[i].seen == 0 && snated(probes[i].dport)(s) {
					probes[i].seen, probes[i].out = time.Since(deleted), s
				}
			}
		}
		if back == 0 && maps.Equal(before, e.switchKeys("hv1", "kv-net-a")) {
			back, afterBack = time.Since(deleted), len(probes)
		}
		return afterBack >= 0 && slices.ContainsFunc(probes[afterBack:], func(p probe) bool { return p.seen > 0 }), nil
	}))
	var lost []string
	first := 0
	for i, p := range probes {
		if p.seen == 0 && slices.ContainsFunc(probes[i+1:], func(p probe) bool { return p.seen > 0 }) {
			lost = append(lost, fmt.Sprint(i+1))
			first = i + 1
		}
	}
	for probes[first].seen == 0 {
		first++
	}
	report(t, fmt.Sprintf("interconnect: kv-net-a deleted in zone hv1 as ovn-kubernetes' syncNodes deletes a stale node's switch -> run recreated its rows (%d, same tunnel keys) after %s; vm-a's probes (one per poll from the delete) lost: %v of %d, the first SNATed on gw1 after the last loss seen %s after the delete",
		len(before), back.Round(time.Millisecond), lost, len(probes), probes[first].seen.Round(time.Millisecond)))
	last := probes[len(probes)-1]
	for i := len(probes) - 1; last.seen == 0; i-- {
		last = probes[i]
	}
	assert.NotEqual(t, old, e.switchUUID("hv1", "kv-net-a"), "kv-net-a is a new row")
	assert.Equal(t, before, e.switchKeys("hv1", "kv-net-a"))
	e.unSNATed("gw1", last.out, vmA, 40302, vmB)
}
