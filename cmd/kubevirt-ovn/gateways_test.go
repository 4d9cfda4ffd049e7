package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/kubevirt-ovn/kubevirt-ovn/nbmodel/sbmodel"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/nbtest"
)

// routersOnGW1 writes to dir the manifests of routers ra..rd, each with
// SNAT on physnet1, ra pinned to gw1 and the others pinned too when pinned.
func routersOnGW1(t *testing.T, dir string, pinned bool) {
	t.Helper()
	var b strings.Builder
	b.WriteString(`apiVersion: k8s.cni.cncf.io/v1
kind: NetworkAttachmentDefinition
metadata: {name: public, namespace: default, annotations: {network-config: '{"type": "FLAT", "physicalNetworkName": "physnet1", "cidr": "172.16.0.0/24", "gatewayIp": "172.16.0.1"}'}}
`)
	for i, r := range []string{"ra", "rb", "rc", "rd"} {
		gateway := ""
		if pinned || r == "ra" {
			gateway = "\n  gateway: gw1"
		}
		fmt.Fprintf(&b, `---
apiVersion: k8s.cni.cncf.io/v1
kind: NetworkAttachmentDefinition
metadata: {name: net-%[1]s, namespace: default, annotations: {network-config: '{"type": "GENEVE", "cidr": "10.%[2]d.0.0/24", "gatewayIp": "10.%[2]d.0.1"}'}}
---
apiVersion: kubevirt.io/v1
kind: VirtualRouter
metadata: {name: %[1]s}
spec:
  enableSnat: true
  internal: [net-%[1]s]
  external: {ip: 172.16.0.%[3]d, network: public}
  peerRouter: {ip: 172.16.0.1, mac: "00:00:00:00:ee:01"}%[4]s
`, r, 10+i, 10+i, gateway)
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "routers.yaml"), []byte(b.String()), 0o644))
}

// said is what a command said on stderr without the OVSDB client's log
// lines (libovsdb's in-process server turns on their every level).
func said(stderr string) string {
	var out strings.Builder
	for _, line := range strings.SplitAfter(stderr, "\n") {
		if !strings.Contains(line, `"level"=`) {
			out.WriteString(line)
		}
	}
	return out.String()
}

