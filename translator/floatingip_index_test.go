package translator

import (
	"fmt"
	"maps"
	"math/rand"
	"reflect"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestFloatingIPSetAffects: a floating IP's change re-plans its router(s)
// and the routers competing for its address; a VM's change re-plans the
// routers with a floating IP on its address, no other; a router's SNAT IP
// re-plans the routers with a floating IP on it.
func TestFloatingIPSetAffects(t *testing.T) {
	in, sources := costInput(100)
	bound := FloatingIP{Name: "f-1", ID: "f-1", Router: "r-5", Network: "public", IP: "172.16.200.1", FixedIP: "10.0.5.10"}
	assert.Equal(t, []Unit{routerUnit("r-5")}, in.Set("fips", Objects{FloatingIPs: []FloatingIP{bound}}))
	st := in.Plan(routerUnit("r-5"), testInstance, nil).FloatingIPs
	require.Len(t, st, 1)
	assert.True(t, st[0].Ready, st[0].Reason)
	assert.Empty(t, in.Set("fips", Objects{FloatingIPs: []FloatingIP{bound}}), "the same floating IP again")

	// Its VM's address changes: its network and r-5; another VM's: its
	// network only.
	nets := sources["networks"]
	nets.VMs = slices.Clone(nets.VMs)
	nets.VMs[5*5].IP = "10.0.5.99"
	assert.Equal(t, []Unit{networkUnit("net-5"), routerUnit("r-5")}, in.Set("networks", nets))
	assert.Equal(t, "waiting for a VM with ip 10.0.5.10 on network net-5", in.Plan(routerUnit("r-5"), testInstance, nil).FloatingIPs[0].Reason)
	nets.VMs = slices.Clone(nets.VMs)
	nets.VMs[7*5].IP = "10.0.7.99"
	assert.Equal(t, []Unit{networkUnit("net-7")}, in.Set("networks", nets))
	nets.VMs = slices.Clone(nets.VMs)
	nets.VMs[5*5].IP = "10.0.5.10"
	assert.Equal(t, []Unit{networkUnit("net-5"), routerUnit("r-5")}, in.Set("networks", nets), "the VM comes back: the floating IP binds")
	assert.True(t, in.Plan(routerUnit("r-5"), testInstance, nil).FloatingIPs[0].Ready)
	sources["networks"] = nets

	// A rival for its address, on r-6: both routers.
	rival := FloatingIP{Name: "f-0", ID: "f-0", Router: "r-6", Network: "public", IP: "172.16.200.1", FixedIP: "10.0.6.10"}
	assert.Equal(t, []Unit{routerUnit("r-5"), routerUnit("r-6")}, in.Set("rival", Objects{FloatingIPs: []FloatingIP{rival}}))
	assert.Empty(t, in.Plan(routerUnit("r-5"), testInstance, nil).Router.NATs[1:], "f-0 comes first by name: r-5 loses f-1's row")
	assert.Equal(t, []Unit{routerUnit("r-5"), routerUnit("r-6")}, in.Set("rival", Objects{}))

	// Moved to another router: the old and the new one.
	moved := bound
	moved.Router, moved.FixedIP = "r-8", "10.0.8.11"
	assert.Equal(t, []Unit{routerUnit("r-5"), routerUnit("r-8")}, in.Set("fips", Objects{FloatingIPs: []FloatingIP{moved}}))
	assert.Empty(t, in.Plan(routerUnit("r-5"), testInstance, nil).FloatingIPs)
	assert.True(t, in.Plan(routerUnit("r-8"), testInstance, nil).FloatingIPs[0].Ready)

	// A router takes the floating IP as its SNAT IP: it and r-8.
	r9 := sources["router-9"].Routers[0]
	ext := *r9.External
	ext.IP = "172.16.200.1"
	r9.External = &ext
	assert.Equal(t, []Unit{routerUnit("r-8"), routerUnit("r-9")}, in.Set("router-9", Objects{Routers: []Router{r9}}))
	assert.Equal(t, "FloatingIp f-1: spec.floatingIp 172.16.200.1 is the SNAT IP of VirtualRouter r-9", in.Plan(routerUnit("r-8"), testInstance, nil).FloatingIPs[0].Reason)

	// A floating IP naming a router that is not declared is a unit of its
	// own, for its status.
	assert.Equal(t, []Unit{routerUnit("nope")}, in.Set("lost", Objects{FloatingIPs: []FloatingIP{{Name: "f-3", ID: "f-3", Router: "nope", Network: "public", IP: "172.16.200.3"}}}))
	assert.Contains(t, in.Units(), routerUnit("nope"))
	assert.Contains(t, in.ReconcileOrder(), routerUnit("nope"))
	up := in.Plan(routerUnit("nope"), testInstance, nil)
	assert.False(t, up.InInput)
	assert.Equal(t, []FloatingIPStatus{{Name: "f-3", ID: "f-3", Reason: "VirtualRouter nope is not declared"}}, up.FloatingIPs)
}

// TestFloatingIPKeepsGatewayWithoutSNAT: a router with enableSnat false is
// scheduled a gateway while a floating IP names it, and released when the
// last one goes.
func TestFloatingIPKeepsGatewayWithoutSNAT(t *testing.T) {
	in := NewInput()
	in.SetChassis([]Chassis{{Name: "ch-1", Hostname: "gw1", Gateway: true, Physnets: []string{"physnet1"}}}, true)
	in.Set("nets", Objects{Networks: []Network{publicNet(), netA()}})
	in.Set("r", Objects{Routers: []Router{{Name: "r1", Internal: []string{"net-a"}, External: &External{IP: "172.16.0.100", Network: "public"}}}})
	assert.Nil(t, in.Plan(routerUnit("r1"), testInstance, nil).Router.Gateway)

	assert.Equal(t, []Unit{routerUnit("r1")}, in.Set("f", Objects{FloatingIPs: []FloatingIP{fip("fip-1", "172.16.0.50", "", "")}}))
	assert.Equal(t, &GatewayChoice{Chassis: []string{"ch-1"}}, in.Plan(routerUnit("r1"), testInstance, nil).Router.Gateway)
	assert.Equal(t, 1, in.gatewayRouters["r1"])

	assert.Equal(t, []Unit{routerUnit("r1")}, in.Set("f", Objects{}))
	assert.Nil(t, in.Plan(routerUnit("r1"), testInstance, nil).Router.Gateway)
	assert.NotContains(t, in.gatewayRouters, "r1")
	assert.Nil(t, in.sched.Order("r1"), "its gateway is released")
}

// TestFloatingIPIncremental: random floating IPs, routers and VMs from
// several sources (on mostly valid networks, so that floating IPs bind
// and compete), changed by random Sets: after every step each router's plan
// (its rows and its floating IPs' status) equals a fresh input's of the
// same objects, and every router whose plan changed is among the units the
// step returned.
func TestFloatingIPIncremental(t *testing.T) {
	const seeds, steps = 30, 60
	fipIPs := []string{"172.16.0.50", "172.16.0.51", "172.16.0.52", "172.16.0.53", "172.16.0.54", "172.16.0.55", "172.16.0.100", "172.17.0.50"}
	fipNames := []string{"f-0", "f-1", "f-2", "f-3", "f-4", "f-5", "f-6", "f-7"}
	routers := []string{"r-0", "r-1", "r-2", "r-3"}
	nets := Objects{Networks: []Network{
		{Name: "pub-0", Namespace: "default", Type: NetworkVXLAN, CIDR: "172.16.0.0/24", GatewayIP: "172.16.0.1"},
		{Name: "net-0", Namespace: "default", Type: NetworkVXLAN, CIDR: "10.0.0.0/24", GatewayIP: "10.0.0.1"},
		{Name: "net-1", Namespace: "default", Type: NetworkVXLAN, CIDR: "10.1.0.0/24", GatewayIP: "10.1.0.1"},
		{Name: "net-2", Namespace: "default", Type: NetworkVXLAN, CIDR: "10.2.0.0/24", GatewayIP: "10.2.0.1"},
	}}
	// Router r-N is mostly on net-N (r-3 on none): edits flip SNAT, move
	// the SNAT IP, take another network or drop the external network.
	newRouter := func(g *gen, i int) Router {
		r := Router{Name: routers[i], Gateway: "gw1", EnableSNAT: g.chance(60), Created: genCreated[g.rnd.Intn(len(genCreated))]}
		if i < 3 {
			r.Internal = []string{fmt.Sprintf("net-%d", i)}
		}
		if g.chance(15) {
			r.Internal = []string{g.pick("net-0", "net-1", "net-2")}
		}
		if g.chance(90) {
			r.External = &External{Network: "pub-0", IP: fmt.Sprintf("172.16.0.%d", 100+i)}
			if g.chance(15) {
				r.External.IP = g.pick("172.16.0.50", "172.16.0.100")
			}
		}
		return r
	}
	newVM := func(g *gen) VMInterface {
		net := g.pick("net-0", "net-1", "net-2")
		return VMInterface{Namespace: g.pick("default", "default", "other"), VMI: g.pick(genVMIs...), Interface: "eth1", Network: net, NetworkNamespace: "default",
			MAC: fmt.Sprintf("50:54:00:00:%02x:%02x", g.rnd.Intn(4), g.rnd.Intn(4)), IP: cidrOf(net) + "." + g.pick(genVMHosts...)}
	}
	newFIP := func(g *gen) FloatingIP {
		f := FloatingIP{Name: g.pick(fipNames...), Router: g.pick(append(routers, routers[0], routers[1], "r-9")...), Network: "pub-0",
			IP: g.pick(fipIPs...), Created: genCreated[g.rnd.Intn(len(genCreated))]}
		f.ID = f.Name
		if g.chance(10) {
			f.Network = "net-0"
		}
		if g.chance(85) {
			v := newVM(g)
			if i := slices.Index(routers, f.Router); i >= 0 && i < 3 && g.chance(80) {
				v.IP = fmt.Sprintf("10.%d.0.%s", i, g.pick(genVMHosts...))
			}
			f.FixedIP = v.IP
			if g.chance(50) {
				f.VMName = g.pick(v.VMI, "default/"+v.VMI, "other/"+v.VMI)
			}
		}
		return f
	}
	allRouters := append(slices.Clone(routers), "r-9")
	changed, ready := 0, 0
	reasons := map[string]int{}
	for seed := int64(1); seed <= seeds; seed++ {
		g := &gen{rnd: rand.New(rand.NewSource(seed))}
		held := Claims{FloatingIPs: map[string]string{g.pick(fipIPs...): g.pick(fipNames...)},
			FixedIPs: map[string]string{g.pick(routers...) + " " + newVM(g).IP: g.pick(fipNames...)}}
		in := NewInput()
		rs := Objects{}
		for i := range routers {
			rs.Routers = append(rs.Routers, newRouter(g, i))
		}
		sources := map[string]Objects{"nets": nets, "routers": rs}
		in.Set("nets", nets)
		in.Set("routers", rs)
		prev := map[Unit]UnitPlan{}
		for _, r := range allRouters {
			prev[routerUnit(r)] = in.Plan(routerUnit(r), testInstance, held)
		}
		for step := range steps {
			src := fmt.Sprintf("src-%d", g.rnd.Intn(4))
			if g.chance(15) {
				src = "routers"
			}
			o := sources[src]
			o = Objects{Routers: slices.Clone(o.Routers), VMs: slices.Clone(o.VMs), FloatingIPs: slices.Clone(o.FloatingIPs)}
			switch op := g.rnd.Intn(8); {
			case src == "routers":
				i := g.rnd.Intn(len(routers))
				o.Routers[i] = newRouter(g, i)
			case op < 2:
				o = Objects{}
				for range g.rnd.Intn(5) {
					o.VMs = append(o.VMs, newVM(g))
				}
				for range g.rnd.Intn(3) {
					o.FloatingIPs = append(o.FloatingIPs, newFIP(g))
				}
			case op < 4 && len(o.FloatingIPs) > 0:
				i := g.rnd.Intn(len(o.FloatingIPs))
				f := newFIP(g)
				f.Name, f.ID = o.FloatingIPs[i].Name, o.FloatingIPs[i].ID
				o.FloatingIPs[i] = f
			case op < 6 && len(o.VMs) > 0:
				o.VMs[g.rnd.Intn(len(o.VMs))] = newVM(g)
			default:
				o = Objects{}
			}
			sources[src] = o
			got := in.Set(src, o)

			fresh := NewInput()
			for _, name := range slices.Sorted(maps.Keys(sources)) {
				fresh.Set(name, sources[name])
			}
			ctx := fmt.Sprintf("seed %d step %d", seed, step)
			for _, r := range allRouters {
				u := routerUnit(r)
				up := in.Plan(u, testInstance, held)
				require.Equal(t, fresh.Plan(u, testInstance, held), up, "%s: %s plans like a fresh input", ctx, u)
				for _, st := range up.FloatingIPs {
					if st.Ready {
						ready++
					} else if st.Err != nil {
						reasons[st.Err.(*InputError).Field]++
					} else {
						reasons[st.Reason[:10]]++
					}
				}
				if !reflect.DeepEqual(prev[u], up) {
					changed++
					require.Contains(t, got, u, "%s: the plan of %s changed but Set did not return it", ctx, u)
				}
				prev[u] = up
			}
		}
	}
	t.Logf("%d seeds × %d steps: %d router plans changed; floating IP plans: %d Ready, not Ready by field or reason: %v", seeds, steps, changed, ready, reasons)
	assert.Greater(t, changed, seeds*steps/4)
	assert.Greater(t, ready, seeds*steps/20, "floating IPs bind")
	for _, why := range []string{"spec.floatingIp", "spec.fixedIp", "spec.networkName", "metadata.name", "waiting fo", "waits for ", "not associ", "VirtualRou"} {
		assert.NotZero(t, reasons[why], "no step exercised %q", why)
	}
}
