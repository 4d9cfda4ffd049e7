package translator

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/ovn-kubernetes/libovsdb/model"

	"github.com/kubevirt-ovn/kubevirt-ovn/nbmodel"
)

// A VM port is bound to one chassis: options:requested-chassis names the
// chassis of its VMI's node, so that another interface with the same
// iface-id elsewhere (the target pod of a live migration, plugged before
// the VM moves) never takes the binding over. While a live migration runs
// it names the source, then the target (OVN's multi-chassis binding), with
// activation-strategy=rarp: ovn-controller on the target installs the
// port's flows ahead of time and keeps the port blocked there until the
// VM's first frame on the target (QEMU's RARP announcement), so nothing
// reaches the target before the VM runs there and the switch costs no
// control-plane round trip. A completed migration names the target alone,
// a failed or aborted one the source alone: never two chassis once it
// ended (a stale activated flag would skip the blocking next time).
// iface-id-ver is never set: the two pods of a migration carry different
// versions.

// ActivationStrategy is the options:activation-strategy of a migrating
// VM port.
const ActivationStrategy = "rarp"

// nodeChassis maps each chassis's name, and each hostname no chassis is
// named after, to the chassis's name: requested-chassis names chassis,
// which OVN's docs advise over hostnames.
func nodeChassis(chassis []Chassis) map[string]string {
	out := make(map[string]string, 2*len(chassis))
	for _, c := range chassis {
		out[c.Name] = c.Name
	}
	for _, c := range chassis {
		if _, taken := out[c.Hostname]; c.Hostname != "" && !taken {
			out[c.Hostname] = c.Name
		}
	}
	return out
}

// portBinder is what a VM port's binding depends on beside its VM
// interface: chassis maps nodes to chassis names (nodeChassis; nil: the SB
// is not known, and a node's name is its chassis's hostname, which OVN
// accepts too), activated the SB's activations by port (SetActivated),
// single that the OVN has no multi-chassis binding (SetSingleChassis).
type portBinder struct {
	chassis   map[string]string
	activated map[string]activation
	single    bool
	// release is the OVN release ("" unknown), monitorAll the chassis
	// that monitor all of the SB (release.go).
	release    string
	monitorAll set[string]
}

func (in *Input) binder() portBinder {
	return portBinder{chassis: in.nodeChassis, activated: in.activated, single: in.singleChassis,
		release: in.release, monitorAll: in.monitorAll}
}

// binding is the options of v's port (named port): requested-chassis,
// and while v migrates activation-strategy. A migration target that is no
// chassis is not followed (the port stays on its source) and the note
// says why. A migration the SB showed activated on its target is
// collapsed onto the target at once: the VM runs there. Without
// multi-chassis binding (OVN 22.03) a migrating port stays on its source
// until the VMI says the migration completed, and the note says so.
func (b portBinder) binding(v *VMInterface, port string) (map[string]string, string) {
	opts, note := migrationBinding(v, b.chassis)
	src, dst, dual := strings.Cut(opts["requested-chassis"], ",")
	if !dual {
		return opts, note
	}
	if b.single {
		return map[string]string{"requested-chassis": src}, fmt.Sprintf("%s %s/%s interface %s: this OVN has no multi-chassis port binding (before 22.06): its port stays on %s until status.migrationState says completed, then moves to %s", ObjVMI, v.Namespace, v.VMI, v.Interface, src, dst)
	}
	if act, ok := b.activated[port]; ok && act.uid == v.MigrationUID && act.chassis == dst {
		return map[string]string{"requested-chassis": dst}, note
	}
	return opts, note
}

// vmPortBinding is the binding of v's port with only chassis known.
func vmPortBinding(v *VMInterface, chassis map[string]string) (map[string]string, string) {
	return portBinder{chassis: chassis}.binding(v, "")
}

// activation is a migrating VM port's target chassis that the SB showed
// activated (options:additional-chassis-activated: ovn-controller saw the
// VM's RARP there), for the migration uid.
type activation struct{ uid, chassis, network string }

