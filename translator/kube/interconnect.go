package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/kubevirt-ovn/kubevirt-ovn/translator"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/chassiszone"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/controller"
)

// In a cluster whose OVN has one NB per zone (ovn-kubernetes'
// interconnect mode) kubevirt-ovn runs as an allocator, which writes no NB,
// and one agent per zone, which writes its zone's NB. They meet in two
// resources of kubevirt-ovn's namespace
// (deploy/interconnect/crd-interconnect.yaml):
//   - OVNZone: a zone's chassis, the tunnel keys in kubevirt-ovn's range
//     that other tools' rows request in its NB, the collisions of our
//     switches' and ports' keys in its SB and the load balancer members its
//     health checks find offline (which the other zones' agents leave out
//     of their VIPs), one per zone, written by its agent and owned by its
//     Node, so that a deleted node's chassis go with it;
//   - OVNAllocation: one unit's decisions, one per router and network,
//     written by the allocator: a router's gateway order and the tunnel
//     keys of the unit's switch and ports.

// The resources of the interconnect state.
var (
	ZoneGVR       = schema.GroupVersionResource{Group: "ovn.kubevirt.io", Version: "v1alpha1", Resource: "ovnzones"}
	AllocationGVR = schema.GroupVersionResource{Group: "ovn.kubevirt.io", Version: "v1alpha1", Resource: "ovnallocations"}
)

// zoneChassis is a chassis as an OVNZone lists it.
type zoneChassis struct {
	Name     string   `json:"name"`
	Hostname string   `json:"hostname,omitempty"`
	Gateway  bool     `json:"gateway,omitempty"`
	Physnets []string `json:"physnets,omitempty"`
}

type zoneSpec struct {
	Zone    string        `json:"zone"`
	Chassis []zoneChassis `json:"chassis,omitempty"`
	// ForeignKeys are the datapath keys in kubevirt-ovn's range that rows
	// not ours request in the zone's NB: the allocator takes none of them.
	ForeignKeys []translator.ForeignKey `json:"foreignKeys,omitempty"`
	// KeyCollisions are our switches and ports whose SB tunnel key is not
	// the one they request in the zone: the allocator reports them on the
	// routers attached to their networks.
	KeyCollisions []zoneCollision `json:"keyCollisions,omitempty"`
	// OfflineMembers are the load balancer members the zone's own health
	// checks find offline: every other zone's agent leaves them out of
	// its rows' VIPs.
	OfflineMembers []zoneOfflineMember `json:"offlineMembers,omitempty"`
	// ActivatedPorts are the migrating VM ports the zone's SB shows
	// activated on their target: every other zone's twin follows.
	ActivatedPorts []translator.PortActivation `json:"activatedPorts,omitempty"`
}

// zoneOfflineMember is a translator.OfflineMember as an OVNZone lists it.
type zoneOfflineMember struct {
	Port     string `json:"port"`
	IP       string `json:"ip"`
	Protocol string `json:"protocol"`
	PortNum  int    `json:"portNumber"`
}

// zoneCollision is a translator.KeyMismatch as an OVNZone lists it (its
// zone is the OVNZone's).
type zoneCollision struct {
	Network   string `json:"network"`
	Switch    string `json:"switch"`
	Port      string `json:"port,omitempty"`
	Requested int    `json:"requested"`
	Actual    int    `json:"actual"`
	Holder    string `json:"holder,omitempty"`
}

// zoneState is one OVNZone read.
type zoneState struct {
	zone    string
	chassis []translator.Chassis
	foreign []translator.ForeignKey
	// collisions are marked with the zone.
	collisions []translator.KeyMismatch
	offline    []translator.OfflineMember
	activated  []translator.PortActivation
}

type allocUnit struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
}

type allocSpec struct {
	Unit       allocUnit      `json:"unit"`
	Gateways   []string       `json:"gateways,omitempty"`
	SwitchKeys map[string]int `json:"switchKeys,omitempty"`
	PortKeys   map[string]int `json:"portKeys,omitempty"`
}

