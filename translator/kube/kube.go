// Package kube is the Kubernetes edge of kubevirt-ovn: it reads
// VirtualRouters, NetworkAttachmentDefinitions and VirtualMachineInstances
// through client-go informers, tells the controller which units an event
// affects, and writes VirtualRouter status, finalizers and events.
package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/kubevirt-ovn/kubevirt-ovn/translator"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/controller"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/manifest"
)

// The resources kubevirt-ovn watches.
var (
	RouterGVR = schema.GroupVersionResource{Group: "kubevirt.io", Version: "v1", Resource: "virtualrouters"}
	NADGVR    = schema.GroupVersionResource{Group: "k8s.cni.cncf.io", Version: "v1", Resource: "network-attachment-definitions"}
	VMIGVR    = schema.GroupVersionResource{Group: "kubevirt.io", Version: "v1", Resource: "virtualmachineinstances"}
	// FloatingIPGVR is ONOS kubevirt-networking's floating IP resource
	// (deploy/common/crd-floatingip.yaml).
	FloatingIPGVR = schema.GroupVersionResource{Group: "kubevirt.io", Version: "v1", Resource: "floatingips"}
)

// Finalizer keeps a deleted VirtualRouter until its rows are gone, also
// when the deletion happens while kubevirt-ovn is down.
const Finalizer = "kubevirt.io/kubevirt-ovn-cleanup"

// Status condition types of a VirtualRouter.
const (
	ConditionReady    = "Ready"
	ConditionRealized = "Realized"
)

// Source reads the cluster's objects from informers.
type Source struct {
	client  dynamic.Interface
	factory dynamicinformer.DynamicSharedInformerFactory
	routers cache.SharedIndexInformer
	nads    cache.SharedIndexInformer
	vmis    cache.SharedIndexInformer
	// fips, sgs, sgRules, lbs and vms are nil when the API server does
	// not serve them (optional.go).
	fips, sgs, sgRules, lbs, vms cache.SharedIndexInformer
	// vmims and pods (migration.go) are nil when the API server does not
	// serve them to kubevirt-ovn; pods come from podFactory (a label
	// selector).
	vmims, pods cache.SharedIndexInformer
	podFactory  dynamicinformer.DynamicSharedInformerFactory
	resync      time.Duration
	// vmiMu orders the conversions of VMIs, which read two stores (vm.go).
	vmiMu    sync.Mutex
	recorder record.EventRecorder
	log      logr.Logger

	// input holds each object as one source, keyed by kind and name.
	input *translator.Input
	// handlers are the event handlers' registrations: synced once every
	// object listed at start has been set in input.
	handlers []cache.ResourceEventHandlerRegistration
	// allocator: the interconnect allocator's source (SetAllocator).
	allocator bool
	// keys are the tunnel key collisions reported (keys.go).
	keys keyState
}

// SetAllocator makes s the source of the interconnect allocator, which
// writes no NB: no finalizers (each zone's agent removes a deleted
// router's rows from what its NB holds), and a status that says what the
// allocator knows: the gateway and tunnel keys are decided, not whether
// the zones' NBs have them.
func (s *Source) SetAllocator() {
	s.allocator = true
	// The default network's transit switch, in every zone, is on no NAD.
	s.input.SetForeignKeys("ovn-kubernetes' default network", []translator.ForeignKey{{Key: OVNKTransitSwitchBaseKey, Holder: "Logical_Switch transit_switch"}})
}

// ovn-kubernetes records the tunnel keys of its networks in their NADs:
// its transit switches request OVNKTransitSwitchBaseKey + the network ID
// (0, the default network, has no NAD), and its cluster-manager allocates
// more (a Layer2 network's transit router) in the tunnel-keys list.
const (
	OVNKNetworkIDAnnotation  = "k8s.ovn.org/network-id"
	OVNKTunnelKeysAnnotation = "k8s.ovn.org/tunnel-keys"
	OVNKTransitSwitchBaseKey = 16711683
)