// SetActivated records the chassis the SB shows VM port port of network
// activated on (its Port_Binding's options:additional-chassis-activated;
// none when it has none or is gone) and returns the network to plan again
// when that collapses the port of a running migration onto its target.
// The activation is kept while the VM's migration (by its uid) runs:
// ovn-northd clears the flag as soon as the port names one chassis, and
// the port must stay on the target until the VMI says the migration
// completed. It is forgotten once the port's VM no longer migrates.
func (in *Input) SetActivated(network, port string, chassis []string) []Unit {
	// Every binding change of every VM port of ours comes here: one that
	// shows no activation, of a port with none remembered, changes
	// nothing, without a look at the network's VMs.
	if len(chassis) == 0 {
		in.mu.RLock()
		_, remembered := in.activated[port]
		in.mu.RUnlock()
		if !remembered {
			return nil
		}
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.setActivated(network, port, chassis, "")
}

// PortActivation is a migrating VM port of Network whose Port_Binding in
// its zone's SB shows it activated on Chassis: a zone agent publishes its
// zone's in its OVNZone, so that every other zone's twin follows the VM
// to its target at once (SetZoneActivations).
type PortActivation struct {
	Network string   `json:"network"`
	Port    string   `json:"port"`
	Chassis []string `json:"chassis"`
	// MigrationUID is the migration's: another migration of the VM
	// is not moved by it.
	MigrationUID string `json:"migrationUid"`
}

// SetZoneActivations records the activations every zone published (by
// zone) and returns the networks to plan again: SetActivated for each.
// They are kept and applied again whenever VM interfaces change (Set): a
// zone's agent may hear of the activation before of the migration.
// An activation no longer published is kept while its migration runs, as
// SetActivated keeps one ovn-northd cleared.
func (in *Input) SetZoneActivations(byZone map[string][]PortActivation) []Unit {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.published = map[string]PortActivation{}
	for _, acts := range byZone {
		for _, a := range acts {
			if len(a.Chassis) > 0 {
				in.published[a.Port] = a
			}
		}
	}
	affected := set[Unit]{}
	in.applyPublished(affected)
	return sortedUnits(affected)
}

// applyPublished applies the published activations (SetZoneActivations),
// adding to affected the networks whose plan they change; in.mu held.
func (in *Input) applyPublished(affected set[Unit]) {
	for _, a := range in.published {
		for _, u := range in.setActivated(a.Network, a.Port, a.Chassis, a.MigrationUID) {
			affected.add(u)
		}
	}
}

// Activations are the migrating VM ports the SB showed activated on their
// target (SetActivated), as long as their migration runs: what a zone
// agent publishes for the other zones' twins, though ovn-northd clears the
// flag as soon as the port names one chassis.
func (in *Input) Activations() []PortActivation {
	in.mu.RLock()
	defer in.mu.RUnlock()
	out := make([]PortActivation, 0, len(in.activated))
	for port, a := range in.activated {
		out = append(out, PortActivation{Network: a.network, Port: port, Chassis: []string{a.chassis}, MigrationUID: a.uid})
	}
	slices.SortFunc(out, func(a, b PortActivation) int { return strings.Compare(a.Port, b.Port) })
	return out
}

// setActivated is SetActivated, in.mu held.
// uid, when set, is the migration the activation is of (published by
// another zone): one of another migration is not applied.
func (in *Input) setActivated(network, port string, chassis []string, uid string) []Unit {
	var v *VMInterface
	for d := range in.vms[network] {
		if VMPortName(d.Network, d.Namespace, d.VMI, d.Interface) == port {
			v = &d.VMInterface
			break
		}
	}
	if v == nil || v.MigrationTarget == "" {
		delete(in.activated, port)
		return nil
	}
	if uid != "" && uid != v.MigrationUID {
		return nil
	}
	// The target as the port's dual binding names it (none: the
	// migration is not followed, nothing to collapse).
	opts, _ := migrationBinding(v, in.nodeChassis)
	_, dst, dual := strings.Cut(opts["requested-chassis"], ",")
	if !dual || !slices.Contains(chassis, dst) {
		return nil
	}
	a := activation{uid: v.MigrationUID, chassis: dst, network: network}
	if in.activated[port] == a {
		return nil
	}
	in.activated[port] = a
	return []Unit{{Kind: KindNetwork, Name: network}}
}

// migrationBinding is the binding of v's port on an OVN with
// multi-chassis binding, before any activation.
func migrationBinding(v *VMInterface, chassis map[string]string) (map[string]string, string) {
	if v.Node == "" {
		return nil, ""
	}
	name := func(node string) (string, bool) {
		if chassis == nil {
			return node, true
		}
		c, ok := chassis[node]
		return c, ok
	}
	src, ok := name(v.Node)
	if !ok {
		src = v.Node // its port cannot bind yet: let OVN say which chassis it waits for
	}
	opts := map[string]string{"requested-chassis": src}
	if v.MigrationTarget == "" {
		return opts, ""
	}
	dst, ok := name(v.MigrationTarget)
	switch {
	case !ok:
		return opts, fmt.Sprintf("%s %s/%s interface %s: %s %s is no chassis (hostname or chassis name in the Southbound): its port stays on %s", ObjVMI, v.Namespace, v.VMI, v.Interface, cmp.Or(v.MigrationTargetField, "status.migrationState.targetNode"), v.MigrationTarget, src)
	case dst == src:
		return opts, ""
	}
	opts["requested-chassis"] = src + "," + dst
	if !v.NoActivation {
		opts["activation-strategy"] = ActivationStrategy
	}
	return opts, ""
}

// In interconnect mode a VM port is a normal port in the zone of the
// chassis it is bound to and a type=remote twin, bound to that chassis, in
// the network's other zones. While a migration to another zone runs, the
// target zone's twin becomes a normal port bound to the source (a remote
// chassis there) and to the target, blocked there until the VM's RARP: its
// ovn-controller claims it as an additional chassis and clones the port's
// traffic to it, as in central mode. The source zone keeps its port on the
// source alone, the other zones their twin on the source. Once the port
// collapses onto the target (activated in the zone that saw it, or
// completed), the target's zone has it alone and every other zone a twin
// bound to the target. The name and the tunnel key never change. The
// target zone's binding to a remote main chassis is ovn-northd's from OVN
// 24.03.6 / 24.09.3 / 25.03 (0688d7e83), the CMS's SB write before
// (RemoteBinding).

// zonePort is VM port p of v as zone z has it: a copy of p for a zone it
// is local to (without the target of a migration to another zone in the
// source's zone), and remote, with requested-chassis the chassis it is
// bound to, for another zone.
func (in *Input) zonePort(p *nbmodel.LogicalSwitchPort, v *VMInterface, z string) (*nbmodel.LogicalSwitchPort, bool) {
	src, dst, dual := strings.Cut(p.Options["requested-chassis"], ",")
	main := in.nodes[src].zone
	if src == "" {
		main = in.nodes[v.Node].zone
	}
	switch {
	case dual && in.nodes[dst].zone == z && main != z:
		return p, false // the target's zone: both chassis
	case main != z:
		chassis := src
		if chassis == "" {
			chassis = in.nodes[v.Node].chassis
		}
		return &nbmodel.LogicalSwitchPort{Options: map[string]string{"requested-chassis": chassis}}, true
	case dual && in.nodes[dst].zone != z:
		// The source's zone: the source alone; the target's zone clones.
		c := model.Clone(p).(*nbmodel.LogicalSwitchPort)
		c.Options = map[string]string{"requested-chassis": src}
		return c, false
	}
	return p, false
}

// RemoteBinding is the chassis a port row of a zone's NB is bound to from
// another zone, for the CMS to set in that zone's SB before OVN binds it
// itself (BindRemotePorts): a type=remote port's requested-chassis, and
// the main chassis of a port bound to two (a migration's target zone),
// which is a remote chassis there unless the migration stays in the zone.
func RemoteBinding(p *nbmodel.LogicalSwitchPort) (string, bool) {
	rc := p.Options["requested-chassis"]
	switch main, _, dual := strings.Cut(rc, ","); {
	case p.Type == "remote" && rc != "":
		return rc, true
	case p.Type == "" && dual:
		return main, true
	}
	return "", false
}

// SetSingleChassis says whether the OVN has no multi-chassis port binding
// (OVN 22.03: requested-chassis names one chassis, no activation
// strategy) and returns the networks of the migrating VMs it changes.
func (in *Input) SetSingleChassis(single bool) []Unit {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.singleChassis == single {
		return nil
	}
	in.singleChassis = single
	return in.migratingNetworks()
}

// migratingNetworks are the networks of the VMs that migrate now.
func (in *Input) migratingNetworks() []Unit {
	affected := set[Unit]{}
	for n, decls := range in.vms {
		for d := range decls {
			if d.MigrationTarget != "" {
				affected.add(Unit{Kind: KindNetwork, Name: n})
				break
			}
		}
	}
	return sortedUnits(affected)
}
