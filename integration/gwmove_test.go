package integration

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubevirt-ovn/kubevirt-ovn/integration/sandbox"
)

// Gateway moves that leave no stale datapath (issue 10). On OVN 23.03 a
// move written as a priority swap leaves the old gateway answering ARP for
// the SNAT IP in about 1 of 6 moves, until something makes its
// ovn-controller recompute; testdata/gateway-moves.md has the measurements
// and the cause. TestGatewayMovesLeaveNoStaleGateway proves the way of
// writing moves that integration/testdata/gateway-moves.md recommends;
// TestGatewayMoveExperiment measures the others.

// mover moves router1's gateway port to gateway `to` by writing the NB and
// returns once its writes are committed (a multi-step mover waits between
// its steps). Any writer can be one: ovn-nbctl here, kubevirt-ovn later.
type mover func(to string) error

// moveResult is what one move did on the wire.
type moveResult struct {
	from, to string
	// wrote is how long the mover took (all its steps); bound is the time
	// from its start until the SB bound the chassisredirect port to `to`.
	wrote, bound time.Duration
	// flaps counts the SB polls that saw the port bound elsewhere (the old
	// gateway, or no one) after it had been bound to `to` and before every
	// BFD session was up.
	flaps int
	// stale: the old gateway answered ARP for the SNAT IP after the move
	// had settled; staleFor is how long it went on answering (re-probed
	// until it stopped or staleProbeFor passed).
	stale    bool
	staleFor time.Duration
	// early: the old gateway answered a probe sent as soon as the mover
	// returned and the SB bound the port to `to` (GWMOVE_EARLY=1).
	early bool
}

func (r moveResult) String() string {
	s := fmt.Sprintf("%s -> %s: written in %s, bound after %s", r.from, r.to,
		r.wrote.Round(time.Millisecond), r.bound.Round(time.Millisecond))
	if r.early {
		s += ", EARLY: the old gateway answered right after the binding"
	}
	if r.flaps > 0 {
		s += fmt.Sprintf(", FLAPPED (%d polls saw it bound elsewhere)", r.flaps)
	}
	if r.stale {
		s += fmt.Sprintf(", STALE: %s went on answering ARP for the SNAT IP for %s", r.from, r.staleFor.Round(time.Millisecond))
	}
	return s
}

// staleProbeFor is how long a stale old gateway is re-probed before it is
// made to recompute, so that the next move starts clean.
const staleProbeFor = 10 * time.Second

// gwMoves is router1 (SNAT, gw1 primary, gw2 backup) in a sandbox; the
// test moves its gateway port between gw1 and gw2 with writes of its own.
type gwMoves struct {
	*env
	uuid map[string]string // gateway name -> SB Chassis _uuid
}

// newGWMoves builds router1 with kubevirt-ovn sync and waits until the port
// is on gw1 and every BFD session is up: before that both gateways may
// claim the port (the startup race in ../shared/ovn-sandbox/NOTES.md).
func newGWMoves(t *testing.T) *gwMoves {
	t.Helper()
	e := newOVN(t)
	e.manifests = examples(t)
	e.sync()
	e.ready("gw1", "hv1", "hv2")
	g := &gwMoves{env: e, uuid: map[string]string{}}
	for _, gw := range e.l.Gateways() {
		out, err := e.l.SBCtl("--bare", "--columns=_uuid", "find", "Chassis", "name="+gw)
		require.NoError(t, err)
		g.uuid[gw] = strings.TrimSpace(out)
		require.NotEmpty(t, g.uuid[gw], "chassis %s in the SB", gw)
	}
	return g
}

// boundTo is the gateway the SB binds the chassisredirect port to: a
// gateway name, "" when unbound, or the _uuid of another chassis.
func (g *gwMoves) boundTo() (string, error) {
	out, err := g.l.SBCtl("--bare", "--columns=chassis", "find", "Port_Binding", "logical_port="+crPort)
	if err != nil {
		return "", err
	}
	out = strings.TrimSpace(out)
	for name, uuid := range g.uuid {
		if uuid == out {
			return name, nil
		}
	}
	return out, nil
}

// waitBound polls the SB until the chassisredirect port is bound to gw
// ("": unbound).
func (g *gwMoves) waitBound(gw string) error {
	var last string
	err := sandbox.Poll(90*time.Second, fmt.Sprintf("%s bound to %q", crPort, gw), func() (bool, error) {
		var err error
		last, err = g.boundTo()
		return last == gw, err
	})
	if err != nil {
		return fmt.Errorf("%w (last bound to %q)", err, last)
	}
	return nil
}

