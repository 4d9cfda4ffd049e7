package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"time"

	"github.com/kubevirt-ovn/kubevirt-ovn/integration/sandbox"
)

// Live migrations at N VMs: `run` with the SB (whose Port_Binding
// activations it follows) on N/10 routers' VMs, all on hv1, with hv1, hv2
// and the gateway gw1 as SB chassis (no ovn-controller: the bench writes what the target's
// ovn-controller would, the activated flag). Half the VMs start migrating
// in one write of their files and are activated in one SB transaction
// (a burst: a node drained at once); the other half start together and are
// activated one by one at -migrations-pace (a sustained rate). Each
// activation's latency runs from the SB write to the port on hv2 alone in
// the NB.

// migrationState is the status.migrationState lines of VM v (none when it
// does not migrate).
func (s *routerState) migrationState(v vmSpec) string {
	if !s.migrating[v.name] {
		return ""
	}
	return fmt.Sprintf("\n  migrationState:\n    sourceNode: hv1\n    targetNode: hv2\n    migrationUid: mig-%s", v.name)
}

// migrationResult is what the migrations phase measured.
type migrationResult struct {
	vms int
	// burst: the dual bindings of half the VMs written after one write
	// of their files (start), then all collapsed after one SB
	// transaction activating them (collapse), each port's latency.
	burstVMs               int
	burstStart, burstTotal time.Duration
	burstLat               []time.Duration
	// paced: activations one by one at rate (per second, as achieved).
	pacedVMs  int
	pacedRate float64
	pacedLat  []time.Duration
	log       string
}

// runMigrations measures live migrations of vms VMs.
func runMigrations(cfg *config, dir string, vms int) (*migrationResult, error) {
	res := &migrationResult{vms: vms, log: filepath.Join(dir, "run-migrations.log")}
	c, err := sandbox.StartCentral(filepath.Join(dir, "ovn"))
	if err != nil {
		return res, err
	}
	stopCentral, _ := cleanup.add(func() { _ = c.Stop() })
	defer stopCentral()
	for i, ch := range []string{"hv1", "hv2", "gw1"} {
		if _, err := c.SBCtl("chassis-add", ch, "geneve", fmt.Sprintf("127.0.0.%d", 11+i)); err != nil {
			return res, err
		}
	}
	// The routers' gateway, on the external network's physnet.
	if _, err := c.SBCtl("set", "Chassis", "gw1", "other_config:ovn-cms-options=enable-chassis-as-gw", "other_config:ovn-bridge-mappings=physnet1:br-ex"); err != nil {
		return res, err
	}
	perRouter := netsPerRouter * vmsPerNet
	in, err := generate(dir, (vms+perRouter-1)/perRouter, variant{})
	if err != nil {
		return res, err
	}
	p, err := startRun(cfg.bin, c.NB, in.dir, res.log, "--sb", c.SB)
	if err != nil {
		return res, err
	}
	stopRun, _ := cleanup.add(p.stop)
	defer stopRun()
	if _, err := p.waitIdle(len(in.routers), cfg.timeout); err != nil {
		return res, fmt.Errorf("%w (log %s)", err, res.log)
	}
	w, err := watchNB(context.Background(), c.NB)
	if err != nil {
		return res, err
	}
	defer w.Close()

	half := len(in.routers) / 2
	ports := func(routers []*routerState) []string {
		var out []string
		for _, s := range routers {
			for j := range netsPerRouter {
				for _, v := range s.vms(j) {
					out = append(out, vmPortRow(v.network, v.name, "eth1"))
				}
			}
		}
		return out
	}
	start := func(routers []*routerState) (time.Duration, error) {
		want := ports(routers)
		began := time.Now()
		for _, s := range routers {
			s.migrating = map[string]bool{}
			for j := range netsPerRouter {
				for _, v := range s.vms(j) {
					s.migrating[v.name] = true
				}
			}
			if err := in.write(s); err != nil {
				return 0, err
			}
		}
		at, err := w.until(func(v view) bool { return v.boundOn(want, "hv1,hv2") == len(want) }, cfg.timeout)
		if err != nil {
			return 0, err
		}
		// The target's ovn-controller claims the port once northd put
		// the dual binding in the SB: activations come after that.
		_, err = c.NBCtl("--wait=sb", "--timeout="+fmt.Sprint(int(cfg.timeout.Seconds())), "sync")
		return at.Sub(began), err
	}
	// collapsed waits until every port of want is on hv2 alone and
	// returns when each one was first seen so, and when all were.
	collapsed := func(want []string) (map[string]time.Time, time.Time, error) {
		seen := map[string]time.Time{}
		wanted := make(map[string]bool, len(want))
		for _, port := range want {
			wanted[port] = true
		}
		at, err := w.until(func(v view) bool {
			now := time.Now()
			for _, lsp := range v.w.lsp {
				if _, ok := seen[lsp.Name]; !ok && wanted[lsp.Name] && lsp.Options["requested-chassis"] == "hv2" {
					seen[lsp.Name] = now
				}
			}
			return len(seen) >= len(want)
		}, cfg.timeout)
		return seen, at, err
	}
	sb, err := dialRaw(c.SB)
	if err != nil {
		return res, err
	}
	defer sb.Close()
	// activate writes what the target's ovn-controller writes once it saw
	// the VM's RARP, for ports, in one transaction.
	activate := func(ports ...string) error {
		ops := []any{"OVN_Southbound"}
		for _, port := range ports {
			ops = append(ops, map[string]any{"op": "mutate", "table": "Port_Binding",
				"where":     []any{[]any{"logical_port", "==", port}},
				"mutations": []any{[]any{"options", "insert", []any{"map", []any{[]any{"additional-chassis-activated", "hv2"}}}}}})
		}
		_, err := sb.transact(ops, cfg.timeout)
		return err
	}

	// The burst.
	burst := ports(in.routers[:half])
	res.burstVMs = len(burst)
	if res.burstStart, err = start(in.routers[:half]); err != nil {
		return res, fmt.Errorf("starting %d migrations: %w (log %s)", len(burst), err, res.log)
	}
	type watched struct {
		seen map[string]time.Time
		at   time.Time
		err  error
	}
	watch := func(want []string) chan watched {
		out := make(chan watched, 1)
		go func() {
			seen, at, err := collapsed(want)
			out <- watched{seen, at, err}
		}()
		return out
	}
	done := watch(burst)
	began := time.Now()
	if err := activate(burst...); err != nil {
		return res, err
	}
	got := <-done
	if got.err != nil {
		return res, fmt.Errorf("collapsing %d activated migrations: %w (log %s)", len(burst), got.err, res.log)
	}
	res.burstTotal = got.at.Sub(began)
	for _, port := range burst {
		res.burstLat = append(res.burstLat, got.seen[port].Sub(began))
	}

	// Sustained: one activation every -migrations-pace.
	paced := ports(in.routers[half:])
	res.pacedVMs = len(paced)
	if _, err := start(in.routers[half:]); err != nil {
		return res, fmt.Errorf("starting %d migrations: %w (log %s)", len(paced), err, res.log)
	}
	done = watch(paced)
	wrote := make(map[string]time.Time, len(paced))
	tick := time.NewTicker(cfg.migrationPace)
	first := time.Now()
	for _, port := range paced {
		<-tick.C
		wrote[port] = time.Now()
		if err := activate(port); err != nil {
			tick.Stop()
			return res, err
		}
	}
	tick.Stop()
	res.pacedRate = float64(len(paced)) / time.Since(first).Seconds()
	got = <-done
	if got.err != nil {
		return res, fmt.Errorf("collapsing %d paced activations: %w (log %s)", len(paced), got.err, res.log)
	}
	for _, port := range paced {
		res.pacedLat = append(res.pacedLat, got.seen[port].Sub(wrote[port]))
	}
	return res, nil
}

