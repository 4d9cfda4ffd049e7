package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsscheme "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset/scheme"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"
)

// Every object `kubectl apply -k deploy/` would send decodes strictly into
// its typed API object (unknown or misspelt fields fail), with the kinds a
// deployment needs.
func TestDeployManifestsDecodeStrictly(t *testing.T) {
	scheme := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(scheme))
	require.NoError(t, apiextensionsscheme.AddToScheme(scheme))
	decoder := serializer.NewCodecFactory(scheme, serializer.EnableStrict).UniversalDeserializer()

	var k struct {
		APIVersion string   `json:"apiVersion"`
		Kind       string   `json:"kind"`
		Resources  []string `json:"resources"`
	}
	data, err := os.ReadFile(filepath.Join("..", "deploy", "kustomization.yaml"))
	require.NoError(t, err)
	require.NoError(t, yaml.UnmarshalStrict(data, &k))
	kinds := map[string]int{}
	var objs []runtime.Object
	for _, f := range k.Resources {
		data, err := os.ReadFile(filepath.Join("..", "deploy", f))
		require.NoError(t, err)
		r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
		for {
			doc, err := r.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			require.NoError(t, err)
			if len(bytes.TrimSpace(doc)) == 0 {
				continue
			}
			obj, gvk, err := decoder.Decode(doc, nil, nil)
			require.NoError(t, err, "%s", f)
			require.NotNil(t, obj)
			kinds[gvk.Kind]++
			objs = append(objs, obj)
		}
	}
	for _, kind := range []string{"Namespace", "CustomResourceDefinition", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "ConfigMap", "Deployment"} {
		assert.Positive(t, kinds[kind], "deploy/ has a %s", kind)
	}
	t.Run("Deployment", func(t *testing.T) { checkDeployment(t, objs) })
}

// The Deployment runs as shipped: it uses the image `make image` builds
// (its entrypoint, no command of its own, no pull of a loaded image), the
// TLS Secret may be missing, every $(VAR) in its args is defined, and the
// binary accepts its args.
func checkDeployment(t *testing.T, objs []runtime.Object) {
	configMaps := map[string]*corev1.ConfigMap{}
	var deployments []*appsv1.Deployment
	for _, o := range objs {
		switch o := o.(type) {
		case *corev1.ConfigMap:
			configMaps[o.Name] = o
		case *appsv1.Deployment:
			deployments = append(deployments, o)
		}
	}
	require.Len(t, deployments, 1)
	pod := deployments[0].Spec.Template.Spec
	require.Len(t, pod.Containers, 1)
	c := pod.Containers[0]
	assert.Equal(t, "kubevirt-ovn:latest", c.Image, "the tag `make image` writes")
	assert.Equal(t, corev1.PullIfNotPresent, c.ImagePullPolicy, "an image loaded into the nodes is used, not pulled")
	assert.Empty(t, c.Command, "the image's entrypoint /kubevirt-ovn runs")
	if sc := c.SecurityContext; assert.NotNil(t, sc) && assert.NotNil(t, sc.RunAsUser) {
		assert.Equal(t, int64(65532), *sc.RunAsUser, "the image's user")
	}

	mounted := map[string]bool{}
	for _, m := range c.VolumeMounts {
		mounted[m.Name] = true
	}
	secrets := 0
	for _, v := range pod.Volumes {
		assert.True(t, mounted[v.Name], "volume %s is mounted", v.Name)
		if v.Secret != nil {
			secrets++
			if assert.NotNil(t, v.Secret.Optional, "volume %s", v.Name) {
				assert.True(t, *v.Secret.Optional, "volume %s: the Secret is optional, tcp: endpoints need none", v.Name)
			}
		}
	}
	assert.Equal(t, 1, secrets, "the TLS Secret volume")

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
		default:
			t.Errorf("env %s: a source this test does not know", e.Name)
		}
	}
	ref := regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)
	var args []string
	for _, a := range c.Args {
		args = append(args, ref.ReplaceAllStringFunc(a, func(m string) string {
			name := ref.FindStringSubmatch(m)[1]
			v, ok := env[name]
			assert.True(t, ok, "arg %q: $(%s) is not in the container's env (the kubelet would pass it verbatim)", a, name)
			return v
		}))
	}
	require.NotEmpty(t, args)
	assert.Equal(t, "run", args[0])

	// The binary's own flag set parses the args: with -h after them it
	// prints only its usage; a flag it does not have, or a bad value,
	// comes first.
	parses := func(args []string) (bool, string) {
		r := kubevirtOVN(t, append(slices.Clone(args), "-h")...)
		return r.code == 2 && strings.HasPrefix(r.stderr, "Usage of "+args[0]+":"), r.stderr
	}
	ok, stderr := parses(args)
	if !assert.True(t, ok, "kubevirt-ovn %s: %s", strings.Join(args, " "), firstLine(stderr)) {
		return
	}
	// The check catches what it is meant to.
	for _, bad := range []string{"--no-such-flag=1", "--leader-elect=maybe"} {
		ok, stderr := parses(append(slices.Clone(args), bad))
		assert.False(t, ok, "an arg %s is refused", bad)
		assert.Contains(t, stderr, strings.TrimLeft(strings.Split(bad, "=")[0], "-"))
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
