package main

import (
	"context"
	"fmt"
	"log"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/stdr"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/client-go/dynamic"

	"github.com/kubevirt-ovn/kubevirt-ovn/translator/gatewaystate"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/kube"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/ovn"
)

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
func (f *gatewayFlags) open(cmd *cobra.Command) (*gatewaystate.State, context.Context, context.CancelFunc, error) {
	if f.nb.Address == "" || f.sb.Address == "" {
		return nil, nil, nil, usageErrorf("--nb and --sb are required")
	}
	if err := endpointsTLS(&f.nb, &f.sb); err != nil {
		return nil, nil, nil, err
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), f.timeout)
	logger := stdr.New(log.New(cmd.ErrOrStderr(), "", log.LstdFlags))
	g, err := gatewaystate.Read(ctx, f.nb, f.sb, f.instance, logger)
	if err != nil {
		cancel()
		return nil, nil, nil, err
	}
	return g, ctx, cancel, nil
}

// openUnlessCluster is open, but with --kubeconfig alone (no --nb, --sb)
// the state of no NB: the cluster's objects alone, as in interconnect mode,
// where each zone's databases are on its own node.
func (f *gatewayFlags) openUnlessCluster(cmd *cobra.Command, kubeconfig string) (*gatewaystate.State, context.Context, context.CancelFunc, error) {
	if kubeconfig == "" || f.nb.Address != "" || f.sb.Address != "" {
		return f.open(cmd)
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), f.timeout)
	return gatewaystate.Unread(), ctx, cancel, nil
}

func newStatusCmd() *cobra.Command {
	var f gatewayFlags
	var output, kubeconfig string
	cmd := &cobra.Command{
		Use:     "status (--nb ADDR --sb ADDR [--kubeconfig FILE] | --kubeconfig FILE) [flags]",
		GroupID: "gateways",
		Short:   "Print each object's state: routers, floating IPs, security groups, load balancers, migrations",
		Long: `status prints the objects an operator reads first: each router, floating IP, security group
and load balancer with Ready and Realized, the chassis involved and the error that keeps it out,
then the gateways and the live migrations. From the NB and SB alone an object is Ready when its
rows are committed and Realized when the chassis have every commit (NB_Global hv_cfg against
nb_cfg); with --kubeconfig they are the conditions kubevirt-ovn's controller wrote on the
cluster's objects, and the objects kept out by an error (no rows) are listed with it. With
--kubeconfig alone it prints the cluster's objects and conditions without reading any NB (in
interconnect mode each zone's databases are on its own node).

Per router, its SNAT IP, its gateway chassis in order as the NB holds them
(the primary, marked when spec.gateway pins it, then the failover candidates) and the
chassis its gateway port is active on now (SB), marked when BFD has failed it over; then, for
routers whose internal IPv6 is routed (no enableIpv6Snat), the routes the upstream router needs
(each internal ipv6Cidr via the router's spec.external.ipv6); then the routers per gateway chassis (primary / active) and the physical networks each maps; then the
VM ports bound to two chassis (live migrations: source, target, and whether the target waits
for the VM's RARP), and, on an OVN release whose ovn-controller may miss a migration's dual
binding, the chassis that are exposed to it. It reads one central NB and SB. -o json or
-o yaml prints the same as one object for tools.`,
		Example: `  kubevirt-ovn status --nb tcp:192.0.2.10:6641 --sb tcp:192.0.2.10:6642
  kubevirt-ovn status --nb tcp:192.0.2.10:6641 --sb tcp:192.0.2.10:6642 --kubeconfig ~/.kube/config -o json`,
		Args: noArgs,
		RunE: runE(func(cmd *cobra.Command) error { return runStatus(cmd, &f, output, kubeconfig) }),
	}
	var g flagGroups
	opts := f.add(&g)
	opts.StringVarP(&output, "output", "o", "text", "print as `FORMAT`: text, json or yaml (the same fields)")
	opts.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig `FILE` of the cluster whose objects' conditions (Ready, Realized, the error) to print; without it, the state the NB and SB say; alone (no --nb, --sb), the cluster's objects only")
	_ = cmd.MarkFlagFilename("kubeconfig")
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

// runStatus prints each object (routers, floating IPs, security groups,
// load balancers) with its state, then the primaries per gateway chassis
// and the live migrations (statusReport), as text, JSON or YAML.
func runStatus(cmd *cobra.Command, f *gatewayFlags, output, kubeconfig string) error {
	if !slices.Contains(statusOutputs, output) {
		return usageErrorf("--output %q is none of %s", output, strings.Join(statusOutputs, ", "))
	}
	g, ctx, cancel, err := f.openUnlessCluster(cmd, kubeconfig)
	if err != nil {
		return err
	}
	defer cancel()
	defer g.Close()
	var objs *kube.ObjectStates
	if kubeconfig != "" {
		cfg, err := restConfig(kubeconfig)
		if err != nil {
			return err
		}
		dyn, err := dynamic.NewForConfig(cfg)
		if err != nil {
			return err
		}
		states, err := kube.ReadObjectStates(ctx, dyn)
		if err != nil {
			return err
		}
		objs = &states
	}
	return newStatusReport(g, objs).write(cmd.OutOrStdout(), output)
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
	moves := g.Rebalance()
	if len(moves) == 0 {
		fmt.Fprintln(stdout, "balanced: no router to move")
		return nil
	}
	if f.dryRun {
		fmt.Fprintf(stdout, "dry run: %d moves, nothing is written\n", len(moves))
	}
	var failed []string
	for _, m := range moves {
		fmt.Fprintf(stdout, "move %s: %s -> %s (gateway chassis now %s)\n", m.Router, m.From, m.To, strings.Join(m.Order, ", "))
		if f.dryRun {
			continue
		}
		if err := g.Move(ctx, m); err != nil {
			fmt.Fprintf(stderr, "%s: moving %s: %v\n", cmd.CommandPath(), m.Router, err)
			failed = append(failed, m.Router)
		}
	}
	if !f.dryRun && f.moveNudge {
		g.FinishMoves(ctx, moves, failed, func(s string) { fmt.Fprintf(stderr, "note: %s\n", s) })
	}
	if len(failed) > 0 {
		fmt.Fprintf(stderr, "%d of %d moves failed; the other routers moved\n", len(failed), len(moves))
		return &exitError{code: exitFailure}
	}
	if !f.dryRun {
		fmt.Fprintf(stdout, "%d routers moved\n", len(moves))
	}
	return nil
}
