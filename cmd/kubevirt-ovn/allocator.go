package main

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"syscall"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"k8s.io/klog/v2"

	"github.com/kubevirt-ovn/kubevirt-ovn/translator"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/controller"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/kube"
)

type allocatorFlags struct {
	cluster clusterFlags
	ctrl    ctrlFlags
	leader  leaderFlags
	serving servingFlags
}

func newAllocatorCmd() *cobra.Command {
	var f allocatorFlags
	cmd := &cobra.Command{
		Use:     "allocator [--kubeconfig FILE] [--namespace NS] [flags]",
		GroupID: "cluster",
		Short:   "Decide every router's gateways and the tunnel keys for the zone agents (interconnect, in a cluster)",
		Long: `allocator is kubevirt-ovn's leader in a cluster whose OVN has one NB per zone (ovn-kubernetes'
interconnect mode). It reads the VirtualRouters, NetworkAttachmentDefinitions and
VirtualMachineInstances and every zone's OVNZone (published by the zone agents), plans every
router and network over all zones, and records each one's decisions (a router's gateway
order, the tunnel keys of its switches and ports) in an OVNAllocation of --namespace, from
which each zone's agent writes its NB. It writes VirtualRouter status, and no NB.

It writes only while it holds the leader election Lease. A chassis that two zones publish
as local stays in the zone that published it first; the later zone's claim is refused with
an error naming both. Formerly 'kubevirt-ovn run --interconnect'.`,
		Example: `  # As deploy/interconnect runs it, in its Pod
  kubevirt-ovn allocator --namespace kubevirt-ovn --lease-namespace kubevirt-ovn --identity $(POD_NAME)

  # From outside the cluster
  kubevirt-ovn allocator --kubeconfig ~/.kube/config --namespace kubevirt-ovn`,
		Args: noArgs,
		RunE: runE(func(cmd *cobra.Command) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runAllocator(ctx, &f, klog.Background())
		}),
	}
	var g flagGroups
	cl := g.group(groupCluster)
	f.cluster.addKubeconfig(cl)
	f.cluster.addNamespace(cl)
	f.ctrl.add(g.group(groupCtrl), false, true)
	f.leader.add(g.group(groupLeader))
	f.serving.add(g.group(groupOps))
	klogFlags(g.group(groupLogging))
	g.install(cmd)
	_ = cmd.MarkFlagFilename("kubeconfig")
	return cmd
}

// runAllocator is the interconnect allocator: leader elected, it plans
// every unit over the zones the agents published and records its
// decisions in OVNAllocations; it writes no NB.
func runAllocator(ctx context.Context, f *allocatorFlags, log logr.Logger) error {
	dyn, kc, recorder, stopEvents, err := f.cluster.clients(ctx, f.ctrl.events)
	if err != nil {
		return err
	}
	defer stopEvents()
	source := kube.NewSource(dyn, f.ctrl.resync, recorder, log.WithName("kube"))
	source.SetAllocator()
	source.Input().SetInterconnect()
	store := kube.NewStore(dyn, kc, f.cluster.namespace, f.ctrl.resync, log.WithName("store"))
	alloc := controller.NewAllocator(source, store, source, f.ctrl.options(log.WithName("allocator"), nil))
	if err := source.Notify(alloc.EnqueueUnits); err != nil {
		return err
	}
	store.Notify(func(u translator.Unit) { alloc.EnqueueUnits([]translator.Unit{u}) }, alloc.ChassisChanged)
	source.Start(ctx)
	store.Start(ctx)
	ready := func() error {
		if !source.HasSynced() || !store.HasSynced() {
			return errors.New("informer caches not synced")
		}
		return nil
	}
	if err := f.serving.serve(ctx, controller.NewMetrics(nil, f.ctrl.instance), ready, log); err != nil {
		return err
	}
	return f.leader.lead(ctx, kc, recorder, alloc, log)
}
