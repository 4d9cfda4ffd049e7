package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// childRun is one finished child process: wall time, CPU, peak RSS and
// what it printed.
type childRun struct {
	wall, cpu      time.Duration
	maxRSS         int64 // bytes
	stdout, stderr string
}

// runChild runs prog to completion within timeout.
func runChild(timeout time.Duration, env []string, prog string, args ...string) (childRun, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, prog, args...)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	resetPeakRSS()
	start := time.Now()
	err := cmd.Start()
	if err == nil {
		// Killed by pid if the bench is stopped meanwhile.
		_, forget := cleanup.add(func() { _ = cmd.Process.Kill() })
		err = cmd.Wait()
		forget()
	}
	r := childRun{wall: time.Since(start), stdout: stdout.String(), stderr: stderr.String()}
	if cmd.ProcessState == nil {
		return r, fmt.Errorf("%s %s: %w", prog, short(args), err)
	}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		r.cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		r.maxRSS = ru.Maxrss * 1024
	}
	if ctx.Err() != nil {
		return r, fmt.Errorf("%s %s: killed after the timeout of %s", prog, short(args), timeout)
	}
	if err != nil {
		return r, fmt.Errorf("%s %s: %w: %s", prog, short(args), err, lastLines(stderr.String(), 5))
	}
	return r, nil
}

// resetPeakRSS lowers the bench's own peak RSS to what it holds now. Go
// starts a child on the parent's memory (vfork), and the kernel counts
// that memory's peak in the child's ru_maxrss at exec: without this, a
// sync measured after the bench dumped and sent 80,000 rows (the floor)
// reported the bench's peak, not its own.
func resetPeakRSS() {
	debug.FreeOSMemory()
	_ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
}

func short(args []string) string {
	s := strings.Join(args, " ")
	if len(s) > 160 {
		s = s[:160] + "..."
	}
	return s
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// txnLine is the line a sync may print with what it sent the NB.
var txnLine = regexp.MustCompile(`(?m)^NB: (\d+) transactions?, (\d+) operations`)

// txnsOps is "transactions/operations" from sync's output, or "-".
func txnsOps(r childRun) string {
	for _, s := range []string{r.stderr, r.stdout} {
		if m := txnLine.FindStringSubmatch(s); m != nil {
			return m[1] + "/" + m[2]
		}
	}
	return "-"
}

// clkTck is USER_HZ, the unit of /proc/PID/stat's times (100 on Linux).
const clkTck = 100

// procCPU is pid's user+system CPU so far.
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name may hold spaces: fields count from after ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	// After ')': state is field 3 of stat(5); utime 14 and stime 15.
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	return time.Duration(ut+st) * time.Second / clkTck, nil
}

// procHWM is pid's peak resident set size (VmHWM), in bytes.
func procHWM(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			f := strings.Fields(v)
			if len(f) > 0 {
				n, _ := strconv.ParseInt(f[0], 10, 64)
				return n * 1024
			}
		}
	}
	return 0
}
