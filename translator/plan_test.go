package translator

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubevirt-ovn/kubevirt-ovn/nbmodel"
)

var update = flag.Bool("update", false, "rewrite golden files")

// testInstance is the managed-by value every test plans with.
const testInstance = "test"

// t0 is the creation time of the oldest router in the tests.
var t0 = time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC)

// netIDs and routerIDs are the owner external_ids, spelled out rather than
// built with OwnerIDs so that a change of keys or values shows.
func netIDs(name string) map[string]string {
	return map[string]string{
		"kubevirt-ovn/managed-by": testInstance,
		"kubevirt-ovn/owner-kind": "Network",
		"kubevirt-ovn/owner":      name,
	}
}

// switchIDs are a switch's netIDs with the mark ovn-kubernetes' stale
// node switch cleanup skips.
func switchIDs(name string) map[string]string {
	ids := netIDs(name)
	ids["k8s.ovn.org/network"] = "kubevirt-ovn/not-ovn-kubernetes"
	return ids
}

// pinnedIDs are routerIDs with the mark of the spec.gateway chassis.
func pinnedIDs(name string) map[string]string {
	ids := routerIDs(name)
	ids["kubevirt-ovn/pinned"] = "true"
	return ids
}

func routerIDs(name string) map[string]string {
	return map[string]string{
		"kubevirt-ovn/managed-by": testInstance,
		"kubevirt-ovn/owner-kind": "VirtualRouter",
		"kubevirt-ovn/owner":      name,
	}
}

func vmIDs(network, vmi string) map[string]string {
	ids := netIDs(network)
	ids["kubevirt-ovn/vmi"] = vmi
	return ids
}

func withDescription(ids map[string]string, d string) map[string]string {
	ids["kubevirt-ovn/description"] = d
	return ids
}

func ptr[T any](v T) *T { return &v }

func findNetwork(p *Plan, name string) *NetworkPlan {
	for i := range p.Networks {
		if p.Networks[i].Name == name {
			return &p.Networks[i]
		}
	}
	return nil
}

func findRouter(p *Plan, name string) *RouterPlan {
	for i := range p.Routers {
		if p.Routers[i].Name == name {
			return &p.Routers[i]
		}
	}
	return nil
}

func portNames(ports []*nbmodel.LogicalSwitchPort) []string {
	var names []string
	for _, p := range ports {
		names = append(names, p.Name)
	}
	return names
}

func errTexts(errs []error) []string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Error())
	}
	return out
}

// Networks of the router tests.
func publicNet() Network {
	return Network{Name: "public", Namespace: "default", Type: NetworkFlat, CIDR: "172.16.0.0/24", GatewayIP: "172.16.0.1", PhysicalNetworkName: "physnet1"}
}

func netA() Network {
	return Network{Name: "net-a", Namespace: "default", Type: NetworkGeneve, CIDR: "10.10.0.0/24", GatewayIP: "10.10.0.1"}
}

func netB() Network {
	return Network{Name: "net-b", Namespace: "default", Type: NetworkVXLAN, CIDR: "10.20.0.0/24", GatewayIP: "10.20.0.1"}
}

func TestBuildNetworkTypes(t *testing.T) {
	tests := []struct {
		name     string
		network  Network
		localnet *nbmodel.LogicalSwitchPort // nil: overlay, no localnet port
	}{
		{
			name:    "FLAT defaults network_name to the network name",
			network: Network{Name: "n1", Namespace: "default", Type: NetworkFlat, CIDR: "192.168.1.0/24"},
			localnet: &nbmodel.LogicalSwitchPort{
				Name: "kv-ln-n1", Type: "localnet", Addresses: []string{"unknown"},
				Options: map[string]string{"network_name": "n1"}, ExternalIDs: netIDs("n1"),
			},
		},
		{
			name:    "FLAT with physicalNetworkName",
			network: Network{Name: "n1", Namespace: "default", Type: NetworkFlat, CIDR: "192.168.1.0/24", PhysicalNetworkName: "physnet1"},
			localnet: &nbmodel.LogicalSwitchPort{
				Name: "kv-ln-n1", Type: "localnet", Addresses: []string{"unknown"},
				Options: map[string]string{"network_name": "physnet1"}, ExternalIDs: netIDs("n1"),
			},
		},
		{
			name:    "VLAN tags the localnet port with segmentId",
			network: Network{Name: "n1", Namespace: "default", Type: NetworkVLAN, SegmentID: "101", CIDR: "192.168.1.0/24", PhysicalNetworkName: "physnet2"},
			localnet: &nbmodel.LogicalSwitchPort{
				Name: "kv-ln-n1", Type: "localnet", Addresses: []string{"unknown"},
				Options: map[string]string{"network_name": "physnet2"}, Tag: ptr(101), ExternalIDs: netIDs("n1"),
			},
		},
		{
			name:    "lower-case vlan",
			network: Network{Name: "n1", Namespace: "default", Type: "vlan", SegmentID: "4094", CIDR: "192.168.1.0/24"},
			localnet: &nbmodel.LogicalSwitchPort{
				Name: "kv-ln-n1", Type: "localnet", Addresses: []string{"unknown"},
				Options: map[string]string{"network_name": "n1"}, Tag: ptr(4094), ExternalIDs: netIDs("n1"),
			},
		},
		{
			name:    "lower-case flat",
			network: Network{Name: "n1", Namespace: "default", Type: "flat", CIDR: "192.168.1.0/24"},
			localnet: &nbmodel.LogicalSwitchPort{
				Name: "kv-ln-n1", Type: "localnet", Addresses: []string{"unknown"},
				Options: map[string]string{"network_name": "n1"}, ExternalIDs: netIDs("n1"),
			},
		},
		{name: "VXLAN", network: Network{Name: "n1", Namespace: "default", Type: NetworkVXLAN, SegmentID: "200", CIDR: "192.168.1.0/24"}},
		{name: "GENEVE", network: Network{Name: "n1", Namespace: "default", Type: NetworkGeneve, SegmentID: "100", CIDR: "192.168.1.0/24"}},
		{name: "GRE", network: Network{Name: "n1", Namespace: "default", Type: NetworkGRE, CIDR: "192.168.1.0/24"}},
		{name: "STT", network: Network{Name: "n1", Namespace: "default", Type: NetworkSTT, CIDR: "192.168.1.0/24"}},
		{name: "lower-case geneve", network: Network{Name: "n1", Namespace: "default", Type: "geneve", CIDR: "192.168.1.0/24"}},
		{name: "mixed-case Vxlan", network: Network{Name: "n1", Namespace: "default", Type: "Vxlan", CIDR: "192.168.1.0/24"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := Build(&Snapshot{Networks: []Network{tc.network}}, testInstance)
			require.Empty(t, p.Errors)
			require.Empty(t, p.Failed)
			want := NetworkPlan{
				Name:   "n1",
				Switch: &nbmodel.LogicalSwitch{Name: "kv-n1", ExternalIDs: switchIDs("n1")},
			}
			if tc.localnet != nil {
				want.Ports = []*nbmodel.LogicalSwitchPort{tc.localnet}
			}
			assert.Equal(t, []NetworkPlan{want}, p.Networks)
			assert.Empty(t, p.Routers)
		})
	}
}

func TestBuildRouter(t *testing.T) {
	nets := []Network{publicNet(), netA(), netB()}
	tests := []struct {
		name   string
		router Router
		want   RouterPlan
	}{
		{
			name: "internal networks only",
			router: Router{
				Name: "r1", MAC: "fa:16:3e:00:00:01", Description: "two nets",
				Internal: []string{"net-b", "net-a"},
			},
			want: RouterPlan{
				Name: "r1",
				Router: &nbmodel.LogicalRouter{
					Name: "kv-r1",
					Options: map[string]string{
						"always_learn_from_arp_request": "false",
						"dynamic_neigh_routers":         "true",
					},
					ExternalIDs: withDescription(routerIDs("r1"), "two nets"),
				},
				Ports: []*nbmodel.LogicalRouterPort{
					{Name: "kv-rtos-r1_net-a", MAC: "fa:16:3e:00:00:01", Networks: []string{"10.10.0.1/24"}, ExternalIDs: routerIDs("r1")},
					{Name: "kv-rtos-r1_net-b", MAC: "fa:16:3e:00:00:01", Networks: []string{"10.20.0.1/24"}, ExternalIDs: routerIDs("r1")},
				},
				SwitchPorts: []SwitchPort{
					{Network: "net-a", Port: &nbmodel.LogicalSwitchPort{
						Name: "kv-stor-net-a_r1", Type: "router", Addresses: []string{"router"},
						Options: map[string]string{"router-port": "kv-rtos-r1_net-a"}, ExternalIDs: routerIDs("r1"),
					}},
					{Network: "net-b", Port: &nbmodel.LogicalSwitchPort{
						Name: "kv-stor-net-b_r1", Type: "router", Addresses: []string{"router"},
						Options: map[string]string{"router-port": "kv-rtos-r1_net-b"}, ExternalIDs: routerIDs("r1"),
					}},
				},
			},
		},
		{
			name: "upper-case MAC is normalized, no description key without description",
			router: Router{
				Name: "r1", MAC: "FA:16:3E:AB:CD:EF",
				Internal: []string{"net-a"},
			},
			want: RouterPlan{
				Name: "r1",
				Router: &nbmodel.LogicalRouter{
					Name: "kv-r1",
					Options: map[string]string{
						"always_learn_from_arp_request": "false",
						"dynamic_neigh_routers":         "true",
					},
					ExternalIDs: routerIDs("r1"),
				},
				Ports: []*nbmodel.LogicalRouterPort{
					{Name: "kv-rtos-r1_net-a", MAC: "fa:16:3e:ab:cd:ef", Networks: []string{"10.10.0.1/24"}, ExternalIDs: routerIDs("r1")},
				},
				SwitchPorts: []SwitchPort{
					{Network: "net-a", Port: &nbmodel.LogicalSwitchPort{
						Name: "kv-stor-net-a_r1", Type: "router", Addresses: []string{"router"},
						Options: map[string]string{"router-port": "kv-rtos-r1_net-a"}, ExternalIDs: routerIDs("r1"),
					}},
				},
			},
		},
		{
			name: "external with SNAT and peer router with MAC",
			router: Router{
				Name: "r1", MAC: "fa:16:3e:00:00:01", Description: "edge",
				EnableSNAT: true,
				Internal:   []string{"net-a", "net-b"},
				External:   &External{IP: "172.16.0.100", Network: "public"},
				PeerRouter: &PeerRouter{IP: "172.16.0.1", MAC: "00:00:00:00:EE:01"},
				Gateway:    "gw1",
			},
			want: RouterPlan{
				Name: "r1",
				Router: &nbmodel.LogicalRouter{
					Name: "kv-r1",
					Options: map[string]string{
						"always_learn_from_arp_request": "false",
						"dynamic_neigh_routers":         "true",
					},
					ExternalIDs: withDescription(routerIDs("r1"), "edge"),
				},
				Ports: []*nbmodel.LogicalRouterPort{
					{Name: "kv-rtoe-r1", MAC: "0a:58:ac:10:00:64", Networks: []string{"172.16.0.100/24"}, ExternalIDs: pinnedIDs("r1")},
					{Name: "kv-rtos-r1_net-a", MAC: "fa:16:3e:00:00:01", Networks: []string{"10.10.0.1/24"}, ExternalIDs: routerIDs("r1")},
					{Name: "kv-rtos-r1_net-b", MAC: "fa:16:3e:00:00:01", Networks: []string{"10.20.0.1/24"}, ExternalIDs: routerIDs("r1")},
				},
				GatewayChassis: []*nbmodel.GatewayChassis{
					{Name: "kv-rtoe-r1_gw1", ChassisName: "gw1", Priority: 1, ExternalIDs: routerIDs("r1")},
				},
				SwitchPorts: []SwitchPort{
					{Network: "public", Port: &nbmodel.LogicalSwitchPort{
						Name: "kv-etor-r1", Type: "router", Addresses: []string{"router"},
						Options:     map[string]string{"router-port": "kv-rtoe-r1", "nat-addresses": "router"},
						ExternalIDs: routerIDs("r1"),
					}},
					{Network: "net-a", Port: &nbmodel.LogicalSwitchPort{
						Name: "kv-stor-net-a_r1", Type: "router", Addresses: []string{"router"},
						Options: map[string]string{"router-port": "kv-rtos-r1_net-a"}, ExternalIDs: routerIDs("r1"),
					}},
					{Network: "net-b", Port: &nbmodel.LogicalSwitchPort{
						Name: "kv-stor-net-b_r1", Type: "router", Addresses: []string{"router"},
						Options: map[string]string{"router-port": "kv-rtos-r1_net-b"}, ExternalIDs: routerIDs("r1"),
					}},
				},
				NATs: []*nbmodel.NAT{
					{Type: "snat", ExternalIP: "172.16.0.100", LogicalIP: "10.10.0.0/24", ExternalPortRange: "1025-65535", ExternalIDs: routerIDs("r1")},
					{Type: "snat", ExternalIP: "172.16.0.100", LogicalIP: "10.20.0.0/24", ExternalPortRange: "1025-65535", ExternalIDs: routerIDs("r1")},
				},
				Routes: []*nbmodel.LogicalRouterStaticRoute{
					{IPPrefix: "0.0.0.0/0", Nexthop: "172.16.0.1", OutputPort: ptr("kv-rtoe-r1"), ExternalIDs: routerIDs("r1")},
				},
				MACBindings: []*nbmodel.StaticMACBinding{
					{LogicalPort: "kv-rtoe-r1", IP: "172.16.0.1", MAC: "00:00:00:00:ee:01", OverrideDynamicMAC: true},
				},
				Gateway: &GatewayChoice{Chassis: []string{"gw1"}},
				SNATIP:  "172.16.0.100",
			},
		},
		{
			name: "enableSnat false: no external side at all (as the seed: no SNAT IP answered, nothing routed out)",
			router: Router{
				Name: "r2", MAC: "fa:16:3e:00:00:02",
				Internal:   []string{"net-a"},
				External:   &External{IP: "172.16.0.5", Network: "public"},
				PeerRouter: &PeerRouter{IP: "172.16.0.254", MAC: "00:00:00:00:ee:02"},
				Gateway:    "gw-unknown",
			},
			want: RouterPlan{
				Name: "r2",
				Router: &nbmodel.LogicalRouter{
					Name: "kv-r2",
					Options: map[string]string{
						"always_learn_from_arp_request": "false",
						"dynamic_neigh_routers":         "true",
					},
					ExternalIDs: routerIDs("r2"),
				},
				Ports: []*nbmodel.LogicalRouterPort{
					{Name: "kv-rtos-r2_net-a", MAC: "fa:16:3e:00:00:02", Networks: []string{"10.10.0.1/24"}, ExternalIDs: routerIDs("r2")},
				},
				SwitchPorts: []SwitchPort{
					{Network: "net-a", Port: &nbmodel.LogicalSwitchPort{
						Name: "kv-stor-net-a_r2", Type: "router", Addresses: []string{"router"},
						Options: map[string]string{"router-port": "kv-rtos-r2_net-a"}, ExternalIDs: routerIDs("r2"),
					}},
				},
			},
		},
		{
			name: "peer without MAC has no binding",
			router: Router{
				Name: "r2", MAC: "fa:16:3e:00:00:02", EnableSNAT: true,
				Internal:   []string{"net-a"},
				External:   &External{IP: "172.16.0.5", Network: "public"},
				PeerRouter: &PeerRouter{IP: "172.16.0.254"},
				Gateway:    "gw2",
			},
			want: RouterPlan{
				Name: "r2",
				Router: &nbmodel.LogicalRouter{
					Name: "kv-r2",
					Options: map[string]string{
						"always_learn_from_arp_request": "false",
						"dynamic_neigh_routers":         "true",
					},
					ExternalIDs: routerIDs("r2"),
				},
				Ports: []*nbmodel.LogicalRouterPort{
					{Name: "kv-rtoe-r2", MAC: "0a:58:ac:10:00:05", Networks: []string{"172.16.0.5/24"}, ExternalIDs: pinnedIDs("r2")},
					{Name: "kv-rtos-r2_net-a", MAC: "fa:16:3e:00:00:02", Networks: []string{"10.10.0.1/24"}, ExternalIDs: routerIDs("r2")},
				},
				GatewayChassis: []*nbmodel.GatewayChassis{
					{Name: "kv-rtoe-r2_gw2", ChassisName: "gw2", Priority: 1, ExternalIDs: routerIDs("r2")},
				},
				SwitchPorts: []SwitchPort{
					{Network: "public", Port: &nbmodel.LogicalSwitchPort{
						Name: "kv-etor-r2", Type: "router", Addresses: []string{"router"},
						Options:     map[string]string{"router-port": "kv-rtoe-r2", "nat-addresses": "router"},
						ExternalIDs: routerIDs("r2"),
					}},
					{Network: "net-a", Port: &nbmodel.LogicalSwitchPort{
						Name: "kv-stor-net-a_r2", Type: "router", Addresses: []string{"router"},
						Options: map[string]string{"router-port": "kv-rtos-r2_net-a"}, ExternalIDs: routerIDs("r2"),
					}},
				},
				NATs: []*nbmodel.NAT{
					{Type: nbmodel.NATTypeSNAT, ExternalIP: "172.16.0.5", LogicalIP: "10.10.0.0/24", ExternalPortRange: SNATPortRange, ExternalIDs: routerIDs("r2")},
				},
				Routes: []*nbmodel.LogicalRouterStaticRoute{
					{IPPrefix: "0.0.0.0/0", Nexthop: "172.16.0.254", OutputPort: ptr("kv-rtoe-r2"), ExternalIDs: routerIDs("r2")},
				},
				Gateway: &GatewayChoice{Chassis: []string{"gw2"}},
				SNATIP:  "172.16.0.5",
			},
		},
		{
			name: "external without peer router has no route",
			router: Router{
				Name: "r3", MAC: "fa:16:3e:00:00:03",
				EnableSNAT: true,
				External:   &External{IP: "172.16.0.200", Network: "public"},
				Gateway:    "gw1",
			},
			want: RouterPlan{
				Name: "r3",
				Router: &nbmodel.LogicalRouter{
					Name: "kv-r3",
					Options: map[string]string{
						"always_learn_from_arp_request": "false",
						"dynamic_neigh_routers":         "true",
					},
					ExternalIDs: routerIDs("r3"),
				},
				Ports: []*nbmodel.LogicalRouterPort{
					{Name: "kv-rtoe-r3", MAC: "0a:58:ac:10:00:c8", Networks: []string{"172.16.0.200/24"}, ExternalIDs: pinnedIDs("r3")},
				},
				GatewayChassis: []*nbmodel.GatewayChassis{
					{Name: "kv-rtoe-r3_gw1", ChassisName: "gw1", Priority: 1, ExternalIDs: routerIDs("r3")},
				},
				SwitchPorts: []SwitchPort{
					{Network: "public", Port: &nbmodel.LogicalSwitchPort{
						Name: "kv-etor-r3", Type: "router", Addresses: []string{"router"},
						Options:     map[string]string{"router-port": "kv-rtoe-r3", "nat-addresses": "router"},
						ExternalIDs: routerIDs("r3"),
					}},
				},
				Gateway: &GatewayChoice{Chassis: []string{"gw1"}},
				SNATIP:  "172.16.0.200",
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := &Snapshot{Networks: nets, Routers: []Router{tc.router}}
			p := Build(s, testInstance)
			require.Empty(t, p.Errors)
			require.Empty(t, p.Failed)
			require.Len(t, p.Routers, 1)
			assert.Equal(t, tc.want, p.Routers[0])
			// The router's rows do not change the networks' own rows.
			assert.Equal(t, []string{"net-a", "net-b", "public"}, []string{p.Networks[0].Name, p.Networks[1].Name, p.Networks[2].Name})
		})
	}
}

