package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsscheme "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset/scheme"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/kubevirt-ovn/kubevirt-ovn/translator/kube"
)

// The kustomizations shipped in deploy/, each runnable as `kubectl apply -k
// DIR`, and what each must deploy: its workloads and what each
// ServiceAccount may and may not do.
var kustomizations = []struct {
	dir       string
	kinds     []string
	serves    []schema.GroupVersionResource // what the binary watches and writes
	workloads map[string]workload           // by Kind/name
	rbac      map[string]grants             // by ServiceAccount
}{{
	dir:    "deploy",
	kinds:  []string{"Namespace", "CustomResourceDefinition", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "ConfigMap", "Deployment"},
	serves: []schema.GroupVersionResource{kube.RouterGVR, kube.FloatingIPGVR, kube.SecurityGroupGVR, kube.SecurityGroupRuleGVR, kube.LoadBalancerGVR},
	workloads: map[string]workload{
		"Deployment/kubevirt-ovn": {command: "run", account: "kubevirt-ovn", user: 65532, tlsSecret: true,
			flags: map[string]string{"lease-namespace": podNamespace}},
	},
	rbac: map[string]grants{
		"kubevirt-ovn": {
			can: []string{"watch kubevirt.io/virtualrouters", "watch kubevirt.io/virtualmachineinstances", "watch k8s.cni.cncf.io/network-attachment-definitions",
				"update kubevirt.io/virtualrouters", "update kubevirt.io/virtualrouters/finalizers", "update kubevirt.io/virtualrouters/status",
				"watch kubevirt.io/floatingips", "update kubevirt.io/floatingips/status",
				"watch kubevirt.io/virtualmachines", "watch kubevirt.io/securitygroups", "watch kubevirt.io/securitygrouprules", "watch kubevirt.io/loadbalancers",
				"update kubevirt.io/securitygroups/status", "update kubevirt.io/securitygrouprules/status", "update kubevirt.io/loadbalancers/status",
				"create core/events default", "patch core/events default", "update coordination.k8s.io/leases kubevirt-ovn",
				"watch kubevirt.io/virtualmachineinstancemigrations", "watch core/pods"},
			cannot: []string{"update kubevirt.io/virtualmachineinstances", "update kubevirt.io/virtualmachineinstancemigrations", "update core/pods", "delete core/pods", "update k8s.cni.cncf.io/network-attachment-definitions",
				"update kubevirt.io/floatingips", "delete kubevirt.io/floatingips",
				"update kubevirt.io/virtualmachines", "update kubevirt.io/securitygroups", "update kubevirt.io/securitygrouprules", "update kubevirt.io/loadbalancers",
				"delete kubevirt.io/securitygroups", "delete kubevirt.io/loadbalancers",
				"delete kubevirt.io/virtualrouters", "list ovn.kubevirt.io/ovnallocations kubevirt-ovn", "update coordination.k8s.io/leases default"},
		},
	},
}, {
	dir:       "deploy/interconnect",
	kinds:     interconnectKinds,
	serves:    interconnectServes,
	workloads: interconnectWorkloads("/var/run/openvswitch", ""),
	rbac:      interconnectRBAC(nil),
}, {
	// OpenShift: the base with the agent's host directory, SELinux type and
	// the SCC that admits both.
	dir:       "deploy/interconnect-openshift",
	kinds:     interconnectKinds,
	serves:    interconnectServes,
	workloads: interconnectWorkloads("/var/run/ovn-ic", "spc_t"),
	rbac: interconnectRBAC(&grants{
		can: []string{"use security.openshift.io/securitycontextconstraints=privileged kubevirt-ovn"},
		cannot: []string{"use security.openshift.io/securitycontextconstraints=anyuid kubevirt-ovn",
			"use security.openshift.io/securitycontextconstraints=privileged default", "update security.openshift.io/securitycontextconstraints=privileged kubevirt-ovn"},
	}),
}}

var (
	interconnectKinds  = []string{"Namespace", "CustomResourceDefinition", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "Deployment", "DaemonSet"}
	interconnectServes = []schema.GroupVersionResource{kube.RouterGVR, kube.FloatingIPGVR, kube.SecurityGroupGVR, kube.SecurityGroupRuleGVR, kube.LoadBalancerGVR, kube.ZoneGVR, kube.AllocationGVR}
)

