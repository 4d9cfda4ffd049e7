package integration

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/kubevirt-ovn/kubevirt-ovn/integration/sandbox"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/kube"
)

var (
	routerGVR = schema.GroupVersionResource{Group: "kubevirt.io", Version: "v1", Resource: "virtualrouters"}
	nadGVR    = schema.GroupVersionResource{Group: "k8s.cni.cncf.io", Version: "v1", Resource: "network-attachment-definitions"}
	vmiGVR    = schema.GroupVersionResource{Group: "kubevirt.io", Version: "v1", Resource: "virtualmachineinstances"}
	leaseGVR  = schema.GroupVersionResource{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"}
)

// syncBuffer collects a process's output safely.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// controllerProc is a running `kubevirt-ovn run`.
type controllerProc struct {
	t    *testing.T
	name string
	cmd  *exec.Cmd
	out  *syncBuffer
	addr string
	done chan struct{}
}

// startController runs `kubevirt-ovn run` with short leader election
// timings; it is stopped (SIGTERM) when the test ends.
func startController(t *testing.T, name string, args ...string) *controllerProc {
	t.Helper()
	port, err := sandbox.FreePort()
	require.NoError(t, err)
	p := &controllerProc{t: t, name: name, out: &syncBuffer{}, addr: fmt.Sprintf("127.0.0.1:%d", port), done: make(chan struct{})}
	full := append([]string{"run", "--http-addr", p.addr, "--identity", name,
		"--lease-namespace", "kube-system", "--lease-duration", "4s", "--renew-deadline", "3s", "--retry-period", "500ms",
		"--resync", "1m", "--v", "2"}, args...)
	p.cmd = exec.Command(binary, full...)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	require.NoError(t, p.cmd.Start())
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.stop()
		if t.Failed() {
			t.Logf("controller %s output:\n%s", name, p.out.String())
		}
	})
	require.NoError(t, sandbox.Poll(30*time.Second, "controller "+name+" serving /healthz", func() (bool, error) {
		select {
		case <-p.done:
			return false, fmt.Errorf("controller %s exited:\n%s", name, p.out.String())
		default:
		}
		resp, err := http.Get("http://" + p.addr + "/healthz")
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	}))
	return p
}

// stop sends SIGTERM and waits for the process to exit.
func (p *controllerProc) stop() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// kill stops the process without letting it release anything.
func (p *controllerProc) kill() {
	_ = p.cmd.Process.Kill()
	<-p.done
}

// metric reads one unlabelled metric (or the sum of a labelled one) from
// /metrics.
func (p *controllerProc) metric(name string) float64 {
	p.t.Helper()
	return p.metrics(name)[0]
}

// metrics reads the named metrics from one scrape, each summed over its
// labels, so that related ones (a histogram's _sum and _count) are read at
// the same moment.
func (p *controllerProc) metrics(names ...string) []float64 {
	p.t.Helper()
	resp, err := http.Get("http://" + p.addr + "/metrics")
	require.NoError(p.t, err)
	defer resp.Body.Close()
	sums := make([]float64, len(names))
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		for i, name := range names {
			if !strings.HasPrefix(line, name+" ") && !strings.HasPrefix(line, name+"{") {
				continue
			}
			f := strings.Fields(line)
			v, err := strconv.ParseFloat(f[len(f)-1], 64)
			require.NoError(p.t, err)
			sums[i] += v
		}
	}
	return sums
}

func (p *controllerProc) get(path string) (int, string) {
	resp, err := http.Get("http://" + p.addr + path)
	require.NoError(p.t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// apply creates (or replaces) the objects of a manifest file.
func (k *kubeAPI) apply(t *testing.T, file string) {
	t.Helper()
	data, err := os.ReadFile(file)
	require.NoError(t, err)
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		var u unstructured.Unstructured
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			return
		} else {
			require.NoError(t, err)
		}
		if len(u.Object) == 0 {
			continue
		}
		k.create(t, &u)
	}
}

func (k *kubeAPI) resource(u *unstructured.Unstructured) (gvr schema.GroupVersionResource, namespaced bool) {
	switch u.GetKind() {
	case "VirtualRouter":
		return routerGVR, false
	case "NetworkAttachmentDefinition":
		return nadGVR, true
	case "VirtualMachineInstance":
		return vmiGVR, true
	case "FloatingIp":
		return kube.FloatingIPGVR, false
	case "SecurityGroup":
		return kube.SecurityGroupGVR, false
	case "SecurityGroupRule":
		return kube.SecurityGroupRuleGVR, false
	case "LoadBalancer":
		return kube.LoadBalancerGVR, false
	case "VirtualMachine":
		return kube.VMGVR, true
	}
	panic("unexpected kind " + u.GetKind())
}

