package translator

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubevirt-ovn/kubevirt-ovn/nbmodel"
)

// fipSnapshot has router r1 (SNAT, on net-a and net-b, peer 172.16.0.254)
// and router r2 (SNAT IP 172.16.0.101), and VMs on net-a and net-b.
func fipSnapshot() *Snapshot {
	netC := Network{Name: "net-c", Namespace: "default", Type: NetworkGeneve, CIDR: "10.30.0.0/24", GatewayIP: "10.30.0.1"}
	return &Snapshot{
		Networks: []Network{publicNet(), netA(), netB(), netC},
		Routers: []Router{
			{Name: "r1", MAC: "fa:16:3e:00:00:01", EnableSNAT: true, Internal: []string{"net-a", "net-b"},
				External: &External{IP: "172.16.0.100", Network: "public"}, PeerRouter: &PeerRouter{IP: "172.16.0.254"}, Gateway: "gw1", Created: t0},
			{Name: "r2", MAC: "fa:16:3e:00:00:02", EnableSNAT: true, Internal: []string{"net-c"},
				External: &External{IP: "172.16.0.101", Network: "public"}, Gateway: "gw1", Created: t0},
		},
		VMs: []VMInterface{
			{Namespace: "default", VMI: "vm-a", Interface: "eth1", Network: "net-a", NetworkNamespace: "default", MAC: "50:54:00:00:00:05", IP: "10.10.0.5", Node: "hv1"},
			{Namespace: "default", VMI: "vm-b", Interface: "eth1", Network: "net-b", NetworkNamespace: "default", MAC: "50:54:00:00:00:06", IP: "10.20.0.6", Node: "hv2"},
		},
	}
}

// withVMX adds VMI vm-x in namespaces default and other, with one address
// on net-a (the network gives it to default's).
func withVMX(s *Snapshot) {
	s.VMs = append(s.VMs,
		VMInterface{Namespace: "default", VMI: "vm-x", Interface: "eth1", Network: "net-a", NetworkNamespace: "default", MAC: "50:54:00:00:00:09", IP: "10.10.0.9", Node: "hv1"},
		VMInterface{Namespace: "other", VMI: "vm-x", Interface: "eth1", Network: "net-a", NetworkNamespace: "default", MAC: "50:54:00:00:00:0a", IP: "10.10.0.9", Node: "hv2"})
}

// fip is floating IP name of r1 on public with floatingIp ip.
func fip(name, ip, fixed, vm string) FloatingIP {
	return FloatingIP{Name: name, ID: name, Router: "r1", Network: "public", IP: ip, FixedIP: fixed, VMName: vm, Created: t0}
}

func fipIDs(router, id string) map[string]string {
	ids := routerIDs(router)
	ids["kubevirt-ovn/floating-ip"] = id
	return ids
}

func dnat(router, id, ip, fixed string) *nbmodel.NAT {
	return &nbmodel.NAT{Type: "dnat_and_snat", ExternalIP: ip, LogicalIP: fixed, ExternalIDs: fipIDs(router, id)}
}

func dnats(rp *RouterPlan) []*nbmodel.NAT {
	var out []*nbmodel.NAT
	for _, n := range rp.NATs {
		if n.Type == nbmodel.NATTypeDNATAndSNAT {
			out = append(out, n)
		}
	}
	return out
}