// TestBuildRouterDualStack: a dual stack internal network's router port
// has both gateways and advertises its /64 for SLAAC, with the network's
// MTU and first IPv6 DNS server; an IPv4-only network's has neither; a
// network with an ipv6Cidr but no ipv6GatewayIp has no IPv6 router side.
func TestBuildRouterDualStack(t *testing.T) {
	a := dualStack(netA())
	a.MTU, a.DNSes = 1450, []string{"8.8.8.8", "2001:4860:4860::8888", "2001:4860:4860::8844"}
	b := dualStack(netB())
	b.IPv6GatewayIP = ""
	s := &Snapshot{Networks: []Network{a, b}, Routers: []Router{{Name: "r1", MAC: "02:00:00:00:00:01", Internal: []string{"net-a", "net-b"}}}}
	p := Build(s, testInstance)
	require.Empty(t, p.Errors)
	rp := findRouter(p, "r1")
	require.NotNil(t, rp)
	require.Len(t, rp.Ports, 2)
	assert.Equal(t, &nbmodel.LogicalRouterPort{
		Name: "kv-rtos-r1_net-a", MAC: "02:00:00:00:00:01", Networks: []string{"10.10.0.1/24", "fd00:10::1/64"},
		Ipv6RaConfigs: map[string]string{"address_mode": "slaac", "send_periodic": "true", "max_interval": "60", "min_interval": "20", "mtu": "1450", "rdnss": "2001:4860:4860::8888"},
		ExternalIDs:   routerIDs("r1"),
	}, rp.Ports[0])
	assert.Equal(t, []string{"10.20.0.1/24"}, rp.Ports[1].Networks)
	assert.Empty(t, rp.Ports[1].Ipv6RaConfigs)
	// A VM port of net-b still has its SLAAC address: the network is dual
	// stack on its switch, routed or not.
	s.VMs = []VMInterface{{Namespace: "default", VMI: "vm1", Interface: "eth1", Network: "net-b", NetworkNamespace: "default", MAC: "50:54:00:00:00:06", IP: "10.20.0.6"}}
	np := findNetwork(Build(s, testInstance), "net-b")
	require.NotNil(t, np)
	assert.Equal(t, []string{"50:54:00:00:00:06 10.20.0.6 fd00:20::5254:ff:fe00:6"}, np.Ports[0].Addresses)
}

// TestBuildRouterExternalIPv6: the gateway port gets the router's
// external IPv6 address beside its SNAT IP, an IPv6 default route to the
// peer (its MAC pinned for that address too), and NAT66 rows only with
// enableIpv6Snat.
func TestBuildRouterExternalIPv6(t *testing.T) {
	pub := publicNet()
	pub.IPv6CIDR = "2001:db8:ff::/64"
	s := &Snapshot{Networks: []Network{pub, dualStack(netA()), netB()}, Routers: []Router{{
		Name: "r1", MAC: "02:00:00:00:00:01", EnableSNAT: true, Gateway: "gw1", Internal: []string{"net-a", "net-b"},
		External:   &External{IP: "172.16.0.10", Network: "public", IPv6: "2001:db8:ff::10"},
		PeerRouter: &PeerRouter{IP: "172.16.0.1", MAC: "00:00:00:00:ee:01", IPv6: "2001:db8:ff::1"},
	}}}
	p := Build(s, testInstance)
	require.Empty(t, p.Errors)
	rp := findRouter(p, "r1")
	require.NotNil(t, rp)
	var gw *nbmodel.LogicalRouterPort
	for _, lrp := range rp.Ports {
		if lrp.Name == GatewayPortName("r1") {
			gw = lrp
		}
	}
	require.NotNil(t, gw)
	assert.Equal(t, []string{"172.16.0.10/24", "2001:db8:ff::10/64"}, gw.Networks)
	var routes []string
	for _, r := range rp.Routes {
		routes = append(routes, r.IPPrefix+" via "+r.Nexthop)
	}
	assert.Equal(t, []string{"0.0.0.0/0 via 172.16.0.1", "::/0 via 2001:db8:ff::1"}, routes)
	var bindings []string
	for _, b := range rp.MACBindings {
		bindings = append(bindings, b.IP+" "+b.MAC)
	}
	assert.Equal(t, []string{"172.16.0.1 00:00:00:00:ee:01", "2001:db8:ff::1 00:00:00:00:ee:01"}, bindings)
	nats := func(rp *RouterPlan) []string {
		var out []string
		for _, n := range rp.NATs {
			out = append(out, n.Type+" "+n.LogicalIP+" "+n.ExternalIP)
		}
		return out
	}
	assert.Equal(t, []string{"snat 10.10.0.0/24 172.16.0.10", "snat 10.20.0.0/24 172.16.0.10"}, nats(rp), "IPv6 routed")

	s.Routers[0].EnableIPv6SNAT = true
	rp = findRouter(Build(s, testInstance), "r1")
	assert.Equal(t, []string{"snat 10.10.0.0/24 172.16.0.10", "snat 10.20.0.0/24 172.16.0.10", "snat fd00:10::/64 2001:db8:ff::10"}, nats(rp),
		"NAT66 for the dual stack network only")
}

// TestExternalIPv6IsAClaim: two routers naming one spec.external.ipv6:
// the older keeps it, the other fails with a named error; a floating IP
// of that address is the floating IP's error.
func TestExternalIPv6IsAClaim(t *testing.T) {
	pub := publicNet()
	pub.IPv6CIDR = "2001:db8:ff::/64"
	router := func(name, ip string, created time.Time, internal string) Router {
		return Router{Name: name, EnableSNAT: true, Gateway: "gw1", Internal: []string{internal}, Created: created,
			External: &External{IP: ip, Network: "public", IPv6: "2001:db8:ff::10"}}
	}
	s := &Snapshot{Networks: []Network{pub, netA(), netB()}, Routers: []Router{
		router("r2", "172.16.0.11", t0.Add(time.Hour), "net-b"), router("r1", "172.16.0.10", t0, "net-a"),
	}, FloatingIPs: []FloatingIP{{Name: "f", ID: "f", Router: "r1", Network: "public", IP: "2001:db8:ff::10", Created: t0}}}
	p := Build(s, testInstance)
	assert.NotNil(t, findRouter(p, "r1"))
	assert.Nil(t, findRouter(p, "r2"))
	require.NotEmpty(t, p.Errors)
	assert.Contains(t, errTexts(p.Errors), "VirtualRouter r2: spec.external.ipv6 2001:db8:ff::10 is already the external IPv6 address of VirtualRouter r1")
	require.Len(t, p.FloatingIPs, 1)
	assert.Equal(t, "FloatingIp f: spec.floatingIp 2001:db8:ff::10 is the spec.external.ipv6 of VirtualRouter r1", p.FloatingIPs[0].Reason)
}

// TestDeclaredIPv6: an IPv6 address declared in the interfaces annotation
// is the port's, in place of the SLAAC one; one outside the ipv6Cidr, on a
// network without one, or no IPv6 address is the interface's error naming
// the annotation's field.
func TestDeclaredIPv6(t *testing.T) {
	const field = "metadata.annotations[interfaces][net-a].ipv6Address"
	for _, tt := range []struct {
		ipv6, cidr, addrs, err string
	}{
		{"fd00:10::5,fe80::1", "fd00:10::/64", "50:54:00:00:00:05 10.10.0.5 fd00:10::5", ""},
		{"fd00:11::5", "fd00:10::/64", "", field + " fd00:11::5 is outside network net-a's ipv6Cidr fd00:10::/64"},
		{"fd00:10::5", "", "", field + " fd00:10::5 is declared but network net-a has no ipv6Cidr"},
		{"10.10.0.9", "fd00:10::/64", "", field + ` "10.10.0.9" is not an IPv6 address`},
		{"fd00:10::1", "fd00:10::/64", "", field + " fd00:10::1 is the ipv6GatewayIp of network net-a"},
	} {
		a := netA()
		if tt.cidr != "" {
			a = dualStack(a)
		}
		s := &Snapshot{Networks: []Network{a}, VMs: []VMInterface{{Namespace: "default", VMI: "vm1", Interface: "eth1", Network: "net-a", NetworkNamespace: "default",
			MAC: "50:54:00:00:00:05", IP: "10.10.0.5", IPv6: tt.ipv6, IPv6Field: field}}}
		p := Build(s, testInstance)
		np := findNetwork(p, "net-a")
		require.NotNil(t, np, tt.ipv6)
		if tt.err != "" {
			require.Len(t, p.Errors, 1, tt.ipv6)
			assert.Equal(t, "VirtualMachineInstance default/vm1: "+tt.err, p.Errors[0].Error())
			continue
		}
		require.Empty(t, p.Errors)
		assert.Equal(t, []string{tt.addrs}, np.Ports[0].Addresses)
	}
}

