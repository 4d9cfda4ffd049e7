package kube

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/tools/record"

	"github.com/kubevirt-ovn/kubevirt-ovn/translator"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/controller"
)

func object(kind, name string, spec map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kubevirt.io/v1", "kind": kind,
		"metadata": map[string]any{"name": name, "generation": int64(4)}, "spec": spec,
	}}
}

func sgObject(name, id string, rules ...any) *unstructured.Unstructured {
	spec := map[string]any{"id": id, "name": "web"}
	if len(rules) > 0 {
		spec["rules"] = rules
	}
	return object("SecurityGroup", name, spec)
}

func ruleObject(name, group string, min, max any) *unstructured.Unstructured {
	return object("SecurityGroupRule", name, map[string]any{"id": name, "securityGroupId": group,
		"direction": "ingress", "etherType": "IPv4", "protocol": "tcp", "portRangeMin": min, "portRangeMax": max})
}

// vmiObject is a VMI on net-a, bound to groups by its own annotation
// ("" none).
func vmiObject(name, groups string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
		"metadata": map[string]any{"name": name, "namespace": "default"},
		"spec":     map[string]any{"networks": []any{map[string]any{"name": "eth1", "multus": map[string]any{"networkName": "net-a"}}}},
		"status": map[string]any{"nodeName": "hv1", "interfaces": []any{
			map[string]any{"name": "eth1", "mac": "50:54:00:00:00:05", "ipAddress": "10.10.0.5"}}},
	}}
	if groups != "" {
		u.SetAnnotations(map[string]string{"securityGroups": groups})
	}
	return u
}

// vmObject is a VirtualMachine whose template binds groups (nil: no
// annotation), with a template spec and status the informer drops.
func vmObject(name string, groups *string) *unstructured.Unstructured {
	tmpl := map[string]any{"spec": map[string]any{"domain": map[string]any{"devices": map[string]any{}}}}
	if groups != nil {
		tmpl["metadata"] = map[string]any{"annotations": map[string]any{"securityGroups": *groups}}
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
		"metadata": map[string]any{"name": name, "namespace": "default"},
		"spec":     map[string]any{"running": true, "template": tmpl},
		"status":   map[string]any{"printableStatus": "Running"},
	}}
}

// units records what the source enqueues.
type units struct {
	mu  sync.Mutex
	got [][]translator.Unit
}

func (u *units) enqueue(us []translator.Unit) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.got = append(u.got, us)
}

// since are the units enqueued after the first n calls, and the number of
// calls.
func (u *units) since(n int) ([]translator.Unit, int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	var out []translator.Unit
	for _, us := range u.got[n:] {
		out = append(out, us...)
	}
	return out, len(u.got)
}

