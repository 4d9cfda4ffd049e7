package controller

import (
	"cmp"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubevirt-ovn/kubevirt-ovn/nbmodel"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/ovn"
)

// VMEvents receives what happened to the ports of a VMI during its live
// migrations: the Kubernetes source records them as Events of the VMI
// (its status is KubeVirt's). A Status that is one gets them.
type VMEvents interface {
	VMIEvent(namespace, name, eventType, reason, message string)
}

// Reasons of the Events of a VMI's migration.
const (
	ReasonMigrationBound       = "MigrationBound"
	ReasonMigrationActivated   = "MigrationActivated"
	ReasonMigrationCollapsed   = "MigrationCollapsed"
	ReasonMigrationNotFollowed = "MigrationNotFollowed"
	ReasonMigrationRolledBack  = "MigrationRolledBack"
)

// dualPort is a VM port committed bound on two chassis.
type dualPort struct {
	network, vmi string
	chassis      string // source,target
}

// vmEvent records an Event on the VMI namespace/name, when the status is
// a VMEvents and this controller is the one writing the central NB.
func (c *Controller) vmEvent(vmi, eventType, reason, format string, args ...any) {
	ev, ok := c.status.(VMEvents)
	if !ok || c.zone != "" {
		return
	}
	ns, name, ok := strings.Cut(vmi, "/")
	if !ok {
		return
	}
	ev.VMIEvent(ns, name, eventType, reason, fmt.Sprintf(format, args...))
}

// migrationEvents says, for network plan np just committed, what its
// migrating ports went through since its last commit: bound on both
// chassis, collapsed onto the target or back onto the source; and each
// note on a migration not followed, once while it holds.
func (c *Controller) migrationEvents(np *translator.NetworkPlan) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ports := make(map[string]*nbmodel.LogicalSwitchPort, len(np.Ports))
	for _, p := range np.Ports {
		ports[p.Name] = p
	}
	for name, d := range c.dual {
		if d.network == np.Name && ports[name] == nil {
			delete(c.dual, name) // its VM is gone
		}
	}
	for _, p := range np.Ports {
		vmi := p.ExternalIDs[translator.KeyVMI]
		if vmi == "" {
			continue
		}
		rc := p.Options["requested-chassis"]
		prev, was := c.dual[p.Name]
		src, dst, dual := strings.Cut(rc, ",")
		switch {
		case dual && prev.chassis != rc:
			c.dual[p.Name] = dualPort{network: np.Name, vmi: vmi, chassis: rc}
			if p.Options["activation-strategy"] != "" {
				c.vmEvent(vmi, corev1.EventTypeNormal, ReasonMigrationBound, "port %s bound on %s (source) and %s (target), blocked on %s until the VM's RARP there", p.Name, src, dst, dst)
			} else {
				c.vmEvent(vmi, corev1.EventTypeNormal, ReasonMigrationBound, "port %s bound on %s (source) and %s (target), both receiving until the migration completes (no activation strategy)", p.Name, src, dst)
			}
		case !dual && was:
			delete(c.dual, p.Name)
			psrc, pdst, _ := strings.Cut(prev.chassis, ",")
			switch rc {
			case pdst:
				c.vmEvent(vmi, corev1.EventTypeNormal, ReasonMigrationCollapsed, "port %s on %s alone: the VM runs on its target", p.Name, rc)
			case psrc:
				c.vmEvent(vmi, corev1.EventTypeWarning, ReasonMigrationRolledBack, "port %s back on %s alone: the migration to %s failed, was aborted or lost its target", p.Name, rc, pdst)
			default:
				c.vmEvent(vmi, corev1.EventTypeNormal, ReasonMigrationCollapsed, "port %s on %s alone", p.Name, rc)
			}
		}
	}
	// Notes: each once while it holds.
	seen := map[translator.VMNote]bool{}
	for _, n := range np.VMNotes {
		seen[n] = true
		if !c.vmNotes[np.Name][n] {
			c.vmEvent(n.VMI, corev1.EventTypeWarning, cmp.Or(n.Reason, ReasonMigrationNotFollowed), "%s", n.Text)
		}
	}
	if len(seen) == 0 {
		delete(c.vmNotes, np.Name)
	} else {
		c.vmNotes[np.Name] = seen
	}
}

// refreshRelease reads ovn-northd's OVN release from the SB into the
// input, and says once per release when its live migrations are at risk
// (translator.MonitorConditionBug).
func (c *Controller) refreshRelease() {
	release := ovn.NorthdRelease(c.sb)
	c.mu.Lock()
	changed := release != c.release
	c.release = release
	c.mu.Unlock()
	if !changed {
		return
	}
	c.EnqueueUnits(c.input.SetOVNRelease(release))
	if bug, fixed := translator.MonitorConditionBug(release); bug {
		c.opts.Log.Info("this OVN's ovn-controller may never see a live migration's dual binding on a target whose interface was plugged first: set external_ids:ovn-monitor-all=true in the Open_vSwitch table of every chassis, or upgrade OVN",
			"ovnRelease", release, "fixedIn", fixed)
		return
	}
	c.opts.Log.V(1).Info("OVN release", "ovnRelease", release)
}
