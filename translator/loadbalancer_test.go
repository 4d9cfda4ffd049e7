package translator

import (
	"encoding/json"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubevirt-ovn/kubevirt-ovn/nbmodel"
)

// lbSnapshot is fipSnapshot with a second VM on net-a (10.10.0.6) and a
// load balancer web on net-a (r1's) balancing tcp 80 over both VMs.
func lbSnapshot() *Snapshot {
	s := fipSnapshot()
	s.VMs = append(s.VMs, VMInterface{Namespace: "default", VMI: "vm-a2", Interface: "eth1", Network: "net-a", NetworkNamespace: "default",
		MAC: "50:54:00:00:00:16", IP: "10.10.0.6", Node: "hv2"})
	s.LoadBalancers = []LoadBalancer{webLB()}
	return s
}

func webLB() LoadBalancer {
	return LoadBalancer{Name: "web", ID: "web", Network: "net-a", VIP: "10.10.0.100", Members: []string{"10.10.0.6", "10.10.0.5"},
		Rules: []LBRule{{Protocol: "tcp", PortMin: 80, PortMax: 80}}, Created: t0}
}

func lbIDs(router, name string) map[string]string {
	ids := routerIDs(router)
	ids[KeyLoadBalancer] = name
	ids[KeyLoadBalancerID] = name
	return ids
}

