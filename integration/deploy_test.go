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
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
		}
	}
	for _, kind := range []string{"Namespace", "CustomResourceDefinition", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "ConfigMap", "Deployment"} {
		assert.Positive(t, kinds[kind], "deploy/ has a %s", kind)
	}
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
