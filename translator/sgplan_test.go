package translator

import (
	"fmt"
	"testing"
)

// sgCostGroups and sgCostRules are the security groups of sgCostInput, as
// make bench has them: 5 groups of 10 rules.
const (
	sgCostGroups = 5
	sgCostRules  = 10
)

// sgCostVM is VM v of internal network j of router i in sgCostInput: bound
// to two neighbouring groups, as make bench binds them.
func sgCostVM(i, j, v int) VMInterface {
	k := i*2 + j
	g := (k + v) % sgCostGroups
	return VMInterface{Namespace: "default", VMI: fmt.Sprintf("vm-%d-%d-%d", i, j, v), Interface: "eth1",
		Network: fmt.Sprintf("net-%d-%d", i, j), NetworkNamespace: "default",
		MAC: fmt.Sprintf("50:54:00:%02x:%02x:%02x", k>>8, k&255, v), IP: fmt.Sprintf("10.%d.%d.%d", k>>8, k&255, 10+v),
		Node: fmt.Sprintf("hv%d", k%3), SecurityGroups: JoinGroups([]string{fmt.Sprintf("sg%d", g), fmt.Sprintf("sg%d", (g+1)%sgCostGroups)})}
}

// sgCostRouter is router i's source in sgCostInput: its two internal
// networks, each with five VMs, and the router.
func sgCostRouter(i int) Objects {
	o := Objects{Routers: []Router{{Name: fmt.Sprintf("r-%d", i), EnableSNAT: true, Gateway: "gw1",
		Internal: []string{fmt.Sprintf("net-%d-0", i), fmt.Sprintf("net-%d-1", i)},
		External: &External{Network: "public", IP: fmt.Sprintf("172.16.%d.%d", 1+i/200, 2+i%200)}}}}
	for j := range 2 {
		k := i*2 + j
		o.Networks = append(o.Networks, Network{Name: fmt.Sprintf("net-%d-%d", i, j), Namespace: "default", Type: NetworkVXLAN,
			CIDR: fmt.Sprintf("10.%d.%d.0/24", k>>8, k&255), GatewayIP: fmt.Sprintf("10.%d.%d.1", k>>8, k&255)})
		for v := range 5 {
			o.VMs = append(o.VMs, sgCostVM(i, j, v))
		}
	}
	return o
}

// sgCostSources are make bench's input with security groups, as sources:
// N routers × 2 internal networks × 5 VMs (one source per router), the
// external network, and 5 groups of 10 rules (one with a remote group),
// every VM in two groups: each group has 4 VMs of every 10, on every
// network.
func sgCostSources(n int) map[string]Objects {
	sources := map[string]Objects{
		"external": {Networks: []Network{{Name: "public", Namespace: "default", Type: NetworkFlat, CIDR: "172.16.0.0/16", GatewayIP: "172.16.0.1"}}},
	}
	for i := range n {
		sources[fmt.Sprintf("router-%d", i)] = sgCostRouter(i)
	}
	var sgs Objects
	for g := range sgCostGroups {
		id := fmt.Sprintf("sg%d", g)
		sg := SecurityGroup{Name: id, ID: id}
		for q := range sgCostRules {
			r := SecurityGroupRule{Name: fmt.Sprintf("%s-r%d", id, q), ID: fmt.Sprintf("%s-r%d", id, q), SecurityGroupID: id, Direction: "ingress", Protocol: "tcp", PortRangeMin: intp(8000 + q)}
			switch q {
			case 1:
				r.RemoteGroupID = fmt.Sprintf("sg%d", (g+1)%sgCostGroups)
			case 2:
				r.RemoteIPPrefix = "192.168.0.0/16"
			case 3:
				r.Direction, r.Protocol, r.PortRangeMin = "egress", "icmp", intp(8)
			}
			sgs.SecurityGroupRules = append(sgs.SecurityGroupRules, r)
		}
		sgs.SecurityGroups = append(sgs.SecurityGroups, sg)
	}
	sources["sgs"] = sgs
	return sources
}

// sgCostChassis are the chassis of sgCostInput's VMs' nodes, in zones of
// their own when zoned.
func sgCostChassis(zoned bool) []Chassis {
	var out []Chassis
	for i := range 3 {
		c := Chassis{Name: fmt.Sprintf("hv%d", i), Hostname: fmt.Sprintf("node-hv%d", i)}
		if zoned {
			c.Zone = c.Name
		}
		out = append(out, c)
	}
	return append(out, Chassis{Name: "gw1", Gateway: true, Physnets: []string{"physnet1"}})
}

// BenchmarkPlanSecurityGroup plans one security group of make bench's
// input with security groups at N routers (each group has 4N VM ports on
// 2N networks): again with nothing changed ("same"), and after one VM
// event, a VM of the group added to or removed from one network in turn
// ("vm-event": the Set and the plan).
func BenchmarkPlanSecurityGroup(b *testing.B) {
	for _, zoned := range []bool{false, true} {
		for _, n := range []int{10, 1000} {
			mode := "central"
			if zoned {
				mode = "zoned"
			}
			sources := sgCostSources(n)
			in := NewInput()
			for name, o := range sources {
				in.Set(name, o)
			}
			in.SetChassis(sgCostChassis(zoned), true)
			u := sgUnit("sg0")
			plan := func(b *testing.B) {
				sp := in.Plan(u, testInstance, nil).SecurityGroup
				if sp == nil || len(sp.Ports) < 4*n {
					b.Fatalf("sg0 not planned: %+v", sp)
				}
			}
			b.Run(fmt.Sprintf("%s/N=%d/same", mode, n), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					plan(b)
				}
			})
			src := fmt.Sprintf("router-%d", n/2)
			base := sources[src]
			more := base
			more.VMs = append(more.VMs[:len(more.VMs):len(more.VMs)], func() VMInterface {
				v := sgCostVM(n/2, 0, 5)
				v.SecurityGroups = "sg0,sg3"
				return v
			}())
			b.Run(fmt.Sprintf("%s/N=%d/vm-event", mode, n), func(b *testing.B) {
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					o := base
					if i%2 == 0 {
						o = more
					}
					i++
					in.Set(src, o)
					plan(b)
				}
				in.Set(src, base)
			})
		}
	}
}
