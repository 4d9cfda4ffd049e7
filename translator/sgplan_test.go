package translator

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
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

// sgChurn is a small input with security groups that random changes are
// made to, the way the memo of each group's members (sgmembers.go) sees
// them: VM interfaces added, removed, rebound, moved to another network
// or node, networks redeclared (invalid, another namespace, gateway or
// pool, twice, gone), groups' rules naming other groups, chassis changing
// zones, and the NB's claims deciding address clashes.
type sgChurn struct {
	t       *testing.T
	rng     *rand.Rand
	zoned   bool
	sources map[string]Objects
	chassis []Chassis
	serial  int
}

func newSGChurn(t *testing.T, seed uint64, zoned bool) *sgChurn {
	c := &sgChurn{t: t, rng: rand.New(rand.NewPCG(seed, 22)), zoned: zoned, sources: sgCostSources(4), chassis: sgCostChassis(zoned)}
	// A second source on router 0's networks: a network's VMs come from
	// several.
	c.sources["extra"] = Objects{}
	return c
}

// input is an input of c's sources and chassis set in the order given.
func (c *sgChurn) input(names []string) *Input {
	in := NewInput()
	for _, name := range names {
		in.Set(name, c.sources[name])
	}
	in.SetChassis(c.chassis, true)
	return in
}

func (c *sgChurn) names() []string { return slices.Sorted(maps.Keys(c.sources)) }

// vmSources are the sources with VM interfaces.
func (c *sgChurn) vmSources() []string {
	var out []string
	for _, name := range c.names() {
		if len(c.sources[name].VMs) > 0 {
			out = append(out, name)
		}
	}
	return out
}

func (c *sgChurn) pick(n int) int { return c.rng.IntN(n) }

func (c *sgChurn) groups() string {
	var ids []string
	for range c.pick(3) {
		ids = append(ids, fmt.Sprintf("sg%d", c.pick(sgCostGroups+1))) // sg5 is never declared
	}
	return JoinGroups(ids)
}

// networkNames are the internal networks, declared or not.
func (c *sgChurn) networkNames() []string {
	var out []string
	for i := range 4 {
		out = append(out, fmt.Sprintf("net-%d-0", i), fmt.Sprintf("net-%d-1", i))
	}
	return append(out, "net-gone")
}

