package translator

import (
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/gateways"
)

// The planner's calls into the gateway scheduler (package gateways): a
// router's own plan assigns its gateways (gatewaysOf), another unit's plan
// only asks where it lives (primaryOf), the input's changes release
// (removeRouter) and reassign (SetChassis) them.

// MaxGateways is how many chassis a router's gateway port lists: the
// primary and up to two failover candidates.
const MaxGateways = gateways.MaxGateways

// Assignment is a router's gateway order as the NB holds it, and Move one
// router's new order, for Rebalance.
type (
	Assignment = gateways.Assignment
	Move       = gateways.Move
)

// Rebalance returns the moves that even out the routers' primaries over
// the gateway chassis of chassis (see gateways.Rebalance).
func Rebalance(routers []Assignment, chassis []Chassis) []Move {
	return gateways.Rebalance(routers, gatewayChassis(chassis))
}

// gatewayChassis are the chassis that may be gateways.
func gatewayChassis(chassis []Chassis) []gateways.Chassis {
	var out []gateways.Chassis
	for _, c := range chassis {
		if c.Gateway {
			out = append(out, gateways.Chassis{Name: c.Name, Hostname: c.Hostname, Physnets: c.Physnets})
		}
	}
	return out
}

// need says what router d needs from the scheduler; ok is false when it
// needs no gateway or its external network is not valid.
func (in *Input) need(d *routerDecl) (gateways.Need, bool) {
	if !in.hasGateway(d) {
		return gateways.Need{}, false
	}
	ext, ok := in.validNetwork(d.External.Network)
	if !ok {
		return gateways.Need{}, false
	}
	return gateways.Need{Physnet: physnetOf(ext.Network), Pin: d.Gateway}, true
}

// physnetOf is the physical network a gateway chassis must map for n, ""
// when any gateway chassis can reach it.
func physnetOf(n *Network) string {
	if n.Type != NetworkFlat && n.Type != NetworkVLAN {
		return ""
	}
	if n.PhysicalNetworkName != "" {
		return n.PhysicalNetworkName
	}
	return n.Name
}

// gatewaysOf is the gateway order of router name (declared once, with need
// n), primary first, for its own plan: the scheduler assigns it, keeping
// what it had or adopting what the NB holds (held). Callers hold in.mu
// (read).
func (in *Input) gatewaysOf(name string, n gateways.Need, held Held) ([]string, error) {
	if !in.scheduling() {
		return in.givenGateways(name, n, held)
	}
	in.adoptHeldGateways(held)
	order, err := in.sched.Assign(name, n, held.HeldGateways(name))
	if err != nil {
		return nil, gatewayErr(err)
	}
	return order, nil
}

// gatewayCheck is the error gatewaysOf would return for router name (with
// need n), and assigns nothing. Callers hold in.mu (read).
func (in *Input) gatewayCheck(name string, n gateways.Need, held Held) error {
	if !in.scheduling() {
		_, err := in.givenGateways(name, n, held)
		return err
	}
	return gatewayErr(in.sched.Check(name, n))
}

// primaryOf is the primary gateway chassis of router d (declared once,
// with need n), for another unit's plan: it never changes the router's
// standing assignment (see gateways.Scheduler.Primary). A router without
// one whose own plan fails (checkRouter) gets none here either, as its
// plan does not: "" (the allocator writes no decision for it, and a zone
// agent sees it without a home). Callers hold in.mu (read).
func (in *Input) primaryOf(d *routerDecl, n gateways.Need, held Held) (string, error) {
	if !in.scheduling() {
		order, err := in.givenGateways(d.Name, n, held)
		if err != nil {
			return "", err
		}
		return order[0], nil
	}
	in.adoptHeldGateways(held)
	if primary, ok := in.sched.Standing(d.Name, n); ok {
		return primary, nil
	}
	if _, errs := in.checkRouter(d, held); len(errs) > 0 {
		return "", nil
	}
	primary, err := in.sched.Primary(d.Name, n, held.HeldGateways(d.Name))
	if err != nil {
		return "", gatewayErr(err)
	}
	return primary, nil
}

// scheduling says whether the scheduler chooses the gateways: the SB is
// known and in does not follow an allocator.
func (in *Input) scheduling() bool { return in.chassisKnown && !in.follow }

// givenGateways is router name's gateway order when the scheduler does not
// choose it: without the SB, its spec.gateway; a follower's, what the
// allocator decided (held).
func (in *Input) givenGateways(name string, n gateways.Need, held Held) ([]string, error) {
	if !in.chassisKnown {
		if n.Pin == "" {
			return nil, routerErr(name, "spec.gateway", "is required when the Southbound database is not given (--sb)")
		}
		return []string{n.Pin}, nil
	}
	if order := held.HeldGateways(name); len(order) > 0 {
		return order, nil
	}
	err := routerErr(name, "gateway", "not chosen yet by the allocator")
	err.Reason = ReasonWaiting
	return nil, err
}

// adoptHeldGateways has the scheduler adopt, before its first assignment,
// the gateway orders the NB holds for every router with a gateway in the
// input. Callers hold in.mu (read or write).
func (in *Input) adoptHeldGateways(held Held) {
	if in.sched.Adopted() {
		return
	}
	var orders []gateways.Held
	for name := range in.gatewayRouters {
		if len(in.routers[name]) != 1 {
			continue // ambiguous: not planned
		}
		for d := range in.routers[name] {
			n, ok := in.need(d)
			if !ok {
				continue
			}
			if order := held.HeldGateways(name); len(order) > 0 {
				orders = append(orders, gateways.Held{Router: name, Need: n, Order: order})
			}
		}
	}
	in.sched.AdoptHeld(orders)
}

// reassignGateways is SetChassis's part: with the candidates changed, the
// routers whose order changes, and those without one (failed before, or
// never planned), are to be planned again. Callers hold in.mu (write).
func (in *Input) reassignGateways() set[Unit] {
	affected := set[Unit]{}
	changed, adopted := in.sched.Reassign()
	for _, r := range changed {
		affected.add(Unit{Kind: KindRouter, Name: r})
	}
	for r := range in.gatewayRouters {
		if !adopted || in.sched.Order(r) == nil {
			affected.add(Unit{Kind: KindRouter, Name: r})
		}
	}
	return affected
}

// gatewayErr is the scheduler's err as an input error of its router.
func gatewayErr(err error) error {
	ge, ok := err.(*gateways.Error)
	if !ok {
		return err
	}
	ie := routerErr(ge.Router, ge.Field, "%s", ge.Msg)
	if ge.NoCandidate {
		ie.Reason = ReasonNoGatewayCandidate
	}
	return ie
}