func TestFloatingIPs(t *testing.T) {
	ready := func(name, port string) FloatingIPStatus {
		return FloatingIPStatus{Name: name, ID: name, Ready: true, Port: port, Gateway: "gw1"}
	}
	notReady := func(name, reason string) FloatingIPStatus {
		return FloatingIPStatus{Name: name, ID: name, Reason: reason}
	}
	const portA, portB = "kv-net-a_default_vm-a_eth1", "kv-net-b_default_vm-b_eth1"
	tests := []struct {
		name  string
		fips  []FloatingIP
		edit  func(s *Snapshot)
		want  []FloatingIPStatus
		nats  []*nbmodel.NAT
		noR1  bool // r1 is not planned
		noErr bool
	}{
		{
			name:  "bound by fixed IP",
			fips:  []FloatingIP{fip("fip-1", "172.16.0.50", "10.10.0.5", "")},
			want:  []FloatingIPStatus{ready("fip-1", portA)},
			nats:  []*nbmodel.NAT{dnat("r1", "fip-1", "172.16.0.50", "10.10.0.5")},
			noErr: true,
		},
		{
			name:  "bound by fixed IP and vmName, with or without namespace",
			fips:  []FloatingIP{fip("fip-1", "172.16.0.50", "10.10.0.5", "vm-a"), fip("fip-2", "172.16.0.51", "10.20.0.6", "default/vm-b")},
			want:  []FloatingIPStatus{ready("fip-1", portA), ready("fip-2", portB)},
			nats:  []*nbmodel.NAT{dnat("r1", "fip-1", "172.16.0.50", "10.10.0.5"), dnat("r1", "fip-2", "172.16.0.51", "10.20.0.6")},
			noErr: true,
		},
		{
			name:  "not associated: no row",
			fips:  []FloatingIP{fip("fip-1", "172.16.0.50", "", "")},
			want:  []FloatingIPStatus{notReady("fip-1", "not associated: no spec.fixedIp")},
			noErr: true,
		},
		{
			name: "VM not there yet: waits, no row",
			fips: []FloatingIP{fip("fip-1", "172.16.0.50", "10.10.0.77", ""), fip("fip-2", "172.16.0.51", "10.10.0.5", "vm-z"),
				fip("fip-3", "172.16.0.52", "10.20.0.6", "other/vm-b")},
			want: []FloatingIPStatus{
				notReady("fip-1", "waiting for a VM with ip 10.10.0.77 on network net-a"),
				notReady("fip-2", "waiting for VM vm-z with ip 10.10.0.5 on network net-a"),
				notReady("fip-3", "waiting for VM other/vm-b with ip 10.20.0.6 on network net-b"),
			},
			noErr: true,
		},
		{
			name: "outside the external network",
			fips: []FloatingIP{fip("fip-1", "198.51.100.9", "10.10.0.5", "")},
			want: []FloatingIPStatus{notReady("fip-1", "FloatingIp fip-1: spec.floatingIp 198.51.100.9 is outside network public (172.16.0.0/24)")},
		},
		{
			name: "not the router's external network",
			fips: []FloatingIP{{Name: "fip-1", ID: "fip-1", Router: "r1", Network: "net-a", IP: "172.16.0.50", FixedIP: "10.10.0.5"}},
			want: []FloatingIPStatus{notReady("fip-1", "FloatingIp fip-1: spec.networkName net-a is not the external network of VirtualRouter r1 (public)")},
		},
		{
			name: "required fields",
			fips: []FloatingIP{{Name: "fip-1", Router: "r1", Network: "public", IP: "172.16.0.50"}, {Name: "fip-2", ID: "fip-2", Router: "r1", IP: "172.16.0.50"},
				{Name: "fip-3", ID: "fip-3", Router: "r1", Network: "public"}, {Name: "fip-4", ID: "fip-4", Router: "r1", Network: "public", IP: "172.16.0.500"}},
			want: []FloatingIPStatus{
				{Name: "fip-1", Reason: "FloatingIp fip-1: spec.id is required"},
				notReady("fip-2", "FloatingIp fip-2: spec.networkName is required"),
				notReady("fip-3", "FloatingIp fip-3: spec.floatingIp is required"),
				notReady("fip-4", `FloatingIp fip-4: spec.floatingIp "172.16.0.500" is not an IP address`),
			},
		},
		{
			name: "another address's owner: SNAT IPs, peer, gateway",
			fips: []FloatingIP{fip("fip-1", "172.16.0.100", "10.10.0.5", ""), fip("fip-2", "172.16.0.101", "10.10.0.5", ""),
				fip("fip-3", "172.16.0.254", "10.10.0.5", ""), fip("fip-4", "172.16.0.1", "10.10.0.5", "")},
			want: []FloatingIPStatus{
				notReady("fip-1", "FloatingIp fip-1: spec.floatingIp 172.16.0.100 is the SNAT IP of VirtualRouter r1"),
				notReady("fip-2", "FloatingIp fip-2: spec.floatingIp 172.16.0.101 is the SNAT IP of VirtualRouter r2"),
				notReady("fip-3", "FloatingIp fip-3: spec.floatingIp 172.16.0.254 is the peerRouter IP of VirtualRouter r1"),
				notReady("fip-4", "FloatingIp fip-4: spec.floatingIp 172.16.0.1 is the gatewayIp of network public"),
			},
		},
		{
			name: "one address, two floating IPs: the older keeps it, also on another router",
			fips: []FloatingIP{
				{Name: "fip-new", ID: "fip-new", Router: "r1", Network: "public", IP: "172.16.0.50", FixedIP: "10.10.0.5", Created: t0.Add(time.Hour)},
				{Name: "fip-old", ID: "fip-old", Router: "r2", Network: "public", IP: "172.16.0.50", Created: t0},
			},
			want: []FloatingIPStatus{notReady("fip-new", "FloatingIp fip-new: spec.floatingIp 172.16.0.50 is already the floating IP of FloatingIp fip-old")},
		},
		{
			name: "one floating IP per fixed IP: the older keeps it",
			fips: []FloatingIP{fip("fip-b", "172.16.0.51", "10.10.0.5", ""), fip("fip-a", "172.16.0.50", "10.10.0.5", "")},
			want: []FloatingIPStatus{
				ready("fip-a", portA),
				notReady("fip-b", "FloatingIp fip-b: spec.fixedIp 10.10.0.5 already has FloatingIp fip-a: one floating IP per fixed IP"),
			},
			nats: []*nbmodel.NAT{dnat("r1", "fip-a", "172.16.0.50", "10.10.0.5")},
		},
		{
			name: "fixed IP on no internal network, vmName without fixedIp",
			fips: []FloatingIP{fip("fip-1", "172.16.0.50", "10.30.0.5", ""), fip("fip-2", "172.16.0.51", "", "vm-a"), fip("fip-3", "172.16.0.52", "10.10.0.1", "")},
			want: []FloatingIPStatus{
				notReady("fip-1", "FloatingIp fip-1: spec.fixedIp 10.30.0.5 is on none of VirtualRouter r1's internal networks: net-a (10.10.0.0/24), net-b (10.20.0.0/24)"),
				notReady("fip-2", "FloatingIp fip-2: spec.fixedIp is required with spec.vmName vm-a: the VM's port is found by both"),
				notReady("fip-3", "FloatingIp fip-3: spec.fixedIp 10.10.0.1 is the gatewayIp of network net-a"),
			},
		},
		{
			name: "a vmName in two namespaces is ambiguous",
			fips: []FloatingIP{fip("fip-1", "172.16.0.50", "10.10.0.9", "vm-x")},
			edit: withVMX,
			want: []FloatingIPStatus{notReady("fip-1", "FloatingIp fip-1: spec.vmName vm-x is ambiguous: default/vm-x and other/vm-x have 10.10.0.9 on network net-a; write namespace/name")},
		},
		{
			name: "namespace/name is not ambiguous",
			fips: []FloatingIP{fip("fip-2", "172.16.0.51", "10.10.0.9", "default/vm-x")},
			edit: withVMX,
			want: []FloatingIPStatus{ready("fip-2", "kv-net-a_default_vm-x_eth1")},
			nats: []*nbmodel.NAT{dnat("r1", "fip-2", "172.16.0.51", "10.10.0.9")},
		},
		{
			name: "the network says whose an address is",
			fips: []FloatingIP{fip("fip-3", "172.16.0.52", "10.10.0.9", "other/vm-x")},
			edit: withVMX,
			want: []FloatingIPStatus{notReady("fip-3", "FloatingIp fip-3: spec.fixedIp 10.10.0.9 on network net-a is VirtualMachineInstance default/vm-x's, not other/vm-x's")},
		},
		{
			name: "router without an external network",
			fips: []FloatingIP{fip("fip-1", "172.16.0.50", "10.10.0.5", "")},
			edit: func(s *Snapshot) {
				s.Routers[0].External, s.Routers[0].EnableSNAT, s.Routers[0].PeerRouter = nil, false, nil
			},
			want: []FloatingIPStatus{notReady("fip-1", "FloatingIp fip-1: spec.routerName VirtualRouter r1 has no spec.external network to answer floating IPs on")},
		},
		{
			name:  "router not declared",
			fips:  []FloatingIP{fip("fip-1", "172.16.0.50", "10.10.0.5", "")},
			edit:  func(s *Snapshot) { s.Routers = s.Routers[1:] },
			want:  []FloatingIPStatus{notReady("fip-1", "VirtualRouter r1 is not declared")},
			noR1:  true,
			noErr: true,
		},
		{
			name: "router invalid: its floating IPs wait for it",
			fips: []FloatingIP{fip("fip-1", "172.16.0.50", "10.10.0.5", "")},
			edit: func(s *Snapshot) { s.Routers[0].Internal = []string{"net-x"} },
			want: []FloatingIPStatus{notReady("fip-1", "waits for its router: VirtualRouter r1: spec.internal[0] network net-x is unknown (no valid NetworkAttachmentDefinition with network-config of that name)")},
			noR1: true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := fipSnapshot()
			s.FloatingIPs = tc.fips
			if tc.edit != nil {
				tc.edit(s)
			}
			p := Build(s, testInstance)
			var got []FloatingIPStatus
			for _, st := range p.FloatingIPs {
				if st.Name == "fip-old" {
					continue // r2's
				}
				st.Err = nil
				got = append(got, st)
			}
			assert.Equal(t, tc.want, got)
			rp := findRouter(p, "r1")
			if tc.noR1 {
				assert.Nil(t, rp)
				return
			}
			require.NotNil(t, rp, "a floating IP's error never fails its router: %v", p.Errors)
			assert.NotContains(t, p.Failed, Unit{Kind: KindRouter, Name: "r1"})
			assert.Equal(t, tc.nats, dnats(rp))
			snats := 0
			if r := s.Routers[0]; r.External != nil && r.EnableSNAT {
				snats = len(r.Internal)
			}
			assert.Len(t, rp.NATs, len(tc.nats)+snats, "the router's snat rows stay")
			assert.Empty(t, rp.Policies, "enableSnat true: no policies")
			if tc.noErr {
				assert.Empty(t, p.Errors)
			} else {
				assert.NotEmpty(t, p.Errors, "a floating IP's error is among the plan's errors")
			}
		})
	}
}