// TestBuildDHCPv6: ipv6AddressMode picks the advertisement's address
// mode and the DHCPv6 options the VM ports refer to: stateless answers
// information requests (DNS), stateful offers the port's EUI-64 address,
// first in its addresses, or the address its interfaces annotation
// declares, without the EUI-64 one; slaac has no DHCPv6 options.
func TestBuildDHCPv6(t *testing.T) {
	for _, tt := range []struct {
		mode, ra string
		opts     map[string]string
		addrs    string
		declared bool
	}{
		{"", "slaac", nil, "50:54:00:00:00:05 10.10.0.5 fd00:10::1234 fd00:10::5254:ff:fe00:5", false},
		{"SLAAC", "slaac", nil, "50:54:00:00:00:05 10.10.0.5 fd00:10::1234", false},
		{"dhcpv6-stateless", "dhcpv6_stateless", map[string]string{"server_id": DHCPServerMAC("net-a"), "dns_server": "{2001:4860:4860::8888, 2001:4860:4860::8844}", "dhcpv6_stateless": "true"},
			"50:54:00:00:00:05 10.10.0.5 fd00:10::1234", false},
		{"dhcpv6-stateful", "dhcpv6_stateful", map[string]string{"server_id": DHCPServerMAC("net-a"), "dns_server": "{2001:4860:4860::8888, 2001:4860:4860::8844}"},
			"50:54:00:00:00:05 10.10.0.5 fd00:10::5254:ff:fe00:5 fd00:10::1234", false},
		{"dhcpv6-stateful", "dhcpv6_stateful", map[string]string{"server_id": DHCPServerMAC("net-a"), "dns_server": "{2001:4860:4860::8888, 2001:4860:4860::8844}"},
			"50:54:00:00:00:05 10.10.0.5 fd00:10::1234", true},
	} {
		t.Run(fmt.Sprintf("%s declared=%v", tt.mode, tt.declared), func(t *testing.T) {
			a := dualStack(netA())
			a.IPv6AddressMode = tt.mode
			a.DNSes = []string{"8.8.8.8", "2001:4860:4860::8888", "2001:4860:4860::8844"}
			ipv6 := "fd00:10::1234"
			if tt.mode == "" {
				ipv6 += ",fd00:10::5254:ff:fe00:5"
			}
			s := &Snapshot{Networks: []Network{a}, Routers: []Router{{Name: "r1", MAC: "02:00:00:00:00:01", Internal: []string{"net-a"}}},
				VMs: []VMInterface{{Namespace: "default", VMI: "vm1", Interface: "eth1", Network: "net-a", NetworkNamespace: "default", MAC: "50:54:00:00:00:05", IP: "10.10.0.5", IPv6: ipv6}}}
			if tt.declared {
				s.VMs[0].IPv6Field = "metadata.annotations[interfaces][net-a].ipv6Address"
			}
			p := Build(s, testInstance)
			require.Empty(t, p.Errors)
			assert.Equal(t, tt.ra, findRouter(p, "r1").Ports[0].Ipv6RaConfigs["address_mode"])
			np := findNetwork(p, "net-a")
			require.NotNil(t, np)
			assert.Equal(t, []string{tt.addrs}, np.Ports[0].Addresses)
			var refs []Ref
			for _, r := range np.Rows() {
				if lsp, ok := r.Model.(*nbmodel.LogicalSwitchPort); ok && lsp.Name == np.Ports[0].Name {
					refs = r.Refs
				}
			}
			if tt.opts == nil {
				assert.Nil(t, np.DHCPv6)
				assert.Equal(t, []Ref{{Column: "dhcpv4_options", Key: "net-a"}}, refs)
				return
			}
			require.NotNil(t, np.DHCPv6)
			assert.Equal(t, "fd00:10::/64", np.DHCPv6.Cidr)
			assert.Equal(t, tt.opts, np.DHCPv6.Options)
			assert.Equal(t, "net-a/ipv6", np.DHCPv6.ExternalIDs[KeyDHCPNetwork])
			assert.Equal(t, []Ref{{Column: "dhcpv4_options", Key: "net-a"}, {Column: "dhcpv6_options", Key: "net-a/ipv6"}}, refs)
		})
	}
}

func TestBuildRouterDerivedMAC(t *testing.T) {
	s := &Snapshot{Networks: []Network{netA()}, Routers: []Router{{Name: "r1", Internal: []string{"net-a"}}}}
	p1 := Build(s, testInstance)
	require.Len(t, p1.Routers, 1)
	require.Len(t, p1.Routers[0].Ports, 1)
	mac := p1.Routers[0].Ports[0].MAC
	_, err := parseMAC(mac)
	assert.NoError(t, err, "derived MAC %s must be a unicast MAC", mac)
	assert.True(t, strings.HasPrefix(mac, "02:"), "derived MAC %s must be locally administered", mac)
	assert.Equal(t, mac, Build(s, testInstance).Routers[0].Ports[0].MAC, "derived MAC is stable")

	s.Routers[0].Name = "r2"
	assert.NotEqual(t, mac, Build(s, testInstance).Routers[0].Ports[0].MAC, "derived MAC depends on the router name")
}

// dualStack is n with the IPv6 side fd00:<third octet of its CIDR>::/64.
func dualStack(n Network) Network {
	third := strings.Split(n.CIDR, ".")[1]
	n.IPv6CIDR, n.IPv6GatewayIP = "fd00:"+third+"::/64", "fd00:"+third+"::1"
	return n
}

func TestBuildVMPorts(t *testing.T) {
	vlan := Network{Name: "vl", Namespace: "tenant", Type: NetworkVLAN, SegmentID: "7", CIDR: "192.168.7.0/24", GatewayIP: "192.168.7.1"}
	tests := []struct {
		name    string
		network Network
		vms     []VMInterface
		want    []*nbmodel.LogicalSwitchPort
	}{
		{
			name:    "VM interface on an overlay network",
			network: netA(),
			vms: []VMInterface{
				{Namespace: "default", VMI: "vm1", Interface: "eth1", Network: "net-a", NetworkNamespace: "default", MAC: "50:54:00:00:00:05", IP: "10.10.0.5", Node: "hv1"},
			},
			want: []*nbmodel.LogicalSwitchPort{
				{Name: "kv-net-a_default_vm1_eth1", Addresses: []string{"50:54:00:00:00:05 10.10.0.5"}, PortSecurity: []string{"50:54:00:00:00:05 10.10.0.5"},
					Options: map[string]string{"requested-chassis": "hv1"}, ExternalIDs: vmIDs("net-a", "default/vm1")},
			},
		},
		{
			name:    "dual stack: the SLAAC address of the MAC",
			network: dualStack(netA()),
			vms: []VMInterface{
				{Namespace: "default", VMI: "vm1", Interface: "eth1", Network: "net-a", NetworkNamespace: "default", MAC: "50:54:00:00:00:05", IP: "10.10.0.5"},
			},
			want: []*nbmodel.LogicalSwitchPort{
				{Name: "kv-net-a_default_vm1_eth1", Addresses: []string{"50:54:00:00:00:05 10.10.0.5 fd00:10::5254:ff:fe00:5"},
					PortSecurity: []string{"50:54:00:00:00:05 10.10.0.5 fd00:10::5254:ff:fe00:5"}, ExternalIDs: vmIDs("net-a", "default/vm1")},
			},
		},
		{
			// A guest with stable-privacy addresses (RFC 7217): status
			// reports them; one outside the ipv6Cidr and the gateway are
			// not the port's.
			name:    "dual stack: the IPv6 addresses status reports",
			network: dualStack(netA()),
			vms: []VMInterface{
				{Namespace: "default", VMI: "vm1", Interface: "eth1", Network: "net-a", NetworkNamespace: "default", MAC: "50:54:00:00:00:05", IP: "10.10.0.5",
					IPv6: "fd00:10::a1b2:c3d4:e5f6:789,fe80::1c2d:3e4f:5a6b:7c8d%eth1,2001:db8::7,fd00:10::1"},
			},
			want: []*nbmodel.LogicalSwitchPort{
				{Name: "kv-net-a_default_vm1_eth1", Addresses: []string{"50:54:00:00:00:05 10.10.0.5 fd00:10::a1b2:c3d4:e5f6:789"},
					PortSecurity: []string{"50:54:00:00:00:05 10.10.0.5 fd00:10::a1b2:c3d4:e5f6:789 fe80::1c2d:3e4f:5a6b:7c8d"}, ExternalIDs: vmIDs("net-a", "default/vm1")},
			},
		},
		{
			name:    "MAC is normalized to lower case",
			network: netA(),
			vms: []VMInterface{
				{Namespace: "default", VMI: "vm1", Interface: "eth1", Network: "net-a", NetworkNamespace: "default", MAC: "50:54:00:AB:CD:EF", IP: "10.10.0.5"},
			},
			want: []*nbmodel.LogicalSwitchPort{
				{Name: "kv-net-a_default_vm1_eth1", Addresses: []string{"50:54:00:ab:cd:ef 10.10.0.5"}, PortSecurity: []string{"50:54:00:ab:cd:ef 10.10.0.5"}, ExternalIDs: vmIDs("net-a", "default/vm1")},
			},
		},
		{
			name:    "VM in another namespace than the NAD gets no port",
			network: netA(),
			vms: []VMInterface{
				{Namespace: "other", VMI: "vm1", Interface: "eth1", Network: "net-a", NetworkNamespace: "other", MAC: "50:54:00:00:00:05", IP: "10.10.0.5"},
			},
			want: nil,
		},
		{
			name:    "VM in another namespace referencing the NAD's namespace gets a port",
			network: netA(),
			vms: []VMInterface{
				{Namespace: "other", VMI: "vm1", Interface: "eth1", Network: "net-a", NetworkNamespace: "default", MAC: "50:54:00:00:00:05", IP: "10.10.0.5"},
			},
			want: []*nbmodel.LogicalSwitchPort{
				{Name: "kv-net-a_other_vm1_eth1", Addresses: []string{"50:54:00:00:00:05 10.10.0.5"}, PortSecurity: []string{"50:54:00:00:00:05 10.10.0.5"}, ExternalIDs: vmIDs("net-a", "other/vm1")},
			},
		},
		{
			name:    "VM on an unknown network gets no port",
			network: netA(),
			vms: []VMInterface{
				{Namespace: "default", VMI: "vm1", Interface: "eth1", Network: "net-zz", NetworkNamespace: "default", MAC: "50:54:00:00:00:05", IP: "10.10.0.5"},
			},
			want: nil,
		},
		{
			name:    "VM ports and the localnet port sorted by name",
			network: vlan,
			vms: []VMInterface{
				{Namespace: "tenant", VMI: "zz", Interface: "eth1", Network: "vl", NetworkNamespace: "tenant", MAC: "50:54:00:00:00:0b", IP: "192.168.7.11"},
				{Namespace: "tenant", VMI: "aa", Interface: "eth2", Network: "vl", NetworkNamespace: "tenant", MAC: "50:54:00:00:00:0a", IP: "192.168.7.10"},
			},
			want: []*nbmodel.LogicalSwitchPort{
				{Name: "kv-ln-vl", Type: "localnet", Addresses: []string{"unknown"}, Options: map[string]string{"network_name": "vl"}, Tag: ptr(7), ExternalIDs: netIDs("vl")},
				{Name: "kv-vl_tenant_aa_eth2", Addresses: []string{"50:54:00:00:00:0a 192.168.7.10"}, PortSecurity: []string{"50:54:00:00:00:0a 192.168.7.10"}, ExternalIDs: vmIDs("vl", "tenant/aa")},
				{Name: "kv-vl_tenant_zz_eth1", Addresses: []string{"50:54:00:00:00:0b 192.168.7.11"}, PortSecurity: []string{"50:54:00:00:00:0b 192.168.7.11"}, ExternalIDs: vmIDs("vl", "tenant/zz")},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := Build(&Snapshot{Networks: []Network{tc.network}, VMs: tc.vms}, testInstance)
			require.Empty(t, p.Errors)
			require.Len(t, p.Networks, 1)
			assert.Equal(t, tc.want, p.Networks[0].Ports)
			assert.Empty(t, p.Networks[0].KeepPorts)
		})
	}
}

// TestBuildDHCP: a network with a gatewayIp gets one DHCP_Options row,
// identified by its name, with the options of its network-config; its VM
// ports refer to it, its localnet port does not. Without a gatewayIp: no
// row, no reference.
func TestBuildDHCP(t *testing.T) {
	mac := DHCPServerMAC("net-a")
	dhcpIDs := func(n string) map[string]string {
		ids := netIDs(n)
		ids["kubevirt-ovn/network"] = n
		return ids
	}
	opts := func(extra map[string]string) map[string]string {
		o := map[string]string{"server_id": "10.10.0.1", "server_mac": mac, "lease_time": "86400"}
		maps.Copy(o, extra)
		return o
	}
	tests := []struct {
		name string
		mod  func(n *Network)
		want map[string]string // nil: no DHCP row
	}{
		{name: "gateway only", want: opts(nil)},
		{name: "defaultRoute: router", mod: func(n *Network) { n.DefaultRoute = true }, want: opts(map[string]string{"router": "10.10.0.1"})},
		{name: "dnses in OVN's set syntax, IPv4 only; mtu", mod: func(n *Network) {
			n.DNSes, n.MTU = []string{"10.0.0.53", "fd00::53", "10.0.0.54"}, 1400
		}, want: opts(map[string]string{"dns_server": "{10.0.0.53, 10.0.0.54}", "mtu": "1400"})},
		{name: "an mtu DHCP cannot carry is left out", mod: func(n *Network) { n.MTU = 60 }, want: opts(nil)},
		{name: "hostRoutes without defaultRoute: no default route in 121", mod: func(n *Network) {
			n.HostRoutes = []HostRoute{{Destination: "192.168.50.0/24", Nexthop: "10.10.0.254"}, {Destination: "172.20.0.0/16"}}
		}, want: opts(map[string]string{"classless_static_route": "{192.168.50.0/24,10.10.0.254, 172.20.0.0/16,0.0.0.0}"})},
		{name: "hostRoutes with defaultRoute: the default route appended to 121", mod: func(n *Network) {
			n.DefaultRoute = true
			n.HostRoutes = []HostRoute{{Destination: "192.168.50.0/24", Nexthop: "10.10.0.254"}}
		}, want: opts(map[string]string{"router": "10.10.0.1", "classless_static_route": "{192.168.50.0/24,10.10.0.254, 0.0.0.0/0,10.10.0.1}"})},
		{name: "a default host route is not doubled", mod: func(n *Network) {
			n.DefaultRoute = true
			n.HostRoutes = []HostRoute{{Destination: "0.0.0.0/0", Nexthop: "10.10.0.254"}}
		}, want: opts(map[string]string{"router": "10.10.0.1", "classless_static_route": "{0.0.0.0/0,10.10.0.254}"})},
		{name: "no gatewayIp: no DHCP", mod: func(n *Network) { n.GatewayIP = ""; n.DefaultRoute = true }},
		// What ONOS accepted (issue 30): a host route to one host, a route
		// without destination and an empty DNS server skipped.
		{name: "a /32 host route; a route without destination and an empty DNS server skipped", mod: func(n *Network) {
			n.HostRoutes = []HostRoute{{Destination: "169.254.169.254/32", Nexthop: "10.10.0.2"}, {Nexthop: "10.10.0.3"}, {Destination: "10.9.0.0/31"}}
			n.DNSes = []string{"", "10.0.0.53"}
		}, want: opts(map[string]string{"classless_static_route": "{169.254.169.254/32,10.10.0.2, 10.9.0.0/31,0.0.0.0}", "dns_server": "{10.0.0.53}"})},
		{name: "only a route without destination: no option 121", mod: func(n *Network) {
			n.HostRoutes = []HostRoute{{Nexthop: "10.10.0.3"}}
		}, want: opts(nil)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := netA()
			if tc.mod != nil {
				tc.mod(&n)
			}
			vm := VMInterface{Namespace: "default", VMI: "vm1", Interface: "eth1", Network: "net-a", NetworkNamespace: "default", MAC: "50:54:00:00:00:05", IP: "10.10.0.5"}
			p := Build(&Snapshot{Networks: []Network{n}, VMs: []VMInterface{vm}}, testInstance)
			require.Empty(t, p.Errors)
			require.Len(t, p.Networks, 1)
			np := &p.Networks[0]
			rows := np.Rows()
			port := rows[len(rows)-1]
			require.Equal(t, "kv-net-a_default_vm1_eth1", port.Model.(*nbmodel.LogicalSwitchPort).Name)
			if tc.want == nil {
				assert.Nil(t, np.DHCP)
				assert.Len(t, rows, 2, "the switch and the VM port")
				assert.Empty(t, port.Refs)
				return
			}
			assert.Equal(t, &nbmodel.DHCPOptions{Cidr: "10.10.0.0/24", Options: tc.want, ExternalIDs: dhcpIDs("net-a")}, np.DHCP)
			assert.Equal(t, Row{Model: np.DHCP}, rows[1], "a root row")
			assert.Equal(t, []Ref{{Column: "dhcpv4_options", Key: "net-a"}}, port.Refs)
		})
	}

	// A FLAT network's localnet port has none; the server MAC is locally
	// administered, unicast, and the network's own.
	p := Build(&Snapshot{Networks: []Network{publicNet()}}, testInstance)
	require.Len(t, p.Networks, 1)
	for _, r := range p.Networks[0].Rows() {
		assert.Empty(t, r.Refs)
	}
	assert.Regexp(t, "^0a:", mac)
	assert.NotEqual(t, mac, DHCPServerMAC("net-b"))
	assert.NotEqual(t, mac, derivedRouterMAC("net-a"))
}

