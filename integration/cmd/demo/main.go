// Command demo shows kubevirt-ovn on a real multi-chassis OVN: it starts
// OVN with four chassis (gateways gw1 and gw2, workers hv1 and hv2) on this
// machine, plugs the VMs of deploy/examples into the workers, syncs the
// examples with the kubevirt-ovn binary, prints what OVN holds, sends one
// packet from a VM and prints it as the external wire sees it, SNATed, and
// one from outside to a floating IP and prints it as the VM receives it. It
// stops everything it started unless -keep.
//
// By default OVN is central: one NB, one SB, one ovn-northd. With -zones it
// is interconnect, as ovn-kubernetes runs it: each chassis in its own zone
// (gw1, gw2, hv1, hv2) with its own NB, SB and ovn-northd, and kubevirt-ovn
// writes every zone's NB (sync --zone NAME=NB,SB per zone).
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/kubevirt-ovn/kubevirt-ovn/integration/sandbox"
	"github.com/kubevirt-ovn/kubevirt-ovn/integration/wire"
)

func main() {
	bin := flag.String("bin", "bin/kubevirt-ovn", "the kubevirt-ovn binary")
	examples := flag.String("examples", "deploy/examples", "manifests to sync")
	keep := flag.Bool("keep", false, "leave OVN running and print how to reach it")
	zones := flag.Bool("zones", false, "interconnect: one NB, SB and ovn-northd per zone (zones gw1, gw2, hv1, hv2)")
	flag.Parse()
	if err := run(*bin, *examples, *keep, *zones); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

// The VMs of deploy/examples and their ports.
var vms = []struct{ chassis, port, ifaceID string }{
	{"hv1", "vm-a", "kv-net-a_default_vm-a_eth1"},
	{"hv2", "vm-b", "kv-net-b_default_vm-b_eth1"},
}

// The router of deploy/examples: its gateway chassis and its gateway
// port's chassisredirect port.
const (
	router  = "kv-router1"
	gateway = "gw1"
	crPort  = "cr-kv-rtoe-router1"
)

// ovn is the OVN the demo runs on: what differs between central and
// interconnect.
type ovn interface {
	sandbox.Chassis
	// syncArgs are kubevirt-ovn's flags naming the databases.
	syncArgs() []string
	// show prints what the NB(s) hold.
	show() error
	// realized waits until the chassis have realized the NB(s): the VMs'
	// ports up, the gateway port active on the gateway.
	realized() error
	// explore prints how to reach the OVN left running.
	explore(dir string)
}

func run(bin, examples string, keep, zones bool) error {
	dir, err := os.MkdirTemp("", "kubevirt-ovn-demo-")
	if err != nil {
		return err
	}
	var d ovn
	if zones {
		step("starting OVN in " + dir + ", interconnect: zones gw1, gw2 (a gateway each), hv1, hv2 (a worker each), each with its own NB + SB ovsdb-server and ovn-northd")
		z, err := sandbox.StartZones(dir, sandbox.DefaultZoneTopology())
		if err != nil {
			return err
		}
		d = interconnect{z}
	} else {
		step("starting OVN in " + dir + ": NB + SB ovsdb-server, ovn-northd, gateways gw1 gw2, workers hv1 hv2")
		c, err := sandbox.Start(dir)
		if err != nil {
			return err
		}
		d = central{c}
	}
	stop := func() {
		step("stopping every daemon the demo started")
		if err := d.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "demo:", err)
		}
		os.RemoveAll(dir)
	}
	if !keep {
		defer stop()
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
		go func() { <-sig; stop(); os.Exit(130) }()
	}
	for _, vm := range vms {
		if err := d.AddVMPort(vm.chassis, vm.port, vm.ifaceID); err != nil {
			return err
		}
	}

	sync := func() error {
		args := append([]string{"sync"}, d.syncArgs()...)
		args = append(args, "--from-file", examples)
		fmt.Printf("$ kubevirt-ovn %s\n", strings.Join(args, " "))
		cmd := exec.Command(bin, args...)
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("kubevirt-ovn sync: %w", err)
		}
		return nil
	}
	step("translating " + examples)
	if err := sync(); err != nil {
		return err
	}
	if err := d.show(); err != nil {
		return err
	}
	step("syncing again: nothing to change")
	if err := sync(); err != nil {
		return err
	}
	if err := d.realized(); err != nil {
		return err
	}

	out := wire.Frame{SrcMAC: "50:54:00:00:00:05", DstMAC: "fa:16:3e:00:00:01",
		SrcIP: "10.10.0.5", DstIP: "198.51.100.7", TTL: 64, SPort: 40000, DPort: 53}
	step("vm-a on hv1 sends: " + describe(out))
	if err := send(d, "hv1", "vm-a", out); err != nil {
		return err
	}
	s, err := await(d, gateway, sandbox.ExternalPort, func(s wire.Seen) bool {
		return s.IsUDP && s.DstIP == out.DstIP && s.DPort == out.DPort
	})
	if err != nil {
		return fmt.Errorf("the packet did not leave %s: %w", gateway, err)
	}
	step(gateway + "'s external wire (ext0) carries, SNATed to 172.16.0.100:")
	fmt.Println("  " + s.String())

	// deploy/examples/floatingips.yaml: 172.16.0.150 is vm-b's.
	in := wire.Frame{SrcMAC: "00:00:00:00:ee:01", DstMAC: "0a:58:ac:10:00:64",
		SrcIP: "198.51.100.7", DstIP: "172.16.0.150", TTL: 64, SPort: 33000, DPort: 8080}
	step("from outside, through the peer router, " + gateway + "'s external wire carries: " + describe(in))
	if err := send(d, gateway, sandbox.ExternalPort, in); err != nil {
		return err
	}
	s, err = await(d, "hv2", "vm-b", func(s wire.Seen) bool { return s.IsUDP && s.SrcIP == in.SrcIP && s.DPort == in.DPort })
	if err != nil {
		return fmt.Errorf("the packet to the floating IP did not reach vm-b: %w", err)
	}
	step("vm-b on hv2 receives, the floating IP 172.16.0.150 DNATed to its address:")
	fmt.Println("  " + s.String())

	// The same path, explained in the user's objects by ovn-trace.
	ovnTrace, err := sandbox.ToolScript(dir, "ovn-trace")
	if err != nil {
		return err
	}
	traceArgs := append(append([]string{"trace"}, d.syncArgs()...), "--from", "default/vm-a", "--to", "198.51.100.7", "--protocol", "udp", "--port", "53")
	step("why vm-a's packet leaves as it does, in these objects: kubevirt-ovn trace (ovn-trace underneath)")
	fmt.Printf("$ kubevirt-ovn %s\n", strings.Join(traceArgs, " "))
	cmd := exec.Command(bin, append(traceArgs, "--ovn-trace", ovnTrace)...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("kubevirt-ovn trace: %w", err)
	}
	if keep {
		step("OVN keeps running; explore it with:")
		d.explore(dir)
		fmt.Printf("%s sync %s --from-file %s --dry-run\n", bin, strings.Join(d.syncArgs(), " "), examples)
		fmt.Printf("%s trace %s --ovn-trace %s --from 198.51.100.7 --to fip:default/vm-b --protocol udp --port 8080\n", bin, strings.Join(d.syncArgs(), " "), ovnTrace)
		fmt.Printf("%s status %s\n", bin, strings.Join(d.syncArgs(), " "))
		fmt.Printf("OVS_RUNDIR=%s/gw1 ovs-vsctl show    # a chassis (gw1 gw2 hv1 hv2)\n", dir)
		fmt.Printf("ovs-ofctl parse-pcap %s/gw1/ext0-tx.pcap    # what gw1 sent on the external wire\n", dir)
		fmt.Println("stop every daemon (by control socket):")
		fmt.Printf("for c in %s/*/ovn-controller.*.ctl; do ovn-appctl -t $c exit; done; for c in %s/*/ovs-vswitchd.ctl; do ovs-appctl -t $c exit --cleanup; done; for c in $(find %s -name ovn-northd.ctl); do ovn-appctl -t $c exit; done; for c in $(find %s -name ovsdb-server.ctl); do ovs-appctl -t $c exit; done\n", dir, dir, dir, dir)
	}
	return nil
}