// nadForeignKeys are the tunnel keys ovn-kubernetes records in a NAD's
// annotations; ones that do not parse are left out.
func nadForeignKeys(u *unstructured.Unstructured) []translator.ForeignKey {
	var out []translator.ForeignKey
	ann := u.GetAnnotations()
	if id, err := strconv.Atoi(ann[OVNKNetworkIDAnnotation]); err == nil && id >= 0 {
		out = append(out, translator.ForeignKey{Key: OVNKTransitSwitchBaseKey + id, Holder: fmt.Sprintf("ovn-kubernetes network %d's transit switch", id)})
	}
	var keys []int
	if err := json.Unmarshal([]byte(ann[OVNKTunnelKeysAnnotation]), &keys); err == nil {
		for _, k := range keys {
			out = append(out, translator.ForeignKey{Key: k, Holder: "ovn-kubernetes' " + OVNKTunnelKeysAnnotation})
		}
	}
	return out
}

// NewSource prepares the informers; Start runs them. recorder may be nil.
func NewSource(client dynamic.Interface, resync time.Duration, recorder record.EventRecorder, log logr.Logger) *Source {
	f := dynamicinformer.NewDynamicSharedInformerFactory(client, resync)
	s := &Source{
		client: client, factory: f, resync: resync, recorder: recorder, log: log, input: translator.NewInput(),
		routers: f.ForResource(RouterGVR).Informer(),
		nads:    f.ForResource(NADGVR).Informer(),
		vmis:    f.ForResource(VMIGVR).Informer(),
	}
	// What the informers keep of each object (slim.go).
	_ = s.routers.SetTransform(dropManagedFields)
	_ = s.nads.SetTransform(dropManagedFields)
	_ = s.vmis.SetTransform(slimVMI)
	return s
}

// Start runs the informers until ctx ends.
func (s *Source) Start(ctx context.Context) {
	s.factory.Start(ctx.Done())
	if s.podFactory != nil {
		s.podFactory.Start(ctx.Done())
	}
}

// HasSynced is true once every informer has listed its objects and they
// are in the input.
func (s *Source) HasSynced() bool {
	informers := []cache.SharedIndexInformer{s.routers, s.nads, s.vmis}
	for _, inf := range []cache.SharedIndexInformer{s.fips, s.sgs, s.sgRules, s.lbs, s.vms, s.vmims, s.pods} {
		if inf != nil {
			informers = append(informers, inf)
		}
	}
	for _, inf := range informers {
		if !inf.HasSynced() {
			return false
		}
	}
	if len(s.handlers) < len(informers) {
		return false
	}
	for _, h := range s.handlers {
		if !h.HasSynced() {
			return false
		}
	}
	return true
}

// Input is the objects of the informers, indexed for planning.
func (s *Source) Input() *translator.Input { return s.input }

