package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	ovsdbcache "github.com/ovn-kubernetes/libovsdb/cache"
	"github.com/ovn-kubernetes/libovsdb/client"
	"github.com/ovn-kubernetes/libovsdb/model"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/kubevirt-ovn/kubevirt-ovn/nbmodel"
	"github.com/kubevirt-ovn/kubevirt-ovn/nbmodel/sbmodel"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/controller"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/kube"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/ovn"
)

// kubeClients are the cluster's dynamic and typed clients and, with
// events, an event recorder; stop flushes the recorder.
func kubeClients(ctx context.Context, f *runFlags, events bool) (dynamic.Interface, kubernetes.Interface, record.EventRecorder, func(), error) {
	cfg, err := restConfig(f.kubeconfig)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	kc, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	if !events {
		return dyn, kc, nil, func() {}, nil
	}
	b := record.NewBroadcaster(record.WithContext(ctx))
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: kc.CoreV1().Events("")})
	return dyn, kc, b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "kubevirt-ovn"}), b.Shutdown, nil
}

// runAllocator is the interconnect allocator (--interconnect): leader
// elected, it plans every unit over the zones the agents published and
// records its decisions in OVNAllocations; it writes no NB.
func runAllocator(ctx context.Context, f *runFlags, log logr.Logger) error {
	dyn, kc, recorder, stopEvents, err := kubeClients(ctx, f, f.events)
	if err != nil {
		return err
	}
	defer stopEvents()
	source := kube.NewSource(dyn, f.resync, recorder, log.WithName("kube"))
	source.SetAllocator()
	source.Input().SetInterconnect()
	store := kube.NewStore(dyn, kc, f.namespace, f.resync, log.WithName("store"))
	opts := controller.Options{Instance: f.instance, Workers: f.workers, Resync: f.resync, Log: log.WithName("allocator")}
	alloc := controller.NewAllocator(source, store, source, opts)
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
	if err := serve(ctx, f.addr, controller.NewMetrics(nil, f.instance), ready, log); err != nil {
		return err
	}
	return runLeading(ctx, f, kc, recorder, alloc, log)
}

