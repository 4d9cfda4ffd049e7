// Package gatewaystate reads what a central NB and its SB hold of our
// objects and where they run, and moves gateways: State holds each
// router's gateway order (its Gateway_Chassis rows), the SB's chassis and
// where each gateway port and VM port is bound now, the floating IPs,
// security groups and load balancers whose rows the NB holds, and whether
// the chassis have every commit (`kubevirt-ovn status`); Rebalance and
// Move even out the primaries, one router per transaction (`kubevirt-ovn
// rebalance`). The CLI parses the flags and prints.
package gatewaystate

import (
	"context"
	"slices"
	"strings"

	"github.com/go-logr/logr"
	"github.com/ovn-kubernetes/libovsdb/client"

	"github.com/kubevirt-ovn/kubevirt-ovn/nbmodel"
	"github.com/kubevirt-ovn/kubevirt-ovn/nbmodel/sbmodel"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator"
	kvnb "github.com/kubevirt-ovn/kubevirt-ovn/translator/nb"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/ovn"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/syncer"
)

// State is the gateway placement of one instance's routers, read from a
// central NB and its SB, with both clients open (Close them).
type State struct {
	// Routers are the gateway orders our routers' rows hold, sorted by
	// router (kvnb.Gateways).
	Routers []translator.Assignment
	// SNATIP maps a router to the SNAT IP of its gateway port.
	SNATIP map[string]string
	// Upstream maps a router whose internal IPv6 is routed to the routes
	// an upstream router needs (kvnb.UpstreamRoutes).
	Upstream map[string]kvnb.Upstream
	// Chassis are the SB's chassis, sorted by name.
	Chassis []translator.Chassis
	// Active maps a router to the chassis its gateway port is bound to
	// now, which BFD may have moved away from its primary; a port bound
	// nowhere is not listed.
	Active map[string]string
	// Migrations are the VM ports of ours bound to two chassis now (a
	// live migration runs), sorted by port.
	Migrations []Migration
	// Release is ovn-northd's OVN release ("" unknown).
	Release string
	// RouterNames are every router whose Logical_Router the NB holds,
	// with a gateway or not, sorted.
	RouterNames []string
	// FloatingIPs, SecurityGroups and LoadBalancers are the objects whose
	// rows the NB holds, sorted by spec.id (load balancers by name).
	FloatingIPs    []FloatingIP
	SecurityGroups []SecurityGroup
	LoadBalancers  []LoadBalancer
	// Bound maps each VM port (and other port) of ours the SB binds to
	// the chassis it is bound to.
	Bound map[string]string
	// NBCfg and HvCfg are NB_Global's: the chassis have every commit that
	// asked for it once HvCfg reaches NBCfg.
	NBCfg, HvCfg int

	instance string
	nb, sb   client.Client
}

