package integration

import (
	"encoding/csv"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubevirt-ovn/kubevirt-ovn/integration/sandbox"
	"github.com/kubevirt-ovn/kubevirt-ovn/integration/wire"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/trace"
)

// Issue 10, failover on the wire: a gateway chassis dies (its ovs-vswitchd
// and ovn-controller SIGKILLed by pid) or leaves the SB, and a gateway is
// added, with routers scheduled over the gateways.

// TestFailoverByBFD: router1 has two gateway candidates (sync with --sb
// writes both as Gateway_Chassis rows). The primary crashes: OVN's BFD
// moves the gateway port to the backup with no controller involved, SNATed
// traffic leaves through the backup's wire and the backup announces the
// SNAT IP by GARP. The time from the kill to the first SNATed packet on the
// backup is printed, not asserted.
func TestFailoverByBFD(t *testing.T) {
	e := newEnv(t)
	e.sync()
	order := gatewayOrders(t, e.l)["router1"]
	require.Len(t, order, 2, "router1's Gateway_Chassis, highest priority first: both gateways are candidates")
	primary, backup := order[0], order[1]
	e.ready(primary, "hv1", "hv2")
	e.send("hv1", "vm-a", vmAMAC, vmAIP, 40020, 5020)
	waitFor(t, e.wire(primary), "vm-a's UDP leaving SNATed via the primary "+primary, 0, snated(5020))

	skip := count(t, e.wire(backup))
	killedAt := time.Now()
	pids, err := e.l.KillChassis(primary)
	require.NoError(t, err)
	for _, pid := range pids {
		require.False(t, sandbox.Alive(pid), "pid %d of %s runs after KillChassis", pid, primary)
	}

	// A new flow (destination port) every 50 ms from vm-a until one leaves
	// SNATed through the backup: the failover happened between the last
	// flow lost and the first one through.
	sentAt := map[uint16]time.Time{}
	var through seen
	var seenAt time.Time
	var last []seen
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	deadline := killedAt.Add(120 * time.Second)
	for dport := uint16(6000); seenAt.IsZero(); dport++ {
		require.Less(t, dport, uint16(6000+60000/50*2), "flow ports exhausted")
		if time.Now().After(deadline) {
			bfd, err := e.l.Exec(backup, "ovs-appctl", "bfd/show")
			require.FailNowf(t, "no failover", "router1's SNATed traffic not seen on backup %s's wire %s after killing %s (flows sent: %d); SB port binding of %s: %q; BFD on %s (%v):\n%s\npackets on the wire:\n%s",
				backup, time.Since(killedAt), primary, len(sentAt), crPort, boundChassis(t, e.l, crPort), backup, err, bfd, wire.Describe(last[min(skip, len(last)):]))
		}
		e.send("hv1", "vm-a", vmAMAC, vmAIP, 41000, dport)
		sentAt[dport] = time.Now()
		last, err = e.l.Capture(backup, sandbox.ExternalPort)
		require.NoError(t, err)
		for _, s := range last[min(skip, len(last)):] {
			if _, ours := sentAt[s.DPort]; ours && snated(s.DPort)(s) {
				through, seenAt = s, time.Now()
				break
			}
		}
		if seenAt.IsZero() {
			<-tick.C
		}
	}
	firstThrough := sentAt[through.DPort]
	var lastLost time.Time
	for dport, at := range sentAt {
		if dport < through.DPort && at.After(lastLost) {
			lastLost = at
		}
	}
	assert.Equal(t, gwPortMAC, through.SrcMAC, "source MAC on the backup's wire: the gateway port's")
	assert.Equal(t, peerMAC, through.DstMAC)

	garp := waitFor(t, e.wire(backup), "GARP for the SNAT IP from the backup "+backup, skip, func(s seen) bool {
		return s.IsARP && s.ARPSPA == snatIP && s.ARPTPA == snatIP
	})
	garpAt := time.Now()
	assert.Equal(t, gwPortMAC, garp.ARPSHA)
	assert.Equal(t, "ff:ff:ff:ff:ff:ff", garp.DstMAC)
	assert.Contains(t, boundChassis(t, e.l, crPort), backup, "SB: the chassisredirect port is bound to the backup")

	// kubevirt-ovn trace says where the packet leaves now, and why there.
	p := e.trace("--from", "default/vm-a", "--to", remoteIP, "--protocol", "udp", "--port", "53")
	t.Log(p.Text())
	gw := hop(t, p, trace.HopGateway)
	assert.Equal(t, backup, gw.Refs["activeChassis"])
	assert.Contains(t, gw.Detail, fmt.Sprintf("active on %s now: failed over from %s", backup, primary))
	assert.Equal(t, trace.Left, p.Verdict.Result)
	assert.Equal(t, backup, p.Verdict.Chassis)

	msg := fmt.Sprintf("failover by BFD: %s killed (pids %v) -> first SNATed packet on backup %s's wire seen after %s "+
		"(the first flow through was sent %s after the kill, the last lost one %s after; %d flows sent); GARP for %s seen after %s",
		primary, pids, backup, seenAt.Sub(killedAt).Round(time.Millisecond),
		firstThrough.Sub(killedAt).Round(time.Millisecond), since(killedAt, lastLost), len(sentAt),
		snatIP, garpAt.Sub(killedAt).Round(time.Millisecond))
	report(t, msg)
}

