package main

import (
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strings"
	"time"
)

func secs(d time.Duration) string {
	switch {
	case d == 0:
		return "-"
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.4f s", d.Seconds())
	case d < time.Second:
		return fmt.Sprintf("%.3f s", d.Seconds())
	}
	return fmt.Sprintf("%.2f s", d.Seconds())
}

func mib(b int64) string {
	if b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20))
}

// ratio2 is a/b with two decimals, for the ratios held against limits.
func ratio2(a, b time.Duration) string {
	if a == 0 || b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f×", a.Seconds()/b.Seconds())
}

func ratio(a, b time.Duration) string {
	if a == 0 || b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f×", a.Seconds()/b.Seconds())
}

// quantile is the nearest-rank q-quantile of ds.
func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	k := int(math.Ceil(q*float64(len(s)))) - 1
	return s[max(0, min(k, len(s)-1))]
}

func mean(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	var t time.Duration
	for _, d := range ds {
		t += d
	}
	return t / time.Duration(len(ds))
}

func report(w io.Writer, cfg *config, results []*result, took time.Duration) {
	fmt.Fprintf(w, "## kubevirt-ovn bench\n\n")
	fmt.Fprintf(w, "Machine: %s. Binary: %s. Bench took %s.\n\n", machine(), cfg.bin, took.Round(time.Second))
	if len(results) == 0 {
		return
	}
	fmt.Fprintf(w, "Per router: 2 internal networks × 5 VMs, DHCP on every network, SNAT, peer router, gateway chassis; one shared FLAT network (with DHCP). "+
		"Rows \"N + FIP\": the same input with one floating IP per router, bound to one of its VMs. "+
		"Rows \"N + SG\": the same input with 5 security groups of 10 rules each (SecurityGroupRule objects), every VM bound to two of them (each group holds 40%% of the VM ports). "+
		"Rows \"N + v6\": the same input dual stack (every network with an ipv6Cidr, SLAAC; every router with its external IPv6 address and an IPv6 default route; IPv6 routed). "+
		"Each column on a fresh NB (full and no-op sync, wait=sb on one NB with northd; floor and nbctl each on their own NB without northd).\n\n")
	if cfg.northdMax > 0 {
		fmt.Fprintf(w, "Above N=%d (-northd-max), no ovn-northd runs: wait=sb is not measured (\"-\"), and the syncs, `run`'s starts and events run without it.\n\n", cfg.northdMax)
	}
	fmt.Fprintln(w, "| N | NB rows | full sync | CPU | peak RSS | txns/ops | wait=sb | no-op sync | CPU | peak RSS | txns/ops | floor (1 txn) | ovn-nbctl | full/floor | nbctl/floor |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	var notes []string
	for _, r := range results {
		if r.skipped != "" {
			notes = append(notes, fmt.Sprintf("N=%s: %s", r.label(), r.skipped))
			continue
		}
		if r.noopNote != "" {
			notes = append(notes, fmt.Sprintf("N=%s: %s", r.label(), r.noopNote))
		}
		if r.eventsSkipped != "" {
			notes = append(notes, fmt.Sprintf("N=%s: %s", r.label(), r.eventsSkipped))
		}
		nbctl := secs(r.nbctl)
		if r.nbctlNotMeasured != "" {
			nbctl = "skipped"
			notes = append(notes, fmt.Sprintf("N=%s: ovn-nbctl not run (%s)", r.label(), r.nbctlNotMeasured))
		}
		fmt.Fprintf(w, "| %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
			r.label(), r.rows, secs(r.full.wall), secs(r.full.cpu), mib(r.full.maxRSS), r.fullTx, secs(r.waitSB),
			secs(r.noop.wall), secs(r.noop.cpu), mib(r.noop.maxRSS), r.noopTx,
			secs(r.floor), nbctl, ratio(r.full.wall, r.floor), ratio(r.nbctl, r.floor))
		for _, k := range slices.Sorted(maps.Keys(r.nbctlSkipped)) {
			notes = append(notes, fmt.Sprintf("N=%s: ovn-nbctl did not rebuild %d rows of %s", r.label(), r.nbctlSkipped[k], k))
		}
		for _, k := range slices.Sorted(maps.Keys(r.errs)) {
			notes = append(notes, fmt.Sprintf("N=%s: %s failed: %v", r.label(), k, firstLine(r.errs[k].Error())))
		}
	}
	fmt.Fprintln(w)

	var starts []*result
	for _, r := range results {
		if r.cold != nil {
			starts = append(starts, r)
		}
	}
	if len(starts) > 0 {
		fmt.Fprintln(w, "`run` starting (--file-poll 100ms, --resync 24h), until idle: cold on a fresh NB, SB and northd; warm on the synced NB. "+
			"Run RSS / sync RSS: the higher of its two peaks over the higher of the two syncs'.")
		fmt.Fprintln(w)
		fmt.Fprintln(w, "| N | cold start | CPU | peak RSS | **cold / full sync** | warm start | CPU | peak RSS | **warm / no-op sync** | **run RSS / sync RSS** |")
		fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|")
		for _, r := range starts {
			cold := secs(r.cold.idle)
			if r.cold.timeout > 0 {
				cold = "> " + r.cold.timeout.String()
			}
			warm, warmCPU, warmRatio := "-", "-", "-"
			var warmHWM int64
			if e := r.ev; e != nil {
				warm, warmCPU, warmHWM = secs(e.startup), secs(e.startupCPU), e.startupHWM
				if e.startupTimeout > 0 {
					warm = "> " + e.startupTimeout.String()
				}
				warmRatio = ratio2(e.startup, r.noop.wall)
			}
			fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", r.label(),
				cold, secs(r.cold.cpu), mib(r.cold.hwm), ratio2(r.cold.idle, r.full.wall),
				warm, warmCPU, mib(warmHWM), warmRatio,
				ratio2(time.Duration(max(r.cold.hwm, warmHWM)), time.Duration(max(r.full.maxRSS, r.noop.maxRSS))))
		}
		fmt.Fprintln(w)
		for _, r := range starts {
			if r.ev == nil || r.ev.limited == nil {
				continue
			}
			l := r.ev.limited
			fmt.Fprintf(w, "- N=%s, warm start under GOMEMLIMIT=%s (as the Deployments run it, from the container's memory limit): %s, CPU %s, peak RSS %s.\n",
				r.label(), l.limit, secs(l.startup), secs(l.cpu), mib(l.hwm))
		}
		fmt.Fprintln(w)
	}

	var evs []*result
	for _, r := range results {
		if r.ev != nil && (len(r.ev.lat) > 0 || r.ev.startup > 0 || r.ev.startupTimeout > 0) {
			evs = append(evs, r)
		}
	}
	if len(evs) > 0 {
		fmt.Fprintln(w, "`run` on the synced NB (--file-poll 100ms, --resync 24h):")
		fmt.Fprintln(w)
		fmt.Fprintln(w, "| N | start → idle | start CPU | start/no-op sync | events | latency p50 | p99 | max | CPU/event (mean) | CPU/event p99 | run peak RSS |")
		fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|")
		for _, r := range evs {
			e := r.ev
			startup := secs(e.startup)
			if e.startupTimeout > 0 {
				startup = "> " + e.startupTimeout.String()
			}
			fmt.Fprintf(w, "| %s | %s | %s | %s | %d | %s | %s | %s | %s | %s | %s |\n", r.label(), startup, secs(e.startupCPU), ratio(e.startup, r.noop.wall), len(e.lat),
				secs(quantile(e.lat, 0.5)), secs(quantile(e.lat, 0.99)), secs(quantile(e.lat, 1)),
				secs(mean(e.cpu)), secs(quantile(e.cpu, 0.99)), mib(e.hwm))
			if e.note != "" {
				notes = append(notes, fmt.Sprintf("N=%s: %s", r.label(), e.note))
			}
			if e.sgReplaced > 0 {
				notes = append(notes, fmt.Sprintf("N=%s: %d of %d rule edits replaced the ACL instead of updating its match in place", r.label(), e.sgReplaced, e.sgEdits))
			}
			if e.fipReplaced > 0 {
				notes = append(notes, fmt.Sprintf("N=%s: %d of %d floating IP moves replaced the NAT row instead of updating its logical_ip in place", r.label(), e.fipReplaced, e.fipMoves))
			}
		}
		fmt.Fprintln(w)
		fmt.Fprintln(w, "Per event kind (p50 latency / mean CPU):")
		fmt.Fprintln(w)
		var withEvents []*result
		for _, r := range evs {
			if len(r.ev.lat) > 0 {
				withEvents = append(withEvents, r)
			}
		}
		for _, r := range withEvents {
			fmt.Fprintf(w, "- N=%s:", r.label())
			for _, k := range []string{"vm-add", "snat-ip", "router-del", "lsp-del", "nat-del", "router-add", "fip-move", "sg-rule", "sg-bind"} {
				var lat, cpu []time.Duration
				for i, kk := range r.ev.kinds {
					if kk == k {
						lat, cpu = append(lat, r.ev.lat[i]), append(cpu, r.ev.cpu[i])
					}
				}
				if len(lat) > 0 {
					fmt.Fprintf(w, " %s %s / %s (%d);", k, secs(quantile(lat, 0.5)), secs(mean(cpu)), len(lat))
				}
			}
			fmt.Fprintln(w)
		}
		for _, v := range []variant{{}, {fips: true}, {sgs: true}, {v6: true}} {
			var same []*result
			for _, r := range withEvents {
				if r.fips == v.fips && r.sgs == v.sgs && r.v6 == v.v6 {
					same = append(same, r)
				}
			}
			if len(same) > 1 {
				lo, hi := same[0], same[len(same)-1]
				fmt.Fprintf(w, "\np99(N=%s)/p99(N=%s) = %s; mean CPU per event N=%s/N=%s = %s\n", hi.label(), lo.label(),
					ratio(quantile(hi.ev.lat, 0.99), quantile(lo.ev.lat, 0.99)), hi.label(), lo.label(), ratio(mean(hi.ev.cpu), mean(lo.ev.cpu)))
			}
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "Settings: -nbctl-batch %d commands per ovn-nbctl invocation, -nbctl-max %d, -fip-nbctl-max %d, -sg-nbctl-max %d, -v6-nbctl-max %d, -timeout %s per measurement, -events %d, -events-budget %s per N, -budget %s. "+
		"Floor: a raw JSON-RPC `transact` over the NB's unix socket of every dumped row (NB_Global excluded) as named-UUID inserts, children referenced from their parents' rows.\n",
		cfg.nbctlBatch, cfg.nbctlMax, cfg.fipNbctlMax, cfg.sgNbctlMax, cfg.v6NbctlMax, cfg.timeout, cfg.events, cfg.eventsBudget, cfg.budget)
	if len(notes) > 0 {
		fmt.Fprintln(w, "\nNotes:")
		for _, n := range notes {
			fmt.Fprintln(w, "- "+n)
		}
	}

	fmt.Fprintln(w, "\nRaw numbers (seconds, bytes):")
	fmt.Fprintln(w, "```")
	for _, r := range results {
		if r.skipped != "" {
			continue
		}
		fmt.Fprintf(w, "N=%s rows=%d full_wall=%.4f full_cpu=%.4f full_maxrss=%d full_txns_ops=%s wait_sb=%.4f noop_wall=%.4f noop_cpu=%.4f noop_maxrss=%d noop_txns_ops=%s floor=%.4f floor_ops=%d nbctl=%.4f nbctl_cmds=%d nbctl_calls=%d\n",
			r.rawLabel(), r.rows, r.full.wall.Seconds(), r.full.cpu.Seconds(), r.full.maxRSS, r.fullTx, r.waitSB.Seconds(),
			r.noop.wall.Seconds(), r.noop.cpu.Seconds(), r.noop.maxRSS, r.noopTx, r.floor.Seconds(), r.floorOps,
			r.nbctl.Seconds(), r.nbctlCmds, r.nbctlCalls)
		if c := r.cold; c != nil {
			fmt.Fprintf(w, "N=%s run_cold_idle=%.4f run_cold_cpu=%.4f run_cold_hwm=%d\n", r.rawLabel(), c.idle.Seconds(), c.cpu.Seconds(), c.hwm)
		}
		if e := r.ev; e != nil {
			fmt.Fprintf(w, "N=%s run_start_idle=%.4f run_start_cpu=%.4f run_start_hwm=%d run_hwm=%d\n", r.rawLabel(), e.startup.Seconds(), e.startupCPU.Seconds(), e.startupHWM, e.hwm)
			if l := e.limited; l != nil {
				fmt.Fprintf(w, "N=%s run_limited_gomemlimit=%s run_limited_idle=%.4f run_limited_cpu=%.4f run_limited_hwm=%d\n", r.rawLabel(), l.limit, l.startup.Seconds(), l.cpu.Seconds(), l.hwm)
			}
			var parts []string
			for i := range e.lat {
				parts = append(parts, fmt.Sprintf("%s:%.4f/%.2f", e.kinds[i], e.lat[i].Seconds(), e.cpu[i].Seconds()))
			}
			fmt.Fprintf(w, "N=%s events(kind:latency/cpu)=%s\n", r.rawLabel(), strings.Join(parts, " "))
		}
	}
	fmt.Fprintln(w, "```")
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " ..."
	}
	return s
}
