package integration

import (
	"log/slog"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/v2/lint/support"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	release "helm.sh/helm/v4/pkg/release/v1"
	apiextensionsscheme "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset/scheme"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// The helm chart (deploy/helm/kubevirt-ovn) and the kustomizations of
// deploy/ install the same objects. Its CRDs and RBAC are deploy/'s own
// files (symlinks in crds/ and files/, included in the release's
// namespace): one source. Its workloads are templates with values; this
// test renders them for the settings of each kustomization and requires
// the objects kustomize builds, field for field, so neither side changes
// alone.

const chartDir = "../deploy/helm/kubevirt-ovn"

// chartCases are the kustomizations and the values that render them.
var chartCases = []struct {
	dir    string
	values map[string]any
}{
	{"deploy", map[string]any{"createNamespace": true}},
	{"deploy/interconnect", map[string]any{"createNamespace": true, "mode": "interconnect"}},
	{"deploy/interconnect-openshift", map[string]any{"createNamespace": true, "mode": "interconnect", "openshift": true}},
}

func chartDecoder(t *testing.T) runtime.Decoder {
	scheme := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(scheme))
	require.NoError(t, apiextensionsscheme.AddToScheme(scheme))
	return serializer.NewCodecFactory(scheme, serializer.EnableStrict).UniversalDeserializer()
}

// helmTemplate is `helm template --include-crds -n kubevirt-ovn
// kubevirt-ovn deploy/helm/kubevirt-ovn` with values, through helm's own
// library.
func helmTemplate(t *testing.T, values map[string]any) string {
	t.Helper()
	quietHelm()
	ch, err := loader.Load(chartDir)
	require.NoError(t, err)
	in := action.NewInstall(&action.Configuration{})
	in.DryRunStrategy = action.DryRunClient
	in.ReleaseName, in.Namespace = "kubevirt-ovn", "kubevirt-ovn"
	in.Replace, in.IncludeCRDs = true, true
	r, err := in.Run(ch, values)
	require.NoError(t, err)
	rel, ok := r.(*release.Release)
	require.True(t, ok, "a release of chart apiVersion v2: %T", r)
	return rel.Manifest
}

// objectsByID are the objects of YAML documents by "Kind namespace/name".
func objectsByID(t *testing.T, decoder runtime.Decoder, where string, data []byte) map[string]runtime.Object {
	t.Helper()
	out := map[string]runtime.Object{}
	for _, d := range decodeDocs(t, decoder, where, data) {
		_, dup := out[d.id]
		require.False(t, dup, "%s: %s twice", where, d.id)
		out[d.id] = d.obj
	}
	return out
}

func kustomizeBuild(t *testing.T, dir string) []byte {
	t.Helper()
	res, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	require.NoError(t, err, "kustomize build %s", dir)
	out, err := res.AsYaml()
	require.NoError(t, err)
	return out
}

// TestChartIsTheKustomizations: for each mode, the chart renders the
// objects its kustomization builds, no more, no fewer, field for field.
func TestChartIsTheKustomizations(t *testing.T) {
	decoder := chartDecoder(t)
	for _, c := range chartCases {
		t.Run(c.dir, func(t *testing.T) {
			want := objectsByID(t, decoder, "kustomize build "+c.dir, kustomizeBuild(t, filepath.Join("..", filepath.FromSlash(c.dir))))
			got := objectsByID(t, decoder, "helm template", []byte(helmTemplate(t, c.values)))
			require.Equal(t, slices.Sorted(maps.Keys(want)), slices.Sorted(maps.Keys(got)), "the objects")
			for id, obj := range want {
				assert.True(t, apiequality.Semantic.DeepEqual(obj, got[id]), "%s as kustomize builds it:\n%v\nas the chart renders it:\n%v", id, obj, got[id])
			}
		})
	}
}

// TestChartValues: the values a user sets reach the objects (the
// comparison above is not of two constants): the image, the endpoints
// and TLS Secret, replicas, resources, the namespace, the host run
// directory; metrics.serviceMonitor adds a Service and a ServiceMonitor
// per workload.
func TestChartValues(t *testing.T) {
	central := helmTemplate(t, map[string]any{
		"image":     map[string]any{"repository": "registry.example/kubevirt-ovn", "tag": "v1.2.3"},
		"ovn":       map[string]any{"nb": "tcp:192.0.2.10:6641", "sb": "tcp:192.0.2.10:6642", "tlsSecret": "my-tls"},
		"replicas":  3,
		"resources": map[string]any{"limits": map[string]any{"memory": "1Gi"}},
	})
	has := func(manifest, s string) bool { return strings.Contains(manifest, s) }
	for _, s := range []string{"image: registry.example/kubevirt-ovn:v1.2.3", `nb: "tcp:192.0.2.10:6641"`, `sb: "tcp:192.0.2.10:6642"`,
		"secretName: my-tls", "replicas: 3", "memory: 1Gi"} {
		assert.True(t, has(central, s), "central mode renders %q", s)
	}
	assert.False(t, has(central, "kind: Namespace"), "createNamespace defaults to false (helm install --create-namespace)")
	assert.False(t, has(central, "kind: ServiceMonitor"))

	ic := helmTemplate(t, map[string]any{"mode": "interconnect", "hostRunDir": "/run/ovn-kubernetes",
		"metrics": map[string]any{"serviceMonitor": map[string]any{"enabled": true, "labels": map[string]any{"release": "prom"}}}})
	assert.True(t, has(ic, "path: /run/ovn-kubernetes"), "hostRunDir")
	assert.Equal(t, 2, strings.Count(ic, "kind: ServiceMonitor"), "the allocator's and the agents'")
	assert.True(t, has(ic, "release: prom"), "serviceMonitor labels")
	assert.False(t, has(ic, "kind: ConfigMap"), "interconnect mode has no central endpoints")
}

// TestChartLints: helm lint --strict of the chart, in each mode, finds
// nothing above INFO.
func TestChartLints(t *testing.T) {
	quietHelm()
	for _, c := range chartCases {
		l := action.NewLint()
		l.Strict, l.Namespace = true, "kubevirt-ovn"
		res := l.Run([]string{chartDir}, c.values)
		assert.Equal(t, 1, res.TotalChartsLinted)
		for _, m := range res.Messages {
			assert.Less(t, m.Severity, support.WarningSev, "%s: %s", c.dir, m)
		}
		assert.Empty(t, res.Errors, c.dir)
	}
}

// quietHelm keeps helm's loader from logging each of the chart's symlinks
// (INFO): they are its design.
func quietHelm() { slog.SetLogLoggerLevel(slog.LevelWarn) }