// interconnectWorkloads: the allocator, and the zone agent reading its
// node's sockets in the host's hostDir, with the SELinux type seLinux.
func interconnectWorkloads(hostDir, seLinux string) map[string]workload {
	return map[string]workload{
		"Deployment/kubevirt-ovn-allocator": {command: "allocator", account: "kubevirt-ovn-allocator", user: 65532,
			flags: map[string]string{"namespace": podNamespace, "lease-namespace": podNamespace}},
		"DaemonSet/kubevirt-ovn-zone-agent": {command: "zone-agent", account: "kubevirt-ovn-zone-agent", user: 0, ovnSockets: hostDir, seLinuxType: seLinux, everyNode: true,
			flags: map[string]string{"zone-nb": "unix:/var/run/ovn/ovnnb_db.sock", "zone-sb": "unix:/var/run/ovn/ovnsb_db.sock",
				"node-name": "pod-field-spec.nodeName", "namespace": podNamespace,
				"pod-name": "pod-field-metadata.name", "pod-uid": "pod-field-metadata.uid"}},
	}
}

// interconnectRBAC: what the allocator and the zone agent may and may not
// do, the agent's with more.
func interconnectRBAC(agentMore *grants) map[string]grants {
	agent := grants{
		can: []string{"watch kubevirt.io/virtualrouters", "watch kubevirt.io/virtualmachineinstances", "watch k8s.cni.cncf.io/network-attachment-definitions",
			"watch kubevirt.io/floatingips", "get core/nodes", "watch ovn.kubevirt.io/ovnallocations kubevirt-ovn", "watch ovn.kubevirt.io/ovnzones kubevirt-ovn",
			"watch kubevirt.io/virtualmachines", "watch kubevirt.io/securitygroups", "watch kubevirt.io/securitygrouprules", "watch kubevirt.io/loadbalancers",
			"watch kubevirt.io/virtualmachineinstancemigrations", "watch core/pods",
			"create ovn.kubevirt.io/ovnzones kubevirt-ovn", "update ovn.kubevirt.io/ovnzones kubevirt-ovn",
			// Its Pod's Events, in its namespace only.
			"create core/events kubevirt-ovn", "patch core/events kubevirt-ovn"},
		cannot: []string{"create kubevirt.io/virtualrouters", "update kubevirt.io/virtualrouters", "patch kubevirt.io/virtualrouters", "delete kubevirt.io/virtualrouters",
			"update kubevirt.io/virtualrouters/status", "patch kubevirt.io/virtualrouters/status", "update kubevirt.io/virtualrouters/finalizers",
			"update kubevirt.io/floatingips", "update kubevirt.io/floatingips/status",
			"update kubevirt.io/securitygroups/status", "update kubevirt.io/securitygrouprules/status", "update kubevirt.io/loadbalancers/status",
			"update kubevirt.io/virtualmachines", "update kubevirt.io/securitygroups",
			"update kubevirt.io/virtualmachineinstances", "update k8s.cni.cncf.io/network-attachment-definitions",
			"update core/nodes", "patch core/nodes", "create core/events default", "patch core/events default", "create core/events",
			"delete core/events kubevirt-ovn", "update core/events kubevirt-ovn", "get core/pods kubevirt-ovn",
			"create ovn.kubevirt.io/ovnallocations kubevirt-ovn", "update ovn.kubevirt.io/ovnallocations kubevirt-ovn", "delete ovn.kubevirt.io/ovnzones kubevirt-ovn",
			"create ovn.kubevirt.io/ovnzones default", "list ovn.kubevirt.io/ovnzones",
			"get coordination.k8s.io/leases kubevirt-ovn", "update coordination.k8s.io/leases kubevirt-ovn",
			"use security.openshift.io/securitycontextconstraints=privileged kubevirt-ovn"},
	}
	if agentMore != nil {
		agent.can = append(agent.can, agentMore.can...)
		agent.cannot = slices.DeleteFunc(agent.cannot, func(a string) bool { return slices.Contains(agentMore.can, a) })
		agent.cannot = append(agent.cannot, agentMore.cannot...)
	}
	return map[string]grants{
		// Writes status, Events, allocations and its Lease; no NB, no
		// finalizers in this mode.
		"kubevirt-ovn-allocator": {
			can: []string{"watch kubevirt.io/virtualrouters", "watch kubevirt.io/virtualmachineinstances", "watch k8s.cni.cncf.io/network-attachment-definitions",
				"update kubevirt.io/virtualrouters/status", "watch kubevirt.io/floatingips", "update kubevirt.io/floatingips/status", "create core/events default", "patch core/events default",
				"watch kubevirt.io/virtualmachines", "watch kubevirt.io/securitygroups", "watch kubevirt.io/securitygrouprules", "watch kubevirt.io/loadbalancers",
				"update kubevirt.io/securitygroups/status", "update kubevirt.io/securitygrouprules/status", "update kubevirt.io/loadbalancers/status",
				"watch ovn.kubevirt.io/ovnzones kubevirt-ovn", "watch ovn.kubevirt.io/ovnallocations kubevirt-ovn",
				"create ovn.kubevirt.io/ovnallocations kubevirt-ovn", "update ovn.kubevirt.io/ovnallocations kubevirt-ovn", "delete ovn.kubevirt.io/ovnallocations kubevirt-ovn",
				"get coordination.k8s.io/leases kubevirt-ovn", "create coordination.k8s.io/leases kubevirt-ovn", "update coordination.k8s.io/leases kubevirt-ovn"},
			cannot: []string{"update kubevirt.io/virtualrouters", "patch kubevirt.io/virtualrouters", "update kubevirt.io/virtualrouters/finalizers",
				"update kubevirt.io/floatingips", "update kubevirt.io/virtualmachineinstances", "update k8s.cni.cncf.io/network-attachment-definitions",
				"update kubevirt.io/virtualmachines", "update kubevirt.io/securitygroups", "update kubevirt.io/securitygrouprules", "update kubevirt.io/loadbalancers",
				"update ovn.kubevirt.io/ovnzones kubevirt-ovn", "create ovn.kubevirt.io/ovnallocations default", "list ovn.kubevirt.io/ovnzones",
				"get core/nodes", "update coordination.k8s.io/leases default",
				"use security.openshift.io/securitycontextconstraints=privileged kubevirt-ovn"},
		},
		// Reads the cluster, writes its zone's OVNZone (and its node's
		// NB) and its Pod's Events, nothing else.
		"kubevirt-ovn-zone-agent": agent,
	}
}