// TestFailoverControllerReschedules: `run` over three gateways, routers not
// pinned. A gateway dies and its SB Chassis row is deleted: the controller
// rewrites the Gateway_Chassis of the routers at once so that none names
// the dead chassis; only the routers whose primary it was get a new
// primary, and router1's traffic flows through its new one.
func TestFailoverControllerReschedules(t *testing.T) {
	e := newOVN(t)
	require.NoError(t, e.l.AddGateway("gw3", ""))
	keepForeign(t, e.l)
	dir := failoverInput(t, true, 5)
	startController(t, "failover", "--nb", e.l.NBEndpoint(), "--sb", e.l.SBEndpoint(), "--from-file", dir)
	routers := append([]string{"router1"}, failoverRouters(5)...)
	before := waitScheduled(t, e.l, routers, 3)
	nbctl(t, e.l, "--timeout=90", "--wait=hv", "sync")

	victim := before["router1"][0]
	e.ready(victim, "hv1", "hv2")
	e.send("hv1", "vm-a", vmAMAC, vmAIP, 40030, 5030)
	waitFor(t, e.wire(victim), "vm-a's UDP leaving SNATed via router1's primary "+victim, 0, snated(5030))

	_, err := e.l.KillChassis(victim)
	require.NoError(t, err)
	removedAt := time.Now()
	require.NoError(t, e.l.RemoveChassis(victim))
	var after map[string][]string
	require.NoError(t, sandbox.Poll(60*time.Second, "no Gateway_Chassis naming the removed "+victim, func() (bool, error) {
		after = gatewayOrders(t, e.l)
		for _, r := range routers {
			if len(after[r]) == 0 || slices.Contains(after[r], victim) {
				return false, nil
			}
		}
		return true, nil
	}), "Gateway_Chassis, highest priority first, before: %v, now: %v", before, after)
	rescheduled := time.Since(removedAt)

	moved := primariesMoved(before, after)
	for _, r := range routers {
		if before[r][0] != victim {
			assert.Equal(t, before[r][0], after[r][0], "router %s's primary was not %s: it must stay (candidates before %v, after %v)", r, victim, before[r], after[r])
		}
	}
	msg := fmt.Sprintf("controller failover: %s removed from the SB -> every Gateway_Chassis rewritten after %s; primaries moved: %s",
		victim, rescheduled.Round(time.Millisecond), moved)
	report(t, msg)

	survivor := after["router1"][0]
	e.ready(survivor, "hv1", "hv2")
	e.send("hv1", "vm-a", vmAMAC, vmAIP, 40031, 5031)
	waitFor(t, e.wire(survivor), "vm-a's UDP leaving SNATed via router1's new primary "+survivor, 0, snated(5031))
}

