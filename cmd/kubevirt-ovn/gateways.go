package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/go-logr/stdr"
	"github.com/ovn-kubernetes/libovsdb/client"

	"github.com/kubevirt-ovn/kubevirt-ovn/nbmodel"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator"
	kvnb "github.com/kubevirt-ovn/kubevirt-ovn/translator/nb"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/ovn"
)

// gatewayState is what status and rebalance read: our routers' gateway
// orders from the NB, the SB's chassis and where each gateway port is
// bound now.
type gatewayState struct {
	instance string
	nb       client.Client
	sb       client.Client
	routers  []translator.Assignment
	snatIP   map[string]string
	chassis  []translator.Chassis
	active   map[string]string
}

func (g *gatewayState) Close() {
	g.nb.Close()
	g.sb.Close()
}

// readGateways connects to both databases and reads the gateway state.
func readGateways(ctx context.Context, nb, sb ovn.Endpoint, instance string, stderr io.Writer) (*gatewayState, error) {
	logger := stdr.New(log.New(stderr, "", log.LstdFlags))
	nbc, err := ovn.DialNB(ctx, nb, logger)
	if err != nil {
		return nil, err
	}
	g := &gatewayState{instance: instance, nb: nbc}
	if err := ovn.ReadOwned(ctx, nbc, instance); err != nil {
		nbc.Close()
		return nil, err
	}
	sbc, err := ovn.ConnectSB(ctx, sb, logger)
	if err != nil {
		nbc.Close()
		return nil, err
	}
	g.sb = sbc
	if g.chassis, err = ovn.GatewayChassis(ctx, sbc); err == nil {
		g.active, err = ovn.ActiveGateways(ctx, sbc)
	}
	if err != nil {
		g.Close()
		return nil, err
	}
	g.routers = kvnb.Gateways(nbc, instance)
	held, err := kvnb.HeldClaims(ctx, nbc, instance)
	if err != nil {
		g.Close()
		return nil, err
	}
	g.snatIP = map[string]string{}
	for ip, r := range held.SNATIPs {
		g.snatIP[r] = ip
	}
	return g, nil
}

// openGateways parses the flags of command name (status, rebalance: more
// flags defined by more), checks them, and reads the gateway state. code is
// the exit status when g is nil.
func openGateways(name string, args []string, stderr io.Writer, more func(*flag.FlagSet)) (g *gatewayState, ctx context.Context, cancel context.CancelFunc, code int) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var nb, sb ovn.Endpoint
	endpointFlags(fs, &nb, &sb)
	instance := fs.String("instance", translator.DefaultInstance, "managed-by value marking the rows this kubevirt-ovn owns")
	timeout := fs.Duration("timeout", 60*time.Second, "give up after this long")
	more(fs)
	if err := fs.Parse(args); err != nil {
		return nil, nil, nil, 2
	}
	if nb.Address == "" || sb.Address == "" {
		fmt.Fprintf(stderr, "kubevirt-ovn %s: --nb and --sb are required\n", name)
		return nil, nil, nil, 2
	}
	if err := endpointsTLS(&nb, &sb); err != nil {
		fmt.Fprintf(stderr, "kubevirt-ovn %s: %v\n", name, err)
		return nil, nil, nil, 1
	}
	ctx, cancel = context.WithTimeout(context.Background(), *timeout)
	g, err := readGateways(ctx, nb, sb, *instance, stderr)
	if err != nil {
		cancel()
		fmt.Fprintf(stderr, "kubevirt-ovn %s: %v\n", name, err)
		return nil, nil, nil, 1
	}
	return g, ctx, cancel, 0
}