// podNamespace is what a $(VAR) set from the pod's namespace expands to here.
const podNamespace = "pod-field-metadata.namespace"

// Every object `kubectl apply -k DIR` would send, for each kustomization in
// deploy/, decodes strictly into its typed API object (unknown or misspelt
// fields fail), with the kinds that mode needs; its workloads run as
// shipped and its ServiceAccounts hold the privileges they need and no
// more.
func TestDeployManifestsDecodeStrictly(t *testing.T) {
	scheme := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(scheme))
	require.NoError(t, apiextensionsscheme.AddToScheme(scheme))
	decoder := serializer.NewCodecFactory(scheme, serializer.EnableStrict).UniversalDeserializer()

	for _, k := range kustomizations {
		t.Run(k.dir, func(t *testing.T) {
			objs := render(t, scheme, decoder, filepath.Join("..", filepath.FromSlash(k.dir)))
			kinds := map[string]int{}
			configMaps := map[string]*corev1.ConfigMap{}
			pods := map[string]corev1.PodSpec{}
			served := map[schema.GroupVersionResource]bool{}
			for _, o := range objs {
				kinds[o.kind]++
				switch obj := o.obj.(type) {
				case *apiextensionsv1.CustomResourceDefinition:
					for _, v := range obj.Spec.Versions {
						served[schema.GroupVersionResource{Group: obj.Spec.Group, Version: v.Name, Resource: obj.Spec.Names.Plural}] = v.Served
					}
				case *corev1.ConfigMap:
					configMaps[obj.Name] = obj
				case *appsv1.Deployment:
					pods[o.kind+"/"+o.name] = obj.Spec.Template.Spec
				case *appsv1.DaemonSet:
					pods[o.kind+"/"+o.name] = obj.Spec.Template.Spec
				}
			}
			for _, kind := range k.kinds {
				assert.Positive(t, kinds[kind], "%s has a %s", k.dir, kind)
			}
			for _, gvr := range k.serves {
				assert.True(t, served[gvr], "%s has the CRD of %s", k.dir, gvr)
			}
			assert.Equal(t, slices.Sorted(maps.Keys(k.workloads)), slices.Sorted(maps.Keys(pods)), "the workloads of %s", k.dir)
			for name, want := range k.workloads {
				if pod, ok := pods[name]; ok {
					t.Run(name, func(t *testing.T) { checkPod(t, pod, configMaps, want) })
				}
			}
			t.Run("RBAC", func(t *testing.T) { checkRBAC(t, objs, k.rbac) })
			t.Run("kustomize", func(t *testing.T) { sameAsKustomize(t, decoder, filepath.Join("..", filepath.FromSlash(k.dir)), objs) })
		})
	}
}

type object struct {
	kind, namespace, name string
	obj                   runtime.Object
}