// TestGatewayAddRemoveMovesOnlyWhatMust: six routers over two gateways
// under `run`. A third gateway joins: no router's primary moves (it becomes
// a backup of each, and takes the next router created). A gateway leaves
// the SB: only the routers whose primary it was move.
func TestGatewayAddRemoveMovesOnlyWhatMust(t *testing.T) {
	e := newOVN(t)
	const n = 6
	dir := failoverInput(t, false, n)
	startController(t, "addremove", "--nb", e.l.NBEndpoint(), "--sb", e.l.SBEndpoint(), "--from-file", dir)
	routers := failoverRouters(n)
	initial := waitScheduled(t, e.l, routers, 2)
	t.Logf("over 2 gateways: %v (primaries per chassis %v)", initial, load(initial))

	require.NoError(t, e.l.AddGateway("gw3", ""))
	// The controller has reacted once every router has gw3 among its
	// candidates (each had fewer than three); then a router created after
	// the add is scheduled.
	var added map[string][]string
	require.NoError(t, sandbox.Poll(60*time.Second, "gw3 a candidate of every router", func() (bool, error) {
		added = gatewayOrders(t, e.l)
		for _, r := range routers {
			if !slices.Contains(added[r], "gw3") {
				return false, nil
			}
		}
		return true, nil
	}), "Gateway_Chassis, highest priority first, before gw3: %v, now: %v", initial, added)
	newcomer := writeFailoverRouter(t, dir, n)
	added = waitScheduled(t, e.l, append(slices.Clone(routers), newcomer), 3)
	t.Logf("after adding gw3: %v (primaries per chassis %v)", added, load(added))
	assert.Empty(t, primariesMoved(initial, added), "adding gw3 must move no router's primary (before: %v, after: %v)", initial, added)
	assert.Equal(t, "gw3", added[newcomer][0], "router %s created after gw3 joined: the least-loaded gateway gw3 is its primary (primaries per chassis %v)", newcomer, load(added))

	// Remove the gateway that is primary of the most routers.
	counts := load(added)
	victim := ""
	for _, gw := range []string{"gw1", "gw2", "gw3"} {
		if victim == "" || counts[gw] > counts[victim] {
			victim = gw
		}
	}
	require.Positive(t, counts[victim], "some gateway must be primary of a router: %v", added)
	_, err := e.l.KillChassis(victim)
	require.NoError(t, err)
	require.NoError(t, e.l.RemoveChassis(victim))
	var removed map[string][]string
	all := append(slices.Clone(routers), newcomer)
	require.NoError(t, sandbox.Poll(60*time.Second, "no Gateway_Chassis naming the removed "+victim, func() (bool, error) {
		removed = gatewayOrders(t, e.l)
		for _, r := range all {
			if len(removed[r]) == 0 || slices.Contains(removed[r], victim) {
				return false, nil
			}
		}
		return true, nil
	}), "Gateway_Chassis, highest priority first, before removing %s: %v, now: %v", victim, added, removed)
	t.Logf("after removing %s: %v (primaries per chassis %v); moved: %s", victim, removed, load(removed), primariesMoved(added, removed))
	for _, r := range all {
		if added[r][0] != victim {
			assert.Equal(t, added[r][0], removed[r][0], "router %s's primary was not %s: it must stay (candidates before %v, after %v)", r, victim, added[r], removed[r])
		}
	}
}

// gatewayOrders reads, for each router of ours with a gateway port, its
// Gateway_Chassis chassis, highest priority (the primary) first. The ports
// and the Gateway_Chassis are two reads: when a port names a row the first
// read did not see (written in between), it reads both again.
func gatewayOrders(t *testing.T, d sandbox.Deployment) map[string][]string {
	t.Helper()
	type gc struct {
		chassis  string
		priority int
	}
	for attempt := 0; ; attempt++ {
		ports := nbCSV(t, d, "name,gateway_chassis", "Logical_Router_Port")
		rows := map[string]gc{}
		for _, rec := range nbCSV(t, d, "_uuid,chassis_name,priority", "Gateway_Chassis") {
			p, err := strconv.Atoi(rec[2])
			require.NoError(t, err, "Gateway_Chassis %s priority %q", rec[0], rec[2])
			rows[rec[0]] = gc{rec[1], p}
		}
		out := map[string][]string{}
		torn := false
		for _, rec := range ports {
			router, ok := strings.CutPrefix(rec[0], "kv-rtoe-")
			if !ok || rec[1] == "" {
				continue
			}
			var gcs []gc
			for _, id := range strings.Fields(rec[1]) {
				g, ok := rows[id]
				torn = torn || !ok
				gcs = append(gcs, g)
			}
			sort.Slice(gcs, func(i, j int) bool { return gcs[i].priority > gcs[j].priority })
			for _, g := range gcs {
				out[router] = append(out[router], g.chassis)
			}
		}
		if !torn {
			return out
		}
		require.Less(t, attempt, 100, "Logical_Router_Port.gateway_chassis names Gateway_Chassis rows that are not there: %v", out)
	}
}

// nbCSV lists columns of every row of table as CSV records.
func nbCSV(t *testing.T, d sandbox.Deployment, columns, table string) [][]string {
	t.Helper()
	out := nbctl(t, d, "--format=csv", "--data=bare", "--no-headings", "--columns="+columns, "list", table)
	recs, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	require.NoError(t, err, "ovn-nbctl list %s as CSV:\n%s", table, out)
	return recs
}