// TestFloatingIPHeldWins: the floating IP whose NAT row the NB shows
// holding an address or a fixed IP keeps it against an older claimant.
func TestFloatingIPHeldWins(t *testing.T) {
	s := fipSnapshot()
	s.FloatingIPs = []FloatingIP{
		{Name: "older", ID: "older", Router: "r1", Network: "public", IP: "172.16.0.50", FixedIP: "10.20.0.6", Created: t0},
		{Name: "newer", ID: "newer", Router: "r1", Network: "public", IP: "172.16.0.50", FixedIP: "10.10.0.5", Created: t0.Add(time.Hour)},
		{Name: "older-fixed", ID: "older-fixed", Router: "r1", Network: "public", IP: "172.16.0.60", FixedIP: "10.20.0.6", Created: t0},
		{Name: "newer-fixed", ID: "newer-fixed", Router: "r1", Network: "public", IP: "172.16.0.61", FixedIP: "10.20.0.6", VMName: "default/vm-b", Created: t0.Add(time.Hour)},
	}
	s.Held = Claims{FloatingIPs: map[string]string{"172.16.0.50": "newer"}, FixedIPs: map[string]string{"r1 10.20.0.6": "newer-fixed"}}
	p := Build(s, testInstance)
	rp := findRouter(p, "r1")
	require.NotNil(t, rp)
	assert.Equal(t, []*nbmodel.NAT{dnat("r1", "newer", "172.16.0.50", "10.10.0.5"), dnat("r1", "newer-fixed", "172.16.0.61", "10.20.0.6")}, dnats(rp))
	assert.Equal(t, []string{
		"FloatingIp older-fixed: spec.fixedIp 10.20.0.6 already has FloatingIp newer-fixed: one floating IP per fixed IP",
		"FloatingIp older: spec.floatingIp 172.16.0.50 is already the floating IP of FloatingIp newer",
	}, errTexts(p.Errors))
}