// render reads the kustomization in dir as kustomize builds it, for what
// ours use: resources, files or kustomization directories (which is how
// deploy/common and an overlay's base are shared: kustomize loads no file
// from outside a kustomization's directory), and patches given by path,
// strategic merge patches of the object they name (an overlay's). Every
// object and every patch decodes strictly, no object is there twice, and
// every namespaced one is in kubevirt-ovn.
func render(t *testing.T, scheme *runtime.Scheme, decoder runtime.Decoder, dir string) []object {
	type raw struct {
		id   string // Kind namespace/name
		gvk  schema.GroupVersionKind
		path string // where it was read, for messages
		json []byte
	}
	// read decodes every document of a file into its id and JSON, strictly
	// checking it against its type.
	read := func(path string) []raw {
		data, err := os.ReadFile(path)
		require.NoError(t, err)
		var out []raw
		for _, d := range decodeDocs(t, decoder, path, data) {
			js, err := yaml.YAMLToJSON(d.doc)
			require.NoError(t, err)
			out = append(out, raw{id: d.id, gvk: d.gvk, path: path, json: js})
		}
		return out
	}
	var walk func(dir string) []raw
	walk = func(dir string) []raw {
		var k struct {
			APIVersion string   `json:"apiVersion"`
			Kind       string   `json:"kind"`
			Resources  []string `json:"resources"`
			Patches    []struct {
				Path string `json:"path"`
			} `json:"patches"`
		}
		data, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
		require.NoError(t, err)
		require.NoError(t, yaml.UnmarshalStrict(data, &k), "%s: only resources and patches by path are supported here", dir)
		assert.Equal(t, "kustomize.config.k8s.io/v1beta1", k.APIVersion, dir)
		assert.Equal(t, "Kustomization", k.Kind, dir)
		inDir := func(what, rel string) string {
			path := filepath.Join(dir, filepath.FromSlash(rel))
			r, err := filepath.Rel(dir, path)
			require.NoError(t, err)
			require.False(t, strings.HasPrefix(r, ".."), "%s: %s %s is outside the kustomization's directory: kustomize refuses it", dir, what, rel)
			return path
		}
		var objs []raw
		for _, res := range k.Resources {
			path := filepath.Join(dir, filepath.FromSlash(res))
			fi, err := os.Stat(path)
			require.NoError(t, err, "%s: resource %s", dir, res)
			if fi.IsDir() {
				abs, err := filepath.Abs(path)
				require.NoError(t, err)
				self, err := filepath.Abs(dir)
				require.NoError(t, err)
				require.False(t, strings.HasPrefix(self+string(filepath.Separator), abs+string(filepath.Separator)),
					"%s: resource %s contains the kustomization: kustomize refuses the cycle", dir, res)
				objs = append(objs, walk(path)...)
				continue
			}
			objs = append(objs, read(inDir("resource", res))...)
		}
		// A patch applies to the object of its kind, namespace and name
		// among this kustomization's resources.
		for _, p := range k.Patches {
			require.NotEmpty(t, p.Path, "%s: a patch by path", dir)
			for _, patch := range read(inDir("patch", p.Path)) {
				i := slices.IndexFunc(objs, func(o raw) bool { return o.id == patch.id })
				require.GreaterOrEqual(t, i, 0, "%s: patch %s: no %s among the resources", dir, p.Path, patch.id)
				typed, err := scheme.New(objs[i].gvk)
				require.NoError(t, err)
				objs[i].json, err = strategicpatch.StrategicMergePatch(objs[i].json, patch.json, typed)
				require.NoError(t, err, "%s: patch %s", dir, p.Path)
				objs[i].path += " patched by " + patch.path
			}
		}
		return objs
	}
	var objs []object
	seen := map[string]string{}
	for _, r := range walk(dir) {
		obj, gvk, err := decoder.Decode(r.json, nil, nil)
		require.NoError(t, err, "%s", r.path)
		m, err := meta.Accessor(obj)
		require.NoError(t, err)
		o := object{kind: gvk.Kind, namespace: m.GetNamespace(), name: m.GetName(), obj: obj}
		if prev, ok := seen[r.id]; ok {
			t.Errorf("%s is in %s and %s", r.id, prev, r.path)
		}
		seen[r.id] = r.path
		switch o.kind {
		case "Namespace", "CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding":
			assert.Empty(t, o.namespace, r.id)
		default:
			assert.Equal(t, "kubevirt-ovn", o.namespace, r.id)
		}
		objs = append(objs, o)
	}
	return objs
}

// decoded is one document of a multi-document YAML, strictly decoded.
type decoded struct {
	id  string // Kind namespace/name
	gvk schema.GroupVersionKind
	obj runtime.Object
	doc []byte
}