// status prints each router's order, SNAT IP and where its port is bound,
// and the routers per gateway chassis; rebalance prints its moves, writes
// nothing with --dry-run, and evens the primaries out without.
func TestStatusAndRebalance(t *testing.T) {
	gw := func(name string) *sbmodel.Chassis {
		return &sbmodel.Chassis{Name: name, Hostname: name, OtherConfig: map[string]string{"ovn-cms-options": "enable-chassis-as-gw", "ovn-bridge-mappings": "physnet1:br-ex"}}
	}
	nbSock, sbSock := nbtest.Serve(t), nbtest.ServeSB(t, gw("gw1"), gw("gw2"), &sbmodel.Chassis{Name: "hv1", Hostname: "hv1"})
	nb, sb := "unix:"+nbSock, "unix:"+sbSock
	dir := t.TempDir()
	sync := func() {
		t.Helper()
		r := cliBounded(t, "sync", "--nb", nb, "--sb", sb, "--from-file", dir)
		require.Equal(t, 0, r.code, r.stderr)
	}
	routersOnGW1(t, dir, true)
	sync()
	routersOnGW1(t, dir, false)
	sync() // sticky: every primary stays on gw1
	cr := func(r string) string { return "cr-" + translator.GatewayPortName(r) }
	nbtest.BindPorts(t, sbSock, "chassisredirect", map[string]string{cr("ra"): "gw1", cr("rb"): "gw2", cr("rc"): "gw2"})

	st := cliBounded(t, "status", "--nb", nb, "--sb", sb)
	require.Equal(t, 0, st.code, st.stderr)
	assert.Equal(t, `ROUTER  READY  REALIZED  SNAT IP      PRIMARY             FAILOVER  ACTIVE             ERROR  
ra      True   Unknown   172.16.0.10  gw1 (spec.gateway)  gw2       gw1                -      
rb      True   Unknown   172.16.0.11  gw1                 gw2       gw2 (failed over)  -      
rc      True   Unknown   172.16.0.12  gw1                 gw2       gw2 (failed over)  -      
rd      True   Unknown   172.16.0.13  gw1                 gw2       - (not bound)      -      

routers per gateway chassis (primary / active):
  gw1                  4 / 1   maps physnet1
  gw2                  0 / 2   maps physnet1
`, st.stdout)

	// The same for tools: -o json and -o yaml, one object.
	// The test NB has no NB_Global (no ovn-northd ran): Realized is
	// Unknown.
	fromNB := objectState{Ready: "True", Realized: "Unknown"}
	want := statusReport{
		Routers: []routerStatus{
			{Name: "ra", objectState: fromNB, SNATIP: "172.16.0.10", Primary: "gw1", Pinned: true, Failover: []string{"gw2"}, Active: "gw1"},
			{Name: "rb", objectState: fromNB, SNATIP: "172.16.0.11", Primary: "gw1", Failover: []string{"gw2"}, Active: "gw2", FailedOver: true},
			{Name: "rc", objectState: fromNB, SNATIP: "172.16.0.12", Primary: "gw1", Failover: []string{"gw2"}, Active: "gw2", FailedOver: true},
			{Name: "rd", objectState: fromNB, SNATIP: "172.16.0.13", Primary: "gw1", Failover: []string{"gw2"}},
		},
		GatewayChassis: []chassisStatus{{Name: "gw1", Primaries: 4, Active: 1, Physnets: []string{"physnet1"}}, {Name: "gw2", Active: 2, Physnets: []string{"physnet1"}}},
	}
	for _, format := range []string{"json", "yaml"} {
		out := cliBounded(t, "status", "--nb", nb, "--sb", sb, "-o", format)
		require.Equal(t, 0, out.code, out.stderr)
		var got statusReport
		require.NoError(t, yaml.UnmarshalStrict([]byte(out.stdout), &got), "%s:\n%s", format, out.stdout)
		assert.Equal(t, want, got, format)
	}
	assert.Contains(t, cliBounded(t, "status", "--nb", nb, "--sb", sb, "-o", "json").stdout, `"failedOver": true`)
	bad := cliBounded(t, "status", "--nb", nb, "--sb", sb, "--output", "xml")
	assert.Equal(t, exitUsage, bad.code)
	assert.Contains(t, bad.stderr, `--output "xml" is none of text, json, yaml`)

	dry := cliBounded(t, "rebalance", "--nb", nb, "--sb", sb, "--dry-run")
	require.Equal(t, 0, dry.code, dry.stderr)
	moves := "move rb: gw1 -> gw2 (gateway chassis now gw2, gw1)\nmove rc: gw1 -> gw2 (gateway chassis now gw2, gw1)\n"
	assert.Equal(t, "dry run: 2 moves, nothing is written\n"+moves, dry.stdout)
	assert.Empty(t, said(dry.stderr))

	r := cliBounded(t, "rebalance", "--nb", nb, "--sb", sb)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, moves+"2 routers moved\n", r.stdout)
	assert.Equal(t, "note: nudging the chassis after 2 gateway moves: reading NB_Global options: 0 rows; an old gateway may keep answering for a moved port until its ovn-controller recomputes\n", said(r.stderr))

	st = cliBounded(t, "status", "--nb", nb, "--sb", sb)
	assert.Contains(t, st.stdout, "  gw1                  2 / 1   maps physnet1\n  gw2                  2 / 2   maps physnet1\n")
	again := cliBounded(t, "rebalance", "--nb", nb, "--sb", sb)
	assert.Equal(t, 0, again.code)
	assert.Equal(t, "balanced: no router to move\n", again.stdout)
	assert.Empty(t, said(again.stderr))
}

// rebalance nudges the chassis (NB_Global options:bfd-mult) after its
// moves only on an OVN whose old gateways may keep a moved port's flows,
// as sync and run do (TestStatusAndRebalance: an unknown release, taken
// to have the bug, is nudged): on a fixed release it writes nothing but
// the Gateway_Chassis rows, and says nothing.
func TestRebalanceDoesNotNudgeAFixedRelease(t *testing.T) {
	gw := func(name string) *sbmodel.Chassis {
		return &sbmodel.Chassis{Name: name, Hostname: name, OtherConfig: map[string]string{"ovn-cms-options": "enable-chassis-as-gw", "ovn-bridge-mappings": "physnet1:br-ex"}}
	}
	nbSock, sbSock := nbtest.Serve(t), nbtest.ServeSB(t, gw("gw1"), gw("gw2"))
	nbtest.SetNorthdRelease(t, sbSock, "24.03.0-20.33.0-72.6")
	nb, sb := "unix:"+nbSock, "unix:"+sbSock
	dir := t.TempDir()
	routersOnGW1(t, dir, true)
	require.Equal(t, 0, cliBounded(t, "sync", "--nb", nb, "--sb", sb, "--from-file", dir).code)
	routersOnGW1(t, dir, false)
	require.Equal(t, 0, cliBounded(t, "sync", "--nb", nb, "--sb", sb, "--from-file", dir).code)
	r := cliBounded(t, "rebalance", "--nb", nb, "--sb", sb)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "move rb: gw1 -> gw2 (gateway chassis now gw2, gw1)\nmove rc: gw1 -> gw2 (gateway chassis now gw2, gw1)\n2 routers moved\n", r.stdout)
	// The test NB has no NB_Global: a nudge would say it could not read
	// it (after waiting for the moved ports' bindings).
	assert.Empty(t, said(r.stderr), "a fixed release: no nudge")
}