// startRecording starts a source on objs (NADs among them created through
// their resource: the fake client's tracker would guess it wrong).
func startRecording(t *testing.T, objs ...runtime.Object) (*Source, *dynamicfake.FakeDynamicClient, *record.FakeRecorder, *units) {
	t.Helper()
	var nads []*unstructured.Unstructured
	objs = slices.DeleteFunc(objs, func(o runtime.Object) bool {
		u, ok := o.(*unstructured.Unstructured)
		if ok && u.GetKind() == "NetworkAttachmentDefinition" {
			nads = append(nads, u)
		}
		return ok && u.GetKind() == "NetworkAttachmentDefinition"
	})
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		RouterGVR: "VirtualRouterList", NADGVR: "NetworkAttachmentDefinitionList", VMIGVR: "VirtualMachineInstanceList", FloatingIPGVR: "FloatingIpList",
		SecurityGroupGVR: "SecurityGroupList", SecurityGroupRuleGVR: "SecurityGroupRuleList", LoadBalancerGVR: "LoadBalancerList", VMGVR: "VirtualMachineList", VMIMGVR: "VirtualMachineInstanceMigrationList", PodGVR: "PodList",
	}, objs...)
	for _, n := range nads {
		_, err := client.Resource(NADGVR).Namespace(n.GetNamespace()).Create(context.Background(), n, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	rec := record.NewFakeRecorder(10)
	s := NewSource(client, 0, rec, logr.Discard())
	got := &units{}
	require.NoError(t, s.Notify(got.enqueue))
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	s.Start(ctx)
	require.Eventually(t, s.HasSynced, settle, 10*time.Millisecond)
	return s, client, rec, got
}

var sgWeb = translator.Unit{Kind: translator.KindSecurityGroup, Name: "sg-web"}

// Security groups and rules as objects feed the input as manifests do:
// embedded rules and rule objects, ports as numbers or strings; a rule
// that does not read fails its group's unit (rows kept) naming the rule.
func TestSecurityGroupsRead(t *testing.T) {
	embedded := map[string]any{"id": "ssh", "direction": "ingress", "protocol": int64(6), "portRangeMin": int64(22), "portRangeMax": "22"}
	s, client, _, got := startRecording(t, sgObject("sg-web", "sg-web", embedded), ruleObject("http", "sg-web", int64(80), "80"))
	acls := func() []string {
		up := s.Input().Plan(sgWeb, "test", nil)
		require.Empty(t, up.Errs)
		require.NotNil(t, up.SecurityGroup)
		assert.Equal(t, int64(4), up.Generation)
		var out []string
		for _, a := range up.SecurityGroup.ACLs {
			out = append(out, a.ExternalIDs[translator.KeySecurityACL]+" "+a.Match)
		}
		return out
	}
	pg := translator.PortGroupName("sg-web")
	assert.Subset(t, acls(), []string{
		"rule/http outport == @" + pg + " && ip4 && tcp && tcp.dst == 80",
		"rule/ssh outport == @" + pg + " && ip4 && tcp && tcp.dst == 22", // protocol 6, ports number and string
	})

	// Edited: its group is affected, and its ACL now says 8080.
	_, n := got.since(0)
	_, err := client.Resource(SecurityGroupRuleGVR).Update(context.Background(), ruleObject("http", "sg-web", int64(8080), int64(8080)), metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		us, _ := got.since(n)
		return slices.Contains(us, sgWeb)
	}, settle, 10*time.Millisecond)
	assert.Contains(t, acls(), "rule/http outport == @"+pg+" && ip4 && tcp && tcp.dst == 8080")

	// A port that is no number: the group fails, naming the rule.
	_, err = client.Resource(SecurityGroupRuleGVR).Update(context.Background(), ruleObject("http", "sg-web", "eighty", int64(80)), metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		return len(s.Input().Plan(sgWeb, "test", nil).Errs) > 0
	}, settle, 10*time.Millisecond)
	up := s.Input().Plan(sgWeb, "test", nil)
	require.Len(t, up.Errs, 1)
	assert.Equal(t, `SecurityGroupRule http: spec.portRangeMin "eighty" is not a number`, up.Errs[0].Error())
}

func ptr(s string) *string { return &s }