// TestFloatingIPWithoutSNAT: a router with enableSnat false keeps its
// gateway side while a floating IP names it (also one not bound yet),
// without snat rows, with policies that let out only the bound floating
// IPs' fixed addresses; without floating IPs it has no external side.
func TestFloatingIPWithoutSNAT(t *testing.T) {
	s := fipSnapshot()
	s.Routers[0].EnableSNAT = false
	p := Build(s, testInstance)
	rp := findRouter(p, "r1")
	require.NotNil(t, rp)
	assert.Empty(t, rp.NATs)
	assert.Nil(t, rp.Gateway)
	assert.Len(t, rp.Ports, 2, "no gateway port")

	s.FloatingIPs = []FloatingIP{fip("fip-1", "172.16.0.50", "10.10.0.77", "")}
	p = Build(s, testInstance)
	rp = findRouter(p, "r1")
	require.NotNil(t, rp)
	assert.Empty(t, rp.NATs, "unbound: no row, and no snat")
	require.NotNil(t, rp.Gateway)
	assert.Equal(t, []string{"gw1"}, rp.Gateway.Chassis)
	assert.Len(t, rp.Ports, 3, "the gateway port stays")
	assert.Len(t, rp.Routes, 1, "the default route stays")
	drop := &nbmodel.LogicalRouterPolicy{Priority: 1000, Action: "drop", ExternalIDs: routerIDs("r1"),
		Match: "ip4.src == {10.10.0.0/24, 10.20.0.0/24} && ip4.dst != {10.10.0.0/24, 10.20.0.0/24}"}
	assert.Equal(t, []*nbmodel.LogicalRouterPolicy{drop}, rp.Policies)

	s.FloatingIPs = append(s.FloatingIPs, fip("fip-2", "172.16.0.51", "10.20.0.6", "vm-b"))
	p = Build(s, testInstance)
	rp = findRouter(p, "r1")
	require.NotNil(t, rp)
	assert.Equal(t, []*nbmodel.NAT{dnat("r1", "fip-2", "172.16.0.51", "10.20.0.6")}, rp.NATs)
	assert.Equal(t, []*nbmodel.LogicalRouterPolicy{
		{Priority: 1001, Action: "allow", ExternalIDs: fipIDs("r1", "fip-2"), Match: "ip4.src == 10.20.0.6 || ip4.dst == 172.16.0.51"},
		drop,
	}, rp.Policies)
	assert.Equal(t, "gw1", p.FloatingIPs[1].Gateway)
}