// TestLoadBalancers: the mapping table of load balancers, row by row (the
// rows of r1, the keys net-a's switch refers to, the status).
func TestLoadBalancers(t *testing.T) {
	web := func(proto string, vips map[string]string) *nbmodel.LoadBalancer {
		lb := &nbmodel.LoadBalancer{Name: "kv-lb-web_" + proto, Vips: vips, ExternalIDs: lbIDs("r1", "web")}
		if proto != "icmp" {
			lb.Protocol = ptr(proto)
		}
		return lb
	}
	tests := []struct {
		name   string
		edit   func(s *Snapshot)
		want   []*nbmodel.LoadBalancer
		status LoadBalancerStatus // Router r1 unless said
	}{
		{
			name:   "one tcp port over two members, sorted",
			want:   []*nbmodel.LoadBalancer{web("tcp", map[string]string{"10.10.0.100:80": "10.10.0.5:80,10.10.0.6:80"})},
			status: LoadBalancerStatus{Name: "web", Ready: true},
		},
		{
			name: "a row per protocol; a range expanded; icmp a port-less VIP; overlapping rules a union",
			edit: func(s *Snapshot) {
				s.LoadBalancers[0].Rules = []LBRule{{Protocol: "TCP", PortMin: 80, PortMax: 81}, {Protocol: "tcp", PortMin: 81},
					{Protocol: "udp", PortMin: 53}, {Protocol: "icmp"}}
			},
			want: []*nbmodel.LoadBalancer{
				web("icmp", map[string]string{"10.10.0.100": "10.10.0.5,10.10.0.6"}),
				web("tcp", map[string]string{"10.10.0.100:80": "10.10.0.5:80,10.10.0.6:80", "10.10.0.100:81": "10.10.0.5:81,10.10.0.6:81"}),
				web("udp", map[string]string{"10.10.0.100:53": "10.10.0.5:53,10.10.0.6:53"}),
			},
			status: LoadBalancerStatus{Name: "web", Ready: true},
		},
		{
			name:   "no members: empty backends drop (ONOS)",
			edit:   func(s *Snapshot) { s.LoadBalancers[0].Members = nil },
			want:   []*nbmodel.LoadBalancer{web("tcp", map[string]string{"10.10.0.100:80": ""})},
			status: LoadBalancerStatus{Name: "web", Ready: true},
		},
		{
			name: "no members with RejectEmptyLB: options:reject",
			edit: func(s *Snapshot) { s.LoadBalancers[0].Members = nil; s.RejectEmptyLB = true },
			want: func() []*nbmodel.LoadBalancer {
				lb := web("tcp", map[string]string{"10.10.0.100:80": ""})
				lb.Options = map[string]string{"reject": "true"}
				return []*nbmodel.LoadBalancer{lb}
			}(),
			status: LoadBalancerStatus{Name: "web", Ready: true},
		},
		{
			name: "a floating IP on the VIP is a VIP key of the same row",
			edit: func(s *Snapshot) { s.FloatingIPs = []FloatingIP{fip("fip-web", "172.16.0.60", "10.10.0.100", "")} },
			want: func() []*nbmodel.LoadBalancer {
				lb := web("tcp", map[string]string{"10.10.0.100:80": "10.10.0.5:80,10.10.0.6:80", "172.16.0.60:80": "10.10.0.5:80,10.10.0.6:80"})
				// Who holds the floating IP and its fixed IP, as a NAT
				// row would say.
				lb.ExternalIDs[KeyFloatingIP] = "fip-web"
				lb.ExternalIDs[KeyFloatingIPAddress] = "172.16.0.60"
				lb.ExternalIDs[KeyLBVIP] = "10.10.0.100"
				return []*nbmodel.LoadBalancer{lb}
			}(),
			status: LoadBalancerStatus{Name: "web", Ready: true, FloatingIPs: []string{"172.16.0.60"}},
		},
		// What ONOS skipped is left out with a note, not a failure of the
		// whole load balancer (issue 30): a stopped member VM has no VMI.
		{
			name:   "a member that is no VM port on the network: left out",
			edit:   func(s *Snapshot) { s.LoadBalancers[0].Members = []string{"10.10.0.5", "10.10.0.7"} },
			want:   []*nbmodel.LoadBalancer{web("tcp", map[string]string{"10.10.0.100:80": "10.10.0.5:80"})},
			status: LoadBalancerStatus{Name: "web", Ready: true, Reason: "spec.members[1] 10.10.0.7 is no VM port on network net-a: left out until it is one"},
		},
		{
			name:   "a member on another network: left out",
			edit:   func(s *Snapshot) { s.LoadBalancers[0].Members = []string{"10.20.0.6"} },
			want:   []*nbmodel.LoadBalancer{web("tcp", map[string]string{"10.10.0.100:80": ""})},
			status: LoadBalancerStatus{Name: "web", Ready: true, Reason: "spec.members[0] 10.20.0.6 is no VM port on network net-a: left out until it is one"},
		},
		{
			name: "a member listed twice is one; the VIP as a member is left out",
			edit: func(s *Snapshot) {
				s.LoadBalancers[0].Members = []string{"10.10.0.6", "10.10.0.100", "10.10.0.5", "10.10.0.6"}
			},
			want:   []*nbmodel.LoadBalancer{web("tcp", map[string]string{"10.10.0.100:80": "10.10.0.5:80,10.10.0.6:80"})},
			status: LoadBalancerStatus{Name: "web", Ready: true, Reason: "spec.members[1] 10.10.0.100 is the VIP: left out"},
		},
		{
			name: "a range beyond the limit: portRangeMin alone, as ONOS",
			edit: func(s *Snapshot) {
				s.LoadBalancers[0].Rules = []LBRule{{Protocol: "tcp", PortMin: 7000, PortMax: 8000}}
			},
			want:   []*nbmodel.LoadBalancer{web("tcp", map[string]string{"10.10.0.100:7000": "10.10.0.5:7000,10.10.0.6:7000"})},
			status: LoadBalancerStatus{Name: "web", Ready: true, Reason: "spec.rules[0].portRangeMax range 7000-8000 spans 1001 ports: OVN has no range VIPs and kubevirt-ovn expands at most 64, so port 7000 alone is balanced, as ONOS did"},
		},
		{
			name: "a range upside down: portRangeMin alone, as ONOS",
			edit: func(s *Snapshot) {
				s.LoadBalancers[0].Rules = []LBRule{{Protocol: "udp", PortMin: 53, PortMax: 50}}
			},
			want:   []*nbmodel.LoadBalancer{web("udp", map[string]string{"10.10.0.100:53": "10.10.0.5:53,10.10.0.6:53"})},
			status: LoadBalancerStatus{Name: "web", Ready: true, Reason: "spec.rules[0].portRangeMax 50 is not a port from portRangeMin 53 to 65535: port 53 alone is balanced, as ONOS did"},
		},
		{
			name:   "an unknown protocol",
			edit:   func(s *Snapshot) { s.LoadBalancers[0].Rules = []LBRule{{Protocol: "sctp", PortMin: 80}} },
			status: LoadBalancerStatus{Name: "web", Reason: `LoadBalancer web: spec.rules[0].protocol "sctp" is not tcp, udp or icmp`},
		},
		{
			name:   "a port out of range",
			edit:   func(s *Snapshot) { s.LoadBalancers[0].Rules = []LBRule{{Protocol: "udp"}} },
			status: LoadBalancerStatus{Name: "web", Reason: "LoadBalancer web: spec.rules[0].portRangeMin 0 is not a port (1-65535)"},
		},
		{
			name:   "no rules",
			edit:   func(s *Snapshot) { s.LoadBalancers[0].Rules = nil },
			status: LoadBalancerStatus{Name: "web", Reason: "LoadBalancer web: spec.rules is empty: nothing to balance"},
		},
		{
			name:   "a VIP outside the network",
			edit:   func(s *Snapshot) { s.LoadBalancers[0].VIP = "10.20.0.100" },
			status: LoadBalancerStatus{Name: "web", Reason: "LoadBalancer web: spec.vip 10.20.0.100 is outside network net-a (10.10.0.0/24)"},
		},
		{
			name: "a VIP that is a VM's address",
			edit: func(s *Snapshot) {
				s.LoadBalancers[0].VIP = "10.10.0.5"
				s.LoadBalancers[0].Members = []string{"10.10.0.6"}
			},
			status: LoadBalancerStatus{Name: "web", Reason: "LoadBalancer web: spec.vip 10.10.0.5 is the address of VM port kv-net-a_default_vm-a_eth1 on network net-a"},
		},
		{
			name:   "no spec.name",
			edit:   func(s *Snapshot) { s.LoadBalancers[0].ID = "" },
			status: LoadBalancerStatus{Name: "web", Reason: "LoadBalancer web: spec.name is required"},
		},
		{
			name: "a VIP two load balancers claim: the first by name keeps it",
			edit: func(s *Snapshot) {
				b := webLB()
				b.Name, b.ID = "api", "api"
				s.LoadBalancers = append(s.LoadBalancers, b)
			},
			want:   []*nbmodel.LoadBalancer{{Name: "kv-lb-api_tcp", Protocol: ptr("tcp"), Vips: map[string]string{"10.10.0.100:80": "10.10.0.5:80,10.10.0.6:80"}, ExternalIDs: lbIDs("r1", "api")}},
			status: LoadBalancerStatus{Name: "web", Reason: "LoadBalancer web: spec.vip 10.10.0.100 is already the VIP of LoadBalancer api"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := lbSnapshot()
			if tt.edit != nil {
				tt.edit(s)
			}
			p := Build(s, testInstance)
			require.Empty(t, p.Failed)
			rp := lbRouterPlan(t, p, "r1")
			assert.Equal(t, tt.want, rp.LoadBalancers)
			// net-a's own rows: the router's without floating IPs.
			var want []*nbmodel.LoadBalancer
			for _, lb := range tt.want {
				sw := *lb
				sw.Name += "_switch"
				sw.ExternalIDs = OwnerIDs(testInstance, Unit{KindNetwork, "net-a"})
				sw.ExternalIDs[KeyLoadBalancer] = lb.ExternalIDs[KeyLoadBalancer]
				sw.ExternalIDs[KeyLoadBalancerID] = lb.ExternalIDs[KeyLoadBalancerID]
				sw.Vips = map[string]string{}
				for k, v := range lb.Vips {
					if strings.HasPrefix(k, "10.") {
						sw.Vips[k] = v
					}
				}
				want = append(want, &sw)
			}
			assert.Equal(t, want, lbNetworkPlan(t, p, "net-a").LoadBalancers, "net-a's switch has rows of its own")
			st := tt.status
			st.Router = "r1"
			var got *LoadBalancerStatus
			for i := range p.LoadBalancers {
				if p.LoadBalancers[i].Name == st.Name {
					got = &p.LoadBalancers[i]
				}
			}
			require.NotNil(t, got, "status of %s", st.Name)
			got.Err = nil
			assert.Equal(t, st, *got)
			if !st.Ready {
				assert.Contains(t, errTexts(p.Errors), st.Reason, "its error is in the plan's errors")
			} else if st.Reason != "" {
				assert.Contains(t, p.Notes, "LoadBalancer "+st.Name+": "+st.Reason, "what it left out is a note of the plan")
			}
		})
	}
}