// Notify keeps the input up to date from informer events and passes to
// enqueue (the controller's EnqueueUnits) the units each event affects: the input compares the object's old and
// new conversion and says which units' plans may change (a router, the
// routers competing for its claims, a network and the routers on it, the
// networks of a VMI's interfaces, the security groups a VM's ports join
// or leave). A kind of deploy/common, or VirtualMachines, that the API
// server does not serve is left out, and logged (optional.go).
func (s *Source) Notify(enqueue func([]translator.Unit)) error {
	type watched struct {
		inf     cache.SharedIndexInformer
		kind    string
		convert func(*unstructured.Unstructured) translator.Objects
	}
	all := []watched{{s.routers, "VirtualRouter", s.routerObjects}, {s.nads, "NetworkAttachmentDefinition", s.nadObjects}}
	s.watchOptional()
	s.watchMigrations()
	for _, o := range []watched{{s.fips, "FloatingIp", s.fipObjects}, {s.sgs, "SecurityGroup", s.sgObjects},
		{s.sgRules, "SecurityGroupRule", s.ruleObjects}, {s.lbs, "LoadBalancer", s.lbObjects}} {
		if o.inf != nil {
			all = append(all, o)
		}
	}
	for _, h := range all {
		kind, convert := h.kind, h.convert
		set := func(obj any, deleted bool) {
			u, ok := asUnstructured(obj)
			if !ok {
				return
			}
			key := kind + "/" + u.GetNamespace() + "/" + u.GetName()
			var objs translator.Objects
			if !deleted && u.GetDeletionTimestamp() == nil {
				// An object being deleted is left out: its rows go.
				objs = convert(u)
			}
			enqueue(s.input.Set(key, objs))
			if kind == "NetworkAttachmentDefinition" && s.allocator {
				// ovn-kubernetes' keys are never ours to take, also while
				// its NAD is being deleted (its switches may still be).
				var keys []translator.ForeignKey
				if !deleted {
					keys = nadForeignKeys(u)
				}
				enqueue(s.input.SetForeignKeys("NAD "+u.GetNamespace()+"/"+u.GetName(), keys))
			}
		}
		reg, err := h.inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { set(obj, false) },
			UpdateFunc: func(_, cur any) { set(cur, false) },
			DeleteFunc: func(obj any) { set(obj, true) },
		})
		if err != nil {
			return err
		}
		s.handlers = append(s.handlers, reg)
	}
	// A VMI, and the VirtualMachine whose template binds its ports to
	// security groups, are read together (vm.go).
	vmi := func(obj any) {
		if rec := vmiOf(obj); rec != nil {
			s.setVMI(rec.Namespace, rec.Name, enqueue)
		}
	}
	reg, err := s.vmis.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: vmi, UpdateFunc: func(_, cur any) { vmi(cur) }, DeleteFunc: vmi,
	})
	if err != nil {
		return err
	}
	s.handlers = append(s.handlers, reg)
	if s.vms != nil {
		reg, err := s.vms.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { s.vmChanged(nil, obj, enqueue) },
			UpdateFunc: func(old, cur any) { s.vmChanged(old, cur, enqueue) },
			DeleteFunc: func(obj any) { s.vmChanged(obj, nil, enqueue) },
		})
		if err != nil {
			return err
		}
		s.handlers = append(s.handlers, reg)
	}
	// A migration, and its target pod, move the port of their VMI
	// (migration.go).
	for _, m := range []struct {
		inf     cache.SharedIndexInformer
		changed func(any, func([]translator.Unit))
	}{{s.vmims, s.migrationChanged}, {s.pods, s.targetPodChanged}} {
		if m.inf == nil {
			continue
		}
		changed := m.changed
		reg, err := m.inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { changed(obj, enqueue) },
			UpdateFunc: func(_, cur any) { changed(cur, enqueue) },
			DeleteFunc: func(obj any) { changed(obj, enqueue) },
		})
		if err != nil {
			return err
		}
		s.handlers = append(s.handlers, reg)
	}
	return nil
}

// routerObjects converts a VirtualRouter; one that does not convert fails
// its unit and keeps its rows.
func (s *Source) routerObjects(u *unstructured.Unstructured) translator.Objects {
	unit := translator.Unit{Kind: translator.KindRouter, Name: u.GetName()}
	invalid := func(err error) translator.Objects {
		return translator.Objects{Invalid: map[translator.Unit]error{
			unit: &translator.InputError{Kind: translator.ObjVirtualRouter, Object: u.GetName(), Msg: err.Error()}}}
	}
	var vr manifest.VirtualRouter
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &vr); err != nil {
		return invalid(err)
	}
	r, err := manifest.RouterFrom(&vr)
	if err != nil {
		return invalid(err)
	}
	r.Generation = u.GetGeneration()
	return translator.Objects{Routers: []translator.Router{r}}
}

// nadObjects converts a NetworkAttachmentDefinition: nothing when it is
// not one of ours (no network-config).
func (s *Source) nadObjects(u *unstructured.Unstructured) translator.Objects {
	var nad manifest.NetworkAttachmentDefinition
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &nad); err != nil {
		return translator.Objects{} // not readable as a NAD: not one of ours
	}
	n, ours, err := manifest.NetworkFrom(&nad)
	switch {
	case !ours:
		return translator.Objects{}
	case err != nil:
		return translator.Objects{Invalid: map[translator.Unit]error{
			{Kind: translator.KindNetwork, Name: nad.Name}: &translator.InputError{Kind: translator.ObjNAD, Object: nad.Namespace + "/" + nad.Name, Msg: err.Error()}}}
	}
	return translator.Objects{Networks: []translator.Network{n}}
}

