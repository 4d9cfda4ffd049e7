// Command demo shows kubevirt-ovn on a real OVN: it starts a private NB, SB
// and ovn-northd on loopback, syncs deploy/examples with the kubevirt-ovn
// binary, prints what OVN holds, and stops everything it started (unless
// -keep).
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"

	"github.com/kubevirt-ovn/kubevirt-ovn/integration/sandbox"
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

func run(bin, examples string, keep bool) (err error) {
	dir, err := os.MkdirTemp("", "kubevirt-ovn-demo-")
	if err != nil {
		return err
	}
	step("starting OVN (NB + SB ovsdb-server, ovn-northd) in " + dir)
	c, err := sandbox.StartCentral(dir)
	if err != nil {
		return err
	}
	stop := func() {
		step("stopping the OVN daemons the demo started")
		if err := c.Stop(); err != nil {
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

	sync := func(extra ...string) error {
		args := append([]string{"sync", "--nb", c.NBTCP, "--from-file", examples}, extra...)
		fmt.Printf("$ kubevirt-ovn %s\n", strings.Join(args, " "))
		cmd := exec.Command(bin, args...)
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		return cmd.Run()
	}
	step("translating " + examples)
	if err := sync(); err != nil {
		return fmt.Errorf("kubevirt-ovn sync: %w", err)
	}
	for _, args := range [][]string{{"show"}, {"lr-nat-list", "kv-router1"}, {"lr-route-list", "kv-router1"}, {"lrp-get-gateway-chassis", "kv-rtoe-router1"}} {
		step("ovn-nbctl " + strings.Join(args, " "))
		out, err := c.NBCtl(args...)
		if err != nil {
			return err
		}
		fmt.Print(out)
	}
	step("syncing again: nothing to change")
	if err := sync(); err != nil {
		return fmt.Errorf("kubevirt-ovn sync: %w", err)
	}
	if keep {
		step("OVN keeps running; explore it with:")
		fmt.Printf("export OVN_NB_DB=%s OVN_SB_DB=%s\n", c.NB, c.SB)
		fmt.Printf("ovn-nbctl show; ovn-sbctl show\n")
		fmt.Printf("%s sync --nb %s --from-file %s --dry-run\n", bin, c.NBTCP, examples)
		fmt.Printf("# stop: ovs-appctl -t %s/ovn-nb/ovsdb-server.ctl exit; ovs-appctl -t %s/ovn-sb/ovsdb-server.ctl exit; ovn-appctl -t %s/northd/ovn-northd.ctl exit\n", dir, dir, dir)
	}
	return nil
}

func step(s string) { fmt.Printf("\n==> %s\n", s) }