// boundOn counts the ports of want whose requested-chassis is chassis.
func (v view) boundOn(want []string, chassis string) int {
	n := 0
	for _, lsp := range v.w.lsp {
		if lsp.Options["requested-chassis"] == chassis && slices.Contains(want, lsp.Name) {
			n++
		}
	}
	return n
}

// reportMigrations prints the migrations phase.
func reportMigrations(w io.Writer, r *migrationResult, err error) {
	fmt.Fprintf(w, "\n### Live migrations, %d VMs\n\n", r.vms)
	if err != nil {
		fmt.Fprintf(w, "failed: %v\n", err)
		return
	}
	rate := func(n int, d time.Duration) string {
		if d <= 0 {
			return "-"
		}
		return fmt.Sprintf("%.0f/s", float64(n)/d.Seconds())
	}
	fmt.Fprintln(w, "| phase | migrations | dual bindings written | activations collapsed | activation → collapse p50 | p99 | max |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|")
	fmt.Fprintf(w, "| burst (one write, one SB transaction) | %d | %s in %s | %s in %s | %s | %s | %s |\n", r.burstVMs,
		rate(r.burstVMs, r.burstStart), secs(r.burstStart), rate(r.burstVMs, r.burstTotal), secs(r.burstTotal),
		secs(quantile(r.burstLat, 0.5)), secs(quantile(r.burstLat, 0.99)), secs(slices.Max(append([]time.Duration{0}, r.burstLat...))))
	fmt.Fprintf(w, "| sustained (activations at %.0f/s) | %d | - | - | %s | %s | %s |\n", r.pacedRate, r.pacedVMs,
		secs(quantile(r.pacedLat, 0.5)), secs(quantile(r.pacedLat, 0.99)), secs(slices.Max(append([]time.Duration{0}, r.pacedLat...))))
	fmt.Fprintln(w, "\nLatency: from the SB write of options:additional-chassis-activated (what the target's ovn-controller writes after the VM's RARP) to the port named on hv2 alone in the NB; the burst's from its one transaction.")
}
