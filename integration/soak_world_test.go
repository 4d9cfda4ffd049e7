package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/kubevirt-ovn/kubevirt-ovn/integration/sandbox"
)

// The soak's workload: the input of one kubevirt-ovn instance, changed
// one random edit at a time (a seeded rand), and written where that
// instance reads it: manifest files or Kubernetes objects.

// soakObj is one object of an input, as a manifest.
type soakObj = map[string]any

// soakVM is a VM interface of a soak router's network.
type soakVM struct {
	name, node, mac, ip string
	groups              []string // security group ids
	// migration is its last live migration (KubeVirt's
	// status.migrationState), nil before the first.
	migration *soakMigration
}

type soakMigration struct {
	source, target, uid string
	completed           bool
}

// soakNet is an internal network of a soak router.
type soakNet struct {
	name   string
	prefix string // "10.x.y." of its /24
	vms    []*soakVM
}

// soakRouter is one router of the workload, with its networks, VMs,
// floating IP and load balancer.
type soakRouter struct {
	name    string
	mac     string
	snat    string // index into the external network's pool
	gateway string // "" (scheduled), gw1 or gw2
	nets    []*soakNet
	fip     *soakFIP
	lb      bool // a load balancer on its first network
	lbPort  int
	members int // how many of the first network's VMs are members
}

type soakFIP struct {
	ip string
	vm *soakVM
}

// soakGroup is a security group of the workload with its rules' ports.
type soakGroup struct {
	id    string
	ports []int
}

// soakWorld is one instance's input.
type soakWorld struct {
	// prefix names every object of the world ("f" or "k"); public is
	// its external network, pool its 172.x.0. addresses, octet the
	// second octet of its internal networks' 10.octet.0.0/16s.
	prefix, public, pool, peer string
	octet                      int
	// publicNAD is the external network's manifest when the world
	// declares it (nil: it is deploy/examples' public).
	publicNAD soakObj
	routers   []*soakRouter
	groups    []*soakGroup
	bad       []string // names of bad objects present
	seq       int      // names and addresses never reused
	usedIP    map[string]bool
}

func newSoakWorld(prefix, public, pool, peer string, octet int) *soakWorld {
	return &soakWorld{prefix: prefix, public: public, pool: pool, peer: peer, octet: octet, usedIP: map[string]bool{}}
}

// publicIP is a free address of the external network's pool (.10-.99;
// deploy/examples' own addresses are .100 and up, the ovn-kubernetes-like
// rows' .2).
func (w *soakWorld) publicIP(r *rand.Rand) string {
	for {
		ip := fmt.Sprintf("%s%d", w.pool, 10+r.IntN(90))
		if !w.usedIP[ip] {
			w.usedIP[ip] = true
			return ip
		}
	}
}

func (w *soakWorld) next() int { w.seq++; return w.seq }

func (w *soakWorld) newVM(r *rand.Rand, n *soakNet) *soakVM {
	i := w.next()
	host := 10 + len(n.vms)
	for slices.ContainsFunc(n.vms, func(v *soakVM) bool { return v.ip == fmt.Sprintf("%s%d", n.prefix, host) }) {
		host++
	}
	vm := &soakVM{name: fmt.Sprintf("%s-vm%d", w.prefix, i), node: []string{"hv1", "hv2"}[r.IntN(2)],
		mac: fmt.Sprintf("52:54:%02x:%02x:%02x:%02x", w.octet, i/65536%256, i/256%256, i%256), ip: fmt.Sprintf("%s%d", n.prefix, host)}
	if len(w.groups) > 0 && r.IntN(2) == 0 {
		vm.groups = []string{w.groups[r.IntN(len(w.groups))].id}
	}
	return vm
}

func (w *soakWorld) newRouter(r *rand.Rand) *soakRouter {
	i := w.next()
	rt := &soakRouter{name: fmt.Sprintf("%s-r%d", w.prefix, i), mac: fmt.Sprintf("fa:16:3e:%02x:%02x:%02x", w.octet, i/256%256, i%256),
		snat: w.publicIP(r), gateway: []string{"", "", "gw1", "gw2"}[r.IntN(4)]}
	for k := 0; k < 1+r.IntN(2); k++ {
		j := w.next()
		n := &soakNet{name: fmt.Sprintf("%s-n%d", w.prefix, j), prefix: fmt.Sprintf("10.%d.%d.", w.octet+j/256, j%256)}
		for v := 0; v < r.IntN(4); v++ {
			n.vms = append(n.vms, w.newVM(r, n))
		}
		rt.nets = append(rt.nets, n)
	}
	return rt
}