// decodeDocs decodes every non-empty document of data (read from where),
// strictly checking it against its type.
func decodeDocs(t *testing.T, decoder runtime.Decoder, where string, data []byte) []decoded {
	t.Helper()
	var out []decoded
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out
		}
		require.NoError(t, err, "%s", where)
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		obj, gvk, err := decoder.Decode(doc, nil, nil)
		require.NoError(t, err, "%s", where)
		m, err := meta.Accessor(obj)
		require.NoError(t, err)
		out = append(out, decoded{id: gvk.Kind + " " + m.GetNamespace() + "/" + m.GetName(), gvk: *gvk, obj: obj, doc: doc})
	}
}

// sameAsKustomize: kustomize (its library, which `kubectl kustomize` and
// `kubectl apply -k` run) builds from dir the objects render read, no
// more, no fewer, field for field: the checks above hold for what
// `kubectl apply -k` sends.
func sameAsKustomize(t *testing.T, decoder runtime.Decoder, dir string, objs []object) {
	built := objectsByID(t, decoder, "kustomize build "+dir, kustomizeBuild(t, dir))
	ours := map[string]runtime.Object{}
	for _, o := range objs {
		ours[o.kind+" "+o.namespace+"/"+o.name] = o.obj
	}
	require.Equal(t, slices.Sorted(maps.Keys(built)), slices.Sorted(maps.Keys(ours)), "the objects of %s", dir)
	for id, obj := range built {
		assert.True(t, apiequality.Semantic.DeepEqual(obj, ours[id]), "%s as kustomize builds it:\n%v\nas render reads it:\n%v", id, obj, ours[id])
	}
}

// workload is what a Deployment or DaemonSet of deploy/ must be.
type workload struct {
	command   string            // the kubevirt-ovn command it runs
	account   string            // its ServiceAccount
	user      int64             // runAsUser
	tlsSecret bool              // mounts the optional OVN TLS Secret
	flags     map[string]string // flags it must pass, as expanded
	// The host directory of ovn-kubernetes' sockets, mounted read-only:
	// --zone-nb/--zone-sb name sockets in it.
	ovnSockets  string
	seLinuxType string // the container's SELinux type ("": none set)
	everyNode   bool   // tolerates every taint
}