// Store is the interconnect state of one namespace, from informers: the
// zones' chassis and the allocations. As a translator.Held (and
// translator.KeyHolder) it says what the allocator decided.
type Store struct {
	client    dynamic.Interface
	kc        kubernetes.Interface // nil: zones are not owned by Nodes
	namespace string
	zoneInf   cache.SharedIndexInformer
	allocInf  cache.SharedIndexInformer
	log       logr.Logger

	mu       sync.RWMutex
	zones    map[string]*zoneState // by object name
	allocs   map[string]*unitAlloc // by object name
	switches map[string]int
	ports    map[string]int
	gateways map[string][]string // by router
	onAlloc  func(translator.Unit)
	onZones  func()

	// claims keep each chassis in one zone (see Chassis).
	claimsMu sync.Mutex
	claims   chassiszone.Claims
}

// unitAlloc is one OVNAllocation read.
type unitAlloc struct {
	unit translator.Unit
	a    translator.Allocation
}

// NewStore watches the OVNZones and OVNAllocations of namespace; Start
// runs it. kc, when given, reads Nodes (a zone's owner).
func NewStore(client dynamic.Interface, kc kubernetes.Interface, namespace string, resync time.Duration, log logr.Logger) *Store {
	f := dynamicinformer.NewFilteredDynamicSharedInformerFactory(client, resync, namespace, nil)
	s := &Store{client: client, kc: kc, namespace: namespace, log: log,
		zoneInf: f.ForResource(ZoneGVR).Informer(), allocInf: f.ForResource(AllocationGVR).Informer(),
		zones: map[string]*zoneState{}, allocs: map[string]*unitAlloc{},
		switches: map[string]int{}, ports: map[string]int{}, gateways: map[string][]string{}}
	for _, inf := range []cache.SharedIndexInformer{s.zoneInf, s.allocInf} {
		_ = inf.SetTransform(dropManagedFields) // slim.go
		_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { s.update(obj, false) },
			UpdateFunc: func(_, obj any) { s.update(obj, false) },
			DeleteFunc: func(obj any) { s.update(obj, true) },
		})
	}
	return s
}

// Notify sets what is called when an allocation changes (with its unit)
// and when a zone's chassis change. Call it before Start.
func (s *Store) Notify(onAlloc func(translator.Unit), onZones func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onAlloc, s.onZones = onAlloc, onZones
}

// Start runs the informers until ctx ends.
func (s *Store) Start(ctx context.Context) {
	go s.zoneInf.Run(ctx.Done())
	go s.allocInf.Run(ctx.Done())
}

// HasSynced says whether the store has listed both resources.
func (s *Store) HasSynced() bool { return s.zoneInf.HasSynced() && s.allocInf.HasSynced() }

func (s *Store) update(obj any, deleted bool) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj, deleted = t.Obj, true
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	s.mu.Lock()
	var unit *translator.Unit
	zones := false
	switch u.GetKind() {
	case "OVNZone":
		delete(s.zones, u.GetName())
		if !deleted {
			z, err := decodeZone(u)
			if err != nil {
				s.log.Info("ignoring an OVNZone", "name", u.GetName(), "error", err.Error())
			} else {
				s.zones[u.GetName()] = z
			}
		}
		zones = true
	case "OVNAllocation":
		if old := s.allocs[u.GetName()]; old != nil {
			s.forget(old)
			un := old.unit
			unit = &un
		}
		delete(s.allocs, u.GetName())
		if !deleted {
			ua, err := decodeAlloc(u)
			if err != nil {
				s.log.Info("ignoring an OVNAllocation", "name", u.GetName(), "error", err.Error())
			} else {
				s.allocs[u.GetName()] = ua
				s.remember(ua)
				un := ua.unit
				unit = &un
			}
		}
	}
	onAlloc, onZones := s.onAlloc, s.onZones
	s.mu.Unlock()
	if unit != nil && onAlloc != nil {
		onAlloc(*unit)
	}
	if zones && onZones != nil {
		onZones()
	}
}