// soakOp is one edit of a world; it returns what it did, "" when it does
// not apply to the world as it is.
type soakOp func(w *soakWorld, r *rand.Rand) string

// soakOps are the workload's edits with their weights.
var soakOps = []struct {
	weight int
	op     soakOp
}{
	// The input's size hovers (8 to 16 routers, up to 6 VMs a network),
	// so that a resource growing over the run is a leak, not the input.
	{4, func(w *soakWorld, r *rand.Rand) string {
		if len(w.routers) >= 16 {
			return ""
		}
		rt := w.newRouter(r)
		w.routers = append(w.routers, rt)
		return "router added"
	}},
	{2, func(w *soakWorld, r *rand.Rand) string {
		if len(w.routers) < 8 && r.IntN(3) > 0 {
			return ""
		}
		if len(w.routers) == 0 {
			return ""
		}
		i := r.IntN(len(w.routers))
		delete(w.usedIP, w.routers[i].snat)
		if f := w.routers[i].fip; f != nil {
			delete(w.usedIP, f.ip)
		}
		w.routers = slices.Delete(w.routers, i, i+1)
		return "router removed"
	}},
	{2, func(w *soakWorld, r *rand.Rand) string {
		rt := w.pick(r)
		if rt == nil {
			return ""
		}
		delete(w.usedIP, rt.snat)
		rt.snat = w.publicIP(r)
		return "SNAT IP changed"
	}},
	{2, func(w *soakWorld, r *rand.Rand) string {
		rt := w.pick(r)
		if rt == nil {
			return ""
		}
		rt.gateway = []string{"", "gw1", "gw2"}[r.IntN(3)]
		return "gateway changed"
	}},
	{5, func(w *soakWorld, r *rand.Rand) string {
		rt := w.pick(r)
		if rt == nil {
			return ""
		}
		n := rt.nets[r.IntN(len(rt.nets))]
		if len(n.vms) >= 6 {
			return ""
		}
		n.vms = append(n.vms, w.newVM(r, n))
		return "VM added"
	}},
	{3, func(w *soakWorld, r *rand.Rand) string {
		rt := w.pick(r)
		if rt == nil {
			return ""
		}
		n := rt.nets[r.IntN(len(rt.nets))]
		if len(n.vms) == 0 {
			return ""
		}
		i := r.IntN(len(n.vms))
		if f := rt.fip; f != nil && f.vm == n.vms[i] {
			delete(w.usedIP, f.ip)
			rt.fip = nil
		}
		n.vms = slices.Delete(n.vms, i, i+1)
		return "VM removed"
	}},
	{3, func(w *soakWorld, r *rand.Rand) string {
		vm := w.pickVM(r)
		if vm == nil || vm.migration != nil && !vm.migration.completed {
			return ""
		}
		vm.node = map[string]string{"hv1": "hv2", "hv2": "hv1"}[vm.node]
		return "VM moved to another node"
	}},
	{3, func(w *soakWorld, r *rand.Rand) string {
		var running []*soakVM
		for _, rt := range w.routers {
			for _, n := range rt.nets {
				for _, vm := range n.vms {
					if vm.migration != nil && !vm.migration.completed {
						running = append(running, vm)
					}
				}
			}
		}
		if len(running) > 0 && r.IntN(2) == 0 {
			// The VM runs on the target: virt-handler's report.
			vm := running[r.IntN(len(running))]
			vm.node, vm.migration.completed = vm.migration.target, true
			return "live migration completed"
		}
		vm := w.pickVM(r)
		if vm == nil || vm.migration != nil && !vm.migration.completed {
			return ""
		}
		other := map[string]string{"hv1": "hv2", "hv2": "hv1"}[vm.node]
		vm.migration = &soakMigration{source: vm.node, target: other, uid: fmt.Sprintf("%s-mig%d", w.prefix, w.next())}
		return "live migration started"
	}},
	{3, func(w *soakWorld, r *rand.Rand) string {
		rt := w.pick(r)
		if rt == nil || len(rt.nets[0].vms) == 0 {
			return ""
		}
		vm := rt.nets[0].vms[r.IntN(len(rt.nets[0].vms))]
		switch {
		case rt.fip == nil:
			rt.fip = &soakFIP{ip: w.publicIP(r), vm: vm}
			return "floating IP added"
		case rt.fip.vm != vm:
			rt.fip.vm = vm
			return "floating IP moved to another VM"
		}
		delete(w.usedIP, rt.fip.ip)
		rt.fip = nil
		return "floating IP removed"
	}},
	{2, func(w *soakWorld, r *rand.Rand) string {
		if len(w.groups) < 3 {
			w.groups = append(w.groups, &soakGroup{id: fmt.Sprintf("%s-sg%d", w.prefix, w.next()), ports: []int{22, 1000 + r.IntN(1000)}})
			return "security group added"
		}
		g := w.groups[r.IntN(len(w.groups))]
		g.ports[len(g.ports)-1] = 1000 + r.IntN(1000)
		return "security group rule edited"
	}},
	{3, func(w *soakWorld, r *rand.Rand) string {
		vm := w.pickVM(r)
		if vm == nil || len(w.groups) == 0 {
			return ""
		}
		if len(vm.groups) > 0 {
			vm.groups = nil
			return "VM left its security group"
		}
		vm.groups = []string{w.groups[r.IntN(len(w.groups))].id}
		return "VM joined a security group"
	}},
	{2, func(w *soakWorld, r *rand.Rand) string {
		rt := w.pick(r)
		if rt == nil {
			return ""
		}
		switch {
		case !rt.lb:
			rt.lb, rt.lbPort, rt.members = true, 8000+r.IntN(1000), len(rt.nets[0].vms)
			return "load balancer added"
		case r.IntN(3) == 0:
			rt.lb = false
			return "load balancer removed"
		}
		rt.members = r.IntN(len(rt.nets[0].vms) + 1)
		return "load balancer members changed"
	}},
	{1, func(w *soakWorld, r *rand.Rand) string {
		if len(w.bad) > 0 && r.IntN(2) == 0 {
			w.bad = w.bad[1:]
			return "bad object removed"
		}
		w.bad = append(w.bad, fmt.Sprintf("%s-bad%d", w.prefix, w.next()))
		return "bad object added"
	}},
}