// runStatus prints, per router, its gateway order as the NB holds it and
// the chassis its gateway port is active on now (SB), then the primaries
// per gateway chassis.
func runStatus(args []string, stdout, stderr io.Writer) int {
	g, _, cancel, code := openGateways("status", args, stderr, func(*flag.FlagSet) {})
	if g == nil {
		return code
	}
	defer cancel()
	defer g.Close()
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ROUTER\tSNAT IP\tPRIMARY\tFAILOVER\tACTIVE\t")
	for _, a := range g.routers {
		primary := a.Order[0]
		if a.Pinned {
			primary += " (spec.gateway)"
		}
		failover := strings.Join(a.Order[1:], ",")
		if failover == "" {
			failover = "-"
		}
		active := g.active[a.Router]
		switch {
		case active == "":
			active = "- (not bound)"
		case active != a.Order[0]:
			active += " (failed over)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t\n", a.Router, g.snatIP[a.Router], primary, failover, active)
	}
	tw.Flush()
	fmt.Fprintln(stdout)
	fmt.Fprintln(stdout, "routers per gateway chassis (primary / active):")
	for _, c := range g.chassis {
		if !c.Gateway {
			continue
		}
		primaries, active := 0, 0
		for _, a := range g.routers {
			if a.Order[0] == c.Name {
				primaries++
			}
			if g.active[a.Router] == c.Name {
				active++
			}
		}
		maps := strings.Join(c.Physnets, ",")
		if maps == "" {
			maps = "no physical network"
		}
		fmt.Fprintf(stdout, "  %-20s %d / %d   maps %s\n", c.Name, primaries, active, maps)
	}
	return 0
}

// runRebalance computes the moves that even out the primaries over the
// gateway chassis (translator.Rebalance), prints them and, without
// --dry-run, commits them one router per transaction.
func runRebalance(args []string, stdout, stderr io.Writer) int {
	var dryRun, moveNudge *bool
	g, ctx, cancel, code := openGateways("rebalance", args, stderr, func(fs *flag.FlagSet) {
		dryRun = fs.Bool("dry-run", false, "print the moves and write nothing")
		moveNudge = moveNudgeFlag(fs)
	})
	if g == nil {
		return code
	}
	defer cancel()
	defer g.Close()
	moves := translator.Rebalance(g.routers, g.chassis)
	if len(moves) == 0 {
		fmt.Fprintln(stdout, "balanced: no router to move")
		return 0
	}
	if *dryRun {
		fmt.Fprintf(stdout, "dry run: %d moves, nothing is written\n", len(moves))
	}
	failed := 0
	var failedRouters []string
	for _, m := range moves {
		fmt.Fprintf(stdout, "move %s: %s -> %s (gateway chassis now %s)\n", m.Router, m.From, m.To, strings.Join(m.Order, ", "))
		if *dryRun {
			continue
		}
		if err := moveGateway(ctx, g.nb, g.instance, m); err != nil {
			fmt.Fprintf(stderr, "kubevirt-ovn rebalance: moving %s: %v\n", m.Router, err)
			failed++
			failedRouters = append(failedRouters, m.Router)
		}
	}
	if !*dryRun && *moveNudge {
		moved := map[string]string{}
		for _, m := range moves {
			moved[m.Router] = m.To
		}
		for _, r := range failedRouters {
			delete(moved, r)
		}
		finishMoves(ctx, g.nb, g.sb, moved, stderr)
	}
	if failed > 0 {
		fmt.Fprintf(stderr, "%d of %d moves failed; the other routers moved\n", failed, len(moves))
		return 1
	}
	if !*dryRun {
		fmt.Fprintf(stdout, "%d routers moved\n", len(moves))
	}
	return 0
}

// moveGateway commits one router's new gateway order: its Gateway_Chassis
// rows only, in one transaction.
func moveGateway(ctx context.Context, nbc client.Client, instance string, m translator.Move) error {
	u := translator.Unit{Kind: translator.KindRouter, Name: m.Router}
	var rows []translator.Row
	for _, gc := range translator.GatewayChassisRows(m.Router, m.Order, instance) {
		rows = append(rows, translator.Row{Model: gc, Parent: translator.GatewayPortName(m.Router)})
	}
	w := kvnb.Work{Desired: kvnb.Desired{Unit: u, Rows: rows, Tables: []string{nbmodel.GatewayChassisTable}}}
	res, err := kvnb.SyncWork(ctx, nbc, []kvnb.Work{w}, kvnb.SyncOptions{Instance: instance})
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