// describe renders frame f as a capture would.
func describe(f wire.Frame) string {
	b, err := f.Bytes()
	if err != nil {
		return err.Error()
	}
	return wire.Parse(b).String()
}

// send puts frame f on port of chassis.
func send(d ovn, chassis, port string, f wire.Frame) error {
	b, err := f.Bytes()
	if err != nil {
		return err
	}
	return d.Inject(chassis, port, b)
}

// await returns the first packet port of chassis sent that matches.
func await(d ovn, chassis, port string, match func(wire.Seen) bool) (wire.Seen, error) {
	deadline := time.Now().Add(15 * time.Second)
	for {
		seen, err := d.Capture(chassis, port)
		if err != nil {
			return wire.Seen{}, err
		}
		for _, s := range seen {
			if match(s) {
				return s, nil
			}
		}
		if time.Now().After(deadline) {
			return wire.Seen{}, fmt.Errorf("%s:%s sent:\n%s", chassis, port, wire.Describe(seen))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// central is OVN with one NB and SB.
type central struct{ sandbox.Deployment }

func (c central) syncArgs() []string {
	return []string{"--nb", c.NBEndpoint(), "--sb", c.SBEndpoint()}
}

func (c central) show() error {
	return printNB("", c.NBCtl, []string{"show"}, []string{"lr-nat-list", router}, []string{"lr-route-list", router}, []string{"lrp-get-gateway-chassis", "kv-rtoe-router1"})
}

// printNB prints what each ovn-nbctl command says, under a heading naming
// the command, prefixed by where.
func printNB(where string, nbctl func(...string) (string, error), commands ...[]string) error {
	for _, args := range commands {
		step(where + "ovn-nbctl " + strings.Join(args, " "))
		out, err := nbctl(args...)
		if err != nil {
			return err
		}
		fmt.Print(out)
	}
	return nil
}

func (c central) realized() error {
	step("waiting until the chassis have realized it (ovn-nbctl --wait=hv sync, gateway port active on " + gateway + ")")
	if _, err := c.NBCtl("--timeout=30", "--wait=hv", "sync"); err != nil {
		return err
	}
	for _, vm := range vms {
		if _, err := c.NBCtl("--timeout=30", "wait-until", "Logical_Switch_Port", vm.ifaceID, "up=true"); err != nil {
			return err
		}
	}
	return sandbox.WaitGateway(c, crPort, gateway, "hv1", "hv2")
}

func (c central) explore(string) {
	fmt.Printf("export OVN_NB_DB=%s OVN_SB_DB=%s\n", c.NBEndpoint(), c.SBEndpoint())
	fmt.Println("ovn-nbctl show; ovn-sbctl show")
}

// interconnect is OVN with one NB, SB and ovn-northd per zone.
type interconnect struct{ *sandbox.Zones }

func (z interconnect) syncArgs() []string { return z.ZoneFlags() }

func (z interconnect) show() error {
	for _, zdb := range z.List() {
		if err := printNB("zone "+zdb.Name+": ", zdb.NBCtl, []string{"show"}); err != nil {
			return err
		}
	}
	home := z.ZoneOf(gateway)
	return printNB("zone "+home.Name+": ", home.NBCtl, []string{"lr-nat-list", router}, []string{"lrp-get-gateway-chassis", "kv-rtoe-router1"})
}

func (z interconnect) realized() error {
	step("waiting until the chassis have realized it (ovn-nbctl --wait=hv sync in every zone, gateway port active on " + gateway + ")")
	for _, zdb := range z.List() {
		if _, err := zdb.NBCtl("--timeout=30", "--wait=hv", "sync"); err != nil {
			return fmt.Errorf("zone %s: %w", zdb.Name, err)
		}
	}
	for _, vm := range vms {
		if _, err := z.ZoneOf(vm.chassis).NBCtl("--timeout=30", "wait-until", "Logical_Switch_Port", vm.ifaceID, "up=true"); err != nil {
			return fmt.Errorf("zone %s: %w", vm.chassis, err)
		}
	}
	return z.WaitGateway(crPort, gateway)
}

func (z interconnect) explore(string) {
	for _, zdb := range z.List() {
		fmt.Printf("ovn-nbctl --db=%s show; ovn-sbctl --db=%s show    # zone %s\n", zdb.NBTCP, zdb.SBTCP, zdb.Name)
	}
}

func step(s string) { fmt.Printf("\n==> %s\n", s) }