func (k *kubeAPI) create(t *testing.T, u *unstructured.Unstructured) {
	t.Helper()
	gvr, namespaced := k.resource(u)
	var err error
	if namespaced {
		if u.GetNamespace() == "" {
			u.SetNamespace("default")
		}
		_, err = k.dyn.Resource(gvr).Namespace(u.GetNamespace()).Create(context.Background(), u, metav1.CreateOptions{})
	} else {
		_, err = k.dyn.Resource(gvr).Create(context.Background(), u, metav1.CreateOptions{})
	}
	require.NoError(t, err, "creating %s %s", u.GetKind(), u.GetName())
}

func (k *kubeAPI) router(t *testing.T, name string) *unstructured.Unstructured {
	t.Helper()
	u, err := k.dyn.Resource(routerGVR).Get(context.Background(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	require.NoError(t, err)
	return u
}

// updateRouter changes a router's spec, retrying on conflicts with the
// controller's own writes.
func (k *kubeAPI) updateRouter(t *testing.T, name string, change func(spec map[string]any)) {
	t.Helper()
	require.NoError(t, sandbox.Poll(10*time.Second, "updating VirtualRouter "+name, func() (bool, error) {
		u := k.router(t, name)
		spec, _, _ := unstructured.NestedMap(u.Object, "spec")
		change(spec)
		require.NoError(t, unstructured.SetNestedMap(u.Object, spec, "spec"))
		_, err := k.dyn.Resource(routerGVR).Update(context.Background(), u, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			return false, nil
		}
		return err == nil, err
	}))
}

func condition(u *unstructured.Unstructured, typ string) map[string]any {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == typ {
			return m
		}
	}
	return nil
}

// waitStatus polls a router until check passes, printing its status when it
// does not.
func (k *kubeAPI) waitStatus(t *testing.T, name, what string, check func(u *unstructured.Unstructured) bool) *unstructured.Unstructured {
	t.Helper()
	var last *unstructured.Unstructured
	err := sandbox.Poll(90*time.Second, what, func() (bool, error) {
		last = k.router(t, name)
		return last != nil && check(last), nil
	})
	if err != nil {
		var status any
		if last != nil {
			status = last.Object["status"]
		}
		require.NoError(t, err, "VirtualRouter %s status: %v", name, status)
	}
	return last
}

func natIPs(t *testing.T, c interface {
	NBCtl(...string) (string, error)
}, router string) string {
	out, err := c.NBCtl("--bare", "--columns=external_ip", "find", "NAT", "external_ids:kubevirt-ovn/owner="+router)
	require.NoError(t, err)
	return strings.Join(strings.Fields(out), " ")
}

func waitNB(t *testing.T, what string, cond func() bool) {
	t.Helper()
	require.NoError(t, sandbox.Poll(90*time.Second, what, func() (bool, error) { return cond(), nil }))
}

// The controller in a cluster: routers, networks and VMs as objects; the NB
// converges, a packet proves SNAT, status says Ready and Realized, an
// invalid router gets its reason while another works, edits and deletions
// follow, drift is repaired.
func TestControllerConvergesReportsStatusAndRepairsDrift(t *testing.T) {
	e := newOVN(t)
	k := startKubeAPI(t)
	ctrl := startController(t, "a", "--nb", e.l.NBEndpoint(), "--sb", e.l.SBEndpoint(), "--kubeconfig", k.kubeconfig)

	ex := filepath.Join("..", "deploy", "examples")
	for _, f := range []string{"networks.yaml", "vmis.yaml", "router.yaml"} {
		k.apply(t, filepath.Join(ex, f))
	}
	waitNB(t, "router1's NAT in the NB", func() bool { return natIPs(t, e.l, "router1") == "172.16.0.100 172.16.0.100" })
	vr := k.waitStatus(t, "router1", "router1 Ready and Realized", func(u *unstructured.Unstructured) bool {
		r, z := condition(u, "Ready"), condition(u, "Realized")
		return r != nil && r["status"] == "True" && z != nil && z["status"] == "True"
	})
	primary, _, _ := unstructured.NestedString(vr.Object, "status", "gateway", "primary")
	cands, _, _ := unstructured.NestedStringSlice(vr.Object, "status", "gateway", "candidates")
	snat, _, _ := unstructured.NestedString(vr.Object, "status", "snatIP")
	gen, _, _ := unstructured.NestedInt64(vr.Object, "status", "observedGeneration")
	assert.Equal(t, "gw1", primary)
	assert.Equal(t, []string{"gw2"}, cands)
	// Where the gateway port is bound in the SB, not only the plan.
	k.waitStatus(t, "router1", "status.gateway.active gw1", func(u *unstructured.Unstructured) bool {
		active, _, _ := unstructured.NestedString(u.Object, "status", "gateway", "active")
		return active == "gw1"
	})
	assert.Equal(t, "172.16.0.100", snat)
	assert.Equal(t, vr.GetGeneration(), gen)
	assert.Contains(t, vr.GetFinalizers(), "kubevirt.io/kubevirt-ovn-cleanup")
	code, _ := ctrl.get("/readyz")
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, 1.0, ctrl.metric("kubevirt_ovn_routers_ready"))
	assert.Equal(t, 1.0, ctrl.metric("kubevirt_ovn_routers_realized"))
	// 3 switches, 6 switch ports, 3 DHCP options, 1 router, 3 router
	// ports, 2 NAT, 1 route, 2 gateway chassis.
	assert.Equal(t, 21.0, ctrl.metric("kubevirt_ovn_owned_rows"), "owned rows")
	_, body := ctrl.get("/metrics")
	for _, name := range []string{"kubevirt_ovn_queue_depth", "kubevirt_ovn_reconcile_duration_seconds_bucket", `kubevirt_ovn_owned_rows{table="NAT"} 2`} {
		assert.Contains(t, body, name)
	}

	// The datapath does it.
	e.ready("gw1", "hv1", "hv2")
	e.send("hv1", "vm-a", vmAMAC, vmAIP, 41001, 6001)
	waitFor(t, e.wire("gw1"), "vm-a's UDP SNATed", 0, snated(6001))

	// An invalid router gets its reason; router1 is untouched.
	bad := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kubevirt.io/v1", "kind": "VirtualRouter", "metadata": map[string]any{"name": "router2"},
		"spec": map[string]any{"enableSnat": true, "internal": []any{"net-c"},
			"external": map[string]any{"ip": "198.18.0.5", "network": "public"}, "gateway": "gw1"},
	}}
	k.create(t, bad)
	k.waitStatus(t, "router2", "router2 not Ready with its reason", func(u *unstructured.Unstructured) bool {
		r := condition(u, "Ready")
		return r != nil && r["status"] == "False" && r["reason"] == "InvalidSpec" &&
			strings.Contains(fmt.Sprint(r["message"]), "spec.external.ip 198.18.0.5 is outside network public (172.16.0.0/24)")
	})
	assert.Equal(t, "True", condition(k.router(t, "router1"), "Ready")["status"])
	assert.Equal(t, 1.0, ctrl.metric("kubevirt_ovn_routers_not_ready"))

	// An edit converges.
	k.updateRouter(t, "router1", func(spec map[string]any) {
		spec["external"].(map[string]any)["ip"] = "172.16.0.101"
	})
	waitNB(t, "router1's NAT follows the edit", func() bool { return natIPs(t, e.l, "router1") == "172.16.0.101 172.16.0.101" })
	k.waitStatus(t, "router1", "status follows the edit", func(u *unstructured.Unstructured) bool {
		ip, _, _ := unstructured.NestedString(u.Object, "status", "snatIP")
		return ip == "172.16.0.101"
	})

	// A gateway move: the port goes to gw2, status says where it is
	// active, and once it is bound there, on an OVN whose old gateway may
	// keep the port's flows, the chassis are nudged (NB_Global
	// options:bfd-mult, absent -> "3"); a fixed OVN gets no nudge. Either
	// way gw1 keeps no stale flows: only gw2 answers ARP for the SNAT IP.
	k.updateRouter(t, "router1", func(spec map[string]any) { spec["gateway"] = "gw2" })
	k.waitStatus(t, "router1", "status.gateway primary and active gw2", func(u *unstructured.Unstructured) bool {
		p, _, _ := unstructured.NestedString(u.Object, "status", "gateway", "primary")
		a, _, _ := unstructured.NestedString(u.Object, "status", "gateway", "active")
		return p == "gw2" && a == "gw2"
	})
	nudge := expectFacts(t).staleGateway
	if nudge {
		waitNB(t, "the chassis nudged after the move", func() bool {
			return strings.Contains(nbctl(t, e.l, "get", "NB_Global", ".", "options"), `bfd-mult="3"`)
		})
	}
	e.ready("gw2", "hv1", "hv2")
	nbctl(t, e.l, "--timeout=90", "--wait=hv", "sync")
	if !nudge {
		assert.NotContains(t, nbctl(t, e.l, "get", "NB_Global", ".", "options"), "bfd-mult", "an OVN without the stale gateway bug needs no nudge")
	}
	moved := frame{SrcMAC: peerMAC, DstMAC: "ff:ff:ff:ff:ff:ff", ARPOp: 1,
		ARPSHA: peerMAC, ARPSPA: peerIP, ARPTHA: "00:00:00:00:00:00", ARPTPA: "172.16.0.101"}
	isMovedReply := func(s seen) bool { return s.IsARP && s.ARPOp == 2 && s.ARPSPA == "172.16.0.101" }
	skip1 := count(t, e.wire("gw1"))
	e.inject("gw1", moved)
	e.inject("gw2", moved)
	waitFor(t, e.wire("gw2"), "ARP reply for the SNAT IP from the new gateway gw2", 0, isMovedReply)
	requireNone(t, e.wire("gw1"), "the old gateway gw1 answers ARP for the SNAT IP", skip1, isMovedReply)

	// Drift: a NAT deleted behind our back comes back.
	uuid := strings.Fields(nbctl(t, e.l, "--bare", "--columns=_uuid", "find", "NAT", "external_ids:kubevirt-ovn/owner=router1", `logical_ip="10.10.0.0/24"`))
	require.Len(t, uuid, 1)
	start := time.Now()
	nbctl(t, e.l, "lr-nat-del", "kv-router1", "snat", "10.10.0.0/24")
	waitNB(t, "the deleted NAT restored", func() bool { return natIPs(t, e.l, "router1") == "172.16.0.101 172.16.0.101" })
	t.Logf("drift repaired in %s", time.Since(start))
	mac := func() string {
		return strings.TrimSpace(nbctl(t, e.l, "--bare", "--columns=mac", "find", "Static_MAC_Binding", "logical_port=kv-rtoe-router1"))
	}
	require.Equal(t, "00:00:00:00:ee:01", mac())
	nbctl(t, e.l, "static-mac-binding-del", "kv-rtoe-router1", "172.16.0.1")
	waitNB(t, "the deleted static MAC binding restored", func() bool { return mac() == "00:00:00:00:ee:01" })

	// Deleting the router removes its rows, then the finalizer lets it go.
	require.NoError(t, k.dyn.Resource(routerGVR).Delete(context.Background(), "router1", metav1.DeleteOptions{}))
	waitNB(t, "router1's rows gone", func() bool {
		return natIPs(t, e.l, "router1") == "" && !strings.Contains(nbctl(t, e.l, "show"), "kv-router1")
	})
	waitNB(t, "router1 gone from the API", func() bool { return k.router(t, "router1") == nil })
	assert.Greater(t, ctrl.metric("kubevirt_ovn_nb_transaction_duration_seconds_count"), 0.0)
}