// The VirtualMachine's template annotation binds its VMI's ports, also
// when it changes while the VM runs (the VMI untouched); a change of the
// VM that is not the binding sets nothing; without the VM, the VMI's own
// annotation binds. The informer keeps only the binding of a VM.
func TestVirtualMachineBindsSecurityGroups(t *testing.T) {
	netA := nad("net-a", map[string]any{"network-config": `{"type": "GENEVE", "cidr": "10.10.0.0/24", "gatewayIp": "10.10.0.1"}`})
	netA.Object["spec"] = map[string]any{"config": `{"cniVersion": "0.3.1", "type": "kubevirt-ovn", "name": "net-a"}`}
	s, client, _, got := startRecording(t, netA, vmiObject("vm-a", `["sg-vmi"]`), vmObject("vm-a", ptr(`["sg-web"]`)),
		sgObject("sg-web", "sg-web"), sgObject("sg-db", "sg-db"), sgObject("sg-vmi", "sg-vmi"))
	// groups are the groups vm-a's port is in.
	port := translator.VMPortName("net-a", "default", "vm-a", "eth1")
	groups := func() []string {
		var out []string
		for _, id := range []string{"sg-db", "sg-vmi", "sg-web"} {
			up := s.Input().Plan(translator.Unit{Kind: translator.KindSecurityGroup, Name: id}, "test", nil)
			require.NotNil(t, up.SecurityGroup, id)
			if slices.Contains(up.SecurityGroup.Ports, port) {
				out = append(out, id)
			}
		}
		return out
	}
	assert.Equal(t, []string{"sg-web"}, groups(), "the VM's template, not the VMI's annotation")
	obj, ok, err := s.vms.GetStore().GetByKey("default/vm-a")
	require.NoError(t, err)
	require.True(t, ok)
	_, hasSpec, _ := unstructured.NestedMap(obj.(*unstructured.Unstructured).Object, "spec", "template", "spec")
	assert.False(t, hasSpec, "the informer keeps only the binding")
	assert.Nil(t, obj.(*unstructured.Unstructured).Object["status"])

	vms := client.Resource(VMGVR).Namespace("default")
	update := func(vm *unstructured.Unstructured) []translator.Unit {
		_, n := got.since(0)
		_, err := vms.Update(context.Background(), vm, metav1.UpdateOptions{})
		require.NoError(t, err)
		require.Eventually(t, func() bool {
			_, m := got.since(0)
			return m > n
		}, settle, 10*time.Millisecond)
		us, _ := got.since(n)
		return us
	}
	sgDB := translator.Unit{Kind: translator.KindSecurityGroup, Name: "sg-db"}
	// Live: the groups left and joined are re-planned, and no other
	// group (the VMI's network too, as for any change of a VM
	// interface).
	netUnit := translator.Unit{Kind: translator.KindNetwork, Name: "net-a"}
	assert.ElementsMatch(t, []translator.Unit{sgWeb, sgDB, netUnit}, update(vmObject("vm-a", ptr(`["sg-db"]`))))
	assert.Equal(t, []string{"sg-db"}, groups())
	// Unbound on the VM: no group, whatever the VMI says.
	assert.ElementsMatch(t, []translator.Unit{sgDB, netUnit}, update(vmObject("vm-a", nil)))
	assert.Empty(t, groups())

	// Not the binding: nothing is set (a VM's status changes often).
	_, n := got.since(0)
	vm := vmObject("vm-a", nil)
	vm.Object["status"] = map[string]any{"printableStatus": "Stopping"}
	_, err = vms.Update(context.Background(), vm, metav1.UpdateOptions{})
	require.NoError(t, err)
	// A VMI event after it, to know the VM's was handled: the handlers
	// of one informer run in order, so an ordering fence is another
	// object's event on the same informer.
	_, err = vms.Create(context.Background(), vmObject("vm-other", nil), metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		_, m := got.since(0)
		return m > n
	}, settle, 10*time.Millisecond)
	_, m := got.since(n)
	assert.Equal(t, n+1, m, "only vm-other's add set anything")

	// Without the VM, the VMI's annotation binds.
	_, n = got.since(0)
	require.NoError(t, vms.Delete(context.Background(), "vm-a", metav1.DeleteOptions{}))
	require.Eventually(t, func() bool { return slices.Equal(groups(), []string{"sg-vmi"}) }, settle, 10*time.Millisecond)
	us, _ := got.since(n)
	assert.Contains(t, us, translator.Unit{Kind: translator.KindSecurityGroup, Name: "sg-vmi"})
}

func readyOfObject(t *testing.T, c *dynamicfake.FakeDynamicClient, gvr schema.GroupVersionResource, name string) (map[string]any, map[string]any) {
	t.Helper()
	u, err := c.Resource(gvr).Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(t, err)
	st, _, _ := unstructured.NestedMap(u.Object, "status")
	conds, _, _ := unstructured.NestedSlice(st, "conditions")
	if len(conds) == 0 {
		return st, nil
	}
	return st, conds[0].(map[string]any)
}

// waitStatus waits until the informer's copy of name has a status (the
// next write compares against it).
func waitCached(t *testing.T, s *Source, store interface {
	GetByKey(string) (any, bool, error)
}, name, message string) {
	t.Helper()
	require.Eventually(t, func() bool {
		o, ok, _ := store.GetByKey(name)
		if !ok {
			return false
		}
		msg, _ := readyOf(asMap(o.(*unstructured.Unstructured).Object["status"]))
		return msg == message
	}, settle, 10*time.Millisecond)
}