func TestGatewaySelection(t *testing.T) {
	sb := []Chassis{
		{Name: "c-11111111", Hostname: "gw1", Gateway: true, Physnets: []string{"physnet1"}},
		{Name: "c-22222222", Hostname: "gw2", Gateway: true, Physnets: []string{"physnet1"}},
		{Name: "c-33333333", Hostname: "compute1", Gateway: false},
	}
	tests := []struct {
		name         string
		gateway      string
		chassis      []Chassis
		chassisKnown bool
		want         []string // exact order; nil: check first and set only
		wantFirst    string
		wantSet      []string
	}{
		{
			name: "spec gateway matched by chassis name", gateway: "c-22222222",
			chassis: sb, chassisKnown: true,
			want: []string{"c-22222222", "c-11111111"},
		},
		{
			name: "spec gateway matched by hostname uses the chassis name", gateway: "gw2",
			chassis: sb, chassisKnown: true,
			want: []string{"c-22222222", "c-11111111"},
		},
		{
			name: "spec gateway by hostname, other order", gateway: "gw1",
			chassis: sb, chassisKnown: true,
			want: []string{"c-11111111", "c-22222222"},
		},
		{
			name: "chassis name wins over another chassis' hostname", gateway: "gw2",
			chassis: []Chassis{
				{Name: "gw2", Hostname: "host-a", Gateway: true, Physnets: []string{"physnet1"}},
				{Name: "c-x", Hostname: "gw2", Gateway: true, Physnets: []string{"physnet1"}},
			},
			chassisKnown: true,
			want:         []string{"gw2", "c-x"},
		},
		{
			name: "no spec gateway: every gateway candidate, never a non-gateway chassis",
			chassis: append(slices.Clone(sb),
				Chassis{Name: "c-44444444", Hostname: "gw3", Gateway: true, Physnets: []string{"physnet1"}},
				Chassis{Name: "c-55555555", Hostname: "compute2"}),
			chassisKnown: true,
			wantSet:      []string{"c-11111111", "c-22222222", "c-44444444"},
		},
		{
			name: "without SB the spec gateway alone", gateway: "gw7",
			want: []string{"gw7"},
		},
		{
			name: "without SB chassis rows are ignored", gateway: "gw7",
			chassis: sb,
			want:    []string{"gw7"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := &Snapshot{
				Networks:     []Network{publicNet()},
				Routers:      []Router{{Name: "r1", MAC: "fa:16:3e:00:00:01", EnableSNAT: true, External: &External{IP: "172.16.0.10", Network: "public"}, Gateway: tc.gateway}},
				Chassis:      tc.chassis,
				ChassisKnown: tc.chassisKnown,
			}
			p := Build(s, testInstance)
			require.Empty(t, p.Errors)
			require.Len(t, p.Routers, 1)
			rp := p.Routers[0]
			require.NotNil(t, rp.Gateway)
			got := rp.Gateway.Chassis
			if tc.want != nil {
				assert.Equal(t, tc.want, got)
			} else {
				assert.ElementsMatch(t, tc.wantSet, got)
			}
			require.Len(t, rp.GatewayChassis, len(got))
			for i, gc := range rp.GatewayChassis {
				assert.Equal(t, &nbmodel.GatewayChassis{
					Name:        "kv-rtoe-r1_" + got[i],
					ChassisName: got[i],
					Priority:    len(got) - i,
					ExternalIDs: routerIDs("r1"),
				}, gc)
			}
		})
	}
}

func determinismSnapshot() *Snapshot {
	return &Snapshot{
		Networks: []Network{
			publicNet(), netA(), netB(),
			{Name: "net-c", Namespace: "default", Type: "vlan", SegmentID: "30", CIDR: "10.30.0.0/24", GatewayIP: "10.30.0.1"},
			{Name: "net-d", Namespace: "default", Type: NetworkGRE, CIDR: "10.40.0.0/24", GatewayIP: "10.40.0.1"},
			{Name: "broken", Namespace: "default", Type: NetworkVLAN, CIDR: "10.50.0.0/24"},
		},
		Routers: []Router{
			{Name: "r-old", MAC: "fa:16:3e:00:00:01", EnableSNAT: true, Internal: []string{"net-a"}, External: &External{IP: "172.16.0.100", Network: "public"}, PeerRouter: &PeerRouter{IP: "172.16.0.1", MAC: "00:00:00:00:ee:01"}, Created: t0},
			{Name: "a-new", MAC: "fa:16:3e:00:00:02", EnableSNAT: true, Internal: []string{"net-b"}, External: &External{IP: "172.16.0.100", Network: "public"}, Created: t0.Add(time.Minute)},
			{Name: "r-c", MAC: "fa:16:3e:00:00:03", Internal: []string{"net-c", "net-d"}, External: &External{IP: "172.16.0.101", Network: "public"}, Gateway: "gw2"},
			{Name: "r-d", MAC: "fa:16:3e:00:00:04", Internal: []string{"net-d"}, Created: t0.Add(time.Hour)},
			{Name: "r-e", Internal: []string{"broken"}},
		},
		VMs: []VMInterface{
			{Namespace: "default", VMI: "vm1", Interface: "eth1", Network: "net-a", NetworkNamespace: "default", MAC: "50:54:00:00:00:01", IP: "10.10.0.11"},
			{Namespace: "default", VMI: "vm2", Interface: "eth1", Network: "net-a", NetworkNamespace: "default", MAC: "50:54:00:00:00:02", IP: "10.10.0.12"},
			{Namespace: "default", VMI: "vm3", Interface: "eth1", Network: "net-a", NetworkNamespace: "default", MAC: "bad", IP: "10.10.0.13"},
			{Namespace: "default", VMI: "vm4", Interface: "eth1", Network: "net-c", NetworkNamespace: "default", MAC: "50:54:00:00:00:04", IP: "10.30.0.14"},
		},
		Chassis: []Chassis{
			{Name: "c1", Hostname: "gw1", Gateway: true, Physnets: []string{"physnet1"}},
			{Name: "c2", Hostname: "gw2", Gateway: true, Physnets: []string{"physnet1"}},
			{Name: "c3", Hostname: "gw3", Gateway: true, Physnets: []string{"physnet1"}},
			{Name: "c4", Hostname: "hv1"},
		},
		ChassisKnown: true,
	}
}

func TestBuildDeterministic(t *testing.T) {
	s := determinismSnapshot()
	p1 := Build(s, testInstance)
	// Preconditions: the snapshot exercises failures and claims.
	require.Contains(t, p1.Failed, Unit{Kind: KindRouter, Name: "a-new"})
	require.Contains(t, p1.Failed, Unit{Kind: KindRouter, Name: "r-d"})
	require.Contains(t, p1.Failed, Unit{Kind: KindRouter, Name: "r-e"})
	require.Contains(t, p1.Failed, Unit{Kind: KindNetwork, Name: "broken"})
	require.NotNil(t, findRouter(p1, "r-old"))
	require.NotNil(t, findRouter(p1, "r-c"))

	p2 := Build(s, testInstance)
	assert.Equal(t, p1, p2, "Build twice on the same snapshot")
	assert.Equal(t, determinismSnapshot(), s, "Build must not modify its input")

	permute := map[string]func(s *Snapshot){
		"reversed": func(s *Snapshot) {
			slices.Reverse(s.Routers)
			slices.Reverse(s.Networks)
			slices.Reverse(s.VMs)
			slices.Reverse(s.Chassis)
		},
		"rotated": func(s *Snapshot) {
			s.Routers = append(s.Routers[2:], s.Routers[:2]...)
			s.Networks = append(s.Networks[3:], s.Networks[:3]...)
			s.VMs = append(s.VMs[1:], s.VMs[:1]...)
			s.Chassis = append(s.Chassis[1:], s.Chassis[:1]...)
		},
		"sorted by name descending": func(s *Snapshot) {
			slices.SortFunc(s.Routers, func(a, b Router) int { return strings.Compare(b.Name, a.Name) })
			slices.SortFunc(s.Networks, func(a, b Network) int { return strings.Compare(b.Name, a.Name) })
		},
	}
	for name, f := range permute {
		t.Run(name, func(t *testing.T) {
			s := determinismSnapshot()
			f(s)
			p := Build(s, testInstance)
			assert.Equal(t, p1.Networks, p.Networks)
			assert.Equal(t, p1.Routers, p.Routers)
			assert.Equal(t, p1.Failed, p.Failed)
			assert.Equal(t, errTexts(p1.Errors), errTexts(p.Errors))
		})
	}
}

// TestBuildInputOrderDuplicateNetwork checks that the errors of a network
// declared in two namespaces do not depend on the order of the input.
func TestBuildInputOrderDuplicateNetwork(t *testing.T) {
	a := netA()
	b := netA()
	b.Namespace = "other"
	p1 := Build(&Snapshot{Networks: []Network{a, b}}, testInstance)
	p2 := Build(&Snapshot{Networks: []Network{b, a}}, testInstance)
	u := Unit{Kind: KindNetwork, Name: "net-a"}
	require.Len(t, p1.Failed[u], 2)
	assert.Equal(t, errTexts(p1.Errors), errTexts(p2.Errors))
	assert.Equal(t, errTexts(p1.Failed[u]), errTexts(p2.Failed[u]), "Plan.Failed depends on the order of Snapshot.Networks")
}

func examplesSnapshot() *Snapshot {
	return &Snapshot{
		Networks: []Network{
			{
				Name: "public", Namespace: "default", Type: "FLAT", MTU: 1500,
				PhysicalNetworkName: "physnet1", CIDR: "172.16.0.0/24", GatewayIP: "172.16.0.1",
				IPPool:       &IPPool{Start: "172.16.0.100", End: "172.16.0.200"},
				DefaultRoute: true,
			},
			{
				Name: "net-a", Namespace: "default", Type: "GENEVE", MTU: 1450, SegmentID: "100",
				CIDR: "10.10.0.0/24", GatewayIP: "10.10.0.1",
				IPPool:       &IPPool{Start: "10.10.0.2", End: "10.10.0.200"},
				DNSes:        []string{"8.8.8.8"},
				DefaultRoute: true,
			},
			{
				Name: "net-b", Namespace: "default", Type: "vxlan", MTU: 1450, SegmentID: "200",
				CIDR: "10.20.0.0/24", GatewayIP: "10.20.0.1",
				DefaultRoute: true,
			},
		},
		Routers: []Router{{
			Name:        "router1",
			MAC:         "fa:16:3e:00:00:01",
			Description: "edge router of net-a and net-b",
			EnableSNAT:  true,
			Internal:    []string{"net-a", "net-b"},
			External:    &External{IP: "172.16.0.100", Network: "public"},
			PeerRouter:  &PeerRouter{IP: "172.16.0.1", MAC: "00:00:00:00:ee:01"},
			Gateway:     "gw1",
		}},
		VMs: []VMInterface{
			{Namespace: "default", VMI: "vm-a", Interface: "eth1", Network: "net-a", NetworkNamespace: "default", MAC: "50:54:00:00:00:05", IP: "10.10.0.5", Node: "hv1"},
			{Namespace: "default", VMI: "vm-b", Interface: "eth1", Network: "net-b", NetworkNamespace: "default", MAC: "50:54:00:00:00:06", IP: "10.20.0.6", Node: "hv2"},
		},
	}
}