// TestFloatingIPWithoutSNATDualStack: with enableSnat false and a
// floating IP, IPv6 (routed, not NATed) is kept in as IPv4 is: a drop
// policy for the internal ipv6Cidrs' traffic that leaves them.
func TestFloatingIPWithoutSNATDualStack(t *testing.T) {
	s := fipSnapshot()
	s.Routers[0].EnableSNAT = false
	for i, n := range s.Networks {
		if n.Name == "net-a" || n.Name == "net-b" {
			s.Networks[i] = dualStack(n)
		}
	}
	s.FloatingIPs = []FloatingIP{fip("fip-2", "172.16.0.51", "10.20.0.6", "vm-b")}
	rp := findRouter(Build(s, testInstance), "r1")
	require.NotNil(t, rp)
	var matches []string
	for _, p := range rp.Policies {
		matches = append(matches, fmt.Sprintf("%d %s %s", p.Priority, p.Action, p.Match))
	}
	assert.Equal(t, []string{
		"1001 allow ip4.src == 10.20.0.6 || ip4.dst == 172.16.0.51",
		"1000 drop ip4.src == {10.10.0.0/24, 10.20.0.0/24} && ip4.dst != {10.10.0.0/24, 10.20.0.0/24}",
		"1000 drop ip6.src == {fd00:10::/64, fd00:20::/64} && ip6.dst != {fd00:10::/64, fd00:20::/64}",
	}, matches)
}

