package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/ovn-kubernetes/libovsdb/client"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/klog/v2"

	"github.com/kubevirt-ovn/kubevirt-ovn/translator/controller"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/kube"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/ovn"
)

type runFlags struct {
	nb, sb       ovn.Endpoint
	zones        zoneFlags
	cluster      clusterFlags
	paths        []string
	fileInterval time.Duration
	allowEmpty   bool
	ctrl         ctrlFlags
	leader       leaderFlags
	serving      servingFlags
	// The roles run selected before they were commands of their own:
	// --interconnect (the allocator) and --zone-nb (a zone agent).
	interconnect bool
	agent        agentFlags
	cpuProfile   string
}

func newRunCmd() *cobra.Command {
	var f runFlags
	cmd := &cobra.Command{
		Use:     "run --nb ADDR [--sb ADDR] [--kubeconfig FILE | --from-file PATH...] [flags]",
		GroupID: "sync",
		Short:   "Keep the OVN NB in sync with a cluster's routers, networks and VMs, or with manifests on disk",
		Long: `run is a controller: it keeps the OVN Northbound database in sync with the VirtualRouters,
NetworkAttachmentDefinitions and VirtualMachineInstances of a cluster (in-cluster
configuration, or --kubeconfig), or with manifests on disk (--from-file, re-read when they
change). It reconciles one router or network per event, repairs rows of ours changed behind
its back, writes VirtualRouter status and Events, and, with a cluster, writes only while it
holds the leader election Lease. It serves /metrics, /healthz and /readyz on --http-addr
(default :8080, every interface); Go's profiles only with --enable-profiling.

With --from-file and --zone (OVN interconnect, one NB and SB per zone) it writes every zone's
NB from one input. In a cluster whose OVN has one NB per zone, run 'kubevirt-ovn allocator'
and 'kubevirt-ovn zone-agent' instead ('run --interconnect' and 'run --zone-nb' still work).`,
		Example: `  # In a cluster (in-cluster configuration), central NB and SB
  kubevirt-ovn run --nb ssl:ovnkube-db.ovn-kubernetes.svc:6641 --sb ssl:ovnkube-db.ovn-kubernetes.svc:6642 \
      --nb-cert /etc/ovn/tls.crt --nb-key /etc/ovn/tls.key --nb-ca /etc/ovn/ca.crt

  # Manifests on disk, re-read when they change
  kubevirt-ovn run --nb unix:/var/run/ovn/ovnnb_db.sock --sb unix:/var/run/ovn/ovnsb_db.sock --from-file routers/

  # More logging (klog)
  kubevirt-ovn run --nb tcp:192.0.2.10:6641 --kubeconfig ~/.kube/config --v 2`,
		Args: noArgs,
		RunE: runE(func(cmd *cobra.Command) error { return runRun(cmd, &f) }),
	}
	var g flagGroups
	db := g.group(groupDatabases)
	endpointFlags(db, &f.nb, &f.sb)
	zoneFlag(db, &f.zones, "with --from-file, interconnect mode instead of --nb/--sb: a zone's NAME=NB,SB (one endpoint each); repeat for every zone")
	in := g.group(groupInput)
	f.cluster.addKubeconfig(in)
	fromFileFlag(in, &f.paths, "watch manifests on disk instead of a cluster: a file or directory `PATH` (repeatable)")
	in.DurationVar(&f.fileInterval, "file-poll", time.Second, "with --from-file: how often to look for changed files")
	in.BoolVar(&f.allowEmpty, "allow-empty", false, "with --from-file: let manifests that declare no router and no network delete every row this instance owns (without it such an input is refused at start and ignored on change)")
	f.ctrl.add(g.group(groupCtrl), true, true)
	f.leader.add(g.group(groupLeader))
	f.serving.add(g.group(groupOps))
	g.group(groupDiag).StringVar(&f.cpuProfile, "cpuprofile", "", "write a CPU profile, from the start until run stops, to `FILE` (go tool pprof reads it)")
	klogFlags(g.group(groupLogging))
	// The old spellings of the cluster roles, hidden from --help.
	old := g.group("Deprecated")
	old.BoolVar(&f.interconnect, "interconnect", false, "be the allocator: kubevirt-ovn allocator")
	f.agent.add(old, old)
	f.cluster.addNamespace(old)
	old.VisitAll(func(fl *pflag.Flag) { fl.Hidden = true })
	g.install(cmd)
	_ = cmd.MarkFlagFilename("from-file", "yaml", "yml", "json")
	_ = cmd.MarkFlagFilename("kubeconfig")
	return cmd
}

