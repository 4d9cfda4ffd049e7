package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"

	"github.com/go-logr/logr"
	ovsdbcache "github.com/ovn-kubernetes/libovsdb/cache"
	"github.com/ovn-kubernetes/libovsdb/model"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/kubevirt-ovn/kubevirt-ovn/nbmodel/sbmodel"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/controller"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/kube"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/ovn"
)

// agentFlags are a zone agent's zone and Pod.
type agentFlags struct {
	nb, sb   ovn.Endpoint
	zoneName string
	nodeName string
	podName  string
	podUID   string
}

// add defines the zone's flags in zone and the node's and Pod's in pod.
func (f *agentFlags) add(zone, pod *pflag.FlagSet) {
	zone.StringVar(&f.nb.Address, "zone-nb", "", "this zone's NB `ADDR`, which the agent writes (e.g. unix:/var/run/ovn/ovnnb_db.sock)")
	zone.StringVar(&f.sb.Address, "zone-sb", "", "this zone's SB `ADDR` (e.g. unix:/var/run/ovn/ovnsb_db.sock)")
	zone.StringVar(&f.zoneName, "zone-name", "", "the zone's `NAME` (default: the NB's NB_Global name, which ovn-kubernetes sets to it)")
	pod.StringVar(&f.nodeName, "node-name", os.Getenv("NODE_NAME"), "this node's `NAME`; the zone's OVNZone is owned by the Node and goes with it (default: $NODE_NAME)")
	pod.StringVar(&f.podName, "pod-name", os.Getenv("POD_NAME"), "this agent's Pod `NAME`, in --namespace, where it records a Warning Event while its zone's NB or SB socket does not answer (default: $POD_NAME; empty: no Event)")
	pod.StringVar(&f.podUID, "pod-uid", os.Getenv("POD_UID"), "with --pod-name: the Pod's `UID`, which kubectl describe pod lists the Events of (default: $POD_UID)")
}

func (f *agentFlags) check() error {
	switch {
	case f.nb.Address == "":
		return usageErrorf("--zone-nb is required")
	case f.sb.Address == "":
		return usageErrorf("--zone-nb needs --zone-sb")
	}
	return nil
}

type zoneAgentFlags struct {
	agent   agentFlags
	cluster clusterFlags
	ctrl    ctrlFlags
	serving servingFlags
}

func newZoneAgentCmd() *cobra.Command {
	var f zoneAgentFlags
	cmd := &cobra.Command{
		Use:     "zone-agent --zone-nb ADDR --zone-sb ADDR [--kubeconfig FILE] [flags]",
		GroupID: "cluster",
		Short:   "Publish a zone's chassis and write its NB from the allocator's decisions (interconnect, one per node)",
		Long: `zone-agent runs on every node of a cluster whose OVN has one NB per zone (ovn-kubernetes'
interconnect mode), beside its zone's NB and SB sockets. It publishes its zone's local
chassis, the tunnel keys other tools' rows request in its NB and its zone's tunnel key
collisions in an OVNZone of --namespace, owned by its Node; and it writes its zone's NB
from the allocator's OVNAllocations: it decides no gateway and no key itself.

It serves /healthz at once, and /readyz once its NB and SB answer and its NB has a name
(the zone's): until then it says why every few seconds and, with --pod-name, in a Warning
Event on its Pod. Formerly 'kubevirt-ovn run --zone-nb'.`,
		Example: `  # As deploy/interconnect's DaemonSet runs it, with the node's sockets mounted at /var/run/ovn
  kubevirt-ovn zone-agent --zone-nb unix:/var/run/ovn/ovnnb_db.sock --zone-sb unix:/var/run/ovn/ovnsb_db.sock \
      --node-name $(NODE_NAME) --pod-name $(POD_NAME) --pod-uid $(POD_UID) --namespace kubevirt-ovn`,
		Args: noArgs,
		RunE: runE(func(cmd *cobra.Command) error {
			if err := f.agent.check(); err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runZoneAgent(ctx, &f, klog.Background())
		}),
	}
	var g flagGroups
	zone := g.group(groupZone)
	cl := g.group(groupCluster)
	f.agent.add(zone, cl)
	endpointTimeoutFlag(zone, &f.agent.nb.Timeout, &f.agent.sb.Timeout)
	f.cluster.addKubeconfig(cl)
	f.cluster.addNamespace(cl)
	f.ctrl.add(g.group(groupCtrl), true, true)
	f.serving.add(g.group(groupOps))
	klogFlags(g.group(groupLogging))
	g.install(cmd)
	_ = cmd.MarkFlagFilename("kubeconfig")
	return cmd
}

