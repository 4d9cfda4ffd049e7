package main

import (
	"context"
	"errors"
	"time"

	"github.com/go-logr/logr"
	ovsdbcache "github.com/ovn-kubernetes/libovsdb/cache"
	"github.com/ovn-kubernetes/libovsdb/client"
	"github.com/ovn-kubernetes/libovsdb/model"
	corev1 "k8s.io/api/core/v1"
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
// chassis and writes its zone's NB from the allocator's decisions.
func runZoneAgent(ctx context.Context, f *runFlags, log logr.Logger) error {
	// The agent records no event (and may not: see its RBAC).
	dyn, kc, _, stopEvents, err := kubeClients(ctx, f, false)
	if err != nil {
		return err
	}
	defer stopEvents()
	nbc, err := ovn.ConnectNB(ctx, f.zoneNB, f.instance, log.WithName("nb"))
	if err != nil {
		return err
	}
	defer nbc.Close()
	sbc, err := ovn.ConnectZoneSB(ctx, f.zoneSB, f.instance, log.WithName("sb"))
	if err != nil {
		return err
	}
	defer sbc.Close()
	zone := f.zoneName
	if zone == "" {
		if zone, err = zoneNameOf(ctx, nbc); err != nil {
			return err
		}
	}
	log = log.WithValues("zone", zone)

	source := kube.NewSource(dyn, f.resync, nil, log.WithName("kube"))
	store := kube.NewStore(dyn, kc, f.namespace, f.resync, log.WithName("store"))
	metrics := controller.NewMetrics(nbc, f.instance)
	opts := controller.Options{Instance: f.instance, Workers: f.workers, Resync: f.resync, Log: log.WithName("controller"), Metrics: metrics, SkipMoveNudge: !*f.moveNudge}
	agent := controller.NewZoneAgent(nbc, sbc, zone, agentSource{source, store, zone}, store, opts)
	if err := source.Notify(agent.EnqueueUnits); err != nil {
		return err
	}
	store.Notify(func(u translator.Unit) { agent.EnqueueUnits([]translator.Unit{u}) }, func() { agent.ChassisChanged(ctx) })
	source.Start(ctx)
	store.Start(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), store.HasSynced) {
		return ctx.Err()
	}
	// The zone's chassis, now and whenever they change; a failed
	// publication is tried again until it succeeds.
	kick := make(chan struct{}, 1)
	onChassis := func(table string) {
		if table != sbmodel.ChassisTable {
			return
		}
		select {
		case kick <- struct{}{}:
		default:
		}
	}
	sbc.Cache().AddEventHandler(&ovsdbcache.EventHandlerFuncs{
		AddFunc:    func(table string, _ model.Model) { onChassis(table) },
		UpdateFunc: func(table string, _, _ model.Model) { onChassis(table) },
		DeleteFunc: func(table string, _ model.Model) { onChassis(table) },
	})
	go func() {
		retry := time.Second
		for {
			chassis, err := ovn.ZoneChassis(ctx, sbc, zone)
			if err == nil {
				err = store.PublishZone(ctx, zone, f.nodeName, chassis)
			}
			var again <-chan time.Time
			if err != nil && ctx.Err() == nil {
				log.Info("publishing the zone's chassis; trying again", "error", err.Error(), "in", retry)
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
			}
		}
	}()
	ready := func() error {
		if !source.HasSynced() || !store.HasSynced() {
			return errors.New("informer caches not synced")
		}
		return connected(nbc)
	}
	if err := serve(ctx, f.addr, metrics, ready, log); err != nil {
		return err
	}
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
// its zone's name.
func zoneNameOf(ctx context.Context, nbc client.Client) (string, error) {
	var globals []*nbmodel.NBGlobal
	if err := nbc.List(ctx, &globals); err != nil {
		return "", err
	}
	if len(globals) != 1 || globals[0].Name == "" {
		return "", errors.New("the zone NB's NB_Global has no name (ovn-kubernetes sets it to the zone's name): give --zone-name")
	}
	return globals[0].Name, nil
}