func TestGoldenExamples(t *testing.T) {
	p := Build(examplesSnapshot(), testInstance)
	require.Empty(t, p.Errors)
	require.Empty(t, p.Failed)
	got, err := json.MarshalIndent(struct {
		Networks []NetworkPlan
		Routers  []RouterPlan
	}{p.Networks, p.Routers}, "", "  ")
	require.NoError(t, err)
	got = append(got, '\n')

	path := filepath.Join("testdata", "examples.plan.golden")
	if *update {
		require.NoError(t, os.MkdirAll("testdata", 0o755))
		require.NoError(t, os.WriteFile(path, got, 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run go test ./translator -run TestGoldenExamples -update to create it")
	assert.Equal(t, string(want), string(got))
}

// validationSnapshot has a valid router "good" on network "net-ok", created
// first, and a router "bad" on net-a that the validation cases break.
func validationSnapshot() *Snapshot {
	return &Snapshot{
		Networks: []Network{
			publicNet(),
			{Name: "net-ok", Namespace: "default", Type: NetworkGeneve, CIDR: "10.30.0.0/24", GatewayIP: "10.30.0.1"},
			netA(),
			netB(),
		},
		Routers: []Router{
			{
				Name: "good", MAC: "fa:16:3e:00:00:01", EnableSNAT: true,
				Internal:   []string{"net-ok"},
				External:   &External{IP: "172.16.0.50", Network: "public"},
				PeerRouter: &PeerRouter{IP: "172.16.0.1", MAC: "00:00:00:00:ee:01"},
				Gateway:    "gw1",
				Created:    t0,
			},
			{
				Name: "bad", MAC: "fa:16:3e:00:00:02", EnableSNAT: true,
				Internal:   []string{"net-a"},
				External:   &External{IP: "172.16.0.100", Network: "public"},
				PeerRouter: &PeerRouter{IP: "172.16.0.1", MAC: "00:00:00:00:ee:01"},
				Gateway:    "gw1",
				Created:    t0.Add(time.Hour),
			},
		},
	}
}

func routerNamed(t *testing.T, s *Snapshot, name string) *Router {
	t.Helper()
	i := slices.IndexFunc(s.Routers, func(r Router) bool { return r.Name == name })
	require.GreaterOrEqual(t, i, 0, "router %s", name)
	return &s.Routers[i]
}

func networkNamed(t *testing.T, s *Snapshot, name string) *Network {
	t.Helper()
	i := slices.IndexFunc(s.Networks, func(n Network) bool { return n.Name == name })
	require.GreaterOrEqual(t, i, 0, "network %s", name)
	return &s.Networks[i]
}

func TestValidationBaseline(t *testing.T) {
	p := Build(validationSnapshot(), testInstance)
	require.Empty(t, p.Errors)
	require.Empty(t, p.Failed)
	assert.NotNil(t, findRouter(p, "good"))
	assert.NotNil(t, findRouter(p, "bad"))
	assert.Len(t, p.Networks, 4)
}

// TestValidationAcceptsWhatONOSAccepted: input ONOS read without
// complaint plans without an error (issue 30): a segmentId that is no
// number on FLAT and overlay networks (ONOS never read it for FLAT, and
// kubevirt-ovn uses it for VLAN only), a VM outside the ipPool.
func TestValidationAcceptsWhatONOSAccepted(t *testing.T) {
	s := validationSnapshot()
	networkNamed(t, s, "public").SegmentID = "none"
	networkNamed(t, s, "net-a").SegmentID = "ten"
	networkNamed(t, s, "net-a").IPPool = &IPPool{Start: "10.10.0.200", End: "10.10.0.250"}
	p := Build(s, testInstance)
	require.Empty(t, p.Errors)
	require.Empty(t, p.Failed)
	assert.NotNil(t, findRouter(p, "good"))
	assert.NotNil(t, findRouter(p, "bad"))
	assert.Empty(t, p.Notes)
}

// TestRouterReadAsONOS: a router ONOS kept, ignoring what it could not
// use, is planned, with a note saying what was ignored (issue 30): an
// internal network listed twice is one; enableSnat and a peer router
// without an external network leave a router of internal ports.
func TestRouterReadAsONOS(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(r *Router)
		ports  int
		notes  []string
	}{
		{"internal network listed twice", func(r *Router) { r.Internal = []string{"net-a", "net-a"} }, 2, nil},
		{"enableSnat without external network", func(r *Router) { r.External, r.PeerRouter = nil, nil }, 1,
			[]string{"VirtualRouter bad: spec.enableSnat is ignored: the router has no spec.external network for the SNAT IP"}},
		{"enableSnat and peer router without external network", func(r *Router) { r.External = nil }, 1, []string{
			"VirtualRouter bad: spec.enableSnat is ignored: the router has no spec.external network for the SNAT IP",
			"VirtualRouter bad: spec.peerRouter is ignored: the peer router is reached through the external network, and the router has no spec.external"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := validationSnapshot()
			tc.mutate(routerNamed(t, s, "bad"))
			p := Build(s, testInstance)
			require.Empty(t, p.Errors)
			require.Empty(t, p.Failed)
			rp := findRouter(p, "bad")
			require.NotNil(t, rp)
			assert.Len(t, rp.Ports, tc.ports)
			assert.Equal(t, tc.notes, rp.Notes)
			assert.Equal(t, tc.notes, p.Notes)
			if tc.ports == 1 {
				assert.Empty(t, rp.NATs)
				assert.Empty(t, rp.Routes)
				assert.Empty(t, rp.MACBindings)
				assert.Empty(t, rp.GatewayChassis)
			}
		})
	}
}

func TestValidation(t *testing.T) {
	badRouter := Unit{Kind: KindRouter, Name: "bad"}
	netAUnit := Unit{Kind: KindNetwork, Name: "net-a"}
	tests := []struct {
		name   string
		mutate func(t *testing.T, s *Snapshot)
		unit   Unit
		// want is "<Kind> <Object>: <field> " as the error text starts.
		want string
		// msg is a further part of the same error's text.
		msg string
	}{
		// Malformed IPs.
		{
			name:   "malformed external.ip",
			mutate: func(t *testing.T, s *Snapshot) { routerNamed(t, s, "bad").External.IP = "172.16.0.300" },
			unit:   badRouter, want: "VirtualRouter bad: spec.external.ip ", msg: "not an IP address",
		},
		{
			name:   "malformed peerRouter.ip",
			mutate: func(t *testing.T, s *Snapshot) { routerNamed(t, s, "bad").PeerRouter.IP = "172.16.0" },
			unit:   badRouter, want: "VirtualRouter bad: spec.peerRouter.ip ", msg: "not an IP address",
		},
		{
			name:   "malformed gatewayIp",
			mutate: func(t *testing.T, s *Snapshot) { networkNamed(t, s, "net-a").GatewayIP = "10.10.0.x" },
			unit:   netAUnit, want: "NetworkAttachmentDefinition default/net-a: network-config.gatewayIp ", msg: "not an IP address",
		},
		{
			name:   "gatewayIp outside the cidr",
			mutate: func(t *testing.T, s *Snapshot) { networkNamed(t, s, "net-a").GatewayIP = "10.11.0.1" },
			unit:   netAUnit, want: "NetworkAttachmentDefinition default/net-a: network-config.gatewayIp ", msg: "not a host address of cidr 10.10.0.0/24",
		},
		{
			name:   "malformed IP in cidr",
			mutate: func(t *testing.T, s *Snapshot) { networkNamed(t, s, "net-a").CIDR = "10.10.0.300/24" },
			unit:   netAUnit, want: "NetworkAttachmentDefinition default/net-a: network-config.cidr ", msg: "not a CIDR",
		},
		// Malformed MACs.
		{
			name:   "malformed spec.mac",
			mutate: func(t *testing.T, s *Snapshot) { routerNamed(t, s, "bad").MAC = "fa:16:3e:00:00" },
			unit:   badRouter, want: "VirtualRouter bad: spec.mac ", msg: "not an Ethernet MAC address",
		},
		{
			name:   "EUI-64 spec.mac",
			mutate: func(t *testing.T, s *Snapshot) { routerNamed(t, s, "bad").MAC = "fa:16:3e:00:00:00:00:01" },
			unit:   badRouter, want: "VirtualRouter bad: spec.mac ", msg: "not an Ethernet MAC address",
		},
		{
			name:   "malformed peerRouter.mac",
			mutate: func(t *testing.T, s *Snapshot) { routerNamed(t, s, "bad").PeerRouter.MAC = "zz:00:00:00:ee:01" },
			unit:   badRouter, want: "VirtualRouter bad: spec.peerRouter.mac ", msg: "not an Ethernet MAC address",
		},
		{
			name:   "multicast spec.mac",
			mutate: func(t *testing.T, s *Snapshot) { routerNamed(t, s, "bad").MAC = "01:00:5e:00:00:01" },
			unit:   badRouter, want: "VirtualRouter bad: spec.mac ", msg: "multicast",
		},
		{
			name:   "multicast peerRouter.mac",
			mutate: func(t *testing.T, s *Snapshot) { routerNamed(t, s, "bad").PeerRouter.MAC = "33:33:00:00:00:01" },
			unit:   badRouter, want: "VirtualRouter bad: spec.peerRouter.mac ", msg: "multicast",
		},
		{
			name:   "zero spec.mac",
			mutate: func(t *testing.T, s *Snapshot) { routerNamed(t, s, "bad").MAC = "00:00:00:00:00:00" },
			unit:   badRouter, want: "VirtualRouter bad: spec.mac ", msg: "zero MAC",
		},
		// Malformed CIDRs.
		{
			name:   "cidr without prefix length",
			mutate: func(t *testing.T, s *Snapshot) { networkNamed(t, s, "net-a").CIDR = "10.10.0.0" },
			unit:   netAUnit, want: "NetworkAttachmentDefinition default/net-a: network-config.cidr ", msg: "not a CIDR",
		},
		{
			name:   "cidr prefix length 33",
			mutate: func(t *testing.T, s *Snapshot) { networkNamed(t, s, "net-a").CIDR = "10.10.0.0/33" },
			unit:   netAUnit, want: "NetworkAttachmentDefinition default/net-a: network-config.cidr ", msg: "not a CIDR",
		},
		{
			name:   "cidr /31 leaves no hosts",
			mutate: func(t *testing.T, s *Snapshot) { networkNamed(t, s, "net-a").CIDR = "10.10.0.0/31" },
			unit:   netAUnit, want: "NetworkAttachmentDefinition default/net-a: network-config.cidr ", msg: "longer than /30",
		},
		{
			name:   "empty cidr",
			mutate: func(t *testing.T, s *Snapshot) { networkNamed(t, s, "net-a").CIDR = "" },
			unit:   netAUnit, want: "NetworkAttachmentDefinition default/net-a: network-config.cidr ", msg: "is empty",
		},
		// SNAT IPs.
		{
			name:   "SNAT IP outside the external network",
			mutate: func(t *testing.T, s *Snapshot) { routerNamed(t, s, "bad").External.IP = "172.17.0.5" },
			unit:   badRouter, want: "VirtualRouter bad: spec.external.ip ", msg: "172.17.0.5 is outside network public (172.16.0.0/24)",
		},
		{
			name:   "SNAT IP is the external network's broadcast address",
			mutate: func(t *testing.T, s *Snapshot) { routerNamed(t, s, "bad").External.IP = "172.16.0.255" },
			unit:   badRouter, want: "VirtualRouter bad: spec.external.ip ", msg: "outside network public",
		},
		{
			name:   "SNAT IP is the external network's gatewayIp",
			mutate: func(t *testing.T, s *Snapshot) { routerNamed(t, s, "bad").External.IP = "172.16.0.1" },
			unit:   badRouter, want: "VirtualRouter bad: spec.external.ip ", msg: "gatewayIp of network public",
		},
		{
			name:   "same SNAT IP as an older router",
			mutate: func(t *testing.T, s *Snapshot) { routerNamed(t, s, "bad").External.IP = "172.16.0.50" },
			unit:   badRouter, want: "VirtualRouter bad: spec.external.ip ", msg: "already the SNAT IP of VirtualRouter good",
		},
		// Unknown and doubly claimed networks.
		{
			name:   "unknown internal network",
			mutate: func(t *testing.T, s *Snapshot) { routerNamed(t, s, "bad").Internal = []string{"net-a", "net-zz"} },
			unit:   badRouter, want: "VirtualRouter bad: spec.internal[1] ", msg: "network net-zz is unknown",
		},
		{
			name:   "unknown external network",
			mutate: func(t *testing.T, s *Snapshot) { routerNamed(t, s, "bad").External.Network = "nowhere" },
			unit:   badRouter, want: "VirtualRouter bad: spec.external.network ", msg: "network nowhere is unknown",
		},
		{
			name:   "internal network of an older router",
			mutate: func(t *testing.T, s *Snapshot) { routerNamed(t, s, "bad").Internal = []string{"net-a", "net-ok"} },
			unit:   badRouter, want: "VirtualRouter bad: spec.internal[1] ", msg: "already an internal network of VirtualRouter good",
		},
		{
			name:   "internal network is another router's external network",
			mutate: func(t *testing.T, s *Snapshot) { routerNamed(t, s, "bad").Internal = []string{"public"} },
			unit:   badRouter, want: "VirtualRouter bad: spec.internal[0] ", msg: "external network of VirtualRouter good",
		},
		{
			name: "overlapping internal cidrs",
			mutate: func(t *testing.T, s *Snapshot) {
				s.Networks = append(s.Networks, Network{Name: "net-wide", Namespace: "default", Type: NetworkGeneve, CIDR: "10.10.0.0/16", GatewayIP: "10.10.1.1"})
				routerNamed(t, s, "bad").Internal = []string{"net-a", "net-wide"}
			},
			unit: badRouter, want: "VirtualRouter bad: spec.internal[1] ", msg: "network net-wide (10.10.0.0/16) overlaps network net-a (10.10.0.0/24)",
		},
		{
			name:   "internal network without gatewayIp",
			mutate: func(t *testing.T, s *Snapshot) { networkNamed(t, s, "net-a").GatewayIP = "" },
			unit:   badRouter, want: "VirtualRouter bad: spec.internal[0] ", msg: "network net-a has no gatewayIp",
		},
		// The external side over IPv6 (issue 33).
		{
			name:   "external ipv6 on a network without ipv6Cidr",
			mutate: func(t *testing.T, s *Snapshot) { routerNamed(t, s, "bad").External.IPv6 = "2001:db8:ff::100" },
			unit:   badRouter, want: "VirtualRouter bad: spec.external.ipv6 ", msg: "network public has no ipv6Cidr",
		},
		{
			name: "external ipv6 outside the external ipv6Cidr",
			mutate: func(t *testing.T, s *Snapshot) {
				networkNamed(t, s, "public").IPv6CIDR = "2001:db8:ff::/64"
				routerNamed(t, s, "bad").External.IPv6 = "2001:db8:fe::100"
			},
			unit: badRouter, want: "VirtualRouter bad: spec.external.ipv6 ", msg: "2001:db8:fe::100 is not a host address of network public's ipv6Cidr 2001:db8:ff::/64",
		},
		{
			name:   "external ipv6 not IPv6",
			mutate: func(t *testing.T, s *Snapshot) { routerNamed(t, s, "bad").External.IPv6 = "172.16.0.9" },
			unit:   badRouter, want: "VirtualRouter bad: spec.external.ipv6 ", msg: `"172.16.0.9" is not an IPv6 address`,
		},
		{
			name:   "external ipv6 link-local",
			mutate: func(t *testing.T, s *Snapshot) { routerNamed(t, s, "bad").External.IPv6 = "fe80::1" },
			unit:   badRouter, want: "VirtualRouter bad: spec.external.ipv6 ", msg: "fe80::1 is not a unicast address a router can route",
		},
		{
			name:   "enableIpv6Snat without external ipv6",
			mutate: func(t *testing.T, s *Snapshot) { routerNamed(t, s, "bad").EnableIPv6SNAT = true },
			unit:   badRouter, want: "VirtualRouter bad: spec.enableIpv6Snat ", msg: "needs spec.external.ipv6",
		},
		{
			name:   "peer ipv6 without external ipv6",
			mutate: func(t *testing.T, s *Snapshot) { routerNamed(t, s, "bad").PeerRouter.IPv6 = "2001:db8:ff::1" },
			unit:   badRouter, want: "VirtualRouter bad: spec.peerRouter.ipv6 ", msg: "needs spec.external.ipv6",
		},
		{
			name: "peer ipv6 outside the external ipv6Cidr",
			mutate: func(t *testing.T, s *Snapshot) {
				networkNamed(t, s, "public").IPv6CIDR = "2001:db8:ff::/64"
				r := routerNamed(t, s, "bad")
				r.External.IPv6, r.PeerRouter.IPv6 = "2001:db8:ff::100", "2001:db8:fe::1"
			},
			unit: badRouter, want: "VirtualRouter bad: spec.peerRouter.ipv6 ", msg: "2001:db8:fe::1 is outside network public's ipv6Cidr 2001:db8:ff::/64",
		},
		{
			name: "peer ipv6 is the router's own",
			mutate: func(t *testing.T, s *Snapshot) {
				networkNamed(t, s, "public").IPv6CIDR = "2001:db8:ff::/64"
				r := routerNamed(t, s, "bad")
				r.External.IPv6, r.PeerRouter.IPv6 = "2001:db8:ff::100", "2001:db8:ff::100"
			},
			unit: badRouter, want: "VirtualRouter bad: spec.peerRouter.ipv6 ", msg: "is the router's own spec.external.ipv6",
		},
		// Peer router.
		{
			name:   "peer IP outside the external cidr",
			mutate: func(t *testing.T, s *Snapshot) { routerNamed(t, s, "bad").PeerRouter.IP = "192.0.2.1" },
			unit:   badRouter, want: "VirtualRouter bad: spec.peerRouter.ip ", msg: "192.0.2.1 is outside network public (172.16.0.0/24)",
		},
		{
			name:   "peer IP is the router's own SNAT IP",
			mutate: func(t *testing.T, s *Snapshot) { routerNamed(t, s, "bad").PeerRouter.IP = "172.16.0.100" },
			unit:   badRouter, want: "VirtualRouter bad: spec.peerRouter.ip ", msg: "own SNAT IP",
		},
		{
			name:   "peer MAC without peer IP",
			mutate: func(t *testing.T, s *Snapshot) { routerNamed(t, s, "bad").PeerRouter.IP = "" },
			unit:   badRouter, want: "VirtualRouter bad: spec.peerRouter.ip ", msg: "is required",
		},
		// VLAN.
		{
			name: "VLAN without segmentId",
			mutate: func(t *testing.T, s *Snapshot) {
				n := networkNamed(t, s, "net-a")
				n.Type, n.SegmentID = NetworkVLAN, ""
			},
			unit: netAUnit, want: "NetworkAttachmentDefinition default/net-a: network-config.segmentId ", msg: "is required for a VLAN network",
		},
		{
			name: "VLAN segmentId 5000",
			mutate: func(t *testing.T, s *Snapshot) {
				n := networkNamed(t, s, "net-a")
				n.Type, n.SegmentID = "vlan", "5000"
			},
			unit: netAUnit, want: "NetworkAttachmentDefinition default/net-a: network-config.segmentId ", msg: "5000 is not a VLAN ID (1-4094)",
		},
		{
			name: "VLAN segmentId 0",
			mutate: func(t *testing.T, s *Snapshot) {
				n := networkNamed(t, s, "net-a")
				n.Type, n.SegmentID = NetworkVLAN, "0"
			},
			unit: netAUnit, want: "NetworkAttachmentDefinition default/net-a: network-config.segmentId ", msg: "0 is not a VLAN ID",
		},
		{
			name: "segmentId not a number",
			mutate: func(t *testing.T, s *Snapshot) {
				n := networkNamed(t, s, "net-a")
				n.Type, n.SegmentID = NetworkVLAN, "ten"
			},
			unit: netAUnit, want: "NetworkAttachmentDefinition default/net-a: network-config.segmentId ", msg: `"ten" is not a number`,
		},
		// ipPool: informational, but a malformed pool is an error.
		{
			name: "ipPool start after end",
			mutate: func(t *testing.T, s *Snapshot) {
				networkNamed(t, s, "net-a").IPPool = &IPPool{Start: "10.10.0.200", End: "10.10.0.100"}
			},
			unit: netAUnit, want: "NetworkAttachmentDefinition default/net-a: network-config.ipPool ", msg: "start 10.10.0.200 is after end 10.10.0.100",
		},
		{
			name: "ipPool outside the cidr",
			mutate: func(t *testing.T, s *Snapshot) {
				networkNamed(t, s, "net-a").IPPool = &IPPool{Start: "10.10.0.100", End: "10.10.1.10"}
			},
			unit: netAUnit, want: "NetworkAttachmentDefinition default/net-a: network-config.ipPool ", msg: "10.10.0.100-10.10.1.10 is not inside cidr 10.10.0.0/24",
		},
		{
			name: "ipPool start not an address",
			mutate: func(t *testing.T, s *Snapshot) {
				networkNamed(t, s, "net-a").IPPool = &IPPool{Start: "ten", End: "10.10.0.10"}
			},
			unit: netAUnit, want: "NetworkAttachmentDefinition default/net-a: network-config.ipPool.start ", msg: `"ten" is not an IP address`,
		},
		{
			name:   "unknown network type",
			mutate: func(t *testing.T, s *Snapshot) { networkNamed(t, s, "net-a").Type = "MPLS" },
			unit:   netAUnit, want: "NetworkAttachmentDefinition default/net-a: network-config.type ", msg: `"MPLS" is not one of`,
		},
		// Gateways.
		{
			name: "gateway node is not a gateway candidate (SB known)",
			mutate: func(t *testing.T, s *Snapshot) {
				s.ChassisKnown = true
				s.Chassis = []Chassis{
					{Name: "c-gw1", Hostname: "gw1", Gateway: true, Physnets: []string{"physnet1"}},
					{Name: "c-node2", Hostname: "node2"},
				}
				routerNamed(t, s, "bad").Gateway = "node2"
			},
			unit: badRouter, want: "VirtualRouter bad: spec.gateway ", msg: "node node2 is not a gateway candidate",
		},
		{
			name: "gateway node unknown to the SB",
			mutate: func(t *testing.T, s *Snapshot) {
				s.ChassisKnown = true
				s.Chassis = []Chassis{{Name: "c-gw1", Hostname: "gw1", Gateway: true, Physnets: []string{"physnet1"}}}
				routerNamed(t, s, "bad").Gateway = "gw9"
			},
			unit: badRouter, want: "VirtualRouter bad: spec.gateway ", msg: "node gw9 is not a gateway candidate",
		},
		{
			name: "not a gateway candidate: every candidate named, also one without hostname",
			mutate: func(t *testing.T, s *Snapshot) {
				s.ChassisKnown = true
				s.Chassis = []Chassis{
					{Name: "c-gw1", Hostname: "gw1", Gateway: true, Physnets: []string{"physnet1"}},
					{Name: "c-gw2", Gateway: true, Physnets: []string{"physnet1"}},
					{Name: "gw3", Hostname: "gw3", Gateway: true, Physnets: []string{"physnet1"}},
				}
				routerNamed(t, s, "bad").Gateway = "gw9"
			},
			unit: badRouter, want: "VirtualRouter bad: spec.gateway ",
			msg: "node gw9 is not a gateway candidate (chassis with enable-chassis-as-gw: c-gw1 (hostname gw1), c-gw2, gw3)",
		},
		{
			name:   "external network without gateway and without SB",
			mutate: func(t *testing.T, s *Snapshot) { routerNamed(t, s, "bad").Gateway = "" },
			unit:   badRouter, want: "VirtualRouter bad: spec.gateway ", msg: "is required when the Southbound database is not given",
		},
		// IPv6.
		{
			name:   "IPv6 external.ip",
			mutate: func(t *testing.T, s *Snapshot) { routerNamed(t, s, "bad").External.IP = "2001:db8::5" },
			unit:   badRouter, want: "VirtualRouter bad: spec.external.ip ", msg: "not an IPv4 address",
		},
		{
			name:   "IPv6 peerRouter.ip",
			mutate: func(t *testing.T, s *Snapshot) { routerNamed(t, s, "bad").PeerRouter.IP = "fe80::1" },
			unit:   badRouter, want: "VirtualRouter bad: spec.peerRouter.ip ", msg: "not an IPv4 address",
		},
		{
			name:   "IPv6 cidr",
			mutate: func(t *testing.T, s *Snapshot) { networkNamed(t, s, "net-a").CIDR = "fd00:10::/64" },
			unit:   netAUnit, want: "NetworkAttachmentDefinition default/net-a: network-config.cidr ", msg: "not an IPv4 CIDR",
		},
		{
			name:   "IPv6 gatewayIp",
			mutate: func(t *testing.T, s *Snapshot) { networkNamed(t, s, "net-a").GatewayIP = "fd00:10::1" },
			unit:   netAUnit, want: "NetworkAttachmentDefinition default/net-a: network-config.gatewayIp ", msg: "not an IPv4 address",
		},
		// The IPv6 side of a dual stack network.
		{
			name:   "malformed ipv6Cidr",
			mutate: func(t *testing.T, s *Snapshot) { networkNamed(t, s, "net-a").IPv6CIDR = "fd00:10::x/64" },
			unit:   netAUnit, want: "NetworkAttachmentDefinition default/net-a: network-config.ipv6Cidr ", msg: "not a CIDR",
		},
		{
			name:   "IPv4 ipv6Cidr",
			mutate: func(t *testing.T, s *Snapshot) { networkNamed(t, s, "net-a").IPv6CIDR = "10.11.0.0/24" },
			unit:   netAUnit, want: "NetworkAttachmentDefinition default/net-a: network-config.ipv6Cidr ", msg: "not an IPv6 CIDR",
		},
		{
			name:   "ipv6Cidr longer than /64",
			mutate: func(t *testing.T, s *Snapshot) { networkNamed(t, s, "net-a").IPv6CIDR = "fd00:10::/80" },
			unit:   netAUnit, want: "NetworkAttachmentDefinition default/net-a: network-config.ipv6Cidr ", msg: "is a /80: VMs configure their address by SLAAC, which needs a /64",
		},
		{
			name:   "link-local ipv6Cidr",
			mutate: func(t *testing.T, s *Snapshot) { networkNamed(t, s, "net-a").IPv6CIDR = "fe80::/64" },
			unit:   netAUnit, want: "NetworkAttachmentDefinition default/net-a: network-config.ipv6Cidr ", msg: "not a unicast prefix",
		},
		{
			name: "ipv6GatewayIp outside the ipv6Cidr",
			mutate: func(t *testing.T, s *Snapshot) {
				n := networkNamed(t, s, "net-a")
				n.IPv6CIDR, n.IPv6GatewayIP = "fd00:10::/64", "fd00:11::1"
			},
			unit: netAUnit, want: "NetworkAttachmentDefinition default/net-a: network-config.ipv6GatewayIp ", msg: "not a host address of ipv6Cidr fd00:10::/64",
		},
		{
			name: "IPv4 ipv6GatewayIp",
			mutate: func(t *testing.T, s *Snapshot) {
				n := networkNamed(t, s, "net-a")
				n.IPv6CIDR, n.IPv6GatewayIP = "fd00:10::/64", "10.10.0.1"
			},
			unit: netAUnit, want: "NetworkAttachmentDefinition default/net-a: network-config.ipv6GatewayIp ", msg: "not an IPv6 address",
		},
		{
			name:   "ipv6GatewayIp without ipv6Cidr",
			mutate: func(t *testing.T, s *Snapshot) { networkNamed(t, s, "net-a").IPv6GatewayIP = "fd00:10::1" },
			unit:   netAUnit, want: "NetworkAttachmentDefinition default/net-a: network-config.ipv6GatewayIp ", msg: "without network-config.ipv6Cidr",
		},
		{
			name:   "ipv6AddressMode without ipv6Cidr",
			mutate: func(t *testing.T, s *Snapshot) { networkNamed(t, s, "net-a").IPv6AddressMode = "dhcpv6-stateful" },
			unit:   netAUnit, want: "NetworkAttachmentDefinition default/net-a: network-config.ipv6AddressMode ", msg: "is set without network-config.ipv6Cidr",
		},
		{
			name: "ipv6AddressMode unknown",
			mutate: func(t *testing.T, s *Snapshot) {
				n := networkNamed(t, s, "net-a")
				n.IPv6CIDR, n.IPv6AddressMode = "fd00:10::/64", "dhcp"
			},
			unit: netAUnit, want: "NetworkAttachmentDefinition default/net-a: network-config.ipv6AddressMode ", msg: `"dhcp" is none of slaac, dhcpv6-stateless, dhcpv6-stateful`,
		},
		{
			name: "ipv6Pool outside the ipv6Cidr",
			mutate: func(t *testing.T, s *Snapshot) {
				n := networkNamed(t, s, "net-a")
				n.IPv6CIDR, n.IPv6Pool = "fd00:10::/64", &IPPool{Start: "fd00:10::10", End: "fd00:11::10"}
			},
			unit: netAUnit, want: "NetworkAttachmentDefinition default/net-a: network-config.ipv6Pool ", msg: "fd00:10::10-fd00:11::10 is not inside ipv6Cidr fd00:10::/64",
		},
		{
			name: "ipv6Pool start after end",
			mutate: func(t *testing.T, s *Snapshot) {
				n := networkNamed(t, s, "net-a")
				n.IPv6CIDR, n.IPv6Pool = "fd00:10::/64", &IPPool{Start: "fd00:10::20", End: "fd00:10::10"}
			},
			unit: netAUnit, want: "NetworkAttachmentDefinition default/net-a: network-config.ipv6Pool ", msg: "start fd00:10::20 is after end fd00:10::10",
		},
		{
			name: "ipv6Pool end IPv4",
			mutate: func(t *testing.T, s *Snapshot) {
				n := networkNamed(t, s, "net-a")
				n.IPv6CIDR, n.IPv6Pool = "fd00:10::/64", &IPPool{Start: "fd00:10::20", End: "10.10.0.10"}
			},
			unit: netAUnit, want: "NetworkAttachmentDefinition default/net-a: network-config.ipv6Pool.end ", msg: `"10.10.0.10" is not an IPv6 address`,
		},
		{
			name: "ipv6Pool without ipv6Cidr",
			mutate: func(t *testing.T, s *Snapshot) {
				networkNamed(t, s, "net-a").IPv6Pool = &IPPool{Start: "fd00:10::20", End: "fd00:10::30"}
			},
			unit: netAUnit, want: "NetworkAttachmentDefinition default/net-a: network-config.ipv6Pool ", msg: "is set without network-config.ipv6Cidr",
		},
		{
			name: "internal networks whose ipv6Cidrs overlap",
			mutate: func(t *testing.T, s *Snapshot) {
				for _, name := range []string{"net-a", "net-b"} {
					n := networkNamed(t, s, name)
					n.IPv6CIDR, n.IPv6GatewayIP = "fd00:10::/64", "fd00:10::1"
				}
				r := routerNamed(t, s, "bad")
				r.Internal = []string{"net-a", "net-b"}
			},
			unit: badRouter, want: "VirtualRouter bad: spec.internal[1] ", msg: "overlaps network net-a (ipv6Cidr fd00:10::/64)",
		},
		// Names.
		{
			name: "network name defined in two namespaces",
			mutate: func(t *testing.T, s *Snapshot) {
				dup := netA()
				dup.Namespace = "other"
				s.Networks = append(s.Networks, dup)
			},
			unit: netAUnit, want: "NetworkAttachmentDefinition default/net-a: metadata.name ", msg: "defined in namespaces default, other",
		},
		{
			name: "network name defined in two namespaces names the other NAD too",
			mutate: func(t *testing.T, s *Snapshot) {
				dup := netA()
				dup.Namespace = "other"
				s.Networks = append(s.Networks, dup)
			},
			unit: netAUnit, want: "NetworkAttachmentDefinition other/net-a: metadata.name ", msg: "defined in namespaces default, other",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := validationSnapshot()
			tc.mutate(t, s)
			p := Build(s, testInstance)

			// (a) an error names the object and the field.
			errs := p.Failed[tc.unit]
			require.NotEmpty(t, errs, "%s not in plan.Failed; errors: %v", tc.unit, p.Errors)
			for _, err := range errs {
				var ie *InputError
				require.True(t, errors.As(err, &ie), "%v is not an InputError", err)
			}
			all := errors.Join(errs...).Error()
			assert.Contains(t, all, tc.want)
			assert.Contains(t, all, tc.msg)
			assert.True(t, slices.ContainsFunc(errs, func(err error) bool {
				return strings.HasPrefix(err.Error(), tc.want) && strings.Contains(err.Error(), tc.msg)
			}), "no error of %s starts with %q and says %q:\n%s", tc.unit, tc.want, tc.msg, all)
			for _, err := range errs {
				assert.Contains(t, p.Errors, err, "plan.Errors lists every unit error")
			}

			// (b) the unit is failed and not planned.
			switch tc.unit.Kind {
			case KindRouter:
				assert.Nil(t, findRouter(p, tc.unit.Name), "failed router is planned")
			case KindNetwork:
				assert.Nil(t, findNetwork(p, tc.unit.Name), "failed network is planned")
			}

			// (c) the valid router and its networks are still planned.
			assert.NotContains(t, p.Failed, Unit{Kind: KindRouter, Name: "good"})
			if rp := findRouter(p, "good"); assert.NotNil(t, rp, "valid router not planned") {
				assert.Equal(t, "172.16.0.50", rp.SNATIP)
				assert.Len(t, rp.Ports, 2)
			}
			for _, n := range []string{"public", "net-ok", "net-b"} {
				assert.NotNil(t, findNetwork(p, n), "valid network %s not planned", n)
			}
		})
	}
}

// TestValidationRouterWithoutName covers a router whose name is empty.
func TestValidationRouterWithoutName(t *testing.T) {
	s := validationSnapshot()
	s.Routers = append(s.Routers, Router{Internal: []string{"net-b"}})
	p := Build(s, testInstance)
	require.NotEmpty(t, p.Errors)
	assert.Contains(t, p.Errors[0].Error(), "VirtualRouter (unnamed): metadata.name ")
	assert.Len(t, p.Routers, 2)
}

func TestSNATIPClaims(t *testing.T) {
	later := t0.Add(time.Minute)
	tests := []struct {
		name             string
		a, b             time.Time // Created of routers "a" and "b"
		held             string    // the router the NB shows holding the claims
		winner, loser    string
		alsoSameInternal bool
	}{
		{name: "older router keeps the IP although its name sorts last", a: later, b: t0, winner: "b", loser: "a"},
		{name: "older router keeps the IP, name sorts first", a: t0, b: later, winner: "a", loser: "b"},
		{name: "same creation time: name order", a: t0, b: t0, winner: "a", loser: "b"},
		{name: "no creation time (manifests): name order", winner: "a", loser: "b"},
		{name: "zero creation time sorts before a set one", a: later, winner: "b", loser: "a"},
		{name: "internal network claims follow the same order", a: later, b: t0, winner: "b", loser: "a", alsoSameInternal: true},
		// The first claimant keeps what the NB shows it holds, whatever
		// names and creation times say (file mode, restarts).
		{name: "held: no creation time, the holder's name sorts last", held: "b", winner: "b", loser: "a"},
		{name: "held: the holder is newer", a: t0, b: later, held: "b", winner: "b", loser: "a"},
		{name: "held: internal network stays with its holder", held: "b", winner: "b", loser: "a", alsoSameInternal: true},
		{name: "held by a router no longer in the input: normal order", held: "gone", winner: "a", loser: "b"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := &Snapshot{
				Networks: []Network{publicNet(), netA(), netB()},
				Routers: []Router{
					{Name: "a", MAC: "fa:16:3e:00:00:0a", EnableSNAT: true, Internal: []string{"net-a"}, External: &External{IP: "172.16.0.100", Network: "public"}, Gateway: "gw1", Created: tc.a},
					{Name: "b", MAC: "fa:16:3e:00:00:0b", EnableSNAT: true, Internal: []string{"net-b"}, External: &External{IP: "172.16.0.100", Network: "public"}, Gateway: "gw1", Created: tc.b},
				},
			}
			if tc.alsoSameInternal {
				s.Routers[0].Internal = []string{"net-a"}
				s.Routers[1].Internal = []string{"net-a"}
			}
			if tc.held != "" {
				s.Held = Claims{SNATIPs: map[string]string{"172.16.0.100": tc.held}, Internal: map[string]string{"net-a": tc.held}}
			}
			for _, order := range [][]int{{0, 1}, {1, 0}} {
				in := *s
				in.Routers = []Router{s.Routers[order[0]], s.Routers[order[1]]}
				p := Build(&in, testInstance)
				rp := findRouter(p, tc.winner)
				if assert.NotNil(t, rp, "winner %s not planned; errors %v", tc.winner, p.Errors) {
					assert.Equal(t, "172.16.0.100", rp.SNATIP)
				}
				assert.Nil(t, findRouter(p, tc.loser))
				assert.NotContains(t, p.Failed, Unit{Kind: KindRouter, Name: tc.winner})
				loserErrs := errTexts(p.Failed[Unit{Kind: KindRouter, Name: tc.loser}])
				require.NotEmpty(t, loserErrs)
				assert.Contains(t, loserErrs, "VirtualRouter "+tc.loser+": spec.external.ip 172.16.0.100 is already the SNAT IP of VirtualRouter "+tc.winner)
				if tc.alsoSameInternal {
					assert.Contains(t, loserErrs, "VirtualRouter "+tc.loser+": spec.internal[0] network net-a is already an internal network of VirtualRouter "+tc.winner)
				}
			}
		})
	}
}