// runZoneAgent is one zone's agent: it publishes its zone's chassis and
// writes its zone's NB from the allocator's decisions. It serves /healthz
// and /readyz at once; until its NB and SB answer and the NB names its
// zone it is not ready, says why every few seconds and, for a socket,
// records a Warning Event on its Pod (see controller.Await).
func runZoneAgent(ctx context.Context, f *zoneAgentFlags, log logr.Logger) error {
	dyn, kc, recorder, stopEvents, err := f.cluster.clients(ctx, f.ctrl.events && f.agent.podName != "")
	if err != nil {
		return err
	}
	defer stopEvents()
	waiting := controller.NewWaiting("connecting to the zone's NB and SB")
	var started atomic.Pointer[func() error]
	metrics := controller.NewMetrics(nil, f.ctrl.instance)
	ready := func() error {
		if r := started.Load(); r != nil {
			return (*r)()
		}
		return waiting.Err()
	}
	if err := f.serving.serve(ctx, metrics, ready, log); err != nil {
		return err
	}
	await := controller.Await{Waiting: waiting, Log: log, Events: recorder}
	if recorder != nil {
		await.Object = &corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: f.cluster.namespace, Name: f.agent.podName, UID: types.UID(f.agent.podUID)}
	}
	for _, db := range []struct {
		ep    ovn.Endpoint
		probe func(context.Context, ovn.Endpoint) error
	}{{f.agent.nb, ovn.ProbeNB}, {f.agent.sb, ovn.ProbeSB}} {
		if err := await.Until(ctx, controller.ReasonOVNSocketUnavailable, func(ctx context.Context) error {
			return withSocketHint(db.ep, db.probe(ctx, db.ep))
		}); err != nil {
			return nil // ctx ended
		}
	}
	nbc, err := ovn.ConnectNB(ctx, f.agent.nb, f.ctrl.instance, log.WithName("nb"))
	if err != nil {
		return err
	}
	defer nbc.Close()
	metrics.CountOwnedRows(nbc, f.ctrl.instance)
	sbc, err := ovn.ConnectZoneSB(ctx, f.agent.sb, f.ctrl.instance, log.WithName("sb"))
	if err != nil {
		return err
	}
	defer sbc.Close()
	zone := f.agent.zoneName
	if zone == "" {
		// ovn-kubernetes names the NB a moment after it starts.
		if err := await.Until(ctx, "", func(ctx context.Context) error {
			var err error
			zone, err = ovn.ZoneName(ctx, nbc)
			return err
		}); err != nil {
			return nil // ctx ended
		}
	}
	log = log.WithValues("zone", zone)
	// Under VXLAN ovn-northd would ignore the keys our switches request:
	// the agent refuses to start.
	zk, err := ovn.ReadZoneKeys(ctx, nbc, f.ctrl.instance)
	if err != nil {
		return fmt.Errorf("zone %s: %w", zone, err)
	}
	if err := zk.CheckGeneve(zone); err != nil {
		return err
	}

	source := kube.NewSource(dyn, f.ctrl.resync, nil, log.WithName("kube"))
	store := kube.NewStore(dyn, kc, f.cluster.namespace, f.ctrl.resync, log.WithName("store"))
	// The zone's chassis, the keys other tools' rows request in its NB,
	// its tunnel key collisions (for the allocator) and the load balancer
	// members its health checks find offline (for the other zones'
	// agents), published in its OVNZone.
	publisher := controller.NewZonePublisher(controller.ZonePublication{
		Zone: zone, Node: f.agent.nodeName,
		Chassis: func(ctx context.Context) ([]translator.Chassis, error) { return ovn.ZoneChassis(ctx, sbc, zone) },
		Keys:    func(ctx context.Context) (ovn.ZoneKeys, error) { return ovn.ReadZoneKeys(ctx, nbc, f.ctrl.instance) },
		Offline: func(ctx context.Context) ([]translator.OfflineMember, error) { return ovn.OfflineMembers(ctx, sbc) },
		// A migrating port activated here: every other zone's twin
		// follows the VM to its target at once.
		// (as long as their migration runs: ovn-northd clears the flag as
		// soon as the port names the target alone)
		Activated: source.Input().Activations,
		Publish:   store.PublishZone,
		Resync:    f.ctrl.resync,
		Log:       log,
	})
	opts := f.ctrl.options(log.WithName("controller"), metrics)
	opts.KeysChanged = publisher.SetCollisions
	opts.Activated = publisher.Kick
	agent := controller.NewZoneAgent(nbc, sbc, zone, kube.NewAgentSource(source, store, zone), store, opts)
	if err := source.Notify(agent.EnqueueUnits); err != nil {
		return err
	}
	store.Notify(func(u translator.Unit) { agent.EnqueueUnits([]translator.Unit{u}) }, func() { agent.ChassisChanged(ctx) })
	readyFn := func() error {
		if !source.HasSynced() || !store.HasSynced() {
			return errors.New("informer caches not synced")
		}
		return connected(nbc)
	}
	started.Store(&readyFn)
	source.Start(ctx)
	store.Start(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), store.HasSynced) {
		return ctx.Err()
	}
	// A chassis, a health check status or a migrating port's activation
	// changed: publish the zone again.
	kick := func(table string, old, cur model.Model) {
		switch table {
		case sbmodel.ChassisTable, sbmodel.ServiceMonitorTable:
			publisher.Kick()
		case sbmodel.PortBindingTable:
			if activation(old) != activation(cur) {
				publisher.Kick()
			}
		}
	}
	sbc.Cache().AddEventHandler(&ovsdbcache.EventHandlerFuncs{
		AddFunc:    func(table string, m model.Model) { kick(table, nil, m) },
		UpdateFunc: func(table string, old, cur model.Model) { kick(table, old, cur) },
		DeleteFunc: func(table string, m model.Model) { kick(table, m, nil) },
	})
	go publisher.Run(ctx)
	return agent.Run(ctx)
}

// activation is a Port_Binding's activated chassis, "" for none or
// another model.
func activation(m model.Model) string {
	pb, ok := m.(*sbmodel.PortBinding)
	if !ok {
		return ""
	}
	return strings.Join(ovn.Activated(pb), ",")
}

// socketHint is where a zone agent's sockets come from, for a user whose
// agent cannot reach them: the host directories the kustomizations mount at
// /var/run/ovn.
const socketHint = "deploy/interconnect mounts the host's /var/run/openvswitch (where ovn-kubernetes keeps a node's NB and SB sockets) at /var/run/ovn, " +
	"deploy/interconnect-openshift the host's /var/run/ovn-ic: is the zone's database running on this node, with its socket there?"

// withSocketHint adds socketHint to the error of a unix: endpoint.
func withSocketHint(ep ovn.Endpoint, err error) error {
	if err == nil || !strings.HasPrefix(ep.Address, "unix:") {
		return err
	}
	return fmt.Errorf("%w; %s", err, socketHint)
}
