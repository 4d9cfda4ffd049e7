package main

import (
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/kubevirt-ovn/kubevirt-ovn/integration/sandbox"
)

// startResult is `run` from its start until idle.
type startResult struct {
	idle, cpu time.Duration
	hwm       int64 // peak RSS when idle
	// timeout is set when run was not idle within it.
	timeout time.Duration
}

// coldStart measures `run` on a fresh NB, SB and northd, as after a new
// zone, an NB rebuilt or a first install: from its start until idle, and
// checks that it built as many rows as the sync did (wantRows, NB_Global
// aside).
func coldStart(cfg *config, dir string, in *input, wantRows int) (startResult, error) {
	var res startResult
	startOVN := sandbox.StartCentral
	if cfg.withoutNorthd(len(in.routers)) {
		startOVN = sandbox.StartDatabases
	}
	c, err := startOVN(filepath.Join(dir, "cold"))
	if err != nil {
		return res, err
	}
	stopCentral, _ := cleanup.add(func() { _ = c.Stop() })
	defer stopCentral()
	log := filepath.Join(dir, "run-cold.log")
	start := time.Now()
	p, err := startRun(cfg.bin, c.NB, in.dir, log)
	if err != nil {
		return res, err
	}
	stopRun, _ := cleanup.add(p.stop)
	defer stopRun()
	idle, err := p.waitIdle(len(in.routers), cfg.timeout)
	res.cpu, _ = procCPU(p.cmd.Process.Pid)
	res.hwm = procHWM(p.cmd.Process.Pid)
	if errors.Is(err, errNotIdle) {
		res.timeout = cfg.timeout
		return res, nil
	}
	if err != nil {
		return res, fmt.Errorf("%w (log %s)", err, log)
	}
	res.idle = idle.Sub(start)
	stopRun()
	raw, err := dialRaw(c.NB)
	if err != nil {
		return res, err
	}
	defer raw.Close()
	got, err := raw.dump("OVN_Northbound", "NB_Global")
	if err != nil {
		return res, err
	}
	if n := countRows(got); n != wantRows {
		return res, fmt.Errorf("the cold NB holds %d rows once run is idle, the synced NB %d (log %s)", n, wantRows, log)
	}
	return res, nil
}