// A router deleted while the controller is down is cleaned up when it comes
// back: the finalizer kept the object until then.
func TestControllerCleansUpRouterDeletedWhileDown(t *testing.T) {
	c := startCentral(t)
	k := startKubeAPI(t)
	args := []string{"--nb", c.NBTCP, "--kubeconfig", k.kubeconfig}
	ctrl := startController(t, "a", args...)
	ex := filepath.Join("..", "deploy", "examples")
	for _, f := range []string{"networks.yaml", "vmis.yaml", "router.yaml"} {
		k.apply(t, filepath.Join(ex, f))
	}
	waitNB(t, "router1's NAT in the NB", func() bool { return natIPs(t, c, "router1") == "172.16.0.100 172.16.0.100" })
	k.waitStatus(t, "router1", "finalizer added", func(u *unstructured.Unstructured) bool { return len(u.GetFinalizers()) == 1 })
	ctrl.stop()

	require.NoError(t, k.dyn.Resource(routerGVR).Delete(context.Background(), "router1", metav1.DeleteOptions{}))
	u := k.router(t, "router1")
	require.NotNil(t, u, "the finalizer keeps the object while kubevirt-ovn is down")
	assert.NotNil(t, u.GetDeletionTimestamp())
	assert.Equal(t, "172.16.0.100 172.16.0.100", natIPs(t, c, "router1"))

	startController(t, "a", args...)
	waitNB(t, "router1's rows removed after restart", func() bool { return natIPs(t, c, "router1") == "" })
	waitNB(t, "router1 gone from the API", func() bool { return k.router(t, "router1") == nil })
	assert.Contains(t, nbctl(t, c, "show"), "(kv-net-a)", "networks stay")
}