func TestVMInterfaceValidation(t *testing.T) {
	good := VMInterface{Namespace: "default", VMI: "vm-good", Interface: "eth1", Network: "net-a", NetworkNamespace: "default", MAC: "50:54:00:00:00:01", IP: "10.10.0.11"}
	tests := []struct {
		name    string
		mac, ip string
		want    string
		msg     string
	}{
		{name: "malformed MAC", mac: "50:54:00:00:01", ip: "10.10.0.12", want: "VirtualMachineInstance default/vm-bad: status.interfaces[eth1].mac ", msg: "not an Ethernet MAC address"},
		{name: "multicast MAC", mac: "01:00:5e:00:00:01", ip: "10.10.0.12", want: "VirtualMachineInstance default/vm-bad: status.interfaces[eth1].mac ", msg: "multicast"},
		{name: "empty MAC", mac: "", ip: "10.10.0.12", want: "VirtualMachineInstance default/vm-bad: status.interfaces[eth1].mac ", msg: "is empty"},
		{name: "IP outside the network's cidr", mac: "50:54:00:00:00:02", ip: "10.99.0.12", want: "VirtualMachineInstance default/vm-bad: status.interfaces[eth1].ipAddress ", msg: "10.99.0.12 is outside network net-a (10.10.0.0/24)"},
		{name: "IP is the network address", mac: "50:54:00:00:00:02", ip: "10.10.0.0", want: "VirtualMachineInstance default/vm-bad: status.interfaces[eth1].ipAddress ", msg: "outside network net-a"},
		{name: "IP is the gateway IP", mac: "50:54:00:00:00:02", ip: "10.10.0.1", want: "VirtualMachineInstance default/vm-bad: status.interfaces[eth1].ipAddress ", msg: "gateway IP of network net-a"},
		{name: "malformed IP", mac: "50:54:00:00:00:02", ip: "10.10.0.256", want: "VirtualMachineInstance default/vm-bad: status.interfaces[eth1].ipAddress ", msg: "not an IP address"},
		{name: "IPv6 IP", mac: "50:54:00:00:00:02", ip: "fd00::12", want: "VirtualMachineInstance default/vm-bad: status.interfaces[eth1].ipAddress ", msg: "not an IPv4 address"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			bad := good
			bad.VMI, bad.MAC, bad.IP = "vm-bad", tc.mac, tc.ip
			s := validationSnapshot()
			s.VMs = []VMInterface{bad, good}
			p := Build(s, testInstance)

			require.Len(t, p.Errors, 1)
			msg := p.Errors[0].Error()
			assert.Contains(t, msg, tc.want)
			assert.Contains(t, msg, tc.msg)
			assert.True(t, strings.HasPrefix(msg, tc.want), "%q does not start with %q", msg, tc.want)
			assert.Empty(t, p.Failed, "a bad VM interface fails no unit")

			np := findNetwork(p, "net-a")
			require.NotNil(t, np)
			assert.Equal(t, []string{"kv-net-a_default_vm-bad_eth1"}, np.KeepPorts)
			assert.Equal(t, []string{"kv-net-a_default_vm-good_eth1"}, portNames(np.Ports))
			assert.NotNil(t, findRouter(p, "bad"), "routers on the network are still planned")
			assert.NotNil(t, findRouter(p, "good"))
		})
	}
}