// A group's status says Ready, its rules' errors (each named) or its own;
// a rule's its own error, or its group's state; a Warning event when one
// stops being Ready; an unchanged status is not written again.
func TestReportSecurityGroup(t *testing.T) {
	s, client, rec, _ := startRecording(t, sgObject("sg-web", "sg-web"), ruleObject("http", "sg-web", int64(80), int64(80)),
		ruleObject("bad", "sg-web", int64(90), int64(80)), ruleObject("orphan", "sg-none", int64(1), int64(2)))
	ctx := context.Background()
	bad := &translator.InputError{Kind: translator.ObjSGRule, Object: "bad", Field: "spec.portRangeMax", Msg: "80 is below spec.portRangeMin 90"}
	require.NoError(t, s.ReportSecurityGroup(ctx, controller.SecurityGroupStatus{ID: "sg-web", Generation: 4, RuleErrors: []error{bad}}))

	st, ready := readyOfObject(t, client, SecurityGroupGVR, "sg-web")
	assert.Equal(t, int64(4), st["observedGeneration"])
	assert.Equal(t, "False", ready["status"])
	assert.Equal(t, "InvalidRule", ready["reason"])
	assert.Equal(t, "rules left as they are: "+bad.Error(), ready["message"])
	_, ready = readyOfObject(t, client, SecurityGroupRuleGVR, "bad")
	assert.Equal(t, "False", ready["status"])
	assert.Equal(t, "InvalidSpec", ready["reason"])
	assert.Equal(t, bad.Error(), ready["message"])
	_, ready = readyOfObject(t, client, SecurityGroupRuleGVR, "http")
	assert.Equal(t, "True", ready["status"])
	// Another group's rule is not this group's to report.
	st, _ = readyOfObject(t, client, SecurityGroupRuleGVR, "orphan")
	assert.Nil(t, st)
	events := []string{<-rec.Events, <-rec.Events}
	assert.ElementsMatch(t, []string{"Warning InvalidRule rules left as they are: " + bad.Error(), "Warning InvalidSpec " + bad.Error()}, events)

	// A rule of a group nobody declares says so.
	require.NoError(t, s.ReportSecurityGroup(ctx, controller.SecurityGroupStatus{ID: "sg-none"}))
	_, ready = readyOfObject(t, client, SecurityGroupRuleGVR, "orphan")
	assert.Equal(t, "GroupNotDeclared", ready["reason"])
	assert.Equal(t, "no SecurityGroup has spec.id sg-none: the rule plans nothing", ready["message"])
	<-rec.Events

	// The group's own error: the group names it, its rules point at it.
	waitCached(t, s, s.sgs.GetStore(), "sg-web", "rules left as they are: "+bad.Error())
	waitCached(t, s, s.sgRules.GetStore(), "http", "its ACL is committed to the OVN Northbound database")
	dup := &translator.InputError{Kind: translator.ObjSecurityGroup, Object: "sg-web", Field: "spec.id", Msg: "sg-web is declared by 2 SecurityGroups (sg-web, sg-web2); a spec.id names one group"}
	require.NoError(t, s.ReportSecurityGroup(ctx, controller.SecurityGroupStatus{ID: "sg-web", Generation: 4, Errs: []error{dup}}))
	_, ready = readyOfObject(t, client, SecurityGroupGVR, "sg-web")
	assert.Equal(t, "InvalidSpec", ready["reason"])
	assert.Equal(t, dup.Error(), ready["message"])
	_, ready = readyOfObject(t, client, SecurityGroupRuleGVR, "http")
	assert.Equal(t, "GroupNotReady", ready["reason"])
	assert.Equal(t, "its SecurityGroup sg-web is left as it is: "+dup.Error(), ready["message"])

	// Ready, and then the same again writes nothing.
	for _, name := range []string{"http", "bad"} {
		waitCached(t, s, s.sgRules.GetStore(), name, "its SecurityGroup sg-web is left as it is: "+dup.Error())
	}
	waitCached(t, s, s.sgs.GetStore(), "sg-web", dup.Error())
	ok := controller.SecurityGroupStatus{ID: "sg-web", Generation: 4}
	require.NoError(t, s.ReportSecurityGroup(ctx, ok))
	for _, r := range []struct {
		gvr  schema.GroupVersionResource
		name string
	}{{SecurityGroupGVR, "sg-web"}, {SecurityGroupRuleGVR, "http"}, {SecurityGroupRuleGVR, "bad"}} {
		_, ready = readyOfObject(t, client, r.gvr, r.name)
		assert.Equal(t, "True", ready["status"], r.name)
	}
	waitCached(t, s, s.sgs.GetStore(), "sg-web", "its Port_Group and ACLs are committed to the OVN Northbound database")
	for _, name := range []string{"http", "bad"} {
		waitCached(t, s, s.sgRules.GetStore(), name, "its ACL is committed to the OVN Northbound database")
	}
	for len(rec.Events) > 0 {
		<-rec.Events
	}
	before := len(client.Actions())
	require.NoError(t, s.ReportSecurityGroup(ctx, ok))
	assert.Len(t, client.Actions(), before, "an unchanged status is not written")
	assert.Empty(t, rec.Events)

	// A failed commit.
	require.NoError(t, s.ReportSecurityGroup(ctx, controller.SecurityGroupStatus{ID: "sg-web", Generation: 4, Err: errors.New("NB gone")}))
	_, ready = readyOfObject(t, client, SecurityGroupGVR, "sg-web")
	assert.Equal(t, "CommitFailed", ready["reason"])
	assert.Equal(t, "its rows are not committed: NB gone", ready["message"])
}

