package translator

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// OVN 23.09.0 made ovn-controller stop monitoring the SB row of a port
// whose interface is local but which is bound elsewhere (3d0f68ffbe
// "Reduce size of the SB monitor condition"), and 04f89faba "controller:
// Add missing monitor conditions" brought it back in 26.03.0, 24.03.7,
// 25.03.2 and 25.09.1. In between, a live migration's target whose
// interface was plugged (its pod started) before the port's dual binding
// reached its ovn-controller never sees that binding: no additional
// chassis, no activation by the VM's RARP, and the port only moves when
// the migration completes, a gap of however long the VM ran on the target
// unreachable. kubevirt-ovn writes the dual binding as soon as the
// target pod is scheduled, before its CNI plugs the interface, which
// avoids it when it wins the race; a chassis whose ovn-controller
// monitors all of the SB (ovn-monitor-all=true) is not affected at all.
// The release is ovn-northd's (SB_Global options:northd_internal_version):
// ovn-controllers are not in the SB, and run the same release in
// ovn-kubernetes' images.

// ReasonMigrationAtRisk is the reason of the note on a migration whose
// target may never see its dual binding (MonitorConditionBug).
const ReasonMigrationAtRisk = "MigrationAtRisk"

// MonitorConditionBug says whether OVN release v ("25.03.0"; a
// northd_internal_version such as "25.03.0-21.1.0-72.8" reads too) has
// the monitor-condition bug, and the first fixed release of its series.
func MonitorConditionBug(v string) (bool, string) {
	n, ok := parseRelease(v)
	if !ok {
		return false, ""
	}
	series := n[0]*100 + n[1]
	fixedIn := func(patch int, fixed string) (bool, string) {
		if n[2] >= patch {
			return false, ""
		}
		return true, fixed
	}
	switch {
	case series < 2309 || series >= 2603:
		return false, ""
	case series == 2403:
		return fixedIn(7, "24.03.7")
	case series == 2503:
		return fixedIn(2, "25.03.2")
	case series == 2509:
		return fixedIn(1, "25.09.1")
	}
	return true, "26.03.0" // 23.09, 24.09: no fixed release of their own
}

// parseRelease reads "25.03.0" (or a northd_internal_version,
// "25.03.0-21.1.0-72.8") as year, month and patch.
func parseRelease(v string) ([3]int, bool) {
	var n [3]int
	v, _, _ = strings.Cut(v, "-")
	parts := strings.Split(v, ".")
	if len(parts) < 3 {
		return n, false
	}
	for i := range n {
		x, err := strconv.Atoi(parts[i])
		if err != nil {
			return n, false
		}
		n[i] = x
	}
	return n, true
}

// StaleGatewayBug says whether ovn-controller of OVN release v may keep a
// moved gateway port's flows on the chassis it moved away from, answering
// ARP for the router's addresses and SNATing there until it recomputes
// (integration/testdata/gateway-moves.md): when the old gateway learns of
// the move and of the new gateway's claim at once, it never releases the
// port. 4848bbc92 "Fix flows not removed in ha migration" fixed it in
// 24.03.0, and in 23.09.1 on its own branch. kubevirt-ovn then nudges the
// chassis after a move (nb.NudgeBFD: a full recompute on every chassis that
// runs BFD); a fixed release needs no nudge. The release is ovn-northd's:
// OVN's upgrade order (ovn-controllers first, then the databases and
// ovn-northd) keeps the chassis at least at that release. An unknown
// release ("", or no number) is taken to have it: the nudge is harmless.
func StaleGatewayBug(v string) bool {
	n, ok := parseRelease(v)
	if !ok {
		return true
	}
	series := n[0]*100 + n[1]
	return series < 2309 || series == 2309 && n[2] < 1
}

// IPv6HealthChecksSince is the first OVN release whose ovn-controller
// probes IPv6 load balancer members (40a686e8e "Add IPv6 support for lb
// health-check"): before it, ovn-northd looks an IPv6 member up in
// ip_port_mappings without brackets and ovn-controller parses a
// Service_Monitor's address as IPv4 only, so an IPv6 member would never
// be probed and would stay in rotation whatever it answered.
const IPv6HealthChecksSince = "23.03.0"

// IPv6HealthChecks says whether OVN release v health-checks IPv6 load
// balancer members. An unknown release ("", or no number) is taken to:
// the release is read from the SB, and a load balancer refused until then
// would flap at every start.
func IPv6HealthChecks(v string) bool {
	n, ok := parseRelease(v)
	since, _ := parseRelease(IPv6HealthChecksSince)
	return !ok || slices.Compare(n[:], since[:]) >= 0
}

// SetOVNRelease records the OVN release of ovn-northd ("" unknown) and
// returns the units that changes: the networks of the migrating VMs whose
// notes it changes, and those of the health-checked IPv6 load balancers
// when it changes whether OVN probes them.
func (in *Input) SetOVNRelease(release string) []Unit {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.release == release {
		return nil
	}
	wasBug, _ := MonitorConditionBug(in.release)
	wasHC6 := IPv6HealthChecks(in.release)
	in.release = release
	affected := set[Unit]{}
	if nowBug, _ := MonitorConditionBug(release); nowBug != wasBug {
		for _, u := range in.migratingNetworks() {
			affected.add(u)
		}
	}
	if IPv6HealthChecks(release) != wasHC6 {
		for _, ds := range in.lbNames {
			for d := range ds {
				if d.HealthCheck != nil && strings.Contains(d.VIP, ":") {
					in.affectedByLoadBalancer(d, affected)
				}
			}
		}
	}
	return sortedUnits(affected)
}

// risk is the note on v's port bound with opts when its target chassis
// may never see the dual binding (MonitorConditionBug), "" otherwise.
func (b portBinder) risk(v *VMInterface, opts map[string]string) string {
	_, dst, dual := strings.Cut(opts["requested-chassis"], ",")
	if !dual || b.monitorAll.has(dst) {
		return ""
	}
	bug, fixed := MonitorConditionBug(b.release)
	if !bug {
		return ""
	}
	return fmt.Sprintf("%s %s/%s interface %s: OVN %s may never show its dual binding to %s's ovn-controller if the target pod's interface was plugged there first (fixed in %s): the port would then move to %s only when the migration completes. Set external_ids:ovn-monitor-all=true in the Open_vSwitch table of every chassis, or upgrade OVN",
		ObjVMI, v.Namespace, v.VMI, v.Interface, b.release, dst, fixed, dst)
}