// TestGoldenFloatingIPs keeps a whole plan with floating IPs reviewable:
// a router with SNAT and one without, their floating IPs' rows and every
// floating IP's status.
func TestGoldenFloatingIPs(t *testing.T) {
	s := fipSnapshot()
	s.Routers[1].EnableSNAT = false
	s.FloatingIPs = []FloatingIP{
		fip("web-1", "172.16.0.50", "10.10.0.5", "vm-a"),
		fip("web-2", "172.16.0.51", "10.20.0.6", ""),
		fip("spare", "172.16.0.52", "", ""),
		{Name: "db-1", ID: "db-1", Router: "r2", Network: "public", IP: "172.16.0.60", FixedIP: "10.30.0.7", VMName: "db", Created: t0},
		{Name: "lost", ID: "lost", Router: "r9", Network: "public", IP: "172.16.0.70", FixedIP: "10.10.0.5", Created: t0},
		{Name: "bad", ID: "bad", Router: "r1", Network: "public", IP: "172.16.1.5", FixedIP: "10.10.0.9", Created: t0},
	}
	s.VMs = append(s.VMs, VMInterface{Namespace: "default", VMI: "db", Interface: "eth1", Network: "net-c", NetworkNamespace: "default", MAC: "50:54:00:00:00:07", IP: "10.30.0.7", Node: "hv2"})
	p := Build(s, testInstance)
	require.Empty(t, p.Failed)
	got, err := json.MarshalIndent(struct {
		Routers     []RouterPlan
		FloatingIPs []FloatingIPStatus
		Errors      []string
	}{p.Routers, p.FloatingIPs, errTexts(p.Errors)}, "", "  ")
	require.NoError(t, err)
	got = append(got, '\n')

	path := filepath.Join("testdata", "floatingips.plan.golden")
	if *update {
		require.NoError(t, os.WriteFile(path, got, 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run go test ./translator -run TestGoldenFloatingIPs -update to create it")
	assert.Equal(t, string(want), string(got))
}

// TestZoneFloatingIPLivesWithItsRouter: in interconnect mode a floating
// IP's NAT row and a router's policies are in the router's home zone only;
// the VM it is bound to is in another zone.
func TestZoneFloatingIPLivesWithItsRouter(t *testing.T) {
	in := zoneInput()
	in.Set("fips", Objects{FloatingIPs: []FloatingIP{{Name: "fip-1", ID: "fip-1", Router: "r1", Network: "public", IP: "172.16.0.50", FixedIP: "10.20.0.5", VMName: "vm2"}}})
	up := in.Plan(Unit{KindRouter, "r1"}, testInstance, nil)
	require.Empty(t, up.Errs)
	require.NotNil(t, up.Router)
	assert.Equal(t, []FloatingIPStatus{{Name: "fip-1", ID: "fip-1", Ready: true, Port: "kv-net-b_default_vm2_eth0", Gateway: "gw1"}}, up.FloatingIPs)
	for zone, zr := range up.Router.Zones {
		var nats, policies int
		for _, r := range zr.Rows {
			switch m := r.Model.(type) {
			case *nbmodel.NAT:
				if m.Type == nbmodel.NATTypeDNATAndSNAT {
					nats++
					assert.Equal(t, "kv-r1", r.Parent)
				}
			case *nbmodel.LogicalRouterPolicy:
				policies++
			}
		}
		if zone == "gw1" {
			assert.Equal(t, 1, nats, "the NAT is in the router's home zone")
		} else {
			assert.Zero(t, nats, "zone %s", zone)
		}
		assert.Zero(t, policies, "enableSnat true: no policies")
	}

	// Without SNAT: the policies go with the router too.
	in.Set("r1", Objects{Routers: []Router{{Name: "r1", Gateway: "gw1", Internal: []string{"net-a", "net-b"},
		External: &External{Network: "public", IP: "172.16.0.10"}}}})
	up = in.Plan(Unit{KindRouter, "r1"}, testInstance, nil)
	require.NotNil(t, up.Router)
	for zone, zr := range up.Router.Zones {
		policies := 0
		for _, r := range zr.Rows {
			if _, ok := r.Model.(*nbmodel.LogicalRouterPolicy); ok {
				policies++
				assert.Equal(t, "kv-r1", r.Parent)
			}
		}
		if zone == "gw1" {
			assert.Equal(t, 2, policies)
		} else {
			assert.Zero(t, policies, "zone %s", zone)
		}
	}
}

// dualStackFIPSnapshot is fipSnapshot with public, net-a and net-b dual
// stack; vm-b reports a privacy address.
func dualStackFIPSnapshot() *Snapshot {
	s := fipSnapshot()
	for i, n := range s.Networks {
		switch n.Name {
		case "public":
			s.Networks[i].IPv6CIDR = "2001:db8:ff::/64"
		case "net-a", "net-b":
			s.Networks[i] = dualStack(n)
		}
	}
	s.Routers[0].External.IPv6 = "2001:db8:ff::100"
	s.VMs[1].IPv6 = "fd00:20::a1b2:c3d4:e5f6:789"
	return s
}

// TestFloatingIPv6: an IPv6 floating IP binds an IPv6 fixed IP that is a
// VM port's (its SLAAC address, or one its status reports): a
// dnat_and_snat row beside the IPv4 ones, the port in its status; its
// errors are named (the other family, outside the ipv6Cidr, a network
// without one, the router's own address).
func TestFloatingIPv6(t *testing.T) {
	s := dualStackFIPSnapshot()
	vmA6 := SLAACAddress(netip.MustParsePrefix("fd00:10::/64"), "50:54:00:00:00:05").String()
	s.FloatingIPs = []FloatingIP{
		fip("v4", "172.16.0.50", "10.10.0.5", ""),
		fip("v6-slaac", "2001:db8:ff::50", vmA6, "vm-a"),
		fip("v6-reported", "2001:db8:ff::51", "fd00:20::a1b2:c3d4:e5f6:789", ""),
		fip("v6-nobody", "2001:db8:ff::52", "fd00:20::77", ""),
		fip("mixed", "2001:db8:ff::53", "10.10.0.5", ""),
		fip("mixed4", "172.16.0.54", "fd00:10::5", ""),
		fip("outside", "2001:db8:fe::1", vmA6, ""),
		fip("own", "2001:db8:ff::100", vmA6, ""),
	}
	p := Build(s, testInstance)
	rp := findRouter(p, "r1")
	require.NotNil(t, rp)
	assert.Equal(t, []*nbmodel.NAT{
		dnat("r1", "v4", "172.16.0.50", "10.10.0.5"),
		dnat("r1", "v6-slaac", "2001:db8:ff::50", vmA6),
		dnat("r1", "v6-reported", "2001:db8:ff::51", "fd00:20::a1b2:c3d4:e5f6:789"),
	}, dnats(rp))
	st := map[string]FloatingIPStatus{}
	for _, f := range p.FloatingIPs {
		st[f.Name] = f
	}
	assert.Equal(t, VMPortName("net-a", "default", "vm-a", "eth1"), st["v6-slaac"].Port)
	assert.Equal(t, VMPortName("net-b", "default", "vm-b", "eth1"), st["v6-reported"].Port)
	assert.Equal(t, "waiting for a VM with ip fd00:20::77 on network net-b", st["v6-nobody"].Reason)
	assert.Equal(t, "FloatingIp mixed: spec.fixedIp 10.10.0.5 is IPv4: spec.floatingIp 2001:db8:ff::53 is IPv6", st["mixed"].Reason)
	assert.Equal(t, "FloatingIp mixed4: spec.fixedIp fd00:10::5 is IPv6: spec.floatingIp 172.16.0.54 is IPv4", st["mixed4"].Reason)
	assert.Equal(t, "FloatingIp outside: spec.floatingIp 2001:db8:fe::1 is outside network public's ipv6Cidr 2001:db8:ff::/64", st["outside"].Reason)
	assert.Equal(t, "FloatingIp own: spec.floatingIp 2001:db8:ff::100 is the spec.external.ipv6 of VirtualRouter r1", st["own"].Reason)

	s.Networks[0].IPv6CIDR = ""
	s.Routers[0].External.IPv6 = ""
	s.FloatingIPs = []FloatingIP{fip("v6", "2001:db8:ff::50", vmA6, "")}
	p = Build(s, testInstance)
	require.Len(t, p.FloatingIPs, 1)
	assert.Equal(t, "FloatingIp v6: spec.floatingIp 2001:db8:ff::50 is IPv6 and network public has no ipv6Cidr", p.FloatingIPs[0].Reason)
}

// TestFloatingIPv6FollowsVMs: an IPv6 floating IP waiting for its fixed IP
// binds when a VM gets it, by its SLAAC address or a reported one, and
// the event re-plans the router (Set returns it).
func TestFloatingIPv6FollowsVMs(t *testing.T) {
	s := dualStackFIPSnapshot()
	vms := s.VMs
	s.VMs = nil
	in := NewInputFrom(s)
	in.Set("fips", Objects{FloatingIPs: []FloatingIP{
		fip("slaac", "2001:db8:ff::50", SLAACAddress(netip.MustParsePrefix("fd00:10::/64"), "50:54:00:00:00:05").String(), ""),
		fip("reported", "2001:db8:ff::51", "fd00:20::a1b2:c3d4:e5f6:789", ""),
	}})
	r1 := Unit{Kind: KindRouter, Name: "r1"}
	assert.Empty(t, dnats(in.Plan(r1, testInstance, nil).Router))
	assert.Contains(t, in.Set("vms", Objects{VMs: vms[:1]}), r1, "vm-a's SLAAC address is a fixed IP")
	assert.Len(t, dnats(in.Plan(r1, testInstance, nil).Router), 1)
	assert.Contains(t, in.Set("vms", Objects{VMs: vms}), r1, "vm-b's reported address is a fixed IP")
	assert.Len(t, dnats(in.Plan(r1, testInstance, nil).Router), 2)
	b := vms[1]
	b.IPv6 = "fd00:20::1234"
	assert.Contains(t, in.Set("vms", Objects{VMs: []VMInterface{vms[0], b}}), r1, "vm-b reports another address")
	assert.Len(t, dnats(in.Plan(r1, testInstance, nil).Router), 1)
}