// Two replicas on one Lease: one writes, the other writes nothing; killed,
// the leader is replaced and the NB converges through the new one. The API
// server serves CRDs only: the Lease is the Lease-shaped test CRD, and
// client-go's real LeaseLock runs against it.
func TestLeaderElectionOneWriterAndTakeover(t *testing.T) {
	c := startCentral(t)
	k := startKubeAPI(t)
	args := []string{"--nb", c.NBTCP, "--kubeconfig", k.kubeconfig}
	a := startController(t, "a", args...)
	b := startController(t, "b", args...)
	ex := filepath.Join("..", "deploy", "examples")
	for _, f := range []string{"networks.yaml", "vmis.yaml", "router.yaml"} {
		k.apply(t, filepath.Join(ex, f))
	}
	waitNB(t, "router1's NAT in the NB", func() bool { return natIPs(t, c, "router1") == "172.16.0.100 172.16.0.100" })

	holder := func() string {
		l, err := k.dyn.Resource(leaseGVR).Namespace("kube-system").Get(context.Background(), "kubevirt-ovn", metav1.GetOptions{})
		if err != nil {
			return ""
		}
		h, _, _ := unstructured.NestedString(l.Object, "spec", "holderIdentity")
		return h
	}
	leader, standby := a, b
	if holder() == "b" {
		leader, standby = b, a
	}
	require.Equal(t, leader.name, holder())
	const txns = "kubevirt_ovn_nb_transaction_duration_seconds_count"
	assert.Greater(t, leader.metric(txns), 0.0, "the leader wrote")
	assert.Zero(t, standby.metric(txns), "the standby wrote nothing to the NB")
	waitNB(t, "the standby saw the leader", func() bool { return strings.Contains(standby.out.String(), "another replica leads") })
	assert.Zero(t, standby.metric(txns), "the standby still wrote nothing")

	start := time.Now()
	leader.kill()
	waitNB(t, "the standby takes the Lease", func() bool { return holder() == standby.name })
	t.Logf("takeover after %s (lease duration 4s)", time.Since(start))
	k.updateRouter(t, "router1", func(spec map[string]any) {
		spec["external"].(map[string]any)["ip"] = "172.16.0.102"
	})
	waitNB(t, "the new leader converges the edit", func() bool { return natIPs(t, c, "router1") == "172.16.0.102 172.16.0.102" })
	assert.Greater(t, standby.metric(txns), 0.0)
}

// `run --from-file`: manifests on disk, re-read when they change; a change
// that does not parse keeps the last good input.
func TestRunFromFileFollowsChanges(t *testing.T) {
	c := startCentral(t)
	ex := examples(t)
	p := startController(t, "files", "--nb", c.NBTCP, "--from-file", ex, "--file-poll", "100ms")
	waitNB(t, "router1's NAT in the NB", func() bool { return natIPs(t, c, "router1") == "172.16.0.100 172.16.0.100" })
	code, _ := p.get("/readyz")
	assert.Equal(t, http.StatusOK, code)

	edit(t, filepath.Join(ex, "router.yaml"), "ip: 172.16.0.100", "ip: 172.16.0.103")
	waitNB(t, "the edit is applied", func() bool { return natIPs(t, c, "router1") == "172.16.0.103 172.16.0.103" })

	require.NoError(t, os.WriteFile(filepath.Join(ex, "router.yaml"), []byte("kind: [unclosed\n"), 0o644))
	waitNB(t, "the broken file reported", func() bool { return strings.Contains(p.out.String(), "do not parse") })
	assert.Equal(t, "172.16.0.103 172.16.0.103", natIPs(t, c, "router1"), "a broken file deletes nothing")
}