// TestLoadBalancerFloatingIPHasNoNAT: a floating IP on a VIP is Ready,
// bound to the load balancer, not to a VM port, and has no NAT row (a
// router NAT does not chain into a load balancer); a floating IP on a VM
// next to it keeps its NAT. With enableSnat false, the policy lets the
// members' replies out.
func TestLoadBalancerFloatingIPHasNoNAT(t *testing.T) {
	s := lbSnapshot()
	s.FloatingIPs = []FloatingIP{fip("fip-web", "172.16.0.60", "10.10.0.100", ""), fip("fip-vm", "172.16.0.50", "10.10.0.5", "")}
	p := Build(s, testInstance)
	rp := lbRouterPlan(t, p, "r1")
	assert.Equal(t, []*nbmodel.NAT{dnat("r1", "fip-vm", "172.16.0.50", "10.10.0.5")}, dnats(rp))
	assert.Equal(t, []FloatingIPStatus{
		{Name: "fip-vm", ID: "fip-vm", Ready: true, Port: "kv-net-a_default_vm-a_eth1", Gateway: "gw1"},
		{Name: "fip-web", ID: "fip-web", Ready: true, LoadBalancer: "web", Gateway: "gw1"},
	}, p.FloatingIPs)

	s.Routers[0].EnableSNAT = false
	p = Build(s, testInstance)
	rp = lbRouterPlan(t, p, "r1")
	var matches []string
	for _, pol := range rp.Policies {
		matches = append(matches, pol.Match)
	}
	assert.Contains(t, matches, "ip4.src == {10.10.0.5, 10.10.0.6} || ip4.dst == 172.16.0.60")
}

// TestLoadBalancerWithoutRouter: a load balancer on a network no router
// has still has its switch's row (the VIP from inside the network); no
// router plans it, so the network's unit reports its status: Ready and
// reachable from inside only, or its own error. A router declaring the
// network takes the status over (the network reports none) and gives it
// back when it drops the network.
func TestLoadBalancerWithoutRouter(t *testing.T) {
	s := lbSnapshot()
	s.Routers[0].Internal = []string{"net-b"}
	p := Build(s, testInstance)
	assert.Empty(t, lbRouterPlan(t, p, "r1").LoadBalancers)
	rows := lbNetworkPlan(t, p, "net-a").LoadBalancers
	require.Len(t, rows, 1)
	assert.Equal(t, "kv-lb-web_tcp_switch", rows[0].Name)
	require.Len(t, p.LoadBalancers, 1)
	st := p.LoadBalancers[0]
	assert.True(t, st.Ready)
	assert.Empty(t, st.Router)
	assert.Equal(t, "no router has network net-a as an internal network: its VIP is reachable from inside the network only", st.Reason)
	assert.Empty(t, p.Errors)

	bad := lbSnapshot()
	bad.Routers[0].Internal = []string{"net-b"}
	bad.LoadBalancers[0].VIP = "10.99.0.9"
	p = Build(bad, testInstance)
	require.Len(t, p.LoadBalancers, 1)
	assert.False(t, p.LoadBalancers[0].Ready)
	assert.Contains(t, p.LoadBalancers[0].Reason, "LoadBalancer web: spec.vip 10.99.0.9 is outside network net-a")
	assert.Len(t, p.Errors, 1, "sync reports it")

	in := NewInputFrom(s)
	net := Unit{Kind: KindNetwork, Name: "net-a"}
	assert.Len(t, in.Plan(net, testInstance, nil).LoadBalancers, 1)
	affected := in.Set("snapshot", lbSnapshot().Objects())
	assert.Contains(t, affected, net, "the router's declaration re-plans the network")
	assert.Empty(t, in.Plan(net, testInstance, nil).LoadBalancers, "the router reports it")
	assert.Len(t, in.Plan(Unit{Kind: KindRouter, Name: "r1"}, testInstance, nil).LoadBalancers, 1)
	affected = in.Set("snapshot", s.Objects())
	assert.Contains(t, affected, net)
	assert.Len(t, in.Plan(net, testInstance, nil).LoadBalancers, 1, "the network reports it again")
}

