package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/go-logr/stdr"
	"github.com/ovn-kubernetes/libovsdb/client"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/kubevirt-ovn/kubevirt-ovn/nbmodel"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator"
	kvnb "github.com/kubevirt-ovn/kubevirt-ovn/translator/nb"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/ovn"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/syncer"
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

// gatewayFlags are the flags of status and rebalance.
type gatewayFlags struct {
	nb, sb    ovn.Endpoint
	instance  string
	timeout   time.Duration
	dryRun    bool
	moveNudge bool
}

// add defines the databases' flags and the options.
func (f *gatewayFlags) add(g *flagGroups) *pflag.FlagSet {
	endpointFlags(g.group(groupDatabases), &f.nb, &f.sb)
	opts := g.group("Options")
	instanceFlag(opts, &f.instance)
	opts.DurationVar(&f.timeout, "timeout", 60*time.Second, "give up after this long")
	return opts
}

// open checks the flags of cmd (status, rebalance) and reads the gateway
// state; the caller closes it and calls cancel.
func (f *gatewayFlags) open(cmd *cobra.Command) (*gatewayState, context.Context, context.CancelFunc, error) {
	if f.nb.Address == "" || f.sb.Address == "" {
		return nil, nil, nil, usageErrorf("--nb and --sb are required")
	}
	if err := endpointsTLS(&f.nb, &f.sb); err != nil {
		return nil, nil, nil, err
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), f.timeout)
	g, err := readGateways(ctx, f.nb, f.sb, f.instance, cmd.ErrOrStderr())
	if err != nil {
		cancel()
		return nil, nil, nil, err
	}
	return g, ctx, cancel, nil
}

func newStatusCmd() *cobra.Command {
	var f gatewayFlags
	cmd := &cobra.Command{
		Use:     "status --nb ADDR --sb ADDR [flags]",
		GroupID: "gateways",
		Short:   "Print each router's gateway chassis, and where its gateway port is active now",
		Long: `status prints, per router, its SNAT IP, its gateway chassis in order as the NB holds them
(the primary, marked when spec.gateway pins it, then the failover candidates) and the
chassis its gateway port is active on now (SB), marked when BFD has failed it over; then the
routers per gateway chassis (primary / active) and the physical networks each maps. It reads
one central NB and SB.`,
		Example: `  kubevirt-ovn status --nb tcp:192.0.2.10:6641 --sb tcp:192.0.2.10:6642`,
		Args:    noArgs,
		RunE:    runE(func(cmd *cobra.Command) error { return runStatus(cmd, &f) }),
	}
	var g flagGroups
	f.add(&g)
	g.install(cmd)
	return cmd
}

func newRebalanceCmd() *cobra.Command {
	var f gatewayFlags
	cmd := &cobra.Command{
		Use:     "rebalance --nb ADDR --sb ADDR [--dry-run] [flags]",
		GroupID: "gateways",
		Short:   "Move routers between gateway chassis until their primaries are even",
		Long: `rebalance moves routers between gateway chassis until the primaries are even (the most
and the fewest routers per chassis differ by one at most), one router per transaction,
printing each move. Routers whose spec.gateway pins their primary are not moved. It reads
and writes one central NB and reads its SB.`,
		Example: `  # The moves it would make
  kubevirt-ovn rebalance --nb tcp:192.0.2.10:6641 --sb tcp:192.0.2.10:6642 --dry-run`,
		Args: noArgs,
		RunE: runE(func(cmd *cobra.Command) error { return runRebalance(cmd, &f) }),
	}
	var g flagGroups
	opts := f.add(&g)
	opts.BoolVar(&f.dryRun, "dry-run", false, "print the moves and write nothing")
	moveNudgeFlag(opts, &f.moveNudge)
	g.install(cmd)
	return cmd
}

// runStatus prints, per router, its gateway order as the NB holds it and
// the chassis its gateway port is active on now (SB), then the primaries
// per gateway chassis.
func runStatus(cmd *cobra.Command, f *gatewayFlags) error {
	stdout := cmd.OutOrStdout()
	g, _, cancel, err := f.open(cmd)
	if err != nil {
		return err
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
	return nil
}

// runRebalance computes the moves that even out the primaries over the
// gateway chassis (translator.Rebalance), prints them and, without
// --dry-run, commits them one router per transaction.
func runRebalance(cmd *cobra.Command, f *gatewayFlags) error {
	stdout, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
	g, ctx, cancel, err := f.open(cmd)
	if err != nil {
		return err
	}
	defer cancel()
	defer g.Close()
	moves := translator.Rebalance(g.routers, g.chassis)
	if len(moves) == 0 {
		fmt.Fprintln(stdout, "balanced: no router to move")
		return nil
	}
	if f.dryRun {
		fmt.Fprintf(stdout, "dry run: %d moves, nothing is written\n", len(moves))
	}
	failed := 0
	var failedRouters []string
	for _, m := range moves {
		fmt.Fprintf(stdout, "move %s: %s -> %s (gateway chassis now %s)\n", m.Router, m.From, m.To, strings.Join(m.Order, ", "))
		if f.dryRun {
			continue
		}
		if err := moveGateway(ctx, g.nb, g.instance, m); err != nil {
			fmt.Fprintf(stderr, "%s: moving %s: %v\n", cmd.CommandPath(), m.Router, err)
			failed++
			failedRouters = append(failedRouters, m.Router)
		}
	}
	if !f.dryRun && f.moveNudge {
		moved := map[string]string{}
		for _, m := range moves {
			moved[m.Router] = m.To
		}
		for _, r := range failedRouters {
			delete(moved, r)
		}
		syncer.FinishMoves(ctx, g.nb, g.sb, moved, func(s string) { fmt.Fprintf(stderr, "note: %s\n", s) })
	}
	if failed > 0 {
		fmt.Fprintf(stderr, "%d of %d moves failed; the other routers moved\n", failed, len(moves))
		return &exitError{code: exitFailure}
	}
	if !f.dryRun {
		fmt.Fprintf(stdout, "%d routers moved\n", len(moves))
	}
	return nil
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
