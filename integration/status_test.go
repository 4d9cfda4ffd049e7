package integration

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kubevirt-ovn/kubevirt-ovn/integration/sandbox"
)

// statusObjects is what status -o json says of the objects (issue 34).
type statusObjects struct {
	Routers []struct {
		Name, Ready, Realized, Error, Active string
	}
	FloatingIPs []struct {
		ID, Ready, Realized, Error, Address, Port, LoadBalancer string
		Chassis                                                 []string
	}
	SecurityGroups []struct {
		ID, Ready, Realized, Error string
		Rules                      int
	}
	LoadBalancers []struct {
		Name, Ready, Realized, Error, Router string
		Members, Chassis                     []string
	}
}

func findBy[T any](t *testing.T, list []T, what string, key func(T) string, want string) T {
	t.Helper()
	for _, x := range list {
		if key(x) == want {
			return x
		}
	}
	require.Failf(t, "not listed", "%s %s not in %+v", what, want, list)
	var zero T
	return zero
}

// TestStatusPerObject: with the controller running on a real OVN and a
// real API server, status --kubeconfig lists every object with its
// conditions, the chassis involved and the error of those kept out (a
// router and a floating IP whose input is wrong, with no rows in the NB);
// without --kubeconfig, the objects whose rows the NB holds, Realized from
// NB_Global. The floating IP's chassis are where its packet goes.
func TestStatusPerObject(t *testing.T) {
	e := newOVN(t)
	k := startKubeAPI(t)
	startController(t, "a", "--nb", e.l.NBEndpoint(), "--sb", e.l.SBEndpoint(), "--kubeconfig", k.kubeconfig)
	ex := filepath.Join("..", "deploy", "examples")
	for _, f := range []string{"networks.yaml", "vmis.yaml", "router.yaml", "floatingips.yaml", "securitygroups.yaml", "loadbalancers.yaml"} {
		k.apply(t, filepath.Join(ex, f))
	}
	k.create(t, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kubevirt.io/v1", "kind": "VirtualRouter", "metadata": map[string]any{"name": "router2"},
		"spec": map[string]any{"enableSnat": true, "internal": []any{"net-c"},
			"external": map[string]any{"ip": "198.18.0.5", "network": "public"}, "gateway": "gw1"}}})
	k.create(t, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kubevirt.io/v1", "kind": "FloatingIp", "metadata": map[string]any{"name": "fip-bad"},
		"spec": map[string]any{"id": "fip-bad", "routerName": "router1", "networkName": "public", "floatingIp": "198.18.0.9"}}})
	k.waitStatus(t, "router1", "router1 Ready and Realized", func(u *unstructured.Unstructured) bool {
		r, z := condition(u, "Ready"), condition(u, "Realized")
		return r != nil && r["status"] == "True" && z != nil && z["status"] == "True"
	})
	e.ready("gw1", "hv1", "hv2")

	var st statusObjects
	var raw string
	require.NoError(t, sandbox.Poll(90*time.Second, "every object's conditions written", func() (bool, error) {
		r := kubevirtOVN(t, "status", "--nb", e.l.NBEndpoint(), "--sb", e.l.SBEndpoint(), "--kubeconfig", k.kubeconfig, "-o", "json")
		if r.code != 0 {
			return false, nil
		}
		raw, st = r.stdout, statusObjects{}
		if err := json.Unmarshal([]byte(r.stdout), &st); err != nil {
			return false, err
		}
		for _, f := range st.FloatingIPs {
			if f.Ready == "Unknown" {
				return false, nil
			}
		}
		for _, lb := range st.LoadBalancers {
			if lb.Ready == "Unknown" {
				return false, nil
			}
		}
		return len(st.FloatingIPs) == 3 && len(st.LoadBalancers) == 1 && len(st.SecurityGroups) == 1, nil
	}), raw)
	t.Log(raw)

	r1 := findBy(t, st.Routers, "router", func(r struct{ Name, Ready, Realized, Error, Active string }) string { return r.Name }, "router1")
	assert.Equal(t, []string{"True", "True", "", "gw1"}, []string{r1.Ready, r1.Realized, r1.Error, r1.Active})
	r2 := findBy(t, st.Routers, "router", func(r struct{ Name, Ready, Realized, Error, Active string }) string { return r.Name }, "router2")
	assert.Equal(t, "False", r2.Ready)
	assert.Contains(t, r2.Error, "spec.external.ip 198.18.0.5 is outside network public (172.16.0.0/24)")

	fipKey := func(f struct {
		ID, Ready, Realized, Error, Address, Port, LoadBalancer string
		Chassis                                                 []string
	}) string {
		return f.ID
	}
	fb := findBy(t, st.FloatingIPs, "floating IP", fipKey, "fip-vm-b")
	assert.Equal(t, []string{"True", "172.16.0.150", vmBPort}, []string{fb.Ready, fb.Address, fb.Port})
	assert.Equal(t, []string{"gw1", "hv2"}, fb.Chassis, "its router's active gateway and its VM's chassis")
	assert.Equal(t, "lb-web", findBy(t, st.FloatingIPs, "floating IP", fipKey, "fip-lb-web").LoadBalancer)
	bad := findBy(t, st.FloatingIPs, "floating IP", fipKey, "fip-bad")
	assert.Equal(t, "False", bad.Ready)
	assert.Contains(t, bad.Error, "198.18.0.9")

	sg := st.SecurityGroups[0]
	assert.Equal(t, []string{"sg-web", "True", ""}, []string{sg.ID, sg.Ready, sg.Error})
	assert.Equal(t, 2, sg.Rules, "web-ssh and web-http")
	lb := st.LoadBalancers[0]
	assert.Equal(t, []string{"lb-web", "True", "router1"}, []string{lb.Name, lb.Ready, lb.Router})
	assert.Equal(t, []string{"10.10.0.5:80"}, lb.Members)
	assert.Equal(t, []string{"gw1", "hv1"}, lb.Chassis, "its router's active gateway and its member's chassis")

	text := kubevirtOVN(t, "status", "--nb", e.l.NBEndpoint(), "--sb", e.l.SBEndpoint(), "--kubeconfig", k.kubeconfig)
	require.Equal(t, 0, text.code, text.stderr)
	assert.Regexp(t, `\nrouter2 +False +False +- +- +- +- +VirtualRouter router2: spec.external.ip 198.18.0.5 is outside network public \(172.16.0.0/24\); VirtualRouter router2: spec.internal\[0\] network net-c is unknown`, text.stdout, "one line per router")
	assert.Regexp(t, `\nfip-vm-b +True +True +172.16.0.150 +10.20.0.6 +router1 +`+vmBPort+` +gw1,hv2 +- *\n`, text.stdout)
	assert.Regexp(t, `\nlb-web +True +True +10.10.0.100:80,172.16.0.160:80 +10.10.0.5:80 +router1 +gw1,hv1 +- *\n`, text.stdout)

	// From the NB and SB alone: the objects with rows, none of the errors.
	nbOnly := kubevirtOVN(t, "status", "--nb", e.l.NBEndpoint(), "--sb", e.l.SBEndpoint())
	require.Equal(t, 0, nbOnly.code, nbOnly.stderr)
	assert.Regexp(t, `\nrouter1 +True +True +172.16.0.100 +gw1 `, nbOnly.stdout)
	assert.NotContains(t, nbOnly.stdout, "router2")
	assert.NotContains(t, nbOnly.stdout, "fip-bad")
	assert.True(t, strings.Contains(nbOnly.stdout, "\nsg-web "), nbOnly.stdout)

	// From the cluster alone (interconnect: no central NB): every object
	// and its conditions, no chassis.
	kubeOnly := kubevirtOVN(t, "status", "--kubeconfig", k.kubeconfig)
	require.Equal(t, 0, kubeOnly.code, kubeOnly.stderr)
	assert.Regexp(t, `\nrouter1 +True +True +- +- +- +- +- *\n`, kubeOnly.stdout)
	assert.Regexp(t, `\nfip-bad +False +False +- +- +- +- +- +FloatingIp fip-bad: spec.floatingIp 198.18.0.9 is outside network public`, kubeOnly.stdout)
	assert.NotContains(t, kubeOnly.stdout, "routers per gateway chassis")

	// The floating IP's chassis are where its packets go: in at gw1, to
	// vm-b on hv2.
	e.dnatToVM("gw1", vmB, vmA, 33100, 8080)
}
