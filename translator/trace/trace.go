// Package trace explains a packet's path through kubevirt-ovn's rows: it
// builds the microflow of a VM interface's (or an outside host's) packet
// to a destination, has ovn-trace run it on the zone's SB (following the
// packet into the next zone in interconnect mode), and names what the
// packet met in the user's objects: the network, the router, the route,
// the NAT rule, the load balancer and its member, the security group rule,
// the gateway chassis and whether it is active, and OVN's verdict. It does
// no I/O of its own: a Runner runs ovn-trace and reads the SB's flows.
package trace

import (
	"context"
	"fmt"
	"strings"
)

// Request is what to trace.
type Request struct {
	// From is a VM interface, namespace/name[/interface], or the IP
	// address of a host outside, whose packet enters from the external
	// network of the router that owns the destination.
	From string
	// To is an IP address; a VM interface, namespace/name[/interface];
	// fip:ID or fip:namespace/name[/interface], a floating IP by its
	// spec.id or by the VM it is bound to; or lb:NAME, a LoadBalancer's
	// VIP.
	To string
	// Protocol is tcp, udp or icmp; "" is a load balancer's protocol, or
	// icmp.
	Protocol string
	// Port is the destination port of tcp and udp; 0 is a load
	// balancer's port.
	Port int
	// Member is the load balancer member (ip or ip:port) to follow; ""
	// is the first one in rotation.
	Member string
}

// SourcePort is the source port of a traced tcp or udp packet.
const SourcePort = 40000

// Runner runs ovn-trace and reads the SB for a trace.
type Runner interface {
	// Trace runs ovn-trace on zone's SB for microflow entering datapath,
	// with lbDst ("" none) as the load-balancing destination, and returns
	// its --detailed output.
	Trace(ctx context.Context, zone, datapath, microflow, lbDst string) (string, error)
	// StageHints returns, for the Flow events among events, the
	// stage-hint of each logical flow (the first 8 hex digits of the NB
	// row it comes from) by the flow's UUID.
	StageHints(ctx context.Context, zone string, events []Event) (map[string]string, error)
}

// Path is a traced packet's path in the user's objects.
type Path struct {
	From    string  `json:"from"`
	To      string  `json:"to"`
	Packet  string  `json:"packet"`
	Hops    []Hop   `json:"hops"`
	Verdict Verdict `json:"verdict"`
	// Traces are the ovn-trace runs, one per zone followed.
	Traces []Run `json:"traces"`
}

// Hop is one thing the packet met.
type Hop struct {
	Zone    string `json:"zone,omitempty"`
	Kind    string `json:"kind"`
	Object  string `json:"object"`
	Detail  string `json:"detail"`
	Chassis string `json:"chassis,omitempty"`
	// Refs name the objects of the hop for tools: router, network,
	// securityGroup, rule and action, loadBalancer, vip and member,
	// floatingIP, externalIP and logicalIP, snatIP, prefix and nexthop,
	// activeChassis and gatewayChassis.
	Refs map[string]string `json:"refs,omitempty"`
}

// The kinds of hops.
const (
	HopSwitch        = "switch"
	HopRouter        = "router"
	HopRoute         = "route"
	HopNAT           = "nat"
	HopFloatingIP    = "floating-ip"
	HopLoadBalancer  = "load-balancer"
	HopSecurityGroup = "security-group"
	HopACL           = "acl"
	HopGateway       = "gateway"
	HopZone          = "zone"
)

// Verdict is where the packet ends.
type Verdict struct {
	// Result is delivered (to a VM), left (by a physical network),
	// dropped, unreachable (no path: nothing of OVN's would carry it),
	// resolving (the router asks for the next hop's MAC and drops the
	// packet meanwhile), continues (into a zone the trace was not given)
	// or error.
	Result  string `json:"result"`
	Detail  string `json:"detail"`
	Chassis string `json:"chassis,omitempty"`
}

// The results of a verdict.
const (
	Delivered   = "delivered"
	Left        = "left"
	Dropped     = "dropped"
	Unreachable = "unreachable"
	Resolving   = "resolving"
	Continues   = "continues"
	Failed      = "error"
)

// Run is one ovn-trace run: its zone, datapath and microflow, and what
// it printed (not in JSON).
type Run struct {
	Zone      string `json:"zone,omitempty"`
	Datapath  string `json:"datapath"`
	Microflow string `json:"microflow"`
	LBDst     string `json:"lbDst,omitempty"`
	Output    string `json:"-"`
}

// maxZones bounds how many zones a trace follows the packet through.
const maxZones = 4

// Trace traces req through zones (one, unnamed, in central mode).
func Trace(ctx context.Context, zones []*Zone, req Request, r Runner) (*Path, error) {
	xs := make([]*index, len(zones))
	for i, z := range zones {
		xs[i] = newIndex(z)
	}
	t := &tracer{xs: xs, req: req}
	start, err := t.plan()
	if err != nil {
		return nil, err
	}
	p := &Path{From: t.fromDesc, To: t.toDesc, Packet: start.h.String()}
	if start.note != nil {
		p.Hops = append(p.Hops, *start.note)
	}
	if start.verdict != nil {
		p.Verdict = *start.verdict
		return p, nil
	}
	at := start
	for n := 0; ; n++ {
		mf := at.h.microflow(at.inport)
		run := Run{Zone: at.x.zone.Name, Datapath: at.datapath, Microflow: mf, LBDst: t.lbDst}
		out, err := r.Trace(ctx, at.x.zone.Name, at.datapath, mf, t.lbDst)
		run.Output = out
		p.Traces = append(p.Traces, run)
		if err != nil {
			return p, err
		}
		events, err := Parse(out)
		if err != nil {
			return p, err
		}
		hints, err := r.StageHints(ctx, at.x.zone.Name, events)
		if err != nil {
			return p, err
		}
		e := &explainer{t: t, x: at.x, h: at.h, hints: hints, srcChassis: at.chassis}
		e.explain(events)
		p.Hops = append(p.Hops, e.hops...)
		p.Verdict = e.verdict
		if e.next == nil {
			return p, nil
		}
		next, v := t.follow(at.x, e.next)
		if v != nil || n+1 == maxZones {
			if v == nil {
				v = &Verdict{Result: Continues, Detail: fmt.Sprintf("still going after %d zones; not followed further", maxZones)}
			}
			p.Verdict = *v
			return p, nil
		}
		p.Hops = append(p.Hops, Hop{Zone: next.x.zone.Name, Kind: HopZone, Object: "zone " + next.x.zone.Name,
			Detail: fmt.Sprintf("through the tunnel to chassis %s, where %s is", next.chassis, at.x.describePort(e.next.port))})
		at = next
	}
}

// Text writes p for a reader.
func (p *Path) Text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s → %s: %s\n", p.From, p.To, p.Packet)
	for _, h := range p.Hops {
		zone := ""
		if h.Zone != "" {
			zone = "[" + h.Zone + "] "
		}
		fmt.Fprintf(&b, "  %s%s: %s\n", zone, h.Object, h.Detail)
	}
	fmt.Fprintf(&b, "%s: %s\n", p.Verdict.Result, p.Verdict.Detail)
	return b.String()
}
