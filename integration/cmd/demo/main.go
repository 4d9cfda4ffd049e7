// Command demo shows kubevirt-ovn on a real multi-chassis OVN: it starts
// NB, SB, ovn-northd and four chassis (gateways gw1 and gw2, workers hv1
// and hv2) on this machine, plugs the VMs of deploy/examples into the
// workers, syncs the examples with the kubevirt-ovn binary, prints what OVN
// holds, sends one packet from a VM and prints it as the external wire sees
// it, SNATed. It stops everything it started unless -keep.
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
	flag.Parse()
	if err := run(*bin, *examples, *keep); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

// The VMs of deploy/examples and their ports.
var vms = []struct{ chassis, port, ifaceID string }{
	{"hv1", "vm-a", "kv-net-a_default_vm-a_eth1"},
	{"hv2", "vm-b", "kv-net-b_default_vm-b_eth1"},
}

func run(bin, examples string, keep bool) error {
	dir, err := os.MkdirTemp("", "kubevirt-ovn-demo-")
	if err != nil {
		return err
	}
	step("starting OVN in " + dir + ": NB + SB ovsdb-server, ovn-northd, gateways gw1 gw2, workers hv1 hv2")
	d, err := sandbox.Start(dir)
	if err != nil {
		return err
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
		args := []string{"sync", "--nb", d.NBEndpoint(), "--sb", d.SBEndpoint(), "--from-file", examples}
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
	for _, args := range [][]string{{"show"}, {"lr-nat-list", "kv-router1"}, {"lr-route-list", "kv-router1"}, {"lrp-get-gateway-chassis", "kv-rtoe-router1"}} {
		step("ovn-nbctl " + strings.Join(args, " "))
		out, err := d.NBCtl(args...)
		if err != nil {
			return err
		}
		fmt.Print(out)
	}
	step("syncing again: nothing to change")
	if err := sync(); err != nil {
		return err
	}

	step("waiting until the chassis have realized it (ovn-nbctl --wait=hv sync, gateway port active on gw1)")
	if _, err := d.NBCtl("--timeout=30", "--wait=hv", "sync"); err != nil {
		return err
	}
	for _, vm := range vms {
		if _, err := d.NBCtl("--timeout=30", "wait-until", "Logical_Switch_Port", vm.ifaceID, "up=true"); err != nil {
			return err
		}
	}
	if err := sandbox.WaitGateway(d, "cr-kv-rtoe-router1", "gw1", "hv1", "hv2"); err != nil {
		return err
	}

	out := wire.Frame{SrcMAC: "50:54:00:00:00:05", DstMAC: "fa:16:3e:00:00:01",
		SrcIP: "10.10.0.5", DstIP: "198.51.100.7", TTL: 64, SPort: 40000, DPort: 53}
	frame, err := out.Bytes()
	if err != nil {
		return err
	}
	step("vm-a on hv1 sends: " + wire.Parse(frame).String())
	if err := d.Inject("hv1", "vm-a", frame); err != nil {
		return err
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		seen, err := d.Capture("gw1", sandbox.ExternalPort)
		if err != nil {
			return err
		}
		for _, s := range seen {
			if s.IsUDP && s.DstIP == out.DstIP && s.DPort == out.DPort {
				step("gw1's external wire (ext0) carries, SNATed to 172.16.0.100:")
				fmt.Println("  " + s.String())
				if keep {
					printEnv(d, dir, bin, examples)
				}
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the packet did not leave gw1; gw1:ext0 sent:\n%s", wire.Describe(seen))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func printEnv(d sandbox.Deployment, dir, bin, examples string) {
	step("OVN keeps running; explore it with:")
	fmt.Printf("export OVN_NB_DB=%s OVN_SB_DB=%s\n", d.NBEndpoint(), d.SBEndpoint())
	fmt.Println("ovn-nbctl show; ovn-sbctl show")
	fmt.Printf("%s sync --nb %s --sb %s --from-file %s --dry-run\n", bin, d.NBEndpoint(), d.SBEndpoint(), examples)
	fmt.Printf("OVS_RUNDIR=%s/gw1 ovs-vsctl show    # a chassis (gw1 gw2 hv1 hv2)\n", dir)
	fmt.Printf("ovs-ofctl parse-pcap %s/gw1/ext0-tx.pcap    # what gw1 sent on the external wire\n", dir)
	fmt.Println("stop every daemon (by control socket):")
	fmt.Printf("for c in %s/*/ovn-controller.*.ctl; do ovn-appctl -t $c exit; done; for c in %s/*/ovs-vswitchd.ctl; do ovs-appctl -t $c exit --cleanup; done; ovn-appctl -t %s/northd/ovn-northd.ctl exit; for c in %s/*/ovsdb-server.ctl; do ovs-appctl -t $c exit; done\n", dir, dir, dir, dir)
}

func step(s string) { fmt.Printf("\n==> %s\n", s) }
