package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/stdr"
	"github.com/spf13/cobra"

	"github.com/kubevirt-ovn/kubevirt-ovn/translator/ovn"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/trace"
)

// traceFlags are the flags of trace.
type traceFlags struct {
	nb, sb   ovn.Endpoint
	zones    zoneFlags
	instance string
	timeout  time.Duration
	req      trace.Request
	raw      bool
	output   string
	binary   string
}

func newTraceCmd() *cobra.Command {
	var f traceFlags
	cmd := &cobra.Command{
		Use:     "trace (--nb ADDR --sb ADDR | --zone NAME=NB,SB...) --from VM|IP --to DEST [flags]",
		GroupID: "troubleshoot",
		Short:   "Explain a VM's packet's path in your objects, with ovn-trace",
		Long: `trace builds the packet a VM interface (namespace/name[/interface]) sends to a destination,
has ovn-trace run it against the SB, and prints its path in your objects: the network, the
router, the route it takes, the NAT rule (SNAT IP, floating IP), the load balancer and the
member it goes to, the security group rule that lets it through or drops it (group and rule
id), the gateway chassis it leaves on and whether that chassis is active now, and where it
ends: delivered to a VM, out of a physical network, dropped, or unreachable.

The destination (--to) is an IP address, another VM interface (namespace/name[/interface]),
fip:ID or fip:namespace/name (a floating IP by its spec.id or by its VM), or lb:NAME (a
LoadBalancer's VIP, on its protocol and port unless --protocol/--port say otherwise). --from
may also be an outside host's IP address: its packet comes in from the external network of
the router that owns the destination (a floating IP, a load balancer's floating IP, a SNAT
IP). The packet is the first of a connection (every conntrack lookup sees a new one).

In interconnect mode give every zone the packet may cross with --zone: the trace starts in
the zone of the VM's node and follows the packet into the zone it tunnels to; a zone not given
ends the trace there, naming the chassis. ovn-trace (OVN's ovn-common package) must be on
PATH, or named with --ovn-trace; kubevirt-ovn connects to the SB itself and hands ovn-trace
a local socket, so ovn-trace needs no TLS flags.`,
		Example: `  kubevirt-ovn trace --nb tcp:192.0.2.10:6641 --sb tcp:192.0.2.10:6642 --from default/vm-a --to 198.51.100.7 --protocol udp --port 53
  kubevirt-ovn trace --nb tcp:192.0.2.10:6641 --sb tcp:192.0.2.10:6642 --from 198.51.100.7 --to fip:default/vm-b --protocol tcp --port 22
  kubevirt-ovn trace --nb tcp:192.0.2.10:6641 --sb tcp:192.0.2.10:6642 --from default/vm-b --to lb:lb-web -o json
  kubevirt-ovn trace --zone hv1=unix:/run/ovn-hv1/ovnnb_db.sock,unix:/run/ovn-hv1/ovnsb_db.sock \
      --zone gw1=unix:/run/ovn-gw1/ovnnb_db.sock,unix:/run/ovn-gw1/ovnsb_db.sock --from default/vm-a --to 198.51.100.7`,
		Args: noArgs,
		RunE: runE(func(cmd *cobra.Command) error { return runTrace(cmd, &f) }),
	}
	var g flagGroups
	db := g.group(groupDatabases)
	endpointFlags(db, &f.nb, &f.sb)
	zoneFlag(db, &f.zones, "interconnect mode, instead of --nb/--sb: a zone's NAME=NB,SB; repeat for every zone the packet may cross")
	p := g.group("Packet")
	p.StringVar(&f.req.From, "from", "", "the sender: a VM interface `namespace/name[/interface]`, or an outside host's IP address")
	p.StringVar(&f.req.To, "to", "", "the destination: an IP address, `namespace/name[/interface]`, fip:ID, fip:namespace/name, or lb:NAME")
	p.StringVar(&f.req.Protocol, "protocol", "", "tcp, udp or icmp (default: a load balancer's protocol, else icmp echo)")
	p.IntVar(&f.req.Port, "port", 0, "the destination port of tcp or udp (default: a load balancer's)")
	p.StringVar(&f.req.Member, "member", "", "the load balancer member `IP[:PORT]` to follow (default: the first in rotation)")
	opts := g.group("Options")
	instanceFlag(opts, &f.instance)
	opts.BoolVar(&f.raw, "raw", false, "print ovn-trace's own output (each zone's) instead of the path")
	opts.StringVarP(&f.output, "output", "o", "text", "print the path as `FORMAT`: text or json")
	opts.StringVar(&f.binary, "ovn-trace", "ovn-trace", "the ovn-trace `BINARY` to run")
	opts.DurationVar(&f.timeout, "timeout", 60*time.Second, "give up after this long")
	g.install(cmd)
	return cmd
}

// traceOutputs are the values of trace -o.
var traceOutputs = []string{"text", "json"}

// runTrace opens every zone (or the central NB and SB), traces the packet
// and prints its path.
func runTrace(cmd *cobra.Command, f *traceFlags) error {
	switch {
	case !slices.Contains(traceOutputs, f.output):
		return usageErrorf("--output %q is none of %s", f.output, strings.Join(traceOutputs, ", "))
	case f.req.From == "" || f.req.To == "":
		return usageErrorf("--from and --to are required")
	case (f.nb.Address == "") == (len(f.zones) == 0):
		return usageErrorf("either --nb and --sb or --zone are required")
	case len(f.zones) > 0 && f.sb.Address != "":
		return usageErrorf("--sb goes with --nb; with --zone each zone names its SB")
	case f.nb.Address != "" && f.sb.Address == "":
		return usageErrorf("--sb is required with --nb: ovn-trace reads the SB")
	}
	if err := endpointsTLS(&f.nb, &f.sb); err != nil {
		return err
	}
	runner, err := ovn.NewTraceRunner(f.binary)
	if err != nil {
		return err
	}
	defer runner.Close()
	ctx, cancel := context.WithTimeout(cmd.Context(), f.timeout)
	defer cancel()
	logger := stdr.New(log.New(cmd.ErrOrStderr(), "", log.LstdFlags))
	var zones []*trace.Zone
	if len(f.zones) == 0 {
		z, err := runner.Open(ctx, "", f.nb, f.sb, f.instance, logger)
		if err != nil {
			return err
		}
		zones = append(zones, z)
	}
	for _, ze := range f.zones.sorted() {
		z, err := runner.Open(ctx, ze.name, ovn.Endpoint{Address: ze.nb}, ovn.Endpoint{Address: ze.sb}, f.instance, logger)
		if err != nil {
			return fmt.Errorf("zone %s: %w", ze.name, err)
		}
		zones = append(zones, z)
	}
	path, err := trace.Trace(ctx, zones, f.req, runner)
	if err != nil && (path == nil || errors.Is(err, context.DeadlineExceeded)) {
		return err
	}
	out := cmd.OutOrStdout()
	if f.raw {
		for _, r := range path.Traces {
			if r.Zone != "" {
				fmt.Fprintf(out, "# zone %s\n", r.Zone)
			}
			fmt.Fprintf(out, "$ ovn-trace %s '%s'%s\n%s\n", r.Datapath, r.Microflow, lbDstNote(r.LBDst), r.Output)
		}
		return err
	}
	if err != nil {
		return err
	}
	if f.output == "json" {
		enc := json.NewEncoder(out)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		return enc.Encode(path)
	}
	_, err = fmt.Fprint(out, path.Text())
	return err
}

func lbDstNote(d string) string {
	if d == "" {
		return ""
	}
	return "   # load balancers narrowed to member " + d
}