// change makes one random change and returns the source it set ("" for
// the chassis) and what it did.
func (c *sgChurn) change() (string, string) {
	edit := func(name string, f func(o *Objects)) string {
		o := c.sources[name]
		o.VMs = slices.Clone(o.VMs)
		o.Networks = slices.Clone(o.Networks)
		o.SecurityGroupRules = slices.Clone(o.SecurityGroupRules)
		f(&o)
		c.sources[name] = o
		return name
	}
	nets := c.networkNames()
	switch k := c.pick(10); k {
	case 0, 1: // a VM added, its IP often another's
		name := c.vmSources()[c.pick(len(c.vmSources()))]
		if c.pick(3) == 0 {
			name = "extra"
		}
		return edit(name, func(o *Objects) {
			c.serial++
			net := nets[c.pick(len(nets))]
			var i, j int
			fmt.Sscanf(net, "net-%d-%d", &i, &j)
			v := VMInterface{Namespace: "default", VMI: fmt.Sprintf("add-%d", c.serial), Interface: "eth1", Network: net, NetworkNamespace: "default",
				MAC: fmt.Sprintf("52:54:00:00:%02x:%02x", c.serial>>8, c.serial&255), IP: fmt.Sprintf("10.0.%d.%d", 2*i+j, 10+c.pick(8)),
				Node: fmt.Sprintf("hv%d", c.pick(4)), SecurityGroups: c.groups()}
			switch c.pick(6) {
			case 0:
				v.IP = "not-an-ip"
			case 1:
				v.NetworkNamespace = "other"
			case 2:
				v.VMI = fmt.Sprintf("vm-%d-%d-%d", i, c.pick(2), c.pick(5)) // another's name
			case 3:
				v.IP = fmt.Sprintf("10.0.%d.%d", c.pick(8), 10+c.pick(8)) // maybe another network's
			}
			o.VMs = append(o.VMs, v)
		}), "vm added"
	case 2: // a VM removed
		name := c.vmSources()[c.pick(len(c.vmSources()))]
		return edit(name, func(o *Objects) {
			i := c.pick(len(o.VMs))
			o.VMs = slices.Delete(o.VMs, i, i+1)
		}), "vm removed"
	case 3, 4: // a VM rebound, moved to another node or network
		name := c.vmSources()[c.pick(len(c.vmSources()))]
		what := []string{"rebound", "moved node", "moved network", "readdressed"}[c.pick(4)]
		return edit(name, func(o *Objects) {
			v := &o.VMs[c.pick(len(o.VMs))]
			switch what {
			case "rebound":
				v.SecurityGroups = c.groups()
			case "moved node":
				v.Node = fmt.Sprintf("node-hv%d", c.pick(4))
			case "moved network":
				v.Network = nets[c.pick(len(nets))]
			case "readdressed":
				v.IP = fmt.Sprintf("10.0.%d.%d", c.pick(8), 10+c.pick(8))
			}
		}), "vm " + what
	case 5, 6: // a network redeclared
		i := c.pick(4)
		name := fmt.Sprintf("router-%d", i)
		base := sgCostRouter(i).Networks
		what := []string{"as it was", "gateway", "pool", "namespace", "invalid", "twice", "gone"}[c.pick(7)]
		return edit(name, func(o *Objects) {
			j := c.pick(2)
			o.Networks = slices.Clone(base)
			n := &o.Networks[j]
			switch what {
			case "gateway":
				n.GatewayIP = ""
				if c.pick(2) == 0 {
					n.GatewayIP = fmt.Sprintf("10.0.%d.254", 2*i+j)
				}
			case "pool":
				n.IPPool = &IPPool{Start: fmt.Sprintf("10.0.%d.12", 2*i+j), End: fmt.Sprintf("10.0.%d.200", 2*i+j)}
			case "namespace":
				n.Namespace = "other"
			case "invalid":
				n.CIDR = "nonsense"
			case "twice":
				o.Networks = append(o.Networks, *n)
			case "gone":
				o.Networks = slices.Delete(o.Networks, j, j+1)
			}
		}), "network " + what
	case 7: // a group's remote groups
		return edit("sgs", func(o *Objects) {
			r := &o.SecurityGroupRules[c.pick(len(o.SecurityGroupRules))]
			r.RemoteIPPrefix, r.RemoteGroupID = "", ""
			if c.pick(2) == 0 {
				r.RemoteGroupID = fmt.Sprintf("sg%d", c.pick(sgCostGroups))
			}
		}), "rule remote"
	case 8: // the chassis change zones
		if c.zoned {
			for i := range 3 {
				c.chassis[i].Zone = []string{"hv0", "hv1", "hv2", "z"}[c.pick(4)]
			}
		}
		return "", "chassis"
	default: // a whole source goes and comes back
		name := c.vmSources()[c.pick(len(c.vmSources()))]
		return name, "source gone and back"
	}
}

// held are NB claims of some of the addresses VMs share on a network.
func (c *sgChurn) held() Held {
	if c.pick(3) == 0 {
		return nil
	}
	claims := Claims{VMAddresses: map[string]string{}}
	for _, name := range c.names() {
		for _, v := range c.sources[name].VMs {
			if c.pick(4) == 0 {
				claims.VMAddresses[v.Network+" "+v.IP] = VMPortName(v.Network, v.Namespace, v.VMI, v.Interface)
			}
		}
	}
	return claims
}