// runZoneAgent is one zone's agent (--zone-nb): it publishes its zone's
// chassis and writes its zone's NB from the allocator's decisions. It
// serves /healthz and /readyz at once; until its NB and SB answer and the
// NB names its zone it is not ready, says why every few seconds and, for a
// socket, records a Warning Event on its Pod (see controller.Await).
func runZoneAgent(ctx context.Context, f *runFlags, log logr.Logger) error {
	dyn, kc, recorder, stopEvents, err := kubeClients(ctx, f, f.events && f.podName != "")
	if err != nil {
		return err
	}
	defer stopEvents()
	waiting := controller.NewWaiting("connecting to the zone's NB and SB")
	var started atomic.Pointer[func() error]
	metrics := controller.NewMetrics(nil, f.instance)
	ready := func() error {
		if r := started.Load(); r != nil {
			return (*r)()
		}
		return waiting.Err()
	}
	if err := serve(ctx, f.addr, metrics, ready, log); err != nil {
		return err
	}
	await := controller.Await{Waiting: waiting, Log: log, Events: recorder}
	if recorder != nil {
		await.Object = &corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: f.namespace, Name: f.podName, UID: types.UID(f.podUID)}
	}
	for _, db := range []struct {
		ep    ovn.Endpoint
		probe func(context.Context, ovn.Endpoint) error
	}{{f.zoneNB, ovn.ProbeNB}, {f.zoneSB, ovn.ProbeSB}} {
		if err := await.Until(ctx, controller.ReasonOVNSocketUnavailable, func(ctx context.Context) error {
			return withSocketHint(db.ep, db.probe(ctx, db.ep))
		}); err != nil {
			return nil // ctx ended
		}
	}
	nbc, err := ovn.ConnectNB(ctx, f.zoneNB, f.instance, log.WithName("nb"))
	if err != nil {
		return err
	}
	defer nbc.Close()
	metrics.CountOwnedRows(nbc, f.instance)
	sbc, err := ovn.ConnectZoneSB(ctx, f.zoneSB, f.instance, log.WithName("sb"))
	if err != nil {
		return err
	}
	defer sbc.Close()
	zone := f.zoneName
	if zone == "" {
		// ovn-kubernetes names the NB a moment after it starts.
		if err := await.Until(ctx, "", func(ctx context.Context) error {
			var err error
			zone, err = zoneNameOf(ctx, nbc)
			return err
		}); err != nil {
			return nil // ctx ended
		}
	}
	log = log.WithValues("zone", zone)
	// Under VXLAN ovn-northd would ignore the keys our switches request:
	// the agent refuses to start.
	zk, err := ovn.ReadZoneKeys(ctx, nbc, f.instance)
	if err != nil {
		return fmt.Errorf("zone %s: %w", zone, err)
	}
	if err := zk.CheckGeneve(zone); err != nil {
		return err
	}

	source := kube.NewSource(dyn, f.resync, nil, log.WithName("kube"))
	store := kube.NewStore(dyn, kc, f.namespace, f.resync, log.WithName("store"))
	// The zone's chassis, now and whenever they change, the keys other
	// tools' rows request in its NB (read again on every resync, for the
	// allocator to take none of them) and the zone's tunnel key
	// collisions, whenever they change (for the allocator to report them
	// on the routers): kick republishes.
	kick := make(chan struct{}, 1)
	republish := func() {
		select {
		case kick <- struct{}{}:
		default:
		}
	}
	var collisions atomic.Pointer[[]translator.KeyMismatch]
	collisions.Store(&[]translator.KeyMismatch{})
	opts := controller.Options{Instance: f.instance, Workers: f.workers, Resync: f.resync, Log: log.WithName("controller"), Metrics: metrics, SkipMoveNudge: !*f.moveNudge,
		KeysChanged: func(ms []translator.KeyMismatch) {
			collisions.Store(&ms)
			republish()
		}}
	agent := controller.NewZoneAgent(nbc, sbc, zone, agentSource{source, store, zone}, store, opts)
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
	// A failed publication is tried again until it succeeds.
	onChassis := func(table string) {
		if table == sbmodel.ChassisTable {
			republish()
		}
	}
	sbc.Cache().AddEventHandler(&ovsdbcache.EventHandlerFuncs{
		AddFunc:    func(table string, _ model.Model) { onChassis(table) },
		UpdateFunc: func(table string, _, _ model.Model) { onChassis(table) },
		DeleteFunc: func(table string, _ model.Model) { onChassis(table) },
	})
	go func() {
		retry := time.Second
		resync := time.NewTicker(f.resync)
		defer resync.Stop()
		for {
			chassis, err := ovn.ZoneChassis(ctx, sbc, zone)
			if err == nil {
				zk, err = ovn.ReadZoneKeys(ctx, nbc, f.instance)
			}
			if err == nil {
				if gerr := zk.CheckGeneve(zone); gerr != nil {
					log.Error(gerr, "the zone's tunnel keys")
				}
				err = store.PublishZone(ctx, zone, f.nodeName, chassis, zk.Foreign, *collisions.Load())
			}
			var again <-chan time.Time
			if err != nil && ctx.Err() == nil {
				log.Info("publishing the zone's chassis, foreign keys and key collisions; trying again", "error", err.Error(), "in", retry)
				again = time.After(retry)
				retry = min(2*retry, 30*time.Second)
			} else {
				retry = time.Second
			}
			select {
			case <-ctx.Done():
				return
			case <-kick:
			case <-again:
			case <-resync.C:
			}
		}
	}()
	return agent.Run(ctx)
}

// agentSource is a zone agent's input: synced once the cluster's objects,
// the OVNZones and the OVNAllocations are listed and the zone's own chassis
// are among them (before that the agent would plan its zone without its
// chassis and remove rows that are needed).
type agentSource struct {
	*kube.Source
	store *kube.Store
	zone  string
}

func (s agentSource) HasSynced() bool {
	if !s.Source.HasSynced() || !s.store.HasSynced() {
		return false
	}
	for _, c := range s.store.Chassis() {
		if c.Zone == s.zone {
			return true
		}
	}
	return false
}

// zoneNameOf is the NB_Global name of the NB, which ovn-kubernetes sets to
// its zone's name (the node's name; in v1.3.0's multi-node zones the
// Node label k8s.ovn.org/zone-name), just after the NB starts. kubevirt-ovn
// never writes it: ovn-kubernetes v1.3.0 waits for it to be its zone.
func zoneNameOf(ctx context.Context, nbc client.Client) (string, error) {
	var globals []*nbmodel.NBGlobal
	if err := nbc.List(ctx, &globals); err != nil {
		return "", fmt.Errorf("reading the zone NB's NB_Global: %w", err)
	}
	if len(globals) != 1 || globals[0].Name == "" {
		return "", errors.New("the zone NB's NB_Global has no name yet (ovn-kubernetes sets it to the zone's name just after the NB starts; with another OVN give --zone-name)")
	}
	return globals[0].Name, nil
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