// TestLoadBalancerRows: the router refers to its rows, which are roots;
// the switch of the network to its own.
func TestLoadBalancerRows(t *testing.T) {
	p := Build(lbSnapshot(), testInstance)
	rows := lbRouterPlan(t, p, "r1").Rows()
	assert.Equal(t, []Ref{{Column: "load_balancer", Key: "kv-lb-web_tcp"}}, rows[0].Refs)
	var lbRows []Row
	for _, r := range rows {
		if _, ok := r.Model.(*nbmodel.LoadBalancer); ok {
			lbRows = append(lbRows, r)
		}
	}
	require.Len(t, lbRows, 1)
	assert.Empty(t, lbRows[0].Parent, "a root")
	np := lbNetworkPlan(t, p, "net-a")
	nrows := np.Rows()
	assert.Equal(t, []Ref{{Column: "load_balancer", Key: "kv-lb-web_tcp_switch"}}, nrows[0].Refs)
	assert.Equal(t, Row{Model: np.LoadBalancers[0]}, nrows[1], "a root of the network's unit")
}

// TestLoadBalancerIncremental: a change of a member's VM, of the load
// balancer or of the router reaches the router's and the network's units,
// and the incremental plan equals the whole one.
func TestLoadBalancerIncremental(t *testing.T) {
	s := lbSnapshot()
	in := NewInputFrom(s)
	r1, netA := Unit{KindRouter, "r1"}, Unit{KindNetwork, "net-a"}

	// The member 10.10.0.6 goes: web balances over the other alone.
	var vms []VMInterface
	for _, v := range s.VMs {
		if v.IP != "10.10.0.6" {
			vms = append(vms, v)
		}
	}
	affected := in.Set("snapshot", Objects{Routers: s.Routers, Networks: s.Networks, VMs: vms, FloatingIPs: s.FloatingIPs, LoadBalancers: s.LoadBalancers})
	assert.Contains(t, affected, r1, "a member's VM went: its load balancer's router")
	assert.Contains(t, affected, netA)
	up := in.Plan(r1, testInstance, nil)
	require.NotNil(t, up.Router)
	require.Len(t, up.Router.LoadBalancers, 1)
	assert.Equal(t, map[string]string{"10.10.0.100:80": "10.10.0.5:80"}, up.Router.LoadBalancers[0].Vips)
	assert.Equal(t, "spec.members[0] 10.10.0.6 is no VM port on network net-a: left out until it is one", up.LoadBalancers[0].Reason)
	nlbs := in.Plan(netA, testInstance, nil).Network.LoadBalancers
	require.Len(t, nlbs, 1)
	assert.Equal(t, map[string]string{"10.10.0.100:80": "10.10.0.5:80"}, nlbs[0].Vips)

	// The load balancer in another source, without the gone member.
	lb := webLB()
	lb.Members = []string{"10.10.0.5"}
	affected = in.Set("lbs", Objects{LoadBalancers: []LoadBalancer{lb}})
	assert.Contains(t, affected, r1)
	assert.Contains(t, affected, netA)
	in.Set("snapshot", Objects{Routers: s.Routers, Networks: s.Networks, VMs: vms, FloatingIPs: s.FloatingIPs})
	up = in.Plan(r1, testInstance, nil)
	require.NotNil(t, up.Router)
	assert.Equal(t, map[string]string{"10.10.0.100:80": "10.10.0.5:80"}, up.Router.LoadBalancers[0].Vips)

	whole := lbSnapshot()
	whole.VMs = vms
	whole.LoadBalancers = []LoadBalancer{lb}
	wp := Build(whole, testInstance)
	assert.Equal(t, lbRouterPlan(t, wp, "r1").LoadBalancers, up.Router.LoadBalancers)
	assert.Equal(t, lbNetworkPlan(t, wp, "net-a").LoadBalancers, in.Plan(netA, testInstance, nil).Network.LoadBalancers)

	// Gone: nothing refers to it, no row.
	affected = in.Set("lbs", Objects{})
	assert.Contains(t, affected, r1)
	assert.Empty(t, in.Plan(r1, testInstance, nil).Router.LoadBalancers)
}