// checkPod: the workload runs as shipped. It uses the image `make image`
// builds (its entrypoint, no command of its own, no pull of a loaded
// image), a TLS Secret may be missing, it is neither privileged nor on the
// host's network, every $(VAR) in its args is defined, and the binary
// accepts its args.
func checkPod(t *testing.T, pod corev1.PodSpec, configMaps map[string]*corev1.ConfigMap, want workload) {
	assert.Equal(t, want.account, pod.ServiceAccountName)
	assert.False(t, pod.HostNetwork, "no host network: unix sockets and the pod's own port")
	assert.False(t, pod.HostPID)
	if want.everyNode {
		assert.True(t, slices.ContainsFunc(pod.Tolerations, func(tl corev1.Toleration) bool {
			return tl.Key == "" && tl.Operator == corev1.TolerationOpExists && tl.Effect == ""
		}), "tolerates every taint: runs on every node ovn-kubernetes runs on")
	}
	require.Len(t, pod.Containers, 1)
	c := pod.Containers[0]
	assert.Equal(t, "kubevirt-ovn:latest", c.Image, "the tag `make image` writes")
	assert.Equal(t, corev1.PullIfNotPresent, c.ImagePullPolicy, "an image loaded into the nodes is used, not pulled")
	assert.Empty(t, c.Command, "the image's entrypoint /kubevirt-ovn runs")
	if sc := c.SecurityContext; assert.NotNil(t, sc) {
		if assert.NotNil(t, sc.RunAsUser) {
			assert.Equal(t, want.user, *sc.RunAsUser)
		}
		if want.user != 0 && assert.NotNil(t, sc.RunAsNonRoot) {
			assert.True(t, *sc.RunAsNonRoot)
		}
		assert.True(t, sc.Privileged == nil || !*sc.Privileged, "not privileged")
		if want.seLinuxType == "" {
			assert.Nil(t, sc.SELinuxOptions)
		} else if assert.NotNil(t, sc.SELinuxOptions) {
			assert.Equal(t, corev1.SELinuxOptions{Type: want.seLinuxType}, *sc.SELinuxOptions, "only the type: the level is the namespace's")
		}
		if assert.NotNil(t, sc.AllowPrivilegeEscalation) {
			assert.False(t, *sc.AllowPrivilegeEscalation)
		}
		if assert.NotNil(t, sc.Capabilities) {
			assert.Equal(t, []corev1.Capability{"ALL"}, sc.Capabilities.Drop)
			assert.Empty(t, sc.Capabilities.Add)
		}
	}

	mounts := map[string]corev1.VolumeMount{}
	for _, m := range c.VolumeMounts {
		mounts[m.Name] = m
	}
	secrets := 0
	hostPaths := map[string]string{} // mount path -> host path
	for _, v := range pod.Volumes {
		m, mounted := mounts[v.Name]
		assert.True(t, mounted, "volume %s is mounted", v.Name)
		if v.Secret != nil {
			secrets++
			if assert.NotNil(t, v.Secret.Optional, "volume %s", v.Name) {
				assert.True(t, *v.Secret.Optional, "volume %s: the Secret is optional, tcp: endpoints need none", v.Name)
			}
		}
		if v.HostPath != nil {
			assert.True(t, m.ReadOnly, "volume %s: the host's %s is mounted read-only", v.Name, v.HostPath.Path)
			// type Directory would keep the pod from starting, and from
			// saying what is missing, where the directory is missing.
			if assert.NotNil(t, v.HostPath.Type, "volume %s", v.Name) {
				assert.Equal(t, corev1.HostPathDirectoryOrCreate, *v.HostPath.Type, "volume %s: the pod starts and reports a missing socket", v.Name)
			}
			hostPaths[m.MountPath] = v.HostPath.Path
		}
	}
	assert.Equal(t, map[bool]int{true: 1, false: 0}[want.tlsSecret], secrets, "the TLS Secret volume")
	if want.ovnSockets == "" {
		assert.Empty(t, hostPaths, "no host path")
	}

	// $(VAR) as the kubelet expands it, from the ConfigMap and made-up
	// pod fields.
	env := map[string]string{}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			env[e.Name] = e.Value
		case e.ValueFrom.ConfigMapKeyRef != nil:
			ref := e.ValueFrom.ConfigMapKeyRef
			cm, ok := configMaps[ref.Name]
			if assert.True(t, ok, "env %s: ConfigMap %s is in deploy/", e.Name, ref.Name) {
				v, ok := cm.Data[ref.Key]
				assert.True(t, ok, "env %s: ConfigMap %s has %s", e.Name, ref.Name, ref.Key)
				env[e.Name] = v
			}
		case e.ValueFrom.FieldRef != nil:
			env[e.Name] = "pod-field-" + e.ValueFrom.FieldRef.FieldPath
		case e.ValueFrom.ResourceFieldRef != nil:
			// The kubelet gives a limit in bytes (divisor 1), as
			// GOMEMLIMIT reads it; the container must set that limit.
			res := e.ValueFrom.ResourceFieldRef.Resource
			q, ok := c.Resources.Limits[corev1.ResourceName(strings.TrimPrefix(res, "limits."))]
			if assert.True(t, ok && strings.HasPrefix(res, "limits."), "env %s: the container sets %s", e.Name, res) {
				env[e.Name] = strconv.FormatInt(q.Value(), 10)
			}
		default:
			t.Errorf("env %s: a source this test does not know", e.Name)
		}
	}
	ref := regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)
	var args []string
	flags := map[string]string{}
	for _, a := range c.Args {
		a = ref.ReplaceAllStringFunc(a, func(m string) string {
			name := ref.FindStringSubmatch(m)[1]
			v, ok := env[name]
			assert.True(t, ok, "arg %q: $(%s) is not in the container's env (the kubelet would pass it verbatim)", a, name)
			return v
		})
		args = append(args, a)
		if name, ok := strings.CutPrefix(a, "--"); ok {
			name, value, ok := strings.Cut(name, "=")
			flags[name] = map[bool]string{true: value, false: "true"}[ok]
		}
	}
	require.NotEmpty(t, args)
	assert.Equal(t, want.command, args[0])
	for name, value := range want.flags {
		assert.Equal(t, value, flags[name], "--%s", name)
	}
	if want.ovnSockets != "" {
		for _, name := range []string{"zone-nb", "zone-sb"} {
			path, ok := strings.CutPrefix(flags[name], "unix:")
			assert.True(t, ok, "--%s=%s: a unix socket", name, flags[name])
			host, ok := "", false
			for mountPath, hostPath := range hostPaths {
				if rest, in := strings.CutPrefix(path, mountPath+"/"); in {
					host, ok = filepath.Join(hostPath, rest), true
				}
			}
			if assert.True(t, ok, "--%s=%s: under a host path mount", name, flags[name]) {
				assert.Equal(t, want.ovnSockets, filepath.Dir(host), "--%s: the sockets are in the host's %s", name, want.ovnSockets)
			}
		}
	}

	// The binary's own flags parse the args: with --help after them it
	// prints its help and exits 0; a flag it does not have, or a bad
	// value, is a usage error (exit status 2) naming it.
	parses := func(args []string) (bool, string) {
		r := kubevirtOVN(t, append(slices.Clone(args), "--help")...)
		return r.code == 0 && strings.Contains(r.stdout, "Usage:\n  kubevirt-ovn "+args[0]+" "), r.stderr
	}
	ok, stderr := parses(args)
	if !assert.True(t, ok, "kubevirt-ovn %s: %s", strings.Join(args, " "), firstLine(stderr)) {
		return
	}
	// The check catches what it is meant to.
	for _, bad := range []string{"--no-such-flag=1", "--workers=many"} {
		ok, stderr := parses(append(slices.Clone(args), bad))
		assert.False(t, ok, "an arg %s is refused", bad)
		assert.Contains(t, stderr, strings.TrimLeft(strings.Split(bad, "=")[0], "-"))
	}
}