// edit applies one random edit that applies to w and says what it was.
func (w *soakWorld) edit(r *rand.Rand) string {
	total := 0
	for _, o := range soakOps {
		total += o.weight
	}
	for {
		n := r.IntN(total)
		for _, o := range soakOps {
			if n -= o.weight; n < 0 {
				if what := o.op(w, r); what != "" {
					return what
				}
				break
			}
		}
	}
}

func (w *soakWorld) pick(r *rand.Rand) *soakRouter {
	if len(w.routers) == 0 {
		return nil
	}
	return w.routers[r.IntN(len(w.routers))]
}

func (w *soakWorld) pickVM(r *rand.Rand) *soakVM {
	var vms []*soakVM
	for _, rt := range w.routers {
		for _, n := range rt.nets {
			vms = append(vms, n.vms...)
		}
	}
	if len(vms) == 0 {
		return nil
	}
	return vms[r.IntN(len(vms))]
}

// objects are the world's manifests, by file: one per router (its
// networks, VMIs, floating IP, load balancer), the security groups, one
// per bad object.
func (w *soakWorld) objects() map[string][]soakObj {
	out := map[string][]soakObj{}
	if w.publicNAD != nil {
		out[w.prefix+"-public"] = []soakObj{w.publicNAD}
	}
	for _, rt := range w.routers {
		var objs []soakObj
		var internal []any
		for _, n := range rt.nets {
			internal = append(internal, n.name)
			objs = append(objs, ctrlNAD(n.name, fmt.Sprintf(`{"type": "GENEVE", "cidr": "%s0/24", "gatewayIp": "%s1"}`, n.prefix, n.prefix)))
			for _, vm := range n.vms {
				objs = append(objs, soakVMI(vm, n.name))
			}
		}
		spec := soakObj{"mac": rt.mac, "enableSnat": true, "internal": internal,
			"external": soakObj{"ip": rt.snat, "network": w.public}, "peerRouter": soakObj{"ip": w.peer, "mac": peerMAC}}
		if rt.gateway != "" {
			spec["gateway"] = rt.gateway
		}
		objs = append(objs, soakObj{"apiVersion": "kubevirt.io/v1", "kind": "VirtualRouter", "metadata": soakObj{"name": rt.name}, "spec": spec})
		if f := rt.fip; f != nil {
			objs = append(objs, soakObj{"apiVersion": "kubevirt.io/v1", "kind": "FloatingIp", "metadata": soakObj{"name": rt.name + "-fip"},
				"spec": soakObj{"id": rt.name + "-fip", "routerName": rt.name, "networkName": w.public, "floatingIp": f.ip, "fixedIp": f.vm.ip, "vmName": f.vm.name}})
		}
		if rt.lb {
			members := []any{}
			for _, vm := range rt.nets[0].vms[:min(rt.members, len(rt.nets[0].vms))] {
				members = append(members, vm.ip)
			}
			objs = append(objs, soakObj{"apiVersion": "kubevirt.io/v1", "kind": "LoadBalancer", "metadata": soakObj{"name": rt.name + "-lb"},
				"spec": soakObj{"name": rt.name + "-lb", "networkId": rt.nets[0].name, "vip": rt.nets[0].prefix + "5", "members": members,
					"rules": []any{soakObj{"protocol": "tcp", "portRangeMin": rt.lbPort, "portRangeMax": rt.lbPort}}}})
		}
		out[rt.name] = objs
	}
	var groups []soakObj
	for _, g := range w.groups {
		var rules []any
		for i, p := range g.ports {
			rules = append(rules, soakObj{"id": fmt.Sprintf("%s-rule%d", g.id, i), "direction": "ingress", "etherType": "IPv4",
				"protocol": "tcp", "portRangeMin": p, "portRangeMax": p, "remoteIpPrefix": "0.0.0.0/0"})
		}
		groups = append(groups, soakObj{"apiVersion": "kubevirt.io/v1", "kind": "SecurityGroup", "metadata": soakObj{"name": g.id},
			"spec": soakObj{"id": g.id, "name": g.id, "rules": rules}})
	}
	if len(groups) > 0 {
		out[w.prefix+"-groups"] = groups
	}
	for _, b := range w.bad {
		// A router whose SNAT IP is outside its external network: its
		// error names the field; nothing else changes.
		out[b] = []soakObj{{"apiVersion": "kubevirt.io/v1", "kind": "VirtualRouter", "metadata": soakObj{"name": b},
			"spec": soakObj{"enableSnat": true, "external": soakObj{"ip": "198.18.0.5", "network": w.public}}}}
	}
	return out
}

