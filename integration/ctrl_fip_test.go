package integration

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/kubevirt-ovn/kubevirt-ovn/integration/sandbox"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/kube"
)

// fipObject is a FloatingIp object of router1 (fipManifest's).
func fipObject(t *testing.T, name, ip, fixed, vm string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	m := strings.ReplaceAll(fipManifest("FloatingIp", ip, fixed, vm), "fip-web", name)
	require.NoError(t, yaml.Unmarshal([]byte(m), &u.Object))
	return u
}

// waitFIP polls floating IP name until check passes, printing its status
// when it does not.
func (k *kubeAPI) waitFIP(t *testing.T, name, what string, check func(u *unstructured.Unstructured) bool) *unstructured.Unstructured {
	t.Helper()
	var last *unstructured.Unstructured
	err := sandbox.Poll(90*time.Second, what, func() (bool, error) {
		u, err := k.dyn.Resource(kube.FloatingIPGVR).Get(context.Background(), name, metav1.GetOptions{})
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
		require.NoError(t, err, "FloatingIp %s status: %v", name, status)
	}
	return last
}

func fipReady(u *unstructured.Unstructured) (status, message string) {
	c := condition(u, "Ready")
	if c == nil {
		return "", ""
	}
	return fmt.Sprint(c["status"]), fmt.Sprint(c["message"])
}

// The controller in a cluster with floating IPs as objects: one waiting
// for its VM says so in its status and binds when the VMI appears (its
// NAT row written, status Ready with the VM's port and the gateway); an
// invalid one gets its reason while its router stays Ready; deleted, its
// NAT row goes.
func TestControllerFloatingIPs(t *testing.T) {
	e := newOVN(t)
	k := startKubeAPI(t)
	startController(t, "a", "--nb", e.l.NBEndpoint(), "--sb", e.l.SBEndpoint(), "--kubeconfig", k.kubeconfig)
	ex := filepath.Join("..", "deploy", "examples")
	for _, f := range []string{"networks.yaml", "vmis.yaml", "router.yaml", "floatingips.yaml"} {
		k.apply(t, filepath.Join(ex, f))
	}
	fipRow := func(ip string) string {
		return strings.TrimSpace(nbctl(t, e.l, "--bare", "--columns=logical_ip", "find", "NAT", "type=dnat_and_snat", "external_ip="+ip))
	}
	waitNB(t, "fip-vm-b's NAT in the NB", func() bool { return fipRow("172.16.0.150") == vmBIP })
	u := k.waitFIP(t, "fip-vm-b", "fip-vm-b Ready", func(u *unstructured.Unstructured) bool {
		st, _ := fipReady(u)
		return st == "True"
	})
	port, _, _ := unstructured.NestedString(u.Object, "status", "port")
	gw, _, _ := unstructured.NestedString(u.Object, "status", "gateway")
	assert.Equal(t, vmBPort, port)
	assert.Equal(t, "gw1", gw)

	// Waiting for its VM.
	k.create(t, fipObject(t, "fip-vm-c", "172.16.0.151", "10.10.0.9", "vm-c"))
	k.waitFIP(t, "fip-vm-c", "fip-vm-c waiting for its VM", func(u *unstructured.Unstructured) bool {
		st, msg := fipReady(u)
		return st == "False" && strings.Contains(msg, "waiting for") && strings.Contains(msg, "10.10.0.9")
	})
	assert.Empty(t, fipRow("172.16.0.151"))
	vmc := &unstructured.Unstructured{}
	require.NoError(t, yaml.Unmarshal([]byte(`apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata: {name: vm-c, namespace: default}
spec:
  networks: [{name: eth1, multus: {networkName: net-a}}]
status:
  nodeName: hv1
  interfaces: [{name: eth1, mac: "50:54:00:00:00:09", ipAddress: 10.10.0.9}]
`), &vmc.Object))
	k.create(t, vmc)
	waitNB(t, "fip-vm-c bound once vm-c exists", func() bool { return fipRow("172.16.0.151") == "10.10.0.9" })
	k.waitFIP(t, "fip-vm-c", "fip-vm-c Ready on vm-c's port", func(u *unstructured.Unstructured) bool {
		st, _ := fipReady(u)
		p, _, _ := unstructured.NestedString(u.Object, "status", "port")
		return st == "True" && p == "kv-net-a_default_vm-c_eth1"
	})

	// Invalid: outside the external network; its router is not affected.
	k.create(t, fipObject(t, "fip-bad", "172.16.1.5", vmAIP, "vm-a"))
	k.waitFIP(t, "fip-bad", "fip-bad not Ready, naming the field", func(u *unstructured.Unstructured) bool {
		st, msg := fipReady(u)
		return st == "False" && strings.Contains(msg, "spec.floatingIp 172.16.1.5 is outside network public")
	})
	assert.Empty(t, fipRow("172.16.1.5"))
	r, _ := fipReady(k.router(t, "router1"))
	assert.Equal(t, "True", r, "router1 stays Ready")

	require.NoError(t, k.dyn.Resource(kube.FloatingIPGVR).Delete(context.Background(), "fip-vm-b", metav1.DeleteOptions{}))
	waitNB(t, "fip-vm-b's NAT removed", func() bool { return fipRow("172.16.0.150") == "" })
	assert.Equal(t, "10.10.0.9", fipRow("172.16.0.151"), "the other floating IP stays")
}