// TestVMDeclaredAddresses: an address declared before boot (the spec's
// macAddress, the interfaces annotation's ipAddress) that status reports
// otherwise, an address outside the network or its gateway's, are errors
// of the interface, naming the field (and both values); its port stays as
// it is, the network's other ports are planned. An address outside the
// network's ipPool is no error.
func TestVMDeclaredAddresses(t *testing.T) {
	good := VMInterface{Namespace: "default", VMI: "vm-good", Interface: "eth1", Network: "net-a", NetworkNamespace: "default", MAC: "50:54:00:00:00:01", IP: "10.10.0.11"}
	declared := func(v *VMInterface) {
		v.MACField = "spec.domain.devices.interfaces[eth1].macAddress"
		v.IPField = "metadata.annotations[interfaces][net-a].ipAddress"
	}
	tests := []struct {
		name   string
		mutate func(v *VMInterface)
		pool   *IPPool
		want   string // "": no error
	}{
		{name: "declared, no status yet", mutate: declared},
		{name: "declared and the same in status (MAC case, IP among several)", mutate: func(v *VMInterface) {
			declared(v)
			v.StatusMAC, v.StatusIP = "50:54:00:00:00:AB", "10.10.0.12"
		}},
		{name: "declared IP differs from status", mutate: func(v *VMInterface) {
			declared(v)
			v.StatusIP = "10.10.0.99"
		}, want: "VirtualMachineInstance default/vm-bad: metadata.annotations[interfaces][net-a].ipAddress 10.10.0.12 differs from status.interfaces[eth1].ipAddress 10.10.0.99"},
		{name: "declared MAC differs from status", mutate: func(v *VMInterface) {
			declared(v)
			v.StatusMAC = "50:54:00:00:00:99"
		}, want: "VirtualMachineInstance default/vm-bad: spec.domain.devices.interfaces[eth1].macAddress 50:54:00:00:00:ab differs from status.interfaces[eth1].mac 50:54:00:00:00:99"},
		{name: "declared IP outside the network", mutate: func(v *VMInterface) {
			declared(v)
			v.IP = "10.99.0.12"
		}, want: "VirtualMachineInstance default/vm-bad: metadata.annotations[interfaces][net-a].ipAddress 10.99.0.12 is outside network net-a (10.10.0.0/24)"},
		// The ipPool is informational, as in ONOS: an address anywhere in
		// the CIDR is the port's (issue 30).
		{name: "inside the ipPool", pool: &IPPool{Start: "10.10.0.10", End: "10.10.0.12"}},
		{name: "below the ipPool", pool: &IPPool{Start: "10.10.0.11", End: "10.10.0.200"}, mutate: func(v *VMInterface) { v.IP = "10.10.0.10" }},
		{name: "above the ipPool, declared", pool: &IPPool{Start: "10.10.0.10", End: "10.10.0.11"}, mutate: declared},
		{name: "outside the ipPool, and the gateway", pool: &IPPool{Start: "10.10.0.100", End: "10.10.0.200"}, mutate: func(v *VMInterface) { v.IP = "10.10.0.1" },
			want: "VirtualMachineInstance default/vm-bad: status.interfaces[eth1].ipAddress 10.10.0.1 is the gateway IP of network net-a"},
		{name: "outside the ipPool, and the network", pool: &IPPool{Start: "10.10.0.100", End: "10.10.0.200"}, mutate: func(v *VMInterface) { v.IP = "10.10.1.5" },
			want: "VirtualMachineInstance default/vm-bad: status.interfaces[eth1].ipAddress 10.10.1.5 is outside network net-a (10.10.0.0/24)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			bad := good
			bad.VMI, bad.MAC, bad.IP = "vm-bad", "50:54:00:00:00:ab", "10.10.0.12"
			if tc.mutate != nil {
				tc.mutate(&bad)
			}
			s := validationSnapshot()
			for i := range s.Networks {
				if s.Networks[i].Name == "net-a" {
					s.Networks[i].IPPool = tc.pool
				}
			}
			s.VMs = []VMInterface{bad, good}
			p := Build(s, testInstance)
			assert.Empty(t, p.Failed, "a bad VM interface fails no unit")
			np := findNetwork(p, "net-a")
			require.NotNil(t, np)
			if tc.want == "" {
				assert.Empty(t, p.Errors)
				assert.Equal(t, []string{"kv-net-a_default_vm-bad_eth1", "kv-net-a_default_vm-good_eth1"}, portNames(np.Ports))
				assert.Equal(t, []string{"50:54:00:00:00:ab " + bad.IP}, np.Ports[0].Addresses)
				assert.Equal(t, []string{"50:54:00:00:00:ab " + bad.IP}, np.Ports[0].PortSecurity)
				return
			}
			assert.Equal(t, []string{tc.want}, errTexts(p.Errors))
			assert.Equal(t, []string{"kv-net-a_default_vm-bad_eth1"}, np.KeepPorts)
			assert.Equal(t, []string{"kv-net-a_default_vm-good_eth1"}, portNames(np.Ports))
		})
	}
}

