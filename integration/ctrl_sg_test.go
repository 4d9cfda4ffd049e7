package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/kubevirt-ovn/kubevirt-ovn/integration/sandbox"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/kube"
)

// waitObject polls object name of gvr (cluster-scoped) until check
// passes, printing its status when it does not.
func (k *kubeAPI) waitObject(t *testing.T, gvr schema.GroupVersionResource, name, what string, check func(u *unstructured.Unstructured) bool) *unstructured.Unstructured {
	t.Helper()
	var last *unstructured.Unstructured
	err := sandbox.Poll(90*time.Second, what, func() (bool, error) {
		u, err := k.dyn.Resource(gvr).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = u
		return check(u), nil
	})
	if err != nil {
		var status any
		if last != nil {
			status = last.Object["status"]
		}
		require.NoError(t, err, "%s %s status: %v", gvr.Resource, name, status)
	}
	return last
}

// readyIs says whether u's Ready condition has status and a message
// containing msg.
func readyIs(status, msg string) func(u *unstructured.Unstructured) bool {
	return func(u *unstructured.Unstructured) bool {
		c := condition(u, "Ready")
		return c != nil && c["status"] == status && strings.Contains(fmt.Sprint(c["message"]), msg)
	}
}

// change updates object name of gvr (namespace "" for a cluster-scoped
// one), retrying on conflicts with the controller's status writes.
func (k *kubeAPI) change(t *testing.T, gvr schema.GroupVersionResource, namespace, name string, edit func(u *unstructured.Unstructured)) {
	t.Helper()
	res := k.dyn.Resource(gvr).Namespace(namespace)
	require.NoError(t, sandbox.Poll(10*time.Second, "updating "+gvr.Resource+" "+name, func() (bool, error) {
		u, err := res.Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		edit(u)
		_, err = res.Update(context.Background(), u, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			return false, nil
		}
		return err == nil, err
	}))
}

func objectOf(t *testing.T, manifest string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	require.NoError(t, yaml.Unmarshal([]byte(manifest), &u.Object))
	return u
}

// vmOf is VirtualMachine vm-a of namespace default, whose template binds
// groups (a JSON list; "" no annotation).
func vmOf(t *testing.T, groups string) *unstructured.Unstructured {
	ann := ""
	if groups != "" {
		ann = fmt.Sprintf("\n      annotations: {securityGroups: '%s'}", groups)
	}
	return objectOf(t, fmt.Sprintf(`apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata: {name: vm-a, namespace: default}
spec:
  running: true
  template:
    metadata:
      labels: {app: web}%s
    spec:
      networks: [{name: eth1, multus: {networkName: net-a}}]
`, ann))
}