// settle polls until the port is bound to gw and every BFD session of
// every chassis is up, and counts the polls that saw it bound elsewhere: a
// move that restarts BFD lets the backup claim the port meanwhile.
func (g *gwMoves) settle(gw string) int {
	t := g.t
	t.Helper()
	flaps := 0
	err := sandbox.Poll(90*time.Second, crPort+" bound to "+gw+" with every BFD session up", func() (bool, error) {
		b, err := g.boundTo()
		if err != nil {
			return false, err
		}
		if b != gw {
			flaps++
			return false, nil
		}
		for _, ch := range append(g.l.Gateways(), g.l.Workers()...) {
			out, err := g.l.Exec(ch, "ovs-appctl", "bfd/show")
			if err != nil {
				return false, err
			}
			n := strings.Count(out, "Local Session State: ")
			if n == 0 || n != strings.Count(out, "Local Session State: up") {
				return false, nil
			}
		}
		return true, nil
	})
	require.NoError(t, err)
	return flaps
}

var (
	arpForSNATIP = frame{SrcMAC: peerMAC, DstMAC: "ff:ff:ff:ff:ff:ff", ARPOp: 1,
		ARPSHA: peerMAC, ARPSPA: peerIP, ARPTHA: "00:00:00:00:00:00", ARPTPA: snatIP}
	isSNATIPReply = func(s seen) bool {
		return s.IsARP && s.ARPOp == 2 && s.ARPSPA == snatIP && s.ARPTPA == peerIP
	}
)

// answers puts an ARP request for the SNAT IP on gateway gw's wire and
// reports whether gw answers within quietWindow.
func (g *gwMoves) answers(gw string) bool {
	g.t.Helper()
	c := g.wire(gw)
	skip := count(g.t, c)
	g.inject(gw, arpForSNATIP)
	return g.seenWithin(c, skip, quietWindow)
}