// waitScheduled waits until every router has want gateway candidates and
// returns them, highest priority first.
func waitScheduled(t *testing.T, d sandbox.Deployment, routers []string, want int) map[string][]string {
	t.Helper()
	var got map[string][]string
	require.NoError(t, sandbox.Poll(120*time.Second, fmt.Sprintf("%d routers with %d Gateway_Chassis each", len(routers), want), func() (bool, error) {
		got = gatewayOrders(t, d)
		for _, r := range routers {
			if len(got[r]) != want {
				return false, nil
			}
		}
		return true, nil
	}), "Gateway_Chassis seen, highest priority first: %v", got)
	return got
}

// primariesMoved lists the routers of before whose primary differs in
// after, as "router: old -> new".
func primariesMoved(before, after map[string][]string) []string {
	var moved []string
	for _, r := range slices.Sorted(maps.Keys(before)) {
		var old, now string
		if len(before[r]) > 0 {
			old = before[r][0]
		}
		if len(after[r]) > 0 {
			now = after[r][0]
		}
		if old != now {
			moved = append(moved, fmt.Sprintf("%s: %s -> %s", r, old, now))
		}
	}
	return moved
}

// load counts the routers each chassis is primary of.
func load(orders map[string][]string) map[string]int {
	out := map[string]int{}
	for _, o := range orders {
		if len(o) > 0 {
			out[o[0]]++
		}
	}
	return out
}

// boundChassis is the name of the chassis the SB binds port to ("" when
// none).
func boundChassis(t *testing.T, d sandbox.Deployment, port string) string {
	t.Helper()
	id, err := d.SBCtl("--bare", "--columns=chassis", "find", "Port_Binding", "logical_port="+port)
	require.NoError(t, err)
	if id = strings.TrimSpace(id); id == "" {
		return ""
	}
	name, err := d.SBCtl("--bare", "--columns=name", "list", "Chassis", id)
	require.NoError(t, err)
	return strings.TrimSpace(name)
}

// since formats at - from, or "-" when at is unset.
func since(from, at time.Time) string {
	if at.IsZero() {
		return "-"
	}
	return at.Sub(from).Round(time.Millisecond).String()
}

// failoverRouters are the names of the routers failoverInput writes.
func failoverRouters(n int) []string {
	var out []string
	for i := 0; i < n; i++ {
		out = append(out, fmt.Sprintf("fo-r%d", i))
	}
	return out
}

// failoverInput is deploy/examples with router1 not pinned to a gateway
// (or without router1), plus n routers fo-r<i> with SNAT from their own
// internal network over the same external network, none pinned.
func failoverInput(t *testing.T, withRouter1 bool, n int) string {
	t.Helper()
	dir := examples(t)
	if withRouter1 {
		edit(t, filepath.Join(dir, "router.yaml"), "  gateway: gw1\n", "")
	} else {
		require.NoError(t, os.WriteFile(filepath.Join(dir, "router.yaml"), nil, 0o644))
	}
	var b strings.Builder
	for i := 0; i < n; i++ {
		b.WriteString(failoverRouter(i))
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "failover.yaml"), []byte(b.String()), 0o644))
	return dir
}

// failoverRouter is router fo-r<i> and its internal network as YAML.
func failoverRouter(i int) string {
	return fmt.Sprintf(`---
apiVersion: k8s.cni.cncf.io/v1
kind: NetworkAttachmentDefinition
metadata: {name: fo-net-%[1]d, namespace: default, annotations: {network-config: '{"type": "GENEVE", "cidr": "10.%[2]d.0.0/24", "gatewayIp": "10.%[2]d.0.1"}'}}
---
apiVersion: kubevirt.io/v1
kind: VirtualRouter
metadata: {name: fo-r%[1]d}
spec:
  mac: "fa:16:3e:00:01:%02[1]x"
  enableSnat: true
  internal: [fo-net-%[1]d]
  external: {ip: 172.16.0.%[3]d, network: public}
  peerRouter: {ip: 172.16.0.1, mac: "00:00:00:00:ee:01"}
`, i, 30+i, 110+i)
}

// writeFailoverRouter adds router fo-r<i> to the running controller's
// input in a file of its own, written whole (renamed into place), and
// returns its name.
func writeFailoverRouter(t *testing.T, dir string, i int) string {
	t.Helper()
	tmp := filepath.Join(t.TempDir(), "new.yaml")
	require.NoError(t, os.WriteFile(tmp, []byte(failoverRouter(i)), 0o644))
	require.NoError(t, os.Rename(tmp, filepath.Join(dir, fmt.Sprintf("failover-%d.yaml", i))))
	return fmt.Sprintf("fo-r%d", i)
}