func soakVMI(vm *soakVM, network string) soakObj {
	meta := soakObj{"name": vm.name, "namespace": "default"}
	if len(vm.groups) > 0 {
		b, _ := json.Marshal(vm.groups)
		meta["annotations"] = soakObj{"securityGroups": string(b)}
	}
	status := soakObj{"nodeName": vm.node, "interfaces": []any{soakObj{"name": "eth1", "mac": vm.mac, "ipAddress": vm.ip}}}
	if m := vm.migration; m != nil {
		state := soakObj{"sourceNode": m.source, "targetNode": m.target, "migrationUid": m.uid, "mode": "PreCopy"}
		if m.completed {
			state["completed"] = true
		}
		status["migrationState"] = state
	}
	return soakObj{"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance", "metadata": meta,
		"spec":   soakObj{"networks": []any{soakObj{"name": "eth1", "multus": soakObj{"networkName": network}}}},
		"status": status}
}

// soakWriteFiles writes objs as manifest files into dir, one per key (a
// new file replaces the old one at once: written aside, then renamed),
// and removes the files of keys that are gone.
func soakWriteFiles(t *testing.T, dir string, objs map[string][]soakObj, prefix string) {
	t.Helper()
	old, err := filepath.Glob(filepath.Join(dir, prefix+"-*.yaml"))
	require.NoError(t, err)
	for _, f := range old {
		if _, ok := objs[strings.TrimSuffix(filepath.Base(f), ".yaml")]; !ok {
			require.NoError(t, os.Remove(f))
		}
	}
	for name, list := range objs {
		var b strings.Builder
		for _, o := range list {
			y, err := yaml.Marshal(o)
			require.NoError(t, err)
			b.WriteString("---\n")
			b.Write(y)
		}
		file := filepath.Join(dir, name+".yaml")
		if cur, err := os.ReadFile(file); err == nil && string(cur) == b.String() {
			continue
		}
		tmp := filepath.Join(dir, "."+name+".tmp")
		require.NoError(t, os.WriteFile(tmp, []byte(b.String()), 0o644))
		require.NoError(t, os.Rename(tmp, file))
	}
}