// sgOracle is what a group's members are, by the networks' own plans.
type sgOracle struct {
	ports    []string
	gateways []netip.Addr // sorted, as pingGatewayMatch takes them
	addrs    []string     // nil: a port of two VM interfaces, which is not checked
}

// members are each group's members as the plans of the networks of a
// central input of c's sources (with held) have them: the ports of its
// VM interfaces that their network plans, with their network's gateway
// and their port's address.
func (c *sgChurn) members(held Held) map[string]*sgOracle {
	chassis := slices.Clone(c.chassis)
	for i := range chassis {
		chassis[i].Zone = ""
	}
	in := NewInput()
	for _, name := range c.names() {
		in.Set(name, c.sources[name])
	}
	in.SetChassis(chassis, true)
	nets := map[string]map[string]string{} // network -> port -> IP; nil: no plan
	namespace := map[string]string{}
	gateway := map[string]netip.Addr{}
	for _, name := range c.names() {
		for _, n := range c.sources[name].Networks {
			namespace[n.Name] = n.Namespace
			gateway[n.Name], _ = netip.ParseAddr(n.GatewayIP)
		}
	}
	out := map[string]*sgOracle{}
	gws := map[string]map[netip.Addr]bool{}
	addrs := map[string]map[netip.Addr]bool{}
	ambiguous := map[string]bool{}
	for _, name := range c.names() {
		for _, v := range c.sources[name].VMs {
			ports, ok := nets[v.Network]
			if !ok {
				if np := in.Plan(networkUnit(v.Network), testInstance, held).Network; np != nil {
					ports = map[string]string{}
					for _, p := range np.Ports {
						if len(p.Addresses) == 1 {
							if _, twice := ports[p.Name]; twice {
								ports[p.Name] = "" // two interfaces' port: which address is the group's is not this test's
								continue
							}
							ports[p.Name] = strings.Fields(p.Addresses[0])[1]
						}
					}
				}
				nets[v.Network] = ports
			}
			port := VMPortName(v.Network, v.Namespace, v.VMI, v.Interface)
			ip, planned := ports[port]
			if !planned || v.NetworkNamespace != namespace[v.Network] {
				continue
			}
			for _, g := range v.Groups() {
				if out[g] == nil {
					out[g], gws[g], addrs[g] = &sgOracle{}, map[netip.Addr]bool{}, map[netip.Addr]bool{}
				}
				out[g].ports = append(out[g].ports, port)
				if a := gateway[v.Network]; a.IsValid() {
					gws[g][a] = true
				}
				if a, err := netip.ParseAddr(ip); err == nil {
					addrs[g][a] = true
				} else {
					ambiguous[g] = true
				}
			}
		}
	}
	for g, o := range out {
		slices.Sort(o.ports)
		o.ports = slices.Compact(o.ports)
		o.gateways = slices.SortedFunc(maps.Keys(gws[g]), netip.Addr.Compare)
		if ambiguous[g] {
			continue // o.addrs nil: not checked
		}
		o.addrs = []string{}
		for _, a := range slices.SortedFunc(maps.Keys(addrs[g]), netip.Addr.Compare) {
			o.addrs = append(o.addrs, a.String())
		}
	}
	for g := range sgCostGroups + 1 {
		if id := fmt.Sprintf("sg%d", g); out[id] == nil {
			out[id] = &sgOracle{addrs: []string{}}
		}
	}
	return out
}