// TestStatusSaysMigrationsAtRisk: on an OVN release with the
// monitor-condition bug, status names the chassis whose ovn-controller
// does not monitor all of the SB, and what to do; on a fixed one, nothing.
func TestStatusSaysMigrationsAtRisk(t *testing.T) {
	for _, tc := range []struct{ release, want string }{
		{"25.03.0-21.1.0-72.8", `
OVN 25.03.0 (ovn-northd): a live migration's target whose interface was plugged before its dual
binding may never see it, and the VM is unreachable until the migration completes (fixed in
25.03.2). Set external_ids:ovn-monitor-all=true in the Open_vSwitch table of these chassis, or
upgrade OVN: hv1, hv3
`},
		{"25.03.2-21.1.0-72.8", ""},
	} {
		t.Run(tc.release, func(t *testing.T) {
			nbSock := nbtest.Serve(t)
			sbSock := nbtest.ServeSB(t, &sbmodel.Chassis{Name: "hv1", Hostname: "hv1"},
				&sbmodel.Chassis{Name: "hv2", Hostname: "hv2", OtherConfig: map[string]string{"ovn-monitor-all": "true"}},
				&sbmodel.Chassis{Name: "hv3", Hostname: "hv3", OtherConfig: map[string]string{"ovn-monitor-all": "false"}})
			nbtest.SetNorthdRelease(t, sbSock, tc.release)
			st := cliBounded(t, "status", "--nb", "unix:"+nbSock, "--sb", "unix:"+sbSock)
			require.Equal(t, 0, st.code, st.stderr)
			if tc.want == "" {
				assert.NotContains(t, st.stdout, "ovn-monitor-all")
				return
			}
			assert.True(t, strings.HasSuffix(st.stdout, tc.want), st.stdout)
		})
	}
}

// TestStatusPrintsUpstreamRoutes: status lists, for a router whose
// internal IPv6 is routed, each internal ipv6Cidr via its external IPv6
// address; a router with enableIpv6Snat (NAT66) needs no route and is not
// listed; the SNAT IP column stays the IPv4 SNAT IP.
func TestStatusPrintsUpstreamRoutes(t *testing.T) {
	gw := &sbmodel.Chassis{Name: "gw1", Hostname: "gw1", OtherConfig: map[string]string{"ovn-cms-options": "enable-chassis-as-gw", "ovn-bridge-mappings": "physnet1:br-ex"}}
	nbSock, sbSock := nbtest.Serve(t), nbtest.ServeSB(t, gw)
	nb, sb := "unix:"+nbSock, "unix:"+sbSock
	dir := t.TempDir()
	var b strings.Builder
	b.WriteString(`apiVersion: k8s.cni.cncf.io/v1
kind: NetworkAttachmentDefinition
metadata: {name: public, namespace: default, annotations: {network-config: '{"type": "FLAT", "physicalNetworkName": "physnet1", "cidr": "172.16.0.0/24", "gatewayIp": "172.16.0.1", "ipv6Cidr": "2001:db8:ff::/64"}'}}
`)
	for i, r := range []string{"routed", "natted"} {
		snat6 := ""
		if r == "natted" {
			snat6 = "\n  enableIpv6Snat: true"
		}
		fmt.Fprintf(&b, `---
apiVersion: k8s.cni.cncf.io/v1
kind: NetworkAttachmentDefinition
metadata: {name: net-%[1]s, namespace: default, annotations: {network-config: '{"type": "GENEVE", "cidr": "10.%[2]d.0.0/24", "gatewayIp": "10.%[2]d.0.1", "ipv6Cidr": "fd00:%[2]d::/64", "ipv6GatewayIp": "fd00:%[2]d::1"}'}}
---
apiVersion: kubevirt.io/v1
kind: VirtualRouter
metadata: {name: %[1]s}
spec:
  enableSnat: true%[3]s
  internal: [net-%[1]s]
  external: {ip: 172.16.0.%[2]d, ipv6: "2001:db8:ff::%[2]d", network: public}
  gateway: gw1
`, r, 10+i, snat6)
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "routers.yaml"), []byte(b.String()), 0o644))
	r := cliBounded(t, "sync", "--nb", nb, "--sb", sb, "--from-file", dir)
	require.Equal(t, 0, r.code, r.stderr)

	st := cliBounded(t, "status", "--nb", nb, "--sb", sb)
	require.Equal(t, 0, st.code, st.stderr)
	assert.Contains(t, st.stdout, "natted  True   Unknown   172.16.0.11  gw1 (spec.gateway)")
	assert.Contains(t, st.stdout, "routed  True   Unknown   172.16.0.10  gw1 (spec.gateway)")
	assert.Contains(t, st.stdout, "IPv6 routed (no NAT66): routes the upstream router needs:\n  routed               fd00:10::/64 via 2001:db8:ff::10\n\n")
	assert.NotContains(t, st.stdout, "fd00:11::/64 via")
}
