package integration

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubevirt-ovn/kubevirt-ovn/integration/sandbox"
)

// monitorBugNote is how kubevirt-ovn warns of OVN's monitor-condition bug
// (translator.MonitorConditionBug) for vm-a migrating to target.
func monitorBugNote(target string) string {
	return "may never show its dual binding to " + target + "'s ovn-controller"
}

// ovnFacts is what the suite expects of the OVN release it runs, by the
// release's number (not by asking kubevirt-ovn, whose detection the tests
// check); a release not listed in expectFacts fails there until someone
// says what its users get.
type ovnFacts struct {
	// monitorBug: OVN 3d0f68ffbe (23.09.0), fixed by 04f89faba (26.03.0,
	// 24.03.7, 25.03.2, 25.09.1): ovn-controller stops monitoring the SB
	// row of a port whose interface is local but which is bound to
	// another chassis, so a live migration's target plugged first may
	// never see its dual binding.
	monitorBug bool
	// staleGateway: the ovn-controller bug of testdata/gateway-moves.md
	// (an old gateway keeps a moved port's flows), fixed by 4848bbc92 in
	// 24.03.0 and 23.09.1.
	staleGateway bool
	// keepsFreedKeys: ovn-northd gives a datapath the tunnel key it
	// requests, once another datapath gave that key up, only when the
	// datapath's own NB row changes (the incremental datapath sync of
	// 25.09, northd/en-datapath-sync.c); before, every round assigned
	// every requested key again.
	keepsFreedKeys bool
	// staleActivation: an options:additional-chassis-activated flag
	// that ovn-controller writes on a port already bound to one chassis
	// (a RARP it handled after the port's collapse) stays there: ovn-northd
	// handles that SB change incrementally, without rewriting the port's
	// options, and keeps the flag on the port's next dual binding (it
	// reads the new requested additional chassis first since 23.09). OVN
	// 23.03's ovn-northd recomputes and drops it at once.
	staleActivation bool
}

// expectFacts is ovnFacts of the suite's release.
func expectFacts(t *testing.T) ovnFacts {
	t.Helper()
	rel, err := sandbox.CurrentRelease()
	require.NoError(t, err)
	switch rel.Series() {
	case "23.03":
		return ovnFacts{staleGateway: true}
	case "25.03":
		return ovnFacts{monitorBug: !rel.AtLeast(25, 3, 2), staleActivation: true}
	case "26.03":
		return ovnFacts{keepsFreedKeys: true, staleActivation: true}
	}
	require.FailNow(t, "no expectation for this release", "%s: say in expectFacts what the suite expects of it", rel)
	return ovnFacts{}
}

// monitorConditionBug checks what a user of the suite's OVN gets when a
// migration to target starts with the target's interface plugged first
// (stderr is the sync's that bound the port to both chassis): on a release
// with OVN's monitor-condition bug, kubevirt-ovn's note says so and what
// to do, and it is done as the note says: ovn-monitor-all=true on every
// chassis (the chassis' SB rows show it, and the next sync says nothing
// more); whether the target had seen the binding before is reported. On
// other releases there is no note and nothing to do.
func (e *env) monitorConditionBug(stderr, target string) {
	t := e.t
	t.Helper()
	rel, err := sandbox.CurrentRelease()
	require.NoError(t, err)
	if !expectFacts(t).monitorBug {
		assert.NotContains(t, stderr, monitorBugNote(target), "OVN %s has no monitor-condition bug", rel.Version)
		return
	}
	assert.Contains(t, stderr, "VirtualMachineInstance default/vm-a interface eth1: OVN "+rel.Version+" "+monitorBugNote(target), "OVN %s has the monitor-condition bug: kubevirt-ovn must say so", rel.Version)
	assert.Contains(t, stderr, "Set external_ids:ovn-monitor-all=true in the Open_vSwitch table of every chassis")
	// Every chassis caught up with the SB (the sync waited, --wait=hv).
	seen := e.vmABinding().additional == target
	report(t, fmt.Sprintf("OVN %s (monitor-condition bug): %s had claimed its dual binding before ovn-monitor-all: %v", rel.Version, target, seen))

	chassis := append(e.l.Gateways(), e.l.Workers()...)
	for _, ch := range chassis {
		_, err := e.l.Exec(ch, "ovs-vsctl", "set", "Open_vSwitch", ".", "external-ids:ovn-monitor-all=true")
		require.NoError(t, err)
	}
	require.NoError(t, sandbox.Poll(60*time.Second, "every chassis's SB row says ovn-monitor-all=true", func() (bool, error) {
		for _, ch := range chassis {
			out, err := e.l.SBCtl("--bare", "--columns=other_config", "find", "Chassis", "name="+ch)
			if err != nil || !strings.Contains(out, "ovn-monitor-all=true") {
				return false, err
			}
		}
		return true, nil
	}))
	r := kubevirtOVN(t, e.syncArgs()...)
	require.Equal(t, 0, r.code, r.stderr)
	assert.NotContains(t, r.stderr, monitorBugNote(target), "every chassis monitors all of the SB now")
}