func (s *Store) remember(ua *unitAlloc) {
	maps.Copy(s.switches, ua.a.Keys.Switches)
	maps.Copy(s.ports, ua.a.Keys.Ports)
	if ua.unit.Kind == translator.KindRouter && len(ua.a.Gateways) > 0 {
		s.gateways[ua.unit.Name] = ua.a.Gateways
	}
}

func (s *Store) forget(ua *unitAlloc) {
	for sw, k := range ua.a.Keys.Switches {
		if s.switches[sw] == k {
			delete(s.switches, sw)
		}
	}
	for p, k := range ua.a.Keys.Ports {
		if s.ports[p] == k {
			delete(s.ports, p)
		}
	}
	if ua.unit.Kind == translator.KindRouter {
		delete(s.gateways, ua.unit.Name)
	}
}

// Chassis are every zone's chassis, each marked with its zone. A chassis
// two zones publish as local stays in the zone that had it first (by
// OVNZone name when both came at once) and the later claim is refused
// with an error in the log naming the chassis and both zones (see
// chassiszone).
func (s *Store) Chassis() []translator.Chassis {
	s.mu.RLock()
	var all []translator.Chassis
	for _, name := range slices.Sorted(maps.Keys(s.zones)) {
		all = append(all, s.zones[name].chassis...)
	}
	s.mu.RUnlock()
	s.claimsMu.Lock()
	out, conflicts := s.claims.Resolve(all)
	s.claimsMu.Unlock()
	for _, c := range conflicts {
		s.log.Error(c, "refusing a zone's claim on a chassis another zone holds", "chassis", c.Chassis, "zone", c.Refused, "holder", c.Kept)
	}
	return out
}

// ForeignKeys are the datapath keys rows not ours request in each zone's
// NB, as its agent published them, by zone.
func (s *Store) ForeignKeys() map[string][]translator.ForeignKey {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := map[string][]translator.ForeignKey{}
	for _, z := range s.zones {
		out[z.zone] = append(out[z.zone], z.foreign...)
	}
	return out
}

// KeyCollisions are the tunnel key collisions every zone's agent
// published, sorted by zone, then as the agent listed them.
func (s *Store) KeyCollisions() []translator.KeyMismatch {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []translator.KeyMismatch
	for _, name := range slices.Sorted(maps.Keys(s.zones)) {
		out = append(out, s.zones[name].collisions...)
	}
	return out
}

// OfflineMembers are the load balancer members every zone's agent
// published as offline in its zone, by zone (every zone published, also
// with none).
func (s *Store) OfflineMembers() map[string][]translator.OfflineMember {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := map[string][]translator.OfflineMember{}
	for _, z := range s.zones {
		out[z.zone] = append(out[z.zone], z.offline...)
	}
	return out
}

// Activations are the migrating VM ports every zone's agent published as
// activated on their target, by zone.
func (s *Store) Activations() map[string][]translator.PortActivation {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := map[string][]translator.PortActivation{}
	for _, z := range s.zones {
		out[z.zone] = append(out[z.zone], z.activated...)
	}
	return out
}

// Units are the units that have an allocation.
func (s *Store) Units() []translator.Unit {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []translator.Unit
	for _, ua := range s.allocs {
		out = append(out, ua.unit)
	}
	return out
}

// HeldGateways implements translator.Held: the allocator's order.
func (s *Store) HeldGateways(router string) []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return slices.Clone(s.gateways[router])
}

// HeldTunnelKeys implements translator.Held.
func (s *Store) HeldTunnelKeys() translator.TunnelKeys {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return translator.TunnelKeys{Switches: maps.Clone(s.switches), Ports: maps.Clone(s.ports)}
}

// HeldSwitchKey implements translator.KeyHolder.
func (s *Store) HeldSwitchKey(sw string) int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.switches[sw]
}

// HeldPortKey implements translator.KeyHolder.
func (s *Store) HeldPortKey(port string) int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.ports[port]
}