// TestVMAddressClaims: a MAC or an IP belongs to one port of a network. The
// port the NB shows holding it keeps it; otherwise the first port by name.
// The other interface gets a named error and its port stays as it is.
func TestVMAddressClaims(t *testing.T) {
	a := VMInterface{Namespace: "default", VMI: "vm-a", Interface: "eth1", Network: "net-a", NetworkNamespace: "default", MAC: "50:54:00:00:00:01", IP: "10.10.0.11"}
	b := VMInterface{Namespace: "default", VMI: "vm-b", Interface: "eth1", Network: "net-a", NetworkNamespace: "default", MAC: "50:54:00:00:00:02", IP: "10.10.0.12"}
	portA, portB := "kv-net-a_default_vm-a_eth1", "kv-net-a_default_vm-b_eth1"
	tests := []struct {
		name          string
		mutate        func(b *VMInterface)
		held          map[string]string
		winner, loser string
		msg           string
	}{
		{name: "same IP: first by port name keeps it", mutate: func(b *VMInterface) { b.IP = "10.10.0.11" },
			winner: portA, loser: portB,
			msg: "VirtualMachineInstance default/vm-b: status.interfaces[eth1].ipAddress 10.10.0.11 is already the IP of VirtualMachineInstance default/vm-a interface eth1 on network net-a"},
		{name: "same MAC: first by port name keeps it", mutate: func(b *VMInterface) { b.MAC = "50:54:00:00:00:01" },
			winner: portA, loser: portB,
			msg: "VirtualMachineInstance default/vm-b: status.interfaces[eth1].mac 50:54:00:00:00:01 is already the MAC of VirtualMachineInstance default/vm-a interface eth1 on network net-a"},
		{name: "same IP held in the NB by the port that sorts last", mutate: func(b *VMInterface) { b.IP = "10.10.0.11" },
			held:   map[string]string{"net-a 10.10.0.11": portB, "net-a 50:54:00:00:00:02": portB},
			winner: portB, loser: portA,
			msg: "VirtualMachineInstance default/vm-a: status.interfaces[eth1].ipAddress 10.10.0.11 is already the IP of VirtualMachineInstance default/vm-b interface eth1 on network net-a"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			bb := b
			tc.mutate(&bb)
			for _, order := range [][]VMInterface{{a, bb}, {bb, a}} {
				s := validationSnapshot()
				s.VMs = order
				s.Held = Claims{VMAddresses: tc.held}
				p := Build(s, testInstance)
				assert.Equal(t, []string{tc.msg}, errTexts(p.Errors))
				assert.Empty(t, p.Failed, "a VM address conflict fails no unit")
				np := findNetwork(p, "net-a")
				require.NotNil(t, np)
				assert.Equal(t, []string{tc.loser}, np.KeepPorts)
				assert.Equal(t, []string{tc.winner}, portNames(np.Ports))
			}
		})
	}
	// The same address on two networks is no conflict.
	s := validationSnapshot()
	other := a
	other.Network, other.IP = "net-b", "10.20.0.11"
	s.VMs = []VMInterface{a, other}
	assert.Empty(t, Build(s, testInstance).Errors)
}

// TestBuildDuplicateRouterName checks a router name declared twice (two
// manifest files): Plan documents that a unit in Failed keeps its rows as they
// are, so it must not also be planned, and the result must not depend on the
// order of the input.
func TestBuildDuplicateRouterName(t *testing.T) {
	s := validationSnapshot()
	s.Routers = append(s.Routers, Router{Name: "good", MAC: "fa:16:3e:00:00:09", Internal: []string{"net-b"}, Created: t0})
	p := Build(s, testInstance)
	u := Unit{Kind: KindRouter, Name: "good"}
	require.Contains(t, p.Failed, u)
	assert.Contains(t, errTexts(p.Failed[u]), "VirtualRouter good: metadata.name is declared 2 times")
	assert.NotNil(t, findRouter(p, "bad"), "the other router is still planned")
	assert.Nil(t, findRouter(p, "good"), "router %s is both in plan.Failed and in plan.Routers", u.Name)

	r := validationSnapshot()
	r.Routers = append(r.Routers, s.Routers[2])
	slices.Reverse(r.Routers)
	assert.Equal(t, p.Routers, Build(r, testInstance).Routers, "which declaration is planned depends on the input order")
}

// TestNameValidation: row names are built from object names joined by '_'
// (kv-<network>_<namespace>_<vmi>_<interface>), so names Kubernetes would
// refuse ('_', spaces, '/', upper case, over 253 characters) could make the
// rows of two objects one, or a row OVN cannot hold. They are named errors
// of their object, and nothing else fails.
func TestNameValidation(t *testing.T) {
	long := strings.Repeat("a", 255)
	tests := []struct {
		name   string
		mutate func(s *Snapshot)
		want   string
	}{
		{name: "router name with '_'", mutate: func(s *Snapshot) { s.Routers[1].Name = "x_y" },
			want: `VirtualRouter x_y: metadata.name "x_y" is not a valid name: a lowercase RFC 1123 subdomain`},
		{name: "router name of 255 characters", mutate: func(s *Snapshot) { s.Routers[1].Name = long },
			want: "VirtualRouter " + long + `: metadata.name "` + long + `" is not a valid name: must be no more than 253 characters`},
		{name: "router name with a space", mutate: func(s *Snapshot) { s.Routers[1].Name = "edge 1" },
			want: `VirtualRouter edge 1: metadata.name "edge 1" is not a valid name`},
		{name: "network name with '_'", mutate: func(s *Snapshot) { s.Networks[3].Name = "net_b" },
			want: `NetworkAttachmentDefinition default/net_b: metadata.name "net_b" is not a valid name`},
		{name: "network namespace with '/'", mutate: func(s *Snapshot) { s.Networks[3].Namespace = "a/b" },
			want: `NetworkAttachmentDefinition a/b/net-b: metadata.namespace "a/b" is not a valid name`},
		{name: "VMI name with '_'", mutate: func(s *Snapshot) { s.VMs[0].VMI = "vm_x" },
			want: `VirtualMachineInstance default/vm_x: metadata.name "vm_x" is not a valid name`},
		{name: "VMI namespace with upper case", mutate: func(s *Snapshot) { s.VMs[0].Namespace = "Prod"; s.VMs[0].NetworkNamespace = "default" },
			want: `VirtualMachineInstance Prod/vm-1: metadata.namespace "Prod" is not a valid name`},
		{name: "interface name with a space", mutate: func(s *Snapshot) { s.VMs[0].Interface = "eth 1" },
			want: `VirtualMachineInstance default/vm-1: spec.networks[].name "eth 1" is not a valid name: must consist of letters, digits`},
		{name: "interface name with a slash", mutate: func(s *Snapshot) { s.VMs[0].Interface = "eth/1" },
			want: `VirtualMachineInstance default/vm-1: spec.networks[].name "eth/1" is not a valid name`},
		{name: "network whose switch has a node's name", mutate: func(s *Snapshot) {
			s.Chassis = append(s.Chassis, Chassis{Name: "0f3c", Hostname: "kv-net-ok"})
		}, want: `NetworkAttachmentDefinition default/net-ok: metadata.name "net-ok" makes switch kv-net-ok, which is also the name of a node (a chassis's hostname): ovn-kubernetes names each node's Logical_Switch after the node`},
	}
	base := func() *Snapshot {
		s := validationSnapshot()
		s.VMs = []VMInterface{{Namespace: "default", VMI: "vm-1", Interface: "eth1", Network: "net-ok", NetworkNamespace: "default", MAC: "50:54:00:00:00:01", IP: "10.30.0.11"}}
		return s
	}
	require.Empty(t, Build(base(), testInstance).Errors, "baseline is valid")
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := base()
			tc.mutate(s)
			p := Build(s, testInstance)
			require.NotEmpty(t, p.Errors)
			assert.True(t, strings.HasPrefix(p.Errors[0].Error(), tc.want), "%q does not start with %q", p.Errors[0], tc.want)
			assert.NotNil(t, findRouter(p, "good"), "the other router is still planned")
		})
	}
	// An '_' in an interface name is unambiguous: it is the last part.
	s := base()
	s.VMs[0].Interface = "eth_1"
	assert.Empty(t, Build(s, testInstance).Errors)
}

// TestIPv6OnlyNetwork: a network with an ipv6Cidr and no cidr is
// IPv6-only. Its switch has VM ports addressed "MAC IPv6" (SLAAC, or what
// status reports) and no DHCPv4; the router's port on it carries the IPv6
// gateway alone, with advertisements, and no IPv4 SNAT is written for it.
// An IPv4 address declared for it, a gatewayIp or ipPool without cidr, a
// router port without ipv6GatewayIp, an IPv4 VIP or fixed IP on it are
// named errors. A VM interface without an IPv4 address on a network with
// a cidr has no port yet, and no error.
func TestIPv6OnlyNetwork(t *testing.T) {
	snap := func() *Snapshot {
		s := dualStackFIPSnapshot()
		b := networkNamed(t, s, "net-b")
		b.CIDR, b.GatewayIP, b.IPPool = "", "", nil
		s.VMs[1].IP = ""
		return s
	}
	p := Build(snap(), testInstance)
	require.Empty(t, p.Errors)
	nb := findNetwork(p, "net-b")
	require.NotNil(t, nb)
	require.Len(t, nb.Ports, 1, "vm-b's")
	var vmPort *nbmodel.LogicalSwitchPort
	for _, lsp := range nb.Ports {
		if lsp.Name == VMPortName("net-b", "default", "vm-b", "eth1") {
			vmPort = lsp
		}
	}
	require.NotNil(t, vmPort)
	assert.Equal(t, []string{"50:54:00:00:00:06 fd00:20::a1b2:c3d4:e5f6:789"}, vmPort.Addresses)
	assert.Nil(t, nb.DHCP, "no DHCPv4")
	r1 := findRouter(p, "r1")
	i := slices.IndexFunc(r1.Ports, func(lrp *nbmodel.LogicalRouterPort) bool { return lrp.Name == RouterPortName("r1", "net-b") })
	require.GreaterOrEqual(t, i, 0)
	assert.Equal(t, []string{"fd00:20::1/64"}, r1.Ports[i].Networks)
	assert.Equal(t, "slaac", r1.Ports[i].Ipv6RaConfigs["address_mode"])
	var snats []string
	for _, nat := range r1.NATs {
		snats = append(snats, nat.LogicalIP)
	}
	assert.Equal(t, []string{"10.10.0.0/24"}, snats, "net-a's IPv4 only")

	// No IPv4 address yet on net-a: no port, no error.
	s := snap()
	s.VMs[0].IP = ""
	p = Build(s, testInstance)
	require.Empty(t, p.Errors)
	assert.Empty(t, findNetwork(p, "net-a").Ports)

	for name, c := range map[string]struct {
		edit func(s *Snapshot)
		want string
	}{
		"gatewayIp without cidr": {func(s *Snapshot) { networkNamed(t, s, "net-b").GatewayIP = "10.20.0.1" },
			"NetworkAttachmentDefinition default/net-b: network-config.gatewayIp is set without network-config.cidr"},
		"ipPool without cidr": {func(s *Snapshot) { networkNamed(t, s, "net-b").IPPool = &IPPool{Start: "10.20.0.2", End: "10.20.0.9"} },
			"NetworkAttachmentDefinition default/net-b: network-config.ipPool is set without network-config.cidr"},
		"no ipv6GatewayIp": {func(s *Snapshot) { networkNamed(t, s, "net-b").IPv6GatewayIP = "" },
			"VirtualRouter r1: spec.internal[1] network net-b has no ipv6GatewayIp for the router's port"},
		"declared IPv4": {func(s *Snapshot) {
			s.VMs[1].IP, s.VMs[1].IPField = "10.20.0.6", "metadata.annotations[interfaces][net-b].ipAddress"
		}, "VirtualMachineInstance default/vm-b: metadata.annotations[interfaces][net-b].ipAddress 10.20.0.6 is declared but network net-b is IPv6-only (no cidr)"},
		"IPv4 VIP": {func(s *Snapshot) {
			s.LoadBalancers = []LoadBalancer{{Name: "web", ID: "web", Network: "net-b", VIP: "10.20.0.100", Rules: []LBRule{{Protocol: "tcp", PortMin: 80}}, Created: t0}}
		}, "LoadBalancer web: spec.vip 10.20.0.100 is IPv4 and network net-b is IPv6-only (no cidr)"},
	} {
		t.Run(name, func(t *testing.T) {
			s := snap()
			c.edit(s)
			p := Build(s, testInstance)
			var got []string
			got = append(got, errTexts(p.Errors)...)
			for _, lb := range p.LoadBalancers {
				if !lb.Ready {
					got = append(got, lb.Reason)
				}
			}
			assert.Contains(t, got, c.want)
		})
	}
}