// The controller in a cluster with security groups as objects: a group
// and a separate rule object give the group's Port_Group and ACLs and say
// Ready; a rule edit updates its ACL in place; a bad rule gets its named
// error in its status and its group's, its ACL left out; the
// VirtualMachine's template annotation, edited while the VMI stays as it
// is, moves vm-a's port into and out of the group's Port_Group.
func TestControllerSecurityGroups(t *testing.T) {
	c := startCentral(t)
	k := startKubeAPI(t)
	startController(t, "a", "--nb", c.NBTCP, "--kubeconfig", k.kubeconfig)
	ex := filepath.Join("..", "deploy", "examples")
	for _, f := range []string{"networks.yaml", "vmis.yaml", "router.yaml", "securitygroups.yaml"} {
		k.apply(t, filepath.Join(ex, f))
	}
	pg := translator.PortGroupName("sg-web")
	var vmA string
	waitNB(t, "vm-a's port", func() bool {
		vmA = strings.TrimSpace(nbctl(t, c, "--bare", "--columns=_uuid", "find", "Logical_Switch_Port", "name=kv-net-a_default_vm-a_eth1"))
		return vmA != ""
	})
	acl := func(key string) (uuid, match string) {
		out := nbctl(t, c, "--bare", "--columns=_uuid,match", "--format=csv", "--no-headings", "find", "ACL", "external_ids:kubevirt-ovn/sg-acl="+key)
		uuid, match, _ = strings.Cut(strings.TrimSpace(out), ",")
		return uuid, strings.Trim(match, `"`)
	}
	ports := func() []string {
		return strings.Fields(nbctl(t, c, "--bare", "--columns=ports", "find", "Port_Group", "name="+pg))
	}
	waitNB(t, "sg-web's ACLs", func() bool {
		_, ssh := acl("rule/web-ssh")
		_, http := acl("rule/web-http")
		return ssh != "" && http != ""
	})
	httpUUID, match := acl("rule/web-http")
	assert.Equal(t, "outport == @"+pg+" && ip4 && tcp && tcp.dst == 80", match)
	assert.Empty(t, ports(), "no VM is bound yet")
	k.waitObject(t, kube.SecurityGroupGVR, "sg-web", "sg-web Ready", readyIs("True", "committed"))
	k.waitObject(t, kube.SecurityGroupRuleGVR, "sgr-web-http", "sgr-web-http Ready", readyIs("True", "committed"))

	// The rule edited: its ACL in place.
	k.change(t, kube.SecurityGroupRuleGVR, "", "sgr-web-http", func(u *unstructured.Unstructured) {
		require.NoError(t, unstructured.SetNestedField(u.Object, int64(8080), "spec", "portRangeMin"))
		require.NoError(t, unstructured.SetNestedField(u.Object, "8080", "spec", "portRangeMax"))
	})
	waitNB(t, "the edited rule's ACL", func() bool {
		_, m := acl("rule/web-http")
		return strings.HasSuffix(m, "tcp.dst == 8080")
	})
	uuid, _ := acl("rule/web-http")
	assert.Equal(t, httpUUID, uuid, "updated in place")

	// A bad rule: named in its status and in its group's; no ACL.
	k.create(t, objectOf(t, `apiVersion: kubevirt.io/v1
kind: SecurityGroupRule
metadata: {name: sgr-web-bad}
spec: {id: web-bad, securityGroupId: sg-web, direction: ingress, protocol: udp, portRangeMin: 90, portRangeMax: 80}
`))
	const badMsg = "SecurityGroupRule sgr-web-bad: spec.portRangeMax 80 is below spec.portRangeMin 90"
	k.waitObject(t, kube.SecurityGroupRuleGVR, "sgr-web-bad", "sgr-web-bad names its error", readyIs("False", badMsg))
	g := k.waitObject(t, kube.SecurityGroupGVR, "sg-web", "sg-web names its rule's error", readyIs("False", badMsg))
	assert.Equal(t, "InvalidRule", condition(g, "Ready")["reason"])
	u, _ := acl("rule/web-bad")
	assert.Empty(t, u)
	_, m := acl("rule/web-http")
	assert.True(t, strings.HasSuffix(m, "tcp.dst == 8080"), "the group's other rules stay: %s", m)
	// The CRD's schema refuses a port that is no number.
	bad := objectOf(t, `apiVersion: kubevirt.io/v1
kind: SecurityGroupRule
metadata: {name: sgr-web-words}
spec: {id: web-words, securityGroupId: sg-web, direction: ingress, protocol: tcp, portRangeMin: eighty}
`)
	_, err := k.dyn.Resource(kube.SecurityGroupRuleGVR).Create(context.Background(), bad, metav1.CreateOptions{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "spec.portRangeMin")

	// The VirtualMachine binds vm-a (its VMI has no annotation), then
	// unbinds it, then binds it again: the VMI is never touched.
	vmi, err := k.dyn.Resource(vmiGVR).Namespace("default").Get(context.Background(), "vm-a", metav1.GetOptions{})
	require.NoError(t, err)
	k.create(t, vmOf(t, `["sg-web"]`))
	waitNB(t, "vm-a's port in sg-web", func() bool { return slices.Equal(ports(), []string{vmA}) })
	setBinding := func(groups string) {
		k.change(t, kube.VMGVR, "default", "vm-a", func(u *unstructured.Unstructured) {
			if groups == "" {
				unstructured.RemoveNestedField(u.Object, "spec", "template", "metadata", "annotations", "securityGroups")
				return
			}
			require.NoError(t, unstructured.SetNestedField(u.Object, groups, "spec", "template", "metadata", "annotations", "securityGroups"))
		})
	}
	setBinding("")
	waitNB(t, "vm-a's port out of sg-web", func() bool { return len(ports()) == 0 })
	setBinding(`["sg-other", "sg-web"]`)
	waitNB(t, "vm-a's port back in sg-web", func() bool { return slices.Equal(ports(), []string{vmA}) })
	now, err := k.dyn.Resource(vmiGVR).Namespace("default").Get(context.Background(), "vm-a", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, vmi.GetResourceVersion(), now.GetResourceVersion(), "the VMI is untouched")

	// The rule object deleted: its ACL goes, the group is Ready again
	// once the bad rule goes too.
	require.NoError(t, k.dyn.Resource(kube.SecurityGroupRuleGVR).Delete(context.Background(), "sgr-web-bad", metav1.DeleteOptions{}))
	k.waitObject(t, kube.SecurityGroupGVR, "sg-web", "sg-web Ready again", readyIs("True", "committed"))
	require.NoError(t, k.dyn.Resource(kube.SecurityGroupRuleGVR).Delete(context.Background(), "sgr-web-http", metav1.DeleteOptions{}))
	waitNB(t, "the deleted rule's ACL gone", func() bool { u, _ := acl("rule/web-http"); return u == "" })
	_, ssh := acl("rule/web-ssh")
	assert.NotEmpty(t, ssh, "the embedded rule stays")
}

// The controller in a cluster with load balancers as objects: one gives
// its Load_Balancer rows on its router and network and says Ready with
// its router and the floating IP on its VIP; one whose VIP is its
// network's gateway says so by name and has no rows; the router stays
// Ready. A member that is no VM port is left out with a note.
func TestControllerLoadBalancers(t *testing.T) {
	c := startCentral(t)
	k := startKubeAPI(t)
	startController(t, "a", "--nb", c.NBTCP, "--kubeconfig", k.kubeconfig)
	ex := filepath.Join("..", "deploy", "examples")
	for _, f := range []string{"networks.yaml", "vmis.yaml", "router.yaml", "loadbalancers.yaml"} {
		k.apply(t, filepath.Join(ex, f))
	}
	vips := func(row string) string {
		return strings.TrimSpace(nbctl(t, c, "--bare", "--columns=vips", "find", "Load_Balancer", "name="+row))
	}
	waitNB(t, "lb-web's rows", func() bool {
		return strings.Contains(vips("kv-lb-lb-web_tcp"), "172.16.0.160:80") && vips("kv-lb-lb-web_tcp_switch") != ""
	})
	assert.Contains(t, vips("kv-lb-lb-web_tcp"), "10.10.0.100:80=10.10.0.5:80")
	// The floating IP arrives after the load balancer (the file's
	// order): the status may say Ready before it lists it, and the NB may
	// have its VIP before the status does.
	u := k.waitObject(t, kube.LoadBalancerGVR, "lb-web", "lb-web Ready with its floating IP", func(u *unstructured.Unstructured) bool {
		fips, _, _ := unstructured.NestedStringSlice(u.Object, "status", "floatingIps")
		return readyIs("True", "committed")(u) && len(fips) > 0
	})
	router, _, _ := unstructured.NestedString(u.Object, "status", "router")
	fips, _, _ := unstructured.NestedStringSlice(u.Object, "status", "floatingIps")
	assert.Equal(t, "router1", router)
	assert.Equal(t, []string{"172.16.0.160"}, fips)
	k.waitFIP(t, "fip-lb-web", "fip-lb-web Ready on the VIP", func(u *unstructured.Unstructured) bool {
		st, _ := fipReady(u)
		return st == "True"
	})

	k.create(t, objectOf(t, `apiVersion: kubevirt.io/v1
kind: LoadBalancer
metadata: {name: lb-bad}
spec:
  name: lb-bad
  networkId: net-a
  vip: 10.10.0.1
  members: [10.10.0.5, 10.10.0.7]
  rules: [{protocol: udp, portRangeMin: "53", portRangeMax: 53}]
`))
	bad := k.waitObject(t, kube.LoadBalancerGVR, "lb-bad", "lb-bad names its error",
		readyIs("False", "LoadBalancer lb-bad: spec.vip 10.10.0.1 is the gatewayIp of network net-a"))
	assert.Equal(t, "InvalidSpec", condition(bad, "Ready")["reason"])
	assert.Empty(t, strings.TrimSpace(nbctl(t, c, "--bare", "--columns=name", "find", "Load_Balancer", "name=kv-lb-lb-bad_udp")))
	r, _ := fipReady(k.router(t, "router1"))
	assert.Equal(t, "True", r, "router1 stays Ready")

	// A member that is no VM port (a stopped VM has no VMI) is left out
	// with a note, as ONOS skipped it; the others keep serving, and it
	// joins once its VM runs (issue 30).
	k.change(t, kube.LoadBalancerGVR, "", "lb-web", func(u *unstructured.Unstructured) {
		require.NoError(t, unstructured.SetNestedStringSlice(u.Object, []string{"10.10.0.5", "10.10.0.7"}, "spec", "members"))
	})
	k.waitObject(t, kube.LoadBalancerGVR, "lb-web", "lb-web Ready, saying what it left out",
		readyIs("True", "spec.members[1] 10.10.0.7 is no VM port on network net-a: left out until it is one"))
	assert.Contains(t, vips("kv-lb-lb-web_tcp"), "10.10.0.100:80=10.10.0.5:80")
	k.create(t, objectOf(t, `apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata: {name: vm-c, namespace: default}
spec:
  networks: [{name: eth1, multus: {networkName: net-a}}]
status:
  nodeName: hv1
  interfaces: [{name: eth1, mac: "50:54:00:00:00:07", ipAddress: 10.10.0.7}]
`))
	waitNB(t, "vm-c joins lb-web", func() bool {
		return strings.Contains(vips("kv-lb-lb-web_tcp"), "10.10.0.100:80=10.10.0.5:80,10.10.0.7:80")
	})
	k.waitObject(t, kube.LoadBalancerGVR, "lb-web", "lb-web Ready without a note", func(u *unstructured.Unstructured) bool {
		c := condition(u, "Ready")
		return c != nil && c["status"] == "True" && !strings.Contains(fmt.Sprint(c["message"]), "left out")
	})

	require.NoError(t, k.dyn.Resource(kube.LoadBalancerGVR).Delete(context.Background(), "lb-web", metav1.DeleteOptions{}))
	waitNB(t, "lb-web's rows gone", func() bool { return vips("kv-lb-lb-web_tcp") == "" && vips("kv-lb-lb-web_tcp_switch") == "" })
}

// A cluster upgraded without the CRDs of deploy/common beside
// VirtualRouter, nor KubeVirt's VirtualMachine: routers are still
// reconciled and Ready, and the log says what to apply.
func TestControllerWithoutOptionalCRDs(t *testing.T) {
	c := startCentral(t)
	k := startKubeAPIWith(t, []string{filepath.Join("..", "deploy", "common", "crd-virtualrouter.yaml"),
		filepath.Join("testdata", "crds", "nad.yaml"), filepath.Join("testdata", "crds", "vmi.yaml"), filepath.Join("testdata", "crds", "lease.yaml")})
	ctrl := startController(t, "a", "--nb", c.NBTCP, "--kubeconfig", k.kubeconfig)
	ex := filepath.Join("..", "deploy", "examples")
	for _, f := range []string{"networks.yaml", "vmis.yaml", "router.yaml"} {
		k.apply(t, filepath.Join(ex, f))
	}
	waitNB(t, "router1's NAT in the NB", func() bool { return natIPs(t, c, "router1") == "172.16.0.100 172.16.0.100" })
	k.waitStatus(t, "router1", "router1 Ready", func(u *unstructured.Unstructured) bool {
		r := condition(u, "Ready")
		return r != nil && r["status"] == "True"
	})
	out := ctrl.out.String()
	for _, crd := range []string{"crd-floatingip.yaml", "crd-securitygroup.yaml", "crd-loadbalancer.yaml"} {
		assert.Contains(t, out, "apply deploy/common/"+crd)
	}
	assert.Contains(t, out, "does not serve virtualmachines.kubevirt.io")
}

// The CRDs of security groups, rules and load balancers accept what the
// manifest decoders accept (ports and protocols as numbers or strings,
// embedded rules, a health check) and refuse a port that is no number by
// its field; `kubectl get` prints their columns.
func TestSecurityGroupAndLoadBalancerCRDs(t *testing.T) {
	k := startKubeAPI(t)
	for _, m := range []string{`apiVersion: kubevirt.io/v1
kind: SecurityGroup
metadata: {name: sg-web}
spec:
  id: sg-web
  name: web
  rules: [{id: a, direction: ingress, protocol: 6, portRangeMin: "22", portRangeMax: 22}, {id: b, direction: egress}]
`, `apiVersion: kubevirt.io/v1
kind: SecurityGroupRule
metadata: {name: sgr-1}
spec: {id: sgr-1, securityGroupId: sg-web, direction: ingress, protocol: icmp, portRangeMin: 8, portRangeMax: "0", remoteGroupId: sg-web}
`, `apiVersion: kubevirt.io/v1
kind: LoadBalancer
metadata: {name: lb-web}
spec:
  name: lb-web
  networkId: net-a
  vip: 10.10.0.100
  members: [10.10.0.5]
  rules: [{protocol: tcp, portRangeMin: 80, portRangeMax: "81"}, {protocol: icmp}]
  healthCheck: {sourceIp: 10.10.0.250, interval: "7", timeout: 20, successCount: 3, failureCount: "3"}
`} {
		k.create(t, objectOf(t, m))
	}
	for field, m := range map[string]string{
		"spec.rules[0].portRangeMax": `apiVersion: kubevirt.io/v1
kind: SecurityGroup
metadata: {name: sg-bad}
spec: {id: sg-bad, rules: [{id: a, portRangeMax: "2x"}]}
`,
		"spec.id": `apiVersion: kubevirt.io/v1
kind: SecurityGroup
metadata: {name: sg-noid}
spec: {name: x}
`,
		"spec.securityGroupId": `apiVersion: kubevirt.io/v1
kind: SecurityGroupRule
metadata: {name: sgr-nogroup}
spec: {id: x}
`,
		"spec.rules[0].portRangeMin": `apiVersion: kubevirt.io/v1
kind: LoadBalancer
metadata: {name: lb-bad}
spec: {networkId: net-a, rules: [{protocol: tcp, portRangeMin: http}]}
`,
		"spec.healthCheck.interval": `apiVersion: kubevirt.io/v1
kind: LoadBalancer
metadata: {name: lb-bad2}
spec: {networkId: net-a, healthCheck: {sourceIp: 10.10.0.250, interval: soon}}
`,
	} {
		u := objectOf(t, m)
		gvr, _ := k.resource(u)
		_, err := k.dyn.Resource(gvr).Create(context.Background(), u, metav1.CreateOptions{})
		if assert.Error(t, err, field) {
			assert.Contains(t, err.Error(), field)
		}
	}

	hc, err := rest.HTTPClientFor(k.config)
	require.NoError(t, err)
	for resource, want := range map[string][]string{
		"securitygroups":     {"Name", "ID", "Ready", "Reason", "Age"},
		"securitygrouprules": {"Name", "Group", "Direction", "Protocol", "Min", "Max", "Remote", "Ready", "Age"},
		"loadbalancers":      {"Name", "Network", "VIP", "Router", "Floating IPs", "Ready", "Age"},
	} {
		req, err := http.NewRequest(http.MethodGet, k.config.Host+"/apis/kubevirt.io/v1/"+resource, nil)
		require.NoError(t, err)
		req.Header.Set("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
		resp, err := hc.Do(req)
		require.NoError(t, err)
		var table struct {
			ColumnDefinitions []struct {
				Name string `json:"name"`
			} `json:"columnDefinitions"`
			Rows []struct {
				Cells []any `json:"cells"`
			} `json:"rows"`
		}
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&table))
		resp.Body.Close()
		var cols []string
		for _, c := range table.ColumnDefinitions {
			cols = append(cols, c.Name)
		}
		assert.Equal(t, want, cols, resource)
		assert.Len(t, table.Rows, 1, resource)
	}
}