// vmiObjects converts a VirtualMachineInstance, as its informer keeps it
// (slimVMI), into its interfaces, bound to the security groups of its
// VirtualMachine's template when it has one (vm.go).
func (s *Source) vmiObjects(rec *vmiRecord) translator.Objects {
	if rec.err != nil {
		s.log.V(1).Info("skipping a VirtualMachineInstance that does not convert", "vmi", rec.Namespace+"/"+rec.Name, "error", rec.err.Error())
		return translator.Objects{}
	}
	// A copy: the informer's record is shared, and following a migration
	// changes the status.
	vmi := rec.VirtualMachineInstance
	var uid string
	if ms := vmi.Status.MigrationState; ms != nil {
		uid = ms.MigrationUID
		copied := *ms
		vmi.Status.MigrationState = &copied
	}
	followMigration(&vmi.Status, s.migrationOf(vmi.Namespace, vmi.Name, uid))
	ifaces, _ := manifest.VMInterfacesFrom(&vmi)
	if groups, ok := s.vmGroups(vmi.Namespace, vmi.Name); ok {
		for i := range ifaces {
			ifaces[i].SecurityGroups = groups
		}
	}
	return translator.Objects{VMs: ifaces}
}

// fipObjects converts a floating IP. The CRD's schema requires what
// manifest.FloatingIPFrom needs: one that still does not convert is
// skipped (it has no router to report it).
func (s *Source) fipObjects(u *unstructured.Unstructured) translator.Objects {
	var obj manifest.FloatingIP
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &obj); err != nil {
		s.log.Info("skipping a floating IP that does not convert", "floatingIp", u.GetName(), "error", err.Error())
		return translator.Objects{}
	}
	f, err := manifest.FloatingIPFrom(&obj)
	if err != nil {
		s.log.Info("skipping a floating IP", "floatingIp", u.GetName(), "error", err.Error())
		return translator.Objects{}
	}
	return translator.Objects{FloatingIPs: []translator.FloatingIP{f}}
}

func asMap(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

func asUnstructured(obj any) (*unstructured.Unstructured, bool) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	u, ok := obj.(*unstructured.Unstructured)
	return u, ok
}

// Prepare adds the finalizer to a router that lacks it.
func (s *Source) Prepare(ctx context.Context, router string) error {
	if s.allocator {
		return nil
	}
	u, err := s.current(router)
	if err != nil || u == nil || u.GetDeletionTimestamp() != nil || slices.Contains(u.GetFinalizers(), Finalizer) {
		return err
	}
	u = u.DeepCopy()
	u.SetFinalizers(append(u.GetFinalizers(), Finalizer))
	_, err = s.client.Resource(RouterGVR).Update(ctx, u, metav1.UpdateOptions{})
	return ignoreGone(err)
}

// Removed drops the finalizer of a deleted router whose rows are gone.
func (s *Source) Removed(ctx context.Context, router string) error {
	if s.allocator {
		return nil
	}
	u, err := s.current(router)
	if err != nil || u == nil || !slices.Contains(u.GetFinalizers(), Finalizer) {
		return err
	}
	u = u.DeepCopy()
	u.SetFinalizers(slices.DeleteFunc(u.GetFinalizers(), func(f string) bool { return f == Finalizer }))
	_, err = s.client.Resource(RouterGVR).Update(ctx, u, metav1.UpdateOptions{})
	if err == nil {
		s.log.Info("router rows removed; finalizer dropped", "router", router)
	}
	return ignoreGone(err)
}