// grants: what a ServiceAccount can and cannot do, each as "VERB
// GROUP/RESOURCE[/SUBRESOURCE][=NAME] [NAMESPACE]" (core: the core group; no
// name: any object; no namespace: cluster-wide).
type grants struct{ can, cannot []string }

// checkRBAC: no rule grants a wildcard, every binding binds a role and a
// ServiceAccount of the kustomization, and each ServiceAccount can do what
// it needs and cannot do what it must not.
func checkRBAC(t *testing.T, objs []object, want map[string]grants) {
	roles := map[string][]rbacv1.PolicyRule{} // "ClusterRole/x", "Role/ns/x"
	accounts := map[string]bool{}
	type binding struct {
		namespace string // "": a ClusterRoleBinding
		role      string
		subjects  []rbacv1.Subject
	}
	var bindings []binding
	for _, o := range objs {
		switch obj := o.obj.(type) {
		case *corev1.ServiceAccount:
			accounts[obj.Name] = true
		case *rbacv1.ClusterRole:
			roles["ClusterRole/"+obj.Name] = obj.Rules
		case *rbacv1.Role:
			roles["Role/"+obj.Namespace+"/"+obj.Name] = obj.Rules
		case *rbacv1.ClusterRoleBinding:
			bindings = append(bindings, binding{"", "ClusterRole/" + obj.RoleRef.Name, obj.Subjects})
		case *rbacv1.RoleBinding:
			role := "ClusterRole/" + obj.RoleRef.Name
			if obj.RoleRef.Kind == "Role" {
				role = "Role/" + obj.Namespace + "/" + obj.RoleRef.Name
			}
			bindings = append(bindings, binding{obj.Namespace, role, obj.Subjects})
		}
	}
	for name, rules := range roles {
		for _, r := range rules {
			for _, field := range [][]string{r.Verbs, r.APIGroups, r.Resources, r.NonResourceURLs} {
				assert.NotContains(t, field, "*", "%s: no wildcard: %v", name, r)
			}
			assert.Empty(t, r.NonResourceURLs, name)
		}
	}
	assert.Equal(t, slices.Sorted(maps.Keys(want)), slices.Sorted(maps.Keys(accounts)), "the ServiceAccounts")
	for _, b := range bindings {
		_, ok := roles[b.role]
		assert.True(t, ok, "a binding to %s: the role is in the kustomization", b.role)
		for _, s := range b.subjects {
			assert.True(t, s.Kind == rbacv1.ServiceAccountKind && s.Namespace == "kubevirt-ovn" && accounts[s.Name], "a binding to %s: subject %v", b.role, s)
		}
	}

	// can: an authorizer of RBAC's rules.
	can := func(account, access string) bool {
		f := strings.Fields(access)
		require.True(t, len(f) == 2 || len(f) == 3, access)
		verb, ns := f[0], ""
		if len(f) == 3 {
			ns = f[2]
		}
		object, name, _ := strings.Cut(f[1], "=")
		group, resource, ok := strings.Cut(object, "/")
		require.True(t, ok, access)
		if group == "core" {
			group = ""
		}
		for _, b := range bindings {
			if b.namespace != "" && b.namespace != ns {
				continue
			}
			if !slices.ContainsFunc(b.subjects, func(s rbacv1.Subject) bool { return s.Name == account }) {
				continue
			}
			for _, r := range roles[b.role] {
				named := len(r.ResourceNames) == 0 || (name != "" && slices.Contains(r.ResourceNames, name))
				if named && slices.Contains(r.Verbs, verb) && slices.Contains(r.APIGroups, group) && slices.Contains(r.Resources, resource) {
					return true
				}
			}
		}
		return false
	}
	for account, g := range want {
		for _, a := range g.can {
			assert.True(t, can(account, a), "%s can %s", account, a)
		}
		for _, a := range g.cannot {
			assert.False(t, can(account, a), "%s cannot %s", account, a)
		}
	}
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// The CRD's OpenAPI schema rejects malformed IPs and MACs before they reach
// kubevirt-ovn; a valid router is accepted.
func TestVirtualRouterCRDValidates(t *testing.T) {
	k := startKubeAPI(t)
	create := func(spec map[string]any) error {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "kubevirt.io/v1", "kind": "VirtualRouter",
			"metadata": map[string]any{"generateName": "r-"}, "spec": spec,
		}}
		_, err := k.dyn.Resource(routerGVR).Create(context.Background(), u, metav1.CreateOptions{})
		return err
	}
	require.NoError(t, create(map[string]any{"mac": "fa:16:3e:00:00:01", "enableSnat": true, "internal": []any{"a"},
		"external": map[string]any{"ip": "172.16.0.100", "network": "public"}, "peerRouter": map[string]any{"ip": "172.16.0.1", "mac": "00:00:00:00:ee:01"}}))
	// kubectl get vr: the server's table has our printer columns.
	hc, err := rest.HTTPClientFor(k.config)
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodGet, k.config.Host+"/apis/kubevirt.io/v1/virtualrouters", nil)
	require.NoError(t, err)
	req.Header.Set("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
	resp, err := hc.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var table struct {
		ColumnDefinitions []struct {
			Name string `json:"name"`
		} `json:"columnDefinitions"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&table))
	var cols []string
	for _, c := range table.ColumnDefinitions {
		cols = append(cols, c.Name)
	}
	assert.Equal(t, []string{"Name", "SNAT IP", "Gateway", "Active", "Ready", "Age"}, cols)

	for field, spec := range map[string]map[string]any{
		"spec.external.ip":      {"external": map[string]any{"ip": "172.16.0.300", "network": "public"}},
		"spec.mac":              {"mac": "fa:16:3e:00:00"},
		"spec.peerRouter.ip":    {"peerRouter": map[string]any{"ip": "not-an-ip"}},
		"spec.peerRouter.mac":   {"peerRouter": map[string]any{"mac": "zz:16:3e:00:00:01"}},
		"spec.external.network": {"external": map[string]any{"ip": "172.16.0.100"}},
	} {
		err := create(spec)
		require.Error(t, err, field)
		assert.Contains(t, err.Error(), field)
	}
}

// TestDualStackCRDFields: the real API server keeps kubevirt-ovn's IPv6
// fields of a VirtualRouter (a structural schema prunes fields it does not
// declare) and deploy/examples-dual-stack/router.yaml is accepted as it
// is; a FloatingIp takes IPv6 addresses and still refuses what is no
// address.
func TestDualStackCRDFields(t *testing.T) {
	k := startKubeAPI(t)
	b, err := os.ReadFile(filepath.Join("..", "deploy", "examples-dual-stack", "router.yaml"))
	require.NoError(t, err)
	vr := objectOf(t, string(b))
	vr.Object["spec"].(map[string]any)["enableIpv6Snat"] = true
	got, err := k.dyn.Resource(routerGVR).Create(context.Background(), vr, metav1.CreateOptions{})
	require.NoError(t, err)
	for _, path := range [][]string{{"spec", "external", "ipv6"}, {"spec", "peerRouter", "ipv6"}} {
		v, found, _ := unstructured.NestedString(got.Object, path...)
		assert.True(t, found, "%v kept", path)
		assert.NotEmpty(t, v, "%v", path)
	}
	snat6, found, _ := unstructured.NestedBool(got.Object, "spec", "enableIpv6Snat")
	assert.True(t, found && snat6, "spec.enableIpv6Snat kept")

	fipGVR := schema.GroupVersionResource{Group: "kubevirt.io", Version: "v1", Resource: "floatingips"}
	fip := func(name, ip, fixed string) error {
		u := objectOf(t, fmt.Sprintf(`apiVersion: kubevirt.io/v1
kind: FloatingIp
metadata: {name: %s}
spec: {id: %s, routerName: router1, networkName: public, floatingIp: "%s", fixedIp: "%s"}
`, name, name, ip, fixed))
		_, err := k.dyn.Resource(fipGVR).Create(context.Background(), u, metav1.CreateOptions{})
		return err
	}
	require.NoError(t, fip("fip6", "2001:db8:ff::150", "fd00:20::a1b2:c3d4:e5f6:789"))
	require.NoError(t, fip("fip4", "172.16.0.150", "10.20.0.6"))
	err = fip("fip-bad", "not-an-ip", "10.20.0.6")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "spec.floatingIp")
}