// A load balancer's status: Ready with its router and floating IPs, or
// its named error with a Warning event.
func TestReportLoadBalancers(t *testing.T) {
	lb := object("LoadBalancer", "lb-web", map[string]any{"name": "lb-web", "networkId": "net-a", "vip": "10.10.0.100",
		"members": []any{"10.10.0.5"}, "rules": []any{map[string]any{"protocol": "tcp", "portRangeMin": int64(80), "portRangeMax": "80"}},
		"healthCheck": map[string]any{"sourceIp": "10.10.0.250", "interval": "7"}})
	s, client, rec, _ := startRecording(t, lb)
	ctx := context.Background()
	got := s.Input().Plan(translator.Unit{Kind: translator.KindRouter, Name: "r1"}, "test", nil)
	assert.Empty(t, got.LoadBalancers, "no router holds net-a")

	require.NoError(t, s.ReportLoadBalancers(ctx, []translator.LoadBalancerStatus{{Name: "lb-web", Generation: 4, Ready: true, Router: "r1", FloatingIPs: []string{"172.16.0.60"}}, {Name: "gone", Ready: true}}))
	st, ready := readyOfObject(t, client, LoadBalancerGVR, "lb-web")
	assert.Equal(t, "True", ready["status"])
	assert.Equal(t, "r1", st["router"])
	assert.Equal(t, []any{"172.16.0.60"}, st["floatingIps"])

	waitCached(t, s, s.lbs.GetStore(), "lb-web", "its Load_Balancer rows are committed to the OVN Northbound database")
	before := len(client.Actions())
	require.NoError(t, s.ReportLoadBalancers(ctx, []translator.LoadBalancerStatus{{Name: "lb-web", Generation: 4, Ready: true, Router: "r1", FloatingIPs: []string{"172.16.0.60"}}}))
	assert.Len(t, client.Actions(), before, "an unchanged status is not written")

	bad := &translator.InputError{Kind: translator.ObjLoadBalancer, Object: "lb-web", Field: "spec.members[0]", Msg: "10.10.0.7 is no VM port on network net-a"}
	require.NoError(t, s.ReportLoadBalancers(ctx, []translator.LoadBalancerStatus{{Name: "lb-web", Generation: 4, Router: "r1", Reason: bad.Error(), Err: bad}}))
	st, ready = readyOfObject(t, client, LoadBalancerGVR, "lb-web")
	assert.Equal(t, "False", ready["status"])
	assert.Equal(t, "InvalidSpec", ready["reason"])
	assert.Equal(t, bad.Error(), ready["message"])
	assert.Nil(t, st["floatingIps"])
	assert.Equal(t, "Warning InvalidSpec "+bad.Error(), <-rec.Events)

	// On a network no router has: Ready, no router, and why it is
	// reachable from inside only.
	why := "no router has network net-a as an internal network: its VIP is reachable from inside the network only"
	require.NoError(t, s.ReportLoadBalancers(ctx, []translator.LoadBalancerStatus{{Name: "lb-web", Generation: 4, Ready: true, Reason: why}}))
	st, ready = readyOfObject(t, client, LoadBalancerGVR, "lb-web")
	assert.Equal(t, "True", ready["status"])
	assert.Equal(t, "its Load_Balancer rows are committed to the OVN Northbound database; "+why, ready["message"])
	assert.Nil(t, st["router"])

	// The interconnect allocator commits nothing: it says planned.
	s.SetAllocator()
	require.NoError(t, s.ReportLoadBalancers(ctx, []translator.LoadBalancerStatus{{Name: "lb-web", Generation: 4, Ready: true, Router: "r1"}}))
	_, ready = readyOfObject(t, client, LoadBalancerGVR, "lb-web")
	assert.Equal(t, "Planned", ready["reason"])
	assert.Contains(t, ready["message"], "the kubevirt-ovn agents write its rows")
}