func runRun(cmd *cobra.Command, f *runFlags) error {
	stderr := cmd.ErrOrStderr()
	role := ""
	switch {
	case f.interconnect && f.agent.nb.Address != "":
		return usageErrorf("--interconnect (the allocator) and --zone-nb (a zone agent) are different roles: run one or the other")
	case f.interconnect:
		role = "allocator"
	case f.agent.nb.Address != "":
		role = "zone-agent"
	}
	if role != "" {
		if f.nb.Address != "" || f.sb.Address != "" || len(f.zones) > 0 || len(f.paths) > 0 {
			return usageErrorf("--interconnect and --zone-nb work with a cluster: no --nb, --sb, --zone or --from-file with them")
		}
		fmt.Fprintf(stderr, "%s: note: 'run %s' is 'kubevirt-ovn %s' now; this spelling keeps working\n", cmd.CommandPath(), map[string]string{"allocator": "--interconnect", "zone-agent": "--zone-nb"}[role], role)
	}
	switch {
	case role == "zone-agent":
		if err := f.agent.check(); err != nil {
			return err
		}
	case role != "":
	case len(f.zones) > 0 && (f.nb.Address != "" || f.sb.Address != ""):
		return usageErrorf("--zone names each zone's NB and SB: no --nb or --sb with it")
	case len(f.zones) > 0 && len(f.paths) == 0:
		return usageErrorf("--zone works with --from-file (in a cluster, run 'kubevirt-ovn allocator' and 'kubevirt-ovn zone-agent')")
	case len(f.zones) == 0 && f.nb.Address == "":
		return usageErrorf("--nb (or --zone) is required")
	}
	if err := endpointsTLS(&f.nb, &f.sb); err != nil {
		return err
	}
	if f.cpuProfile != "" {
		stop, err := startCPUProfile(f.cpuProfile)
		if err != nil {
			return usageErrorf("--cpuprofile: %v", err)
		}
		defer stop()
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := klog.Background()
	switch {
	case role == "allocator":
		return runAllocator(ctx, &allocatorFlags{cluster: f.cluster, ctrl: f.ctrl, leader: f.leader, serving: f.serving}, log)
	case role == "zone-agent":
		return runZoneAgent(ctx, &zoneAgentFlags{agent: f.agent, cluster: f.cluster, ctrl: f.ctrl, serving: f.serving}, log)
	case len(f.zones) > 0:
		return runZones(ctx, f, log)
	}
	return runController(ctx, f, log)
}

// runController is the controller of one NB: from a cluster or from
// manifests on disk.
func runController(ctx context.Context, f *runFlags, log logr.Logger) error {
	var nb, sb client.Client
	defer func() {
		for _, c := range []client.Client{nb, sb} {
			if c != nil {
				c.Close()
			}
		}
	}()
	// The NB and SB.
	connect := func(ctx context.Context) error {
		var err error
		if nb, err = ovn.ConnectNB(ctx, f.nb, f.ctrl.instance, log.WithName("nb")); err != nil {
			return err
		}
		if f.sb.Address != "" {
			sb, err = ovn.ConnectWatchSB(ctx, f.sb, f.ctrl.instance, log.WithName("sb"))
		}
		return err
	}

	if len(f.paths) > 0 {
		// The manifests are read while the NB connects; an input error
		// is said at once.
		files, err := controller.LoadWhileConnecting(ctx, f.paths, log.WithName("files"), controller.FileOptions{AllowEmpty: f.allowEmpty},
			func(ctx context.Context) (func() (int, error), error) {
				if err := connect(ctx); err != nil {
					return nil, err
				}
				return controller.OwnedUnits(ctx, nb, f.ctrl.instance), nil
			})
		if err != nil {
			return err
		}
		metrics := controller.NewMetrics(nb, f.ctrl.instance)
		ctrl := controller.New(nb, sb, files, nil, f.ctrl.options(log.WithName("controller"), metrics))
		go files.Watch(ctx, f.fileInterval, ctrl.EnqueueUnits)
		if err := f.serving.serve(ctx, metrics, func() error { return connected(nb) }, log); err != nil {
			return err
		}
		return ctrl.Run(ctx)
	}

	if err := connect(ctx); err != nil {
		return err
	}
	dyn, kc, recorder, stopEvents, err := f.cluster.clients(ctx, f.ctrl.events)
	if err != nil {
		return err
	}
	defer stopEvents()
	metrics := controller.NewMetrics(nb, f.ctrl.instance)
	source := kube.NewSource(dyn, f.ctrl.resync, recorder, log.WithName("kube"))
	ctrl := controller.New(nb, sb, source, source, f.ctrl.options(log.WithName("controller"), metrics))
	if err := source.Notify(ctrl.EnqueueUnits); err != nil {
		return err
	}
	source.Start(ctx)
	ready := func() error {
		if !source.HasSynced() {
			return errors.New("informer caches not synced")
		}
		return connected(nb)
	}
	if err := f.serving.serve(ctx, metrics, ready, log); err != nil {
		return err
	}
	return f.leader.lead(ctx, kc, recorder, ctrl, log)
}

// runZones runs the controllers of every zone (--zone) from manifests on
// disk.
func runZones(ctx context.Context, f *runFlags, log logr.Logger) error {
	var zones []controller.ZoneClients
	defer func() {
		for _, z := range zones {
			for _, c := range []client.Client{z.NB, z.SB} {
				if c != nil {
					c.Close()
				}
			}
		}
	}()
	// Every zone's NB and SB, while the manifests are read.
	connect := func(ctx context.Context) (func() (int, error), error) {
		for _, z := range f.zones.sorted() {
			label := "zone " + z.name + ": "
			zc := controller.ZoneClients{Zone: z.name}
			var err error
			zc.NB, err = ovn.ConnectNB(ctx, ovn.Endpoint{Address: z.nb}, f.ctrl.instance, log.WithName("nb").WithValues("zone", z.name))
			if err == nil {
				zc.SB, err = ovn.ConnectZoneSB(ctx, ovn.Endpoint{Address: z.sb}, f.ctrl.instance, log.WithName("sb").WithValues("zone", z.name))
			}
			zones = append(zones, zc)
			if err != nil {
				return nil, fmt.Errorf("%s%w", label, err)
			}
		}
		return func() (int, error) {
			n := 0
			for _, z := range zones {
				k, err := controller.OwnedUnits(ctx, z.NB, f.ctrl.instance)()
				if err != nil {
					return 0, err
				}
				n += k
			}
			return n, nil
		}, nil
	}
	files, err := controller.LoadWhileConnecting(ctx, f.paths, log.WithName("files"), controller.FileOptions{AllowEmpty: f.allowEmpty}, connect)
	if err != nil {
		return err
	}
	// The metrics' owned-row counts are the first zone's.
	metrics := controller.NewMetrics(zones[0].NB, f.ctrl.instance)
	group := controller.NewZones(zones, files, nil, f.ctrl.options(log.WithName("controller"), metrics))
	go files.Watch(ctx, f.fileInterval, group.EnqueueUnits)
	ready := func() error {
		for _, z := range zones {
			if err := connected(z.NB); err != nil {
				return fmt.Errorf("zone %s: %w", z.Zone, err)
			}
		}
		return nil
	}
	if err := f.serving.serve(ctx, metrics, ready, log); err != nil {
		return err
	}
	return group.Run(ctx)
}