// Report writes a router's status when it changed, and an event for a
// failure or a gateway change.
func (s *Source) Report(ctx context.Context, router string, st controller.RouterStatus) error {
	u, err := s.current(router)
	if err != nil || u == nil {
		return err
	}
	old, _, _ := unstructured.NestedMap(u.Object, "status")
	conds := conditionsOf(u)
	ready := metav1.Condition{Type: ConditionReady, Status: metav1.ConditionTrue, Reason: "Committed",
		Message: "the router's rows are committed to the OVN Northbound database", ObservedGeneration: st.Generation}
	if st.Err != nil {
		ready.Status, ready.Reason, ready.Message = metav1.ConditionFalse, reasonOf(st.Err), st.Err.Error()
	}
	realized := metav1.Condition{Type: ConditionRealized, Status: metav1.ConditionTrue, Reason: "ChassisUpToDate",
		Message: "NB_Global.hv_cfg has reached the nb_cfg of the router's last commit", ObservedGeneration: st.Generation}
	if !st.Realized {
		realized.Status, realized.Reason, realized.Message = metav1.ConditionFalse, "Pending",
			"waiting for the chassis to report the router's last commit (NB_Global.hv_cfg)"
		if st.Err != nil {
			realized.Reason, realized.Message = "NotReady", "the router's rows are not committed"
		}
	}
	if s.allocator {
		if st.Err == nil {
			ready.Reason, ready.Message = "Allocated", "the router's gateway and tunnel keys are allocated; each zone's kubevirt-ovn agent writes its rows"
		}
		realized.Status, realized.Reason, realized.Message = metav1.ConditionUnknown, "Interconnect",
			"the allocator does not read the zones' databases"
	}
	meta.SetStatusCondition(&conds, ready)
	meta.SetStatusCondition(&conds, realized)
	status, err := statusOf(st.Generation, conds)
	if err != nil {
		return err
	}
	if st.SNATIP != "" {
		status["snatIP"] = st.SNATIP
	}
	if len(st.Gateway) > 0 {
		cands := make([]any, 0, len(st.Gateway)-1)
		for _, g := range st.Gateway[1:] {
			cands = append(cands, g)
		}
		gw := map[string]any{"primary": st.Gateway[0], "candidates": cands}
		if st.Active != "" {
			gw["active"] = st.Active
		}
		status["gateway"] = gw
	}
	if equality.Semantic.DeepEqual(old, status) {
		return nil
	}
	u = u.DeepCopy()
	u.Object["status"] = status
	if _, err := s.client.Resource(RouterGVR).UpdateStatus(ctx, u, metav1.UpdateOptions{}); err != nil {
		return ignoreGone(err)
	}
	if s.recorder != nil {
		oldReady, _ := readyOf(old)
		switch {
		case st.Err != nil && oldReady != ready.Message:
			s.recorder.Event(u, corev1.EventTypeWarning, ready.Reason, st.Err.Error())
		case st.GatewayChanged:
			s.recorder.Eventf(u, corev1.EventTypeNormal, "GatewayChanged", "gateway chassis is now %s", st.Gateway[0])
		}
	}
	return nil
}

// statusOf is a status holding the observed generation and conditions,
// as the API server stores them.
func statusOf(generation int64, conds []metav1.Condition) (map[string]any, error) {
	raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&struct {
		Conditions []metav1.Condition `json:"conditions"`
	}{conds})
	if err != nil {
		return nil, err
	}
	return map[string]any{"observedGeneration": generation, "conditions": raw["conditions"]}, nil
}

func readyOf(status map[string]any) (string, bool) {
	conds, _, _ := unstructured.NestedSlice(status, "conditions")
	for _, c := range conds {
		m := asMap(c)
		if m["type"] == ConditionReady {
			msg, _ := m["message"].(string)
			return msg, true
		}
	}
	return "", false
}

// reasonOf is a condition reason for an error.
func reasonOf(err error) string {
	var in *translator.InputError
	if errors.As(err, &in) {
		if in.Reason != "" {
			return in.Reason
		}
		return "InvalidSpec"
	}
	return "CommitFailed"
}

func (s *Source) current(router string) (*unstructured.Unstructured, error) {
	obj, ok, err := s.routers.GetStore().GetByKey(router)
	if err != nil || !ok {
		return nil, err
	}
	u, ok := asUnstructured(obj)
	if !ok {
		return nil, fmt.Errorf("VirtualRouter %s: unexpected object %T in the cache", router, obj)
	}
	return u, nil
}

func ignoreGone(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// conditionsOf are the status conditions of a VirtualRouter as it is read.
func conditionsOf(u *unstructured.Unstructured) []metav1.Condition {
	raw, ok, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	if !ok {
		return nil
	}
	tmp := &struct {
		Conditions []metav1.Condition `json:"conditions"`
	}{}
	_ = runtime.DefaultUnstructuredConverter.FromUnstructured(map[string]any{"conditions": raw}, tmp)
	return tmp.Conditions
}