// The claims are the NBs' business: the store holds none.

// HeldSNATIP implements translator.Held.
func (s *Store) HeldSNATIP(string) string { return "" }

// HeldInternal implements translator.Held.
func (s *Store) HeldInternal(string) string { return "" }

// HeldVMAddress implements translator.Held.
func (s *Store) HeldVMAddress(string, string) string { return "" }

// HeldFloatingIP implements translator.Held.
func (s *Store) HeldFloatingIP(string) string { return "" }

// HeldFixedIP implements translator.Held.
func (s *Store) HeldFixedIP(string, string) string { return "" }

// Apply makes unit u's OVNAllocation say a; nil a deletes it. It writes
// only when the allocation differs.
func (s *Store) Apply(ctx context.Context, u translator.Unit, a *translator.Allocation) error {
	name := objectName(strings.ToLower(string(u.Kind))+"-", u.Name)
	res := s.client.Resource(AllocationGVR).Namespace(s.namespace)
	cur, exists, err := s.allocInf.GetStore().GetByKey(s.namespace + "/" + name)
	if err != nil {
		return err
	}
	if a == nil {
		if !exists {
			return nil
		}
		err := res.Delete(ctx, name, metav1.DeleteOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}
	spec := allocSpec{Unit: allocUnit{Kind: string(u.Kind), Name: u.Name}, Gateways: a.Gateways,
		SwitchKeys: a.Keys.Switches, PortKeys: a.Keys.Ports}
	return s.put(ctx, res, AllocationGVR, "OVNAllocation", name, cur, exists, &spec, nil)
}

// PublishZone makes zone's OVNZone list st: its chassis, the foreign keys
// in kubevirt-ovn's range, the zone's tunnel key collisions, the load
// balancer members its health checks find offline and the migrating VM
// ports activated in it; with node (and a Nodes client), the Node owns it,
// so that it goes with the node. It writes only when the OVNZone differs.
func (s *Store) PublishZone(ctx context.Context, zone, node string, st controller.ZoneState) error {
	name := objectName("zone-", zone)
	spec := zoneSpec{Zone: zone, ActivatedPorts: st.Activated}
	chassis, foreign, collisions, offline := st.Chassis, st.Foreign, st.Collisions, st.Offline
	for _, m := range offline {
		spec.OfflineMembers = append(spec.OfflineMembers, zoneOfflineMember{Port: m.Port, IP: m.IP, Protocol: m.Protocol, PortNum: m.PortNum})
	}
	for _, m := range collisions {
		spec.KeyCollisions = append(spec.KeyCollisions, zoneCollision{Network: m.Network, Switch: m.Switch, Port: m.Port,
			Requested: m.Key, Actual: m.Actual, Holder: m.Holder})
	}
	for _, f := range foreign {
		if f.Key >= translator.MinDatapathKey && f.Key <= translator.MaxDatapathKey {
			spec.ForeignKeys = append(spec.ForeignKeys, f)
		}
	}
	for _, c := range chassis {
		spec.Chassis = append(spec.Chassis, zoneChassis{Name: c.Name, Hostname: c.Hostname, Gateway: c.Gateway, Physnets: c.Physnets})
	}
	cur, exists, err := s.zoneInf.GetStore().GetByKey(s.namespace + "/" + name)
	if err != nil {
		return err
	}
	var owners []metav1.OwnerReference
	if node != "" && s.kc != nil && !exists {
		n, err := s.kc.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("node %s, owner of zone %s's OVNZone: %w", node, zone, err)
		}
		owners = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: n.Name, UID: n.UID}}
	}
	return s.put(ctx, s.client.Resource(ZoneGVR).Namespace(s.namespace), ZoneGVR, "OVNZone", name, cur, exists, &spec, owners)
}