// Read connects to the NB and the SB and reads the gateway state of
// instance's routers; log hears of the connections.
func Read(ctx context.Context, nb, sb ovn.Endpoint, instance string, log logr.Logger) (*State, error) {
	nbc, err := ovn.DialNB(ctx, nb, log)
	if err != nil {
		return nil, err
	}
	s := &State{instance: instance, nb: nbc}
	if err := ovn.ReadOwned(ctx, nbc, instance); err != nil {
		nbc.Close()
		return nil, err
	}
	sbc, err := ovn.ConnectWatchSB(ctx, sb, instance, log)
	if err != nil {
		nbc.Close()
		return nil, err
	}
	s.sb = sbc
	if s.Chassis, err = ovn.GatewayChassis(ctx, sbc); err == nil {
		s.Active, err = ovn.ActiveGateways(ctx, sbc)
	}
	if err != nil {
		s.Close()
		return nil, err
	}
	s.Routers = kvnb.Gateways(nbc, instance)
	held, err := kvnb.HeldClaims(ctx, nbc, instance)
	if err != nil {
		s.Close()
		return nil, err
	}
	s.SNATIP = map[string]string{}
	for ip, r := range held.SNATIPs {
		// The SNAT IP; an IPv6 address of the gateway port is the
		// router's spec.external.ipv6 (Upstream).
		if !strings.Contains(ip, ":") {
			s.SNATIP[r] = ip
		}
	}
	s.Upstream = kvnb.UpstreamRoutes(nbc, instance)
	s.Migrations = migrations(nbc, instance)
	s.Release = ovn.NorthdRelease(sbc)
	if err := s.readSB(ctx); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// readSB reads where the ports are bound, the health checks, NB_Global's
// realization counters, and the objects.
func (s *State) readSB(ctx context.Context) error {
	var err error
	if s.Bound, err = ovn.BoundPorts(ctx, s.sb, s.instance); err != nil {
		return err
	}
	offline, err := ovn.OfflineBackends(ctx, s.sb)
	if err != nil {
		return err
	}
	if s.NBCfg, s.HvCfg, err = ovn.Realization(ctx, s.nb); err != nil {
		return err
	}
	for i, m := range s.Migrations {
		s.Migrations[i].Activated = s.activated(ctx, m.Port)
	}
	return s.readObjects(ctx, s.nb, offline)
}

// activated are the chassis where a migrating port was activated (the
// VM's RARP seen there), from its SB binding.
func (s *State) activated(ctx context.Context, port string) []string {
	pb := &sbmodel.PortBinding{LogicalPort: port}
	if err := s.sb.Get(ctx, pb); err != nil {
		return nil
	}
	return ovn.Activated(pb)
}

// Migration is a VM port of ours that names two chassis: its VMI is
// live-migrating from Source to Target; Blocked, its port is blocked on
// the target until the VM's RARP there (activation-strategy).
type Migration struct {
	Port, VMI      string
	Source, Target string
	Blocked        bool
	// Activated are the chassis the SB says the port was activated on.
	Activated []string
}

// migrations are instance's VM ports in nbc's cache that name two chassis.
func migrations(nbc client.Client, instance string) []Migration {
	var out []Migration
	for _, m := range nbc.Cache().Table(nbmodel.LogicalSwitchPortTable).Rows() {
		p := m.(*nbmodel.LogicalSwitchPort)
		if p.ExternalIDs[translator.KeyManagedBy] != instance || p.ExternalIDs[translator.KeyVMI] == "" {
			continue
		}
		src, dst, dual := strings.Cut(p.Options["requested-chassis"], ",")
		if !dual {
			continue
		}
		out = append(out, Migration{Port: p.Name, VMI: p.ExternalIDs[translator.KeyVMI], Source: src, Target: dst,
			Blocked: p.Options["activation-strategy"] != ""})
	}
	slices.SortFunc(out, func(a, b Migration) int { return strings.Compare(a.Port, b.Port) })
	return out
}

// Unread is the state of no NB and SB: nothing read (status from the
// cluster's objects alone).
func Unread() *State {
	return &State{NBCfg: -1, HvCfg: -1, SNATIP: map[string]string{}, Active: map[string]string{}, Bound: map[string]string{}}
}

// Close closes the clients of the NB and the SB.
func (s *State) Close() {
	if s.nb != nil {
		s.nb.Close()
	}
	if s.sb != nil {
		s.sb.Close()
	}
}

// Load is a gateway chassis and the routers it serves.
type Load struct {
	translator.Chassis
	// Primaries are the routers whose order puts the chassis first,
	// Active those whose gateway port is bound to it now.
	Primaries, Active int
}

// Loads are the gateway chassis of the SB, by name, with their loads.
func (s *State) Loads() []Load {
	var out []Load
	for _, c := range s.Chassis {
		if !c.Gateway {
			continue
		}
		l := Load{Chassis: c}
		for _, a := range s.Routers {
			if a.Order[0] == c.Name {
				l.Primaries++
			}
			if s.Active[a.Router] == c.Name {
				l.Active++
			}
		}
		out = append(out, l)
	}
	return out
}

// Rebalance returns the moves that even out the routers' primaries over
// the gateway chassis (translator.Rebalance); it writes nothing.
func (s *State) Rebalance() []translator.Move {
	return translator.Rebalance(s.Routers, s.Chassis)
}

// Move commits one router's new gateway order: its Gateway_Chassis rows
// only, in one transaction.
func (s *State) Move(ctx context.Context, m translator.Move) error {
	u := translator.Unit{Kind: translator.KindRouter, Name: m.Router}
	var rows []translator.Row
	for _, gc := range translator.GatewayChassisRows(m.Router, m.Order, s.instance) {
		rows = append(rows, translator.Row{Model: gc, Parent: translator.GatewayPortName(m.Router)})
	}
	w := kvnb.Work{Desired: kvnb.Desired{Unit: u, Rows: rows, Tables: []string{nbmodel.GatewayChassisTable}}}
	res, err := kvnb.SyncWork(ctx, s.nb, []kvnb.Work{w}, kvnb.SyncOptions{Instance: s.instance})
	if err != nil {
		return err
	}
	for _, r := range res.Units {
		if r.Err != nil {
			return r.Err
		}
	}
	return nil
}

// FinishMoves finishes the moves committed, those of moves but for the
// routers of failed: it waits for their gateway ports to be bound on
// their new primaries and nudges the chassis (syncer.FinishMoves), saying
// what it did to note (may be nil). Only an OVN whose old gateways may keep
// a moved port's flows needs it (translator.StaleGatewayBug): on a fixed
// release it writes nothing, as sync and run do.
func (s *State) FinishMoves(ctx context.Context, moves []translator.Move, failed []string, note func(string)) {
	if !translator.StaleGatewayBug(s.Release) {
		return
	}
	moved := map[string]string{}
	for _, m := range moves {
		moved[m.Router] = m.To
	}
	for _, r := range failed {
		delete(moved, r)
	}
	syncer.FinishMoves(ctx, s.nb, s.sb, moved, note)
}