// seenWithin reports whether c sends an ARP reply for the SNAT IP after
// skip within d.
func (g *gwMoves) seenWithin(c capture, skip int, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		ps, err := c.read()
		require.NoError(g.t, err)
		for _, p := range ps[skip:] {
			if isSNATIPReply(p) {
				return true
			}
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// checkMove moves the gateway port from `from` to `to` with move, waits
// until the SB binds it to `to`, every BFD session is up and every chassis
// has caught up (--wait=hv), then puts an ARP request for the SNAT IP on
// both gateways' wires: `to` must answer (the test fails otherwise);
// whether `from` answers too is the result's stale. A stale `from` is
// re-probed until it stops or staleProbeFor passes, then made to
// recompute (or nudged, GWMOVE_HEAL=nudge) so that the next move starts
// clean.
func (g *gwMoves) checkMove(move mover, from, to string) moveResult {
	t := g.t
	t.Helper()
	r := moveResult{from: from, to: to}
	start := time.Now()
	require.NoError(t, move(to), "moving the gateway port to %s", to)
	r.wrote = time.Since(start)
	require.NoError(t, g.waitBound(to))
	r.bound = time.Since(start)
	if os.Getenv("GWMOVE_EARLY") != "" {
		r.early = g.answers(from)
	}
	r.flaps = g.settle(to)
	nbctl(t, g.l, "--timeout=90", "--wait=hv", "sync")

	skipTo, skipFrom := count(t, g.wire(to)), count(t, g.wire(from))
	g.inject(from, arpForSNATIP)
	g.inject(to, arpForSNATIP)
	waitFor(t, g.wire(to), "ARP reply for the SNAT IP from the new gateway "+to, skipTo, isSNATIPReply)
	r.stale = g.seenWithin(g.wire(from), skipFrom, quietWindow)
	if r.stale {
		g.heal(&r)
	}
	now, err := g.boundTo()
	require.NoError(t, err)
	require.Equal(t, to, now, "%s no longer bound to %s after the probe", crPort, to)
	return r
}

// heal measures how long a stale old gateway goes on answering, then makes
// it stop.
func (g *gwMoves) heal(r *moveResult) {
	t := g.t
	t.Helper()
	staleAt := time.Now()
	if os.Getenv("GWMOVE_DIAG") != "" {
		g.diagnose(r.from)
	}
	for g.answers(r.from) && time.Since(staleAt) < staleProbeFor {
	}
	r.staleFor = time.Since(staleAt)
	if !g.answers(r.from) {
		return
	}
	how := "ovn-appctl recompute on " + r.from
	if os.Getenv("GWMOVE_HEAL") == "nudge" {
		how = "the BFD nudge"
		require.NoError(t, g.nudge())
	} else {
		_, err := g.l.Exec(r.from, "ovn-appctl", "recompute")
		require.NoError(t, err)
	}
	nbctl(t, g.l, "--timeout=90", "--wait=hv", "sync")
	require.False(t, g.answers(r.from), "%s still answers ARP for the SNAT IP after %s", r.from, how)
	t.Logf("stale %s silenced by %s", r.from, how)
}

// diagnose logs what a stale gateway holds (its flows for the SNAT IP) and
// the SB rows of the port, and copies the sandbox for its logs.
func (g *gwMoves) diagnose(gw string) {
	t := g.t
	flows, _ := g.l.Exec(gw, "ovs-ofctl", "dump-flows", "br-int")
	var keep []string
	for _, l := range strings.Split(flows, "\n") {
		if i := strings.Index(l, " actions="); i > 0 && strings.Contains(l, snatIP) {
			keep = append(keep, l[:i])
		}
	}
	pb, _ := g.l.SBCtl("--columns=chassis,ha_chassis_group", "find", "Port_Binding", "logical_port="+crPort)
	ha, _ := g.l.SBCtl("--columns=chassis,priority", "list", "HA_Chassis")
	t.Logf("stale %s: %d flows with %s:\n%s\nPort_Binding:\n%s\nHA_Chassis:\n%s", gw, len(keep), snatIP, strings.Join(keep, "\n"), pb, ha)
	if l, ok := g.l.(*sandbox.Local); ok {
		keepDir, err := os.MkdirTemp("", "gwmove-stale-")
		if err == nil && exec.Command("cp", "-r", l.Dir, keepDir).Run() == nil {
			t.Logf("sandbox at the stale move copied to %s", keepDir)
		}
	}
}

// moveBackAndForth makes n moves between gw1 and gw2 with move, starting
// from gw1, and logs and returns each move's result.
func (g *gwMoves) moveBackAndForth(move mover, n int) []moveResult {
	g.t.Helper()
	from, to := "gw1", "gw2"
	var rs []moveResult
	for i := 0; i < n; i++ {
		r := g.checkMove(move, from, to)
		g.t.Logf("move %d: %s", i+1, r)
		rs = append(rs, r)
		from, to = to, from
	}
	return rs
}

// summary counts stale and flapping moves and sums up the times.
func summary(rs []moveResult) (stale, flapped int, text string) {
	var total, worst time.Duration
	for _, r := range rs {
		if r.stale {
			stale++
		}
		if r.flaps > 0 {
			flapped++
		}
		total += r.bound
		worst = max(worst, r.bound)
	}
	avg := time.Duration(0)
	if len(rs) > 0 {
		avg = total / time.Duration(len(rs))
	}
	return stale, flapped, fmt.Sprintf("%d moves, %d stale, %d flapped; bound after %s on average, %s at worst",
		len(rs), stale, flapped, avg.Round(time.Millisecond), worst.Round(time.Millisecond))
}

// moves is GWMOVE_MOVES, or n.
func moves(t *testing.T, n int) int {
	if s := os.Getenv("GWMOVE_MOVES"); s != "" {
		var err error
		n, err = strconv.Atoi(s)
		require.NoError(t, err, "GWMOVE_MOVES")
	}
	return n
}

// The recommended move: the priority swap, then, once the SB binds the port
// to the new gateway, the nudge. A stale old gateway recomputes at the
// nudge; 40 moves back and forth leave no old gateway answering.
func TestGatewayMovesLeaveNoStaleGateway(t *testing.T) {
	if testing.Short() {
		t.Skip("40 gateway moves take about two minutes")
	}
	g := newGWMoves(t)
	rs := g.moveBackAndForth(g.swapNudge, moves(t, 40))
	stale, flapped, text := summary(rs)
	t.Logf("swap, wait for the binding, nudge: %s", text)
	assert.Zero(t, stale, "moves after which the old gateway went on answering ARP for the SNAT IP")
	assert.Zero(t, flapped, "moves during which the port went back to the old gateway")
}

// TestGatewayMoveExperiment measures the way of writing moves that
// GWMOVE_STRATEGY names over GWMOVE_MOVES moves (default 40); it fails
// only when the sandbox does. GWMOVE_DIAG=1 logs what a stale gateway
// holds; GWMOVE_HEAL=nudge silences it with the nudge, not a recompute;
// GWMOVE_BFD_MULT sets an operator's bfd-mult first; GWMOVE_EARLY=1 also
// probes the old gateway as soon as the SB binds the port to the new one.
func TestGatewayMoveExperiment(t *testing.T) {
	name := os.Getenv("GWMOVE_STRATEGY")
	if name == "" {
		t.Skip("set GWMOVE_STRATEGY to measure one way of writing moves")
	}
	g := newGWMoves(t)
	if v := os.Getenv("GWMOVE_BFD_MULT"); v != "" {
		nbctl(t, g.l, "set", "NB_Global", ".", "options:bfd-mult="+v)
		require.NoError(t, sandbox.WaitGateway(g.l, crPort, "gw1", "hv1", "hv2"))
	}
	strategies := map[string]mover{
		"swap":                 g.swapPriorities,
		"lower-then-raise":     g.lowerThenRaise,
		"remove-then-readd":    g.removeThenReadd,
		"replace":              g.replaceRows,
		"swap-nudge":           g.swapNudge,
		"ha-swap":              g.haSwap,
		"ha-remove-then-readd": g.haRemoveThenReadd,
		"ha-drain":             g.haDrain,
		"ha-drain-single":      g.haDrainSingle,
	}
	move, ok := strategies[name]
	require.True(t, ok, "GWMOVE_STRATEGY=%s is none of the strategies in gwmove_test.go", name)
	if strings.HasPrefix(name, "ha-") {
		g.useHAGroup()
	}
	_, _, text := summary(g.moveBackAndForth(move, moves(t, 40)))
	t.Logf("strategy %s: %s", name, text)
}

// The strategies. Gateway_Chassis rows are named <port>-<chassis>, as
// kubevirt-ovn writes them; the usual priorities are 2 for the primary and
// 1 for the backup.

// other is the gateway that is not gw.
func other(gw string) string {
	if gw == "gw1" {
		return "gw2"
	}
	return "gw1"
}

// swapPriorities (a): one transaction raises `to` and lowers the other.
func (g *gwMoves) swapPriorities(to string) error {
	_, err := g.l.NBCtl("lrp-set-gateway-chassis", gwPort, to, "2",
		"--", "lrp-set-gateway-chassis", gwPort, other(to), "1")
	return err
}

// swapNudge (the recommendation): the swap; once the SB binds the port to
// `to`, the nudge.
func (g *gwMoves) swapNudge(to string) error {
	if err := g.swapPriorities(to); err != nil {
		return err
	}
	if err := g.waitBound(to); err != nil {
		return err
	}
	return g.nudge()
}

// nudge rewrites NB_Global options:bfd-mult without changing what it
// means: absent becomes "3" (the default detect multiplier) and "3" becomes
// absent; an operator's value N becomes "0N" and back (OVS reads both as
// N). northd copies it to SB_Global, every ovn-controller that runs BFD
// rewrites the bfd column of its tunnel interfaces, and ovn-controller
// answers a change of a non-VIF interface with a full recompute, which
// drops a stale old gateway's flows.
func (g *gwMoves) nudge() error {
	cur, err := g.l.NBCtl("--if-exists", "get", "NB_Global", ".", "options:bfd-mult")
	if err != nil {
		return err
	}
	switch v := strings.Trim(strings.TrimSpace(cur), `"`); {
	case v == "":
		_, err = g.l.NBCtl("set", "NB_Global", ".", "options:bfd-mult=3")
	case v == "3":
		_, err = g.l.NBCtl("remove", "NB_Global", ".", "options", "bfd-mult")
	case strings.HasPrefix(v, "0"):
		_, err = g.l.NBCtl("set", "NB_Global", ".", "options:bfd-mult="+strings.TrimPrefix(v, "0"))
	default:
		_, err = g.l.NBCtl("set", "NB_Global", ".", "options:bfd-mult=0"+v)
	}
	return err
}

// lowerThenRaise (d): one transaction lowers the old primary below the
// backup (the port moves), a second restores the usual priorities.
func (g *gwMoves) lowerThenRaise(to string) error {
	if _, err := g.l.NBCtl("lrp-set-gateway-chassis", gwPort, other(to), "0"); err != nil {
		return err
	}
	if err := g.waitBound(to); err != nil {
		return err
	}
	return g.swapPriorities(to)
}

// removeThenReadd (c): one transaction deletes the old primary's
// Gateway_Chassis row, so that `to` is the port's only chassis; once the
// SB binds the port to `to`, a second one adds the old primary back as
// the backup.
func (g *gwMoves) removeThenReadd(to string) error {
	if _, err := g.l.NBCtl("lrp-del-gateway-chassis", gwPort, other(to)); err != nil {
		return err
	}
	if err := g.waitBound(to); err != nil {
		return err
	}
	return g.swapPriorities(to)
}

// replaceRows (e): one transaction deletes both Gateway_Chassis rows and
// inserts new ones with the priorities swapped.
func (g *gwMoves) replaceRows(to string) error {
	_, err := g.l.NBCtl("lrp-del-gateway-chassis", gwPort, to,
		"--", "lrp-del-gateway-chassis", gwPort, other(to),
		"--", "lrp-set-gateway-chassis", gwPort, to, "2",
		"--", "lrp-set-gateway-chassis", gwPort, other(to), "1")
	return err
}

// haGroup is the NB HA_Chassis_Group the ha- strategies give the port.
const haGroup = "kv-router1"

// useHAGroup replaces the port's Gateway_Chassis rows by an
// HA_Chassis_Group with the same chassis and priorities.
func (g *gwMoves) useHAGroup() {
	t := g.t
	t.Helper()
	nbctl(t, g.l, "ha-chassis-group-add", haGroup,
		"--", "ha-chassis-group-add-chassis", haGroup, "gw1", "2",
		"--", "ha-chassis-group-add-chassis", haGroup, "gw2", "1")
	uuid := strings.TrimSpace(nbctl(t, g.l, "--bare", "--columns=_uuid", "find", "HA_Chassis_Group", "name="+haGroup))
	nbctl(t, g.l, "lrp-del-gateway-chassis", gwPort, "gw1",
		"--", "lrp-del-gateway-chassis", gwPort, "gw2",
		"--", "set", "Logical_Router_Port", gwPort, "ha_chassis_group="+uuid)
	require.NoError(t, sandbox.WaitGateway(g.l, crPort, "gw1", "hv1", "hv2"))
}

// haSetPrimary writes the HA group's priorities: `to` 2, the other 1.
func (g *gwMoves) haSetPrimary(to string) error {
	_, err := g.l.NBCtl("ha-chassis-group-add-chassis", haGroup, to, "2",
		"--", "ha-chassis-group-add-chassis", haGroup, other(to), "1")
	return err
}

// haSwap (b): one transaction swaps the HA_Chassis priorities.
func (g *gwMoves) haSwap(to string) error { return g.haSetPrimary(to) }

// haRemoveThenReadd (c on an HA group): remove the old primary's
// HA_Chassis, wait for the SB binding, add it back as the backup.
func (g *gwMoves) haRemoveThenReadd(to string) error {
	if _, err := g.l.NBCtl("ha-chassis-group-remove-chassis", haGroup, other(to)); err != nil {
		return err
	}
	if err := g.waitBound(to); err != nil {
		return err
	}
	return g.haSetPrimary(to)
}

// haDrain (f): one transaction empties the HA group, so that no chassis
// may hold the port and the old primary releases it; once the SB shows it
// unbound, a second transaction adds `to` as primary and the other as
// backup.
func (g *gwMoves) haDrain(to string) error {
	if _, err := g.l.NBCtl("ha-chassis-group-remove-chassis", haGroup, to,
		"--", "ha-chassis-group-remove-chassis", haGroup, other(to)); err != nil {
		return err
	}
	if err := g.waitBound(""); err != nil {
		return err
	}
	return g.haSetPrimary(to)
}

// haDrainSingle (g): as haDrain, but `to` alone first; once it holds the
// port, the other is added as backup.
func (g *gwMoves) haDrainSingle(to string) error {
	if _, err := g.l.NBCtl("ha-chassis-group-remove-chassis", haGroup, to,
		"--", "ha-chassis-group-remove-chassis", haGroup, other(to)); err != nil {
		return err
	}
	if err := g.waitBound(""); err != nil {
		return err
	}
	if _, err := g.l.NBCtl("ha-chassis-group-add-chassis", haGroup, to, "2"); err != nil {
		return err
	}
	if err := g.waitBound(to); err != nil {
		return err
	}
	_, err := g.l.NBCtl("ha-chassis-group-add-chassis", haGroup, other(to), "1")
	return err
}