// TestGoldenLoadBalancers keeps a whole plan with load balancers
// reviewable.
func TestGoldenLoadBalancers(t *testing.T) {
	s := lbSnapshot()
	lb2 := LoadBalancer{Name: "dns", ID: "dns-onos", Description: "resolvers", Network: "net-b", VIP: "10.20.0.53", Members: []string{"10.20.0.6"},
		Rules: []LBRule{{Protocol: "udp", PortMin: 53}, {Protocol: "tcp", PortMin: 53}, {Protocol: "icmp"}}, Created: t0}
	bad := LoadBalancer{Name: "bad", ID: "bad", Network: "net-a", VIP: "10.10.0.1", Members: []string{"10.10.0.99"},
		Rules: []LBRule{{Protocol: "tcp", PortMin: 443}}, Created: t0}
	lb2.HealthCheck = &LBHealthCheck{SourceIP: "10.20.0.250", Interval: 2}
	s.LoadBalancers = append(s.LoadBalancers, lb2, bad)
	s.FloatingIPs = []FloatingIP{fip("fip-web", "172.16.0.60", "10.10.0.100", "")}
	p := Build(s, testInstance)
	require.Empty(t, p.Failed)
	got, err := json.MarshalIndent(struct {
		Routers       []RouterPlan
		Networks      []NetworkPlan
		FloatingIPs   []FloatingIPStatus
		LoadBalancers []LoadBalancerStatus
		Errors        []string
	}{p.Routers, p.Networks, p.FloatingIPs, p.LoadBalancers, errTexts(p.Errors)}, "", "  ")
	require.NoError(t, err)
	got = append(got, '\n')
	path := filepath.Join("testdata", "loadbalancers.plan.golden")
	if *update {
		require.NoError(t, os.WriteFile(path, got, 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run go test ./translator -run TestGoldenLoadBalancers -update to create it")
	assert.Equal(t, string(want), string(got))
}

func lbRouterPlan(t *testing.T, p *Plan, name string) *RouterPlan {
	t.Helper()
	for i := range p.Routers {
		if p.Routers[i].Name == name {
			return &p.Routers[i]
		}
	}
	require.FailNow(t, "no plan of router "+name)
	return nil
}

func lbNetworkPlan(t *testing.T, p *Plan, name string) *NetworkPlan {
	t.Helper()
	for i := range p.Networks {
		if p.Networks[i].Name == name {
			return &p.Networks[i]
		}
	}
	require.FailNow(t, "no plan of network "+name)
	return nil
}

// TestSetRejectEmptyLB: the flag reaches the units with load balancers
// (net-b: its sibling row), once.
func TestSetRejectEmptyLB(t *testing.T) {
	s := lbSnapshot()
	s.LoadBalancers[0].Members = nil
	in := NewInputFrom(s)
	assert.Equal(t, []Unit{{KindNetwork, "net-a"}, {KindNetwork, "net-b"}, {KindRouter, "r1"}}, in.SetRejectEmptyLB(true))
	assert.Empty(t, in.SetRejectEmptyLB(true))
	up := in.Plan(Unit{KindRouter, "r1"}, testInstance, nil)
	require.NotNil(t, up.Router)
	assert.Equal(t, map[string]string{"reject": "true"}, up.Router.LoadBalancers[0].Options)
	np := in.Plan(Unit{KindNetwork, "net-a"}, testInstance, nil)
	assert.Equal(t, map[string]string{"reject": "true"}, np.Network.LoadBalancers[0].Options)
}

// TestLoadBalancerHealthCheck: spec.healthCheck gives every tcp/udp row
// the members' ip_port_mappings (their VM port and the source IP) and a
// Load_Balancer_Health_Check per VIP key (the floating IP's too), with
// OVN's defaults where the spec is silent; icmp rows get none. Its errors
// are the load balancer's.
func TestLoadBalancerHealthCheck(t *testing.T) {
	s := lbSnapshot()
	s.LoadBalancers[0].Rules = append(s.LoadBalancers[0].Rules, LBRule{Protocol: "icmp"})
	s.LoadBalancers[0].HealthCheck = &LBHealthCheck{SourceIP: "10.10.0.250", Interval: 2, FailureCount: 2}
	s.FloatingIPs = []FloatingIP{fip("fip-web", "172.16.0.60", "10.10.0.100", "")}
	p := Build(s, testInstance)
	require.Empty(t, p.Errors)
	rp := lbRouterPlan(t, p, "r1")
	require.Len(t, rp.LoadBalancers, 2)
	assert.Nil(t, rp.LoadBalancers[0].IPPortMappings, "icmp: nothing to probe")
	assert.Equal(t, map[string]string{"10.10.0.5": "kv-net-a_default_vm-a_eth1:10.10.0.250", "10.10.0.6": "kv-net-a_default_vm-a2_eth1:10.10.0.250"},
		rp.LoadBalancers[1].IPPortMappings)
	opts := map[string]string{"interval": "2", "timeout": "20", "success_count": "3", "failure_count": "2"}
	hcIDs := lbIDs("r1", "web")
	delete(hcIDs, KeyLoadBalancerID)
	assert.Equal(t, []LBHealthCheckRow{
		{LoadBalancer: "kv-lb-web_tcp", Row: &nbmodel.LoadBalancerHealthCheck{Vip: "10.10.0.100:80", Options: opts, ExternalIDs: hcIDs}},
		{LoadBalancer: "kv-lb-web_tcp", Row: &nbmodel.LoadBalancerHealthCheck{Vip: "172.16.0.60:80", Options: opts, ExternalIDs: hcIDs}},
	}, rp.LBHealthChecks)
	np := lbNetworkPlan(t, p, "net-a")
	require.Len(t, np.LBHealthChecks, 1)
	assert.Equal(t, "kv-lb-web_tcp_switch", np.LBHealthChecks[0].LoadBalancer)
	assert.Equal(t, "10.10.0.100:80", np.LBHealthChecks[0].Row.Vip)
	assert.Equal(t, rp.LoadBalancers[1].IPPortMappings, np.LoadBalancers[1].IPPortMappings)
	var children []Row
	for _, r := range rp.Rows() {
		if _, ok := r.Model.(*nbmodel.LoadBalancerHealthCheck); ok {
			children = append(children, r)
		}
	}
	require.Len(t, children, 2)
	assert.Equal(t, "kv-lb-web_tcp", children[0].Parent, "a child of its row")

	for name, c := range map[string]struct {
		hc   LBHealthCheck
		edit func(s *Snapshot)
		want string
	}{
		"no source":     {LBHealthCheck{}, nil, "spec.healthCheck.sourceIp is empty"},
		"outside":       {LBHealthCheck{SourceIP: "10.20.0.250"}, nil, "spec.healthCheck.sourceIp 10.20.0.250 is outside network net-a (10.10.0.0/24): OVN probes the members from the subnet"},
		"gateway":       {LBHealthCheck{SourceIP: "10.10.0.1"}, nil, "spec.healthCheck.sourceIp 10.10.0.1 is the gatewayIp of network net-a"},
		"the VIP":       {LBHealthCheck{SourceIP: "10.10.0.100"}, nil, "spec.healthCheck.sourceIp 10.10.0.100 is the VIP"},
		"a VM's":        {LBHealthCheck{SourceIP: "10.10.0.5"}, nil, "spec.healthCheck.sourceIp 10.10.0.5 is the address of VM port kv-net-a_default_vm-a_eth1 on network net-a"},
		"negative":      {LBHealthCheck{SourceIP: "10.10.0.250", Timeout: -1}, nil, "spec.healthCheck.timeout -1 is negative"},
		"icmp only":     {LBHealthCheck{SourceIP: "10.10.0.250"}, func(s *Snapshot) { s.LoadBalancers[0].Rules = []LBRule{{Protocol: "icmp"}} }, "spec.healthCheck needs a tcp or udp rule: OVN probes ports, not ICMP"},
		"in the ipPool": {LBHealthCheck{SourceIP: "10.10.0.250"}, func(s *Snapshot) { s.Networks[1].IPPool = &IPPool{Start: "10.10.0.2", End: "10.10.0.254"} }, "spec.healthCheck.sourceIp 10.10.0.250 is in the ipPool 10.10.0.2-10.10.0.254 of network net-a, the range a VM may be given its address from"},
	} {
		t.Run(name, func(t *testing.T) {
			s := lbSnapshot()
			hc := c.hc
			s.LoadBalancers[0].HealthCheck = &hc
			if c.edit != nil {
				c.edit(s)
			}
			require.Equal(t, "net-a", s.Networks[1].Name, "precondition")
			p := Build(s, testInstance)
			assert.Equal(t, []string{"LoadBalancer web: " + c.want}, errTexts(p.Errors))
			assert.Empty(t, lbRouterPlan(t, p, "r1").LoadBalancers)
			assert.Empty(t, lbNetworkPlan(t, p, "net-a").LBHealthChecks)
		})
	}
}

// TestLoadBalancerIPv6: a VIP on net-a's ipv6Cidr balances over VM ports'
// IPv6 addresses (a SLAAC one, a reported one), in OVN's bracketed form
// on the router's and the switch's rows; a member of the other family is
// left out with a note; an IPv6 floating IP of the VIP is a VIP key too;
// a VIP outside the ipv6Cidr, or on a network without one, is the load
// balancer's error.
func TestLoadBalancerIPv6(t *testing.T) {
	s := dualStackFIPSnapshot()
	for i, n := range s.Networks {
		if n.Name == "net-a" {
			s.Networks[i] = dualStack(n)
		}
	}
	vmA6 := SLAACAddress(netip.MustParsePrefix("fd00:10::/64"), "50:54:00:00:00:05").String()
	s.VMs = append(s.VMs, VMInterface{Namespace: "default", VMI: "vm-a2", Interface: "eth1", Network: "net-a", NetworkNamespace: "default",
		MAC: "50:54:00:00:00:16", IP: "10.10.0.6", IPv6: "fd00:10::a2", Node: "hv2"})
	s.LoadBalancers = []LoadBalancer{{Name: "web6", ID: "web6", Network: "net-a", VIP: "fd00:10::100", Members: []string{"fd00:10::a2", vmA6, "10.10.0.5"},
		Rules: []LBRule{{Protocol: "tcp", PortMin: 80}}, Created: t0}}
	s.FloatingIPs = []FloatingIP{fip("fip-web6", "2001:db8:ff::60", "fd00:10::100", "")}
	p := Build(s, testInstance)
	require.Empty(t, p.Failed)
	rp := lbRouterPlan(t, p, "r1")
	require.Len(t, rp.LoadBalancers, 1)
	backends := "[fd00:10::a2]:80,[" + vmA6 + "]:80" // sorted by address
	assert.Equal(t, map[string]string{"[fd00:10::100]:80": backends, "[2001:db8:ff::60]:80": backends}, rp.LoadBalancers[0].Vips)
	np := findNetwork(p, "net-a")
	require.Len(t, np.LoadBalancers, 1)
	assert.Equal(t, map[string]string{"[fd00:10::100]:80": backends}, np.LoadBalancers[0].Vips)
	require.Len(t, p.LoadBalancers, 1)
	assert.True(t, p.LoadBalancers[0].Ready)
	assert.Contains(t, p.LoadBalancers[0].Reason, "spec.members[2] 10.10.0.5 is not of the VIP's family (fd00:10::100): left out")

	// enableSnat false: the floating IP's allow policy lets the members'
	// IPv6 replies out, in IPv6 terms.
	s.Routers[0].EnableSNAT = false
	var allow []string
	for _, pol := range lbRouterPlan(t, Build(s, testInstance), "r1").Policies {
		if pol.Action == nbmodel.LogicalRouterPolicyActionAllow {
			allow = append(allow, pol.Match)
		}
	}
	assert.Equal(t, []string{"ip6.src == {fd00:10::a2, " + vmA6 + "} || ip6.dst == 2001:db8:ff::60"}, allow)

	for _, tt := range []struct {
		edit func(lb *LoadBalancer)
		want string
	}{
		{func(lb *LoadBalancer) { lb.VIP = "fd00:11::100" }, "LoadBalancer web6: spec.vip fd00:11::100 is outside network net-a's ipv6Cidr fd00:10::/64"},
		{func(lb *LoadBalancer) { lb.VIP = "fd00:10::1" }, "LoadBalancer web6: spec.vip fd00:10::1 is the ipv6GatewayIp of network net-a"},
		{func(lb *LoadBalancer) { lb.VIP = vmA6 }, "LoadBalancer web6: spec.vip " + vmA6 + " is the address of VM port kv-net-a_default_vm-a_eth1 on network net-a"},
		{func(lb *LoadBalancer) { lb.Network, lb.VIP = "net-c", "fd00:30::100" }, "LoadBalancer web6: spec.vip fd00:30::100 is IPv6 and network net-c has no ipv6Cidr"},
	} {
		s := dualStackFIPSnapshot()
		lb := LoadBalancer{Name: "web6", ID: "web6", Network: "net-a", VIP: "fd00:10::100", Members: []string{vmA6}, Rules: []LBRule{{Protocol: "tcp", PortMin: 80}}, Created: t0}
		tt.edit(&lb)
		s.LoadBalancers = []LoadBalancer{lb}
		p := Build(s, testInstance)
		require.Len(t, p.LoadBalancers, 1, tt.want)
		assert.False(t, p.LoadBalancers[0].Ready, tt.want)
		assert.Equal(t, tt.want, p.LoadBalancers[0].Reason)
	}
}

// TestLoadBalancerHealthCheckIPv6: a health check on an IPv6 VIP maps
// each member as ovn-nb.xml writes IPv6 ones ("[member]" to
// "port:[source]") and checks every VIP key, the floating IP's too; its
// source address is an IPv6 address of the network that is nobody's
// (named errors, ipv6Pool included); on an OVN before 23.03.0, whose
// ovn-controller cannot probe IPv6, it is a named limit, and the release
// becoming known re-plans the load balancer's units.
func TestLoadBalancerHealthCheckIPv6(t *testing.T) {
	vmA6 := SLAACAddress(netip.MustParsePrefix("fd00:10::/64"), "50:54:00:00:00:05").String()
	snap := func(hc LBHealthCheck) *Snapshot {
		s := dualStackFIPSnapshot()
		s.VMs = append(s.VMs, VMInterface{Namespace: "default", VMI: "vm-a2", Interface: "eth1", Network: "net-a", NetworkNamespace: "default",
			MAC: "50:54:00:00:00:16", IP: "10.10.0.6", IPv6: "fd00:10::a2", Node: "hv2"})
		s.LoadBalancers = []LoadBalancer{{Name: "web6", ID: "web6", Network: "net-a", VIP: "fd00:10::100", Members: []string{"fd00:10::a2", vmA6},
			Rules: []LBRule{{Protocol: "tcp", PortMin: 80}}, HealthCheck: &hc, Created: t0}}
		s.FloatingIPs = []FloatingIP{fip("fip-web6", "2001:db8:ff::60", "fd00:10::100", "")}
		return s
	}
	p := Build(snap(LBHealthCheck{SourceIP: "fd00:10::fa", Interval: 1}), testInstance)
	require.Empty(t, p.Errors)
	rp := lbRouterPlan(t, p, "r1")
	require.Len(t, rp.LoadBalancers, 1)
	mappings := map[string]string{
		"[fd00:10::a2]":  "kv-net-a_default_vm-a2_eth1:[fd00:10::fa]",
		"[" + vmA6 + "]": "kv-net-a_default_vm-a_eth1:[fd00:10::fa]",
	}
	assert.Equal(t, mappings, rp.LoadBalancers[0].IPPortMappings)
	var vips []string
	for _, hc := range rp.LBHealthChecks {
		vips = append(vips, hc.Row.Vip)
		assert.Equal(t, "1", hc.Row.Options["interval"])
	}
	assert.Equal(t, []string{"[2001:db8:ff::60]:80", "[fd00:10::100]:80"}, vips)
	np := lbNetworkPlan(t, p, "net-a")
	require.Len(t, np.LBHealthChecks, 1)
	assert.Equal(t, "[fd00:10::100]:80", np.LBHealthChecks[0].Row.Vip)
	assert.Equal(t, mappings, np.LoadBalancers[0].IPPortMappings)

	for name, c := range map[string]struct {
		src  string
		edit func(s *Snapshot)
		want string
	}{
		"IPv4 source":   {"10.10.0.250", nil, "spec.healthCheck.sourceIp 10.10.0.250 is not of the family of VIP fd00:10::100: OVN probes a member from an address of its own family"},
		"not an IP":     {"fd00:10::zz", nil, `spec.healthCheck.sourceIp "fd00:10::zz" is not an IPv6 address`},
		"outside":       {"fd00:11::fa", nil, "spec.healthCheck.sourceIp fd00:11::fa is outside network net-a (ipv6Cidr fd00:10::/64): OVN probes the members from the subnet"},
		"gateway":       {"fd00:10::1", nil, "spec.healthCheck.sourceIp fd00:10::1 is the ipv6GatewayIp of network net-a"},
		"the VIP":       {"fd00:10::100", nil, "spec.healthCheck.sourceIp fd00:10::100 is the VIP"},
		"a VM's SLAAC":  {vmA6, nil, "spec.healthCheck.sourceIp " + vmA6 + " is the address of VM port kv-net-a_default_vm-a_eth1 on network net-a"},
		"a VM's status": {"fd00:10::a2", nil, "spec.healthCheck.sourceIp fd00:10::a2 is the address of VM port kv-net-a_default_vm-a2_eth1 on network net-a"},
		"in ipv6Pool": {"fd00:10::fa", func(s *Snapshot) { s.Networks[1].IPv6Pool = &IPPool{Start: "fd00:10::10", End: "fd00:10::ffff"} },
			"spec.healthCheck.sourceIp fd00:10::fa is in the ipv6Pool fd00:10::10-fd00:10::ffff of network net-a, the range a VM may be given its address from"},
		"OVN 22.03": {"fd00:10::fa", func(s *Snapshot) { s.OVNRelease = "22.03.8" },
			"spec.healthCheck is not supported with IPv6 VIP fd00:10::100 on OVN 22.03.8: ovn-controller probes IPv6 members from OVN 23.03.0 on"},
	} {
		t.Run(name, func(t *testing.T) {
			s := snap(LBHealthCheck{SourceIP: c.src})
			require.Equal(t, "net-a", s.Networks[1].Name, "precondition")
			if c.edit != nil {
				c.edit(s)
			}
			p := Build(s, testInstance)
			require.Len(t, p.LoadBalancers, 1)
			assert.False(t, p.LoadBalancers[0].Ready)
			assert.Equal(t, "LoadBalancer web6: "+c.want, p.LoadBalancers[0].Reason)
			assert.Empty(t, lbRouterPlan(t, p, "r1").LoadBalancers)
		})
	}

	// The release read from the SB: the health-checked IPv6 load
	// balancer's units, and only when it changes whether OVN probes IPv6.
	in := NewInputFrom(snap(LBHealthCheck{SourceIP: "fd00:10::fa"}))
	units := []Unit{{KindNetwork, "net-a"}, {KindNetwork, "net-b"}, {KindRouter, "r1"}}
	assert.Empty(t, in.SetOVNRelease("23.03.1"), "unknown was taken to probe IPv6")
	assert.Equal(t, units, in.SetOVNRelease("22.03.8"))
	r1 := in.Plan(Unit{KindRouter, "r1"}, testInstance, nil)
	assert.Empty(t, r1.Router.LoadBalancers, "on 22.03 the load balancer fails")
	assert.Empty(t, in.SetOVNRelease("22.03.9"))
	assert.Equal(t, units, in.SetOVNRelease("26.03.0"))
	r1 = in.Plan(Unit{KindRouter, "r1"}, testInstance, nil)
	assert.Len(t, r1.Router.LoadBalancers, 1)
}

// TestZoneOfflineMembersIPv6: an IPv6 member its own zone finds offline
// is left out of the other zones' rows, as an IPv4 one (its backend is
// "[ip]:port", its mapping key "[ip]").
func TestZoneOfflineMembersIPv6(t *testing.T) {
	s := dualStackFIPSnapshot()
	s.Chassis = zoneChassis()
	s.ChassisKnown = true
	s.VMs = append(s.VMs, VMInterface{Namespace: "default", VMI: "vm-a2", Interface: "eth1", Network: "net-a", NetworkNamespace: "default",
		MAC: "50:54:00:00:00:16", IP: "10.10.0.6", Node: "hv2"})
	a2 := SLAACAddress(netip.MustParsePrefix("fd00:10::/64"), "50:54:00:00:00:16").String()
	vmA6 := SLAACAddress(netip.MustParsePrefix("fd00:10::/64"), "50:54:00:00:00:05").String()
	s.LoadBalancers = []LoadBalancer{{Name: "web6", ID: "web6", Network: "net-a", VIP: "fd00:10::100", Members: []string{a2, vmA6},
		Rules: []LBRule{{Protocol: "tcp", PortMin: 80}}, HealthCheck: &LBHealthCheck{SourceIP: "fd00:10::fa"}, Created: t0}}
	in := NewInputFrom(s)
	require.True(t, in.Zoned())
	const vip = "[fd00:10::100]:80"
	both := "[" + vmA6 + "]:80,[" + a2 + "]:80" // sorted by address
	require.True(t, netip.MustParseAddr(vmA6).Less(netip.MustParseAddr(a2)), "precondition")
	switchRow := func(z string) *nbmodel.LoadBalancer {
		na := in.Plan(Unit{KindNetwork, "net-a"}, testInstance, nil)
		require.Empty(t, na.Errs)
		return zoneLBRow(na.Network.Zones[z], "kv-lb-web6_tcp_switch")
	}
	require.NotNil(t, switchRow("gw1"))
	assert.Equal(t, both, switchRow("gw1").Vips[vip])

	down := OfflineMember{Port: VMPortName("net-a", "default", "vm-a2", "eth1"), IP: a2, Protocol: "tcp", PortNum: 80}
	assert.NotEmpty(t, in.SetOfflineMembers("hv2", []OfflineMember{down}))
	assert.Equal(t, "["+vmA6+"]:80", switchRow("gw1").Vips[vip], "out in a zone where it does not live")
	assert.Equal(t, "["+vmA6+"]:80", switchRow("hv1").Vips[vip])
	assert.Equal(t, both, switchRow("hv2").Vips[vip], "its own zone keeps it: OVN decides there")
	r1 := in.Plan(Unit{KindRouter, "r1"}, testInstance, nil)
	assert.Equal(t, "["+vmA6+"]:80", zoneLBRow(r1.Router.Zones["gw1"], "kv-lb-web6_tcp").Vips[vip], "the router's row in its home zone")
}