// soakKube keeps a world's objects in the API server: it creates, updates
// and deletes what changed since the last apply.
type soakKube struct {
	k    *kubeAPI
	have map[string]soakObj // kind/namespace/name -> object as applied
}

func soakKey(o soakObj) string {
	u := unstructured.Unstructured{Object: o}
	return u.GetKind() + "/" + u.GetNamespace() + "/" + u.GetName()
}

// apply makes the API server hold objs: networks and security groups
// created first and deleted last.
func (s *soakKube) apply(t *testing.T, objs map[string][]soakObj) {
	t.Helper()
	want := map[string]soakObj{}
	for _, list := range objs {
		for _, o := range list {
			want[soakKey(o)] = o
		}
	}
	rank := func(key string) int {
		switch {
		case strings.HasPrefix(key, "NetworkAttachmentDefinition/"), strings.HasPrefix(key, "SecurityGroup/"):
			return 0
		case strings.HasPrefix(key, "VirtualRouter/"):
			return 1
		}
		return 2
	}
	keys := func(m map[string]soakObj) []string {
		ks := make([]string, 0, len(m))
		for k := range m {
			ks = append(ks, k)
		}
		slices.SortFunc(ks, func(a, b string) int { return cmpInts(rank(a), rank(b), strings.Compare(a, b)) })
		return ks
	}
	for _, key := range keys(want) {
		o := want[key]
		if cur, ok := s.have[key]; ok && reflect.DeepEqual(cur, o) {
			continue
		}
		s.put(t, o)
		s.have[key] = o
	}
	gone := keys(s.have)
	slices.Reverse(gone)
	for _, key := range gone {
		if _, ok := want[key]; ok {
			continue
		}
		s.remove(t, s.have[key])
		delete(s.have, key)
	}
}

func cmpInts(a, b, then int) int {
	if a != b {
		return a - b
	}
	return then
}

// put creates o, or replaces the spec, status and annotations of the
// object of its name (retrying on conflicts with the controller's status
// writes).
func (s *soakKube) put(t *testing.T, o soakObj) {
	t.Helper()
	u := &unstructured.Unstructured{Object: deepCopy(o)}
	gvr, namespaced := s.k.resource(u)
	ri := s.k.dyn.Resource(gvr)
	var client interface {
		Get(context.Context, string, metav1.GetOptions, ...string) (*unstructured.Unstructured, error)
		Create(context.Context, *unstructured.Unstructured, metav1.CreateOptions, ...string) (*unstructured.Unstructured, error)
		Update(context.Context, *unstructured.Unstructured, metav1.UpdateOptions, ...string) (*unstructured.Unstructured, error)
	} = ri
	if namespaced {
		client = ri.Namespace(u.GetNamespace())
	}
	require.NoError(t, sandbox.Poll(30*time.Second, "writing "+soakKey(o), func() (bool, error) {
		cur, err := client.Get(context.Background(), u.GetName(), metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			_, err = client.Create(context.Background(), u.DeepCopy(), metav1.CreateOptions{})
			return err == nil, err
		}
		if err != nil {
			return false, err
		}
		next := u.DeepCopy()
		next.SetResourceVersion(cur.GetResourceVersion())
		_, err = client.Update(context.Background(), next, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			return false, nil
		}
		return err == nil, err
	}))
}

func (s *soakKube) remove(t *testing.T, o soakObj) {
	t.Helper()
	u := &unstructured.Unstructured{Object: o}
	gvr, namespaced := s.k.resource(u)
	var err error
	if namespaced {
		err = s.k.dyn.Resource(gvr).Namespace(u.GetNamespace()).Delete(context.Background(), u.GetName(), metav1.DeleteOptions{})
	} else {
		err = s.k.dyn.Resource(gvr).Delete(context.Background(), u.GetName(), metav1.DeleteOptions{})
	}
	if !apierrors.IsNotFound(err) {
		require.NoError(t, err, "deleting %s", soakKey(o))
	}
}

// deepCopy copies a manifest through JSON: the API machinery wants only
// JSON types (int64, not int).
func deepCopy(o soakObj) soakObj {
	b, err := json.Marshal(o)
	if err != nil {
		panic(err)
	}
	var out soakObj
	if err := json.Unmarshal(b, &out); err != nil {
		panic(err)
	}
	return out
}