// put creates object name of kind with spec (a pointer to a struct), or
// updates cur's spec when it differs.
func (s *Store) put(ctx context.Context, res dynamic.ResourceInterface, gvr schema.GroupVersionResource, kind, name string, cur any, exists bool, spec any, owners []metav1.OwnerReference) error {
	want, err := runtime.DefaultUnstructuredConverter.ToUnstructured(spec)
	if err != nil {
		return err
	}
	if exists {
		u := cur.(*unstructured.Unstructured)
		have, _, _ := unstructured.NestedMap(u.Object, "spec")
		if equalJSON(have, want) {
			return nil
		}
		u = u.DeepCopy()
		u.Object["spec"] = want
		_, err := res.Update(ctx, u, metav1.UpdateOptions{})
		return err
	}
	u := &unstructured.Unstructured{Object: map[string]any{"spec": want}}
	u.SetAPIVersion(gvr.GroupVersion().String())
	u.SetKind(kind)
	u.SetName(name)
	u.SetNamespace(s.namespace)
	u.SetOwnerReferences(owners)
	_, err = res.Create(ctx, u, metav1.CreateOptions{})
	return err
}

// equalJSON compares two decoded JSON objects (numbers may be int64 or
// float64 on either side).
func equalJSON(a, b map[string]any) bool {
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && string(ja) == string(jb)
}

func decodeZone(u *unstructured.Unstructured) (*zoneState, error) {
	var spec zoneSpec
	if err := fromSpec(u, &spec); err != nil {
		return nil, err
	}
	if spec.Zone == "" {
		return nil, fmt.Errorf("spec.zone is empty")
	}
	out := &zoneState{zone: spec.Zone, foreign: spec.ForeignKeys}
	for _, c := range spec.KeyCollisions {
		out.collisions = append(out.collisions, translator.KeyMismatch{Zone: spec.Zone,
			KeyRequest: translator.KeyRequest{Network: c.Network, Switch: c.Switch, Port: c.Port, Key: c.Requested},
			Actual:     c.Actual, Holder: c.Holder})
	}
	for _, m := range spec.OfflineMembers {
		out.offline = append(out.offline, translator.OfflineMember{Port: m.Port, IP: m.IP, Protocol: m.Protocol, PortNum: m.PortNum})
	}
	out.activated = spec.ActivatedPorts
	for _, c := range spec.Chassis {
		out.chassis = append(out.chassis, translator.Chassis{Name: c.Name, Hostname: c.Hostname, Gateway: c.Gateway, Physnets: c.Physnets, Zone: spec.Zone})
	}
	return out, nil
}

func decodeAlloc(u *unstructured.Unstructured) (*unitAlloc, error) {
	var spec allocSpec
	if err := fromSpec(u, &spec); err != nil {
		return nil, err
	}
	kind := translator.OwnerKind(spec.Unit.Kind)
	if spec.Unit.Name == "" || (kind != translator.KindRouter && kind != translator.KindNetwork) {
		return nil, fmt.Errorf("spec.unit %s/%s is no router or network", spec.Unit.Kind, spec.Unit.Name)
	}
	return &unitAlloc{unit: translator.Unit{Kind: kind, Name: spec.Unit.Name},
		a: translator.Allocation{Gateways: spec.Gateways, Keys: translator.TunnelKeys{Switches: spec.SwitchKeys, Ports: spec.PortKeys}}}, nil
}

func fromSpec(u *unstructured.Unstructured, into any) error {
	spec, _, err := unstructured.NestedFieldNoCopy(u.Object, "spec")
	if err != nil {
		return err
	}
	b, err := json.Marshal(spec)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, into)
}

// objectName is prefix+name, or, when that is too long for an object
// name, prefix with the start of name and a hash of all of it.
func objectName(prefix, name string) string {
	name = strings.ToLower(name)
	if len(prefix)+len(name) <= 253 {
		return prefix + name
	}
	h := fnv.New64a()
	h.Write([]byte(name))
	sum := fmt.Sprintf("%016x", h.Sum64())
	return prefix + strings.TrimRight(name[:253-len(prefix)-len(sum)-1], ".-") + "-" + sum
}