// TestSecurityGroupMemoIsTheFreshPlan: after every change of a random
// sequence, each group's plan by an input that has planned the groups
// all along (their members kept, sgmembers.go) is the plan of a fresh
// input of the same sources, with whatever claims the NB holds; some
// changes come several before a plan, a group is planned twice with
// different claims. Centrally and in interconnect mode, the kept members
// spliced and merged (the fresh input the other way). Each group's ports,
// ping gateways and addresses are also those the networks' own plans
// give its VM interfaces.
func TestSecurityGroupMemoIsTheFreshPlan(t *testing.T) {
	spliceMax := sgSpliceMax
	defer func() { sgSpliceMax = spliceMax }()
	for _, zoned := range []bool{false, true} {
		for seed := range uint64(4) {
			t.Run(fmt.Sprintf("zoned=%v/seed=%d", zoned, seed), func(t *testing.T) {
				c := newSGChurn(t, seed, zoned)
				in := c.input(c.names())
				var did []string
				for step := range 150 {
					src, what := c.change()
					did = append(did, what)
					switch {
					case src == "":
						in.SetChassis(c.chassis, true)
					case what == "source gone and back":
						in.Set(src, Objects{})
						if c.pick(2) == 0 {
							for g := range sgCostGroups {
								in.Plan(sgUnit(fmt.Sprintf("sg%d", g)), testInstance, nil)
							}
						}
						fallthrough
					default:
						in.Set(src, c.sources[src])
					}
					if c.pick(3) == 0 {
						continue // another change before the plans
					}
					for range 1 + c.pick(2) {
						held := c.held()
						// The kept members spliced, merged whole, or
						// either by how many change; the fresh plans
						// the other way, and the members as the
						// networks' plans have them.
						inMax := []int{0, 3, spliceMax}[c.pick(3)]
						sgSpliceMax = spliceMax
						if inMax != 0 {
							sgSpliceMax = 0
						}
						fresh := c.input(c.names())
						var wants []UnitPlan
						for g := range sgCostGroups + 1 {
							wants = append(wants, fresh.Plan(sgUnit(fmt.Sprintf("sg%d", g)), testInstance, held))
						}
						sgSpliceMax = inMax
						oracle := c.members(held)
						for g, want := range wants {
							u := sgUnit(fmt.Sprintf("sg%d", g))
							got := in.Plan(u, testInstance, held)
							require.Equal(t, want, got, "step %d, %s, after %v", step, u.Name, did)
							if sp := got.SecurityGroup; sp != nil {
								o := oracle[u.Name]
								require.Equal(t, o.ports, sp.Ports, "step %d, %s: the ports the networks plan", step, u.Name)
								ping := ""
								for _, a := range sp.ACLs {
									if a.ExternalIDs[KeySecurityACL] == "base/ping-gateway" {
										ping = a.Match
									}
								}
								require.Equal(t, pingGatewayMatch(sp.PortGroup.Name, o.gateways), ping, "step %d, %s", step, u.Name)
								if sp.AddressSet != nil && o.addrs != nil {
									require.Equal(t, o.addrs, sp.AddressSet.Addresses, "step %d, %s", step, u.Name)
								}
							}
						}
					}
					did = did[:0]
				}
			})
		}
	}
}

// TestSecurityGroupMemoConcurrentPlans: plans of the groups run at once
// (under the input's read lock, each group's memo its own), with
// different claims, while the input changes; then each group's plan is a
// fresh input's. Run with -race, it also checks the memos' locking.
func TestSecurityGroupMemoConcurrentPlans(t *testing.T) {
	c := newSGChurn(t, 7, true)
	in := c.input(c.names())
	helds := []Held{nil, c.held(), c.held()}
	done := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-done:
					return
				default:
				}
				in.Plan(sgUnit(fmt.Sprintf("sg%d", (w+i)%sgCostGroups)), testInstance, helds[i%len(helds)])
			}
		}()
	}
	for range 100 {
		src, _ := c.change()
		if src == "" {
			in.SetChassis(c.chassis, true)
		} else {
			in.Set(src, c.sources[src])
		}
	}
	close(done)
	wg.Wait()
	fresh := c.input(c.names())
	for _, held := range helds {
		for g := range sgCostGroups {
			u := sgUnit(fmt.Sprintf("sg%d", g))
			require.Equal(t, fresh.Plan(u, testInstance, held), in.Plan(u, testInstance, held), u.Name)
		}
	}
}
