package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubevirt-ovn/kubevirt-ovn/translator/nbtest"
)

var examples = filepath.Join("..", "..", "deploy", "examples")

type result struct {
	code           int
	stdout, stderr string
}

func cli(args ...string) result {
	var out, errb bytes.Buffer
	code := run(args, &out, &errb)
	return result{code, out.String(), errb.String()}
}

// cliBounded is cli, failing the test when the command has not returned
// within a minute.
func cliBounded(t *testing.T, args ...string) result {
	t.Helper()
	done := make(chan result, 1)
	go func() { done <- cli(args...) }()
	select {
	case r := <-done:
		return r
	case <-time.After(time.Minute):
		require.FailNow(t, "kubevirt-ovn "+strings.Join(args, " ")+" did not return")
		return result{}
	}
}

var commands = []string{"sync", "run", "allocator", "zone-agent", "status", "rebalance", "trace", "version", "completion"}

// --help, on every command, exits 0 and prints to stdout a synopsis,
// examples and double-dash flags in groups; -h and -help too.
func TestHelp(t *testing.T) {
	singleDash := regexp.MustCompile(`(^|[\s\[(|])-[a-z][a-z]`)
	for _, c := range commands {
		r := cli(c, "--help")
		require.Equal(t, 0, r.code, "%s --help: %s", c, r.stderr)
		assert.Empty(t, r.stderr, c)
		assert.Contains(t, r.stdout, "Usage:\n  kubevirt-ovn "+c, c)
		flagLine := regexp.MustCompile(`^ {2,6}-`)
		for _, line := range strings.Split(r.stdout, "\n") {
			if f := strings.TrimSpace(line); flagLine.MatchString(line) && !strings.HasPrefix(f, "-h, --") && !strings.HasPrefix(f, "-v, --") && !strings.HasPrefix(f, "-o, --") {
				assert.True(t, strings.HasPrefix(f, "--"), "%s: a flag listed with two dashes: %q", c, line)
			}
		}
		if c == "version" || c == "completion" {
			continue
		}
		assert.Contains(t, r.stdout, "\nExamples:\n", c)
		synopsis, _, _ := strings.Cut(strings.SplitN(r.stdout, "Usage:\n", 2)[1], "\n")
		assert.False(t, singleDash.MatchString(synopsis), "%s: the synopsis spells flags with two dashes: %q", c, synopsis)
	}
	for _, h := range []string{"-h", "-help"} {
		r := cli("sync", h)
		assert.Equal(t, 0, r.code, "sync %s", h)
		assert.Contains(t, r.stdout, "Usage:\n  kubevirt-ovn sync")
	}
	r := cli("--help")
	assert.Equal(t, 0, r.code)
	for _, c := range commands {
		assert.Contains(t, r.stdout, "\n  "+c+" ", "kubevirt-ovn --help lists %s", c)
	}
}

// sync --help: the groups, in order, and the flags of each.
func TestSyncHelpGroupsFlags(t *testing.T) {
	r := cli("sync", "--help")
	require.Equal(t, 0, r.code)
	out := r.stdout
	last := -1
	for _, group := range []string{"\nOVN databases:\n", "\nInput:\n", "\nSync:\n", "\nDiagnostics:\n"} {
		i := strings.Index(out, group)
		require.Greater(t, i, last, "group %q after the previous one", group)
		last = i
	}
	section := func(name string) string {
		s := strings.SplitN(out, "\n"+name+":\n", 2)[1]
		s, _, _ = strings.Cut(s, "\n\n")
		return s
	}
	for group, flags := range map[string][]string{
		"OVN databases": {"--nb ADDR", "--nb-cert FILE", "--sb ADDR", "--endpoint-timeout", "--zone NAME=NB,SB"},
		"Input":         {"--from-file PATH", "--allow-empty"},
		"Sync":          {"--dry-run", "--instance NAME", "--timeout", "--batch-ops N", "--move-nudge", "--northd-wait"},
		"Diagnostics":   {"-v, --verbose", "--cpuprofile FILE", "--memprofile FILE"},
	} {
		for _, f := range flags {
			assert.Contains(t, section(group), f, "group %s", group)
		}
	}
}

// klog's flags are a group of their own, spelt with dashes; the
// underscore spellings are accepted too.
func TestKlogFlags(t *testing.T) {
	for _, c := range []string{"run", "allocator", "zone-agent"} {
		r := cli(c, "--help")
		require.Equal(t, 0, r.code)
		klogSection := strings.SplitN(r.stdout, "\nLogging (klog):\n", 2)
		require.Len(t, klogSection, 2, "%s --help has a klog group", c)
		assert.Contains(t, klogSection[1], "--log-file-max-size")
		assert.Contains(t, klogSection[1], "--v Level")
		assert.NotContains(t, r.stdout, "--log_file", c)
		assert.NotContains(t, strings.SplitN(r.stdout, "\nLogging (klog):\n", 2)[0], "--vmodule", "%s: klog's flags only in their group", c)
	}
	for _, spelling := range []string{"--log_file_max_size=10", "--log-file-max-size=10", "-log_file_max_size=10", "--skip_headers"} {
		r := cli("run", spelling, "--help")
		assert.Equal(t, 0, r.code, "run %s: %s", spelling, r.stderr)
	}
}

// A usage error exits 2 and names the flag, command or argument at fault.
func TestUsageErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"sync", "--no-such-flag"}, "unknown flag: --no-such-flag"},
		{[]string{"sync", "-no-such-flag"}, "no-such-flag"},
		{[]string{"sync", "--timeout", "soon"}, `invalid argument "soon" for "--timeout"`},
		{[]string{"run", "--leader-elect=maybe"}, "--leader-elect"},
		{[]string{"sync", "--zone", "gw1"}, `"gw1" is not NAME=NB,SB`},
		{[]string{"sync", "--from-file", examples}, "--from-file and either --nb or --zone are required"},
		{[]string{"sync", "--nb", "unix:/x", "--zone", "a=unix:/a,unix:/b", "--from-file", examples}, "--from-file and either --nb or --zone are required"},
		{[]string{"sync", "--nb", "unix:/x", "--from-file", examples, "extra"}, `unexpected argument "extra"`},
		{[]string{"run"}, "--nb (or --zone) is required"},
		{[]string{"run", "--zone", "a=unix:/a,unix:/b"}, "--zone works with --from-file"},
		{[]string{"run", "--interconnect", "--zone-nb", "unix:/a"}, "different roles"},
		{[]string{"run", "--zone-nb", "unix:/a"}, "--zone-nb needs --zone-sb"},
		{[]string{"run", "--interconnect", "--nb", "unix:/a"}, "work with a cluster"},
		{[]string{"zone-agent"}, "--zone-nb is required"},
		{[]string{"status", "--nb", "unix:/a"}, "--nb and --sb are required"},
		{[]string{"snyc"}, `unknown command "snyc" (did you mean sync?)`},
		{[]string{"trace", "--nb", "unix:/a", "--sb", "unix:/b", "--to", "10.0.0.1"}, "--from and --to are required"},
		{[]string{"trace", "--nb", "unix:/a", "--from", "default/vm-a", "--to", "10.0.0.1"}, "--sb is required with --nb: ovn-trace reads the SB"},
		{[]string{"trace", "--from", "default/vm-a", "--to", "10.0.0.1"}, "either --nb and --sb or --zone are required"},
		{[]string{"trace", "--nb", "unix:/a", "--sb", "unix:/b", "--from", "default/vm-a", "--to", "10.0.0.1", "-o", "yaml"}, `--output "yaml" is none of text, json`},
	} {
		r := cli(c.args...)
		assert.Equal(t, 2, r.code, "%v: %s", c.args, r.stderr)
		assert.Contains(t, r.stderr, c.want, "%v", c.args)
		assert.Contains(t, r.stderr, "--help' for usage", "%v", c.args)
	}
	// No command: the usage, on stderr.
	r := cli()
	assert.Equal(t, 2, r.code)
	assert.Contains(t, r.stderr, "Usage:\n  kubevirt-ovn [flags]\n  kubevirt-ovn [command]")
}

// trace without ovn-trace fails at once, saying what is missing and how
// to get it, before it connects to anything.
func TestTraceWithoutOVNTrace(t *testing.T) {
	r := cliBounded(t, "trace", "--nb", "unix:/nonexistent/nb.sock", "--sb", "unix:/nonexistent/sb.sock", "--from", "default/vm-a", "--to", "10.0.0.1", "--ovn-trace", "/nonexistent/ovn-trace")
	assert.Equal(t, 1, r.code)
	assert.Equal(t, "kubevirt-ovn trace: ovn-trace is not installed: /nonexistent/ovn-trace is not on PATH or not executable (install OVN's ovn-common package, ovn-trace's home, or name it with --ovn-trace)\n", r.stderr)
}

// The single-dash spellings of long flags (Go's flag package accepted
// them; scripts use them) are rewritten to double dashes; flag values,
// one-letter shorthands and what follows "--" are left alone.
func TestSingleDashLongFlags(t *testing.T) {
	for _, c := range []struct{ in, want []string }{
		{[]string{"sync", "-nb", "unix:/nb", "-from-file=dir", "-dry-run"}, []string{"sync", "--nb", "unix:/nb", "--from-file=dir", "--dry-run"}},
		{[]string{"sync", "-v", "-h"}, []string{"sync", "-v", "-h"}},
		{[]string{"run", "-v", "2", "-log_file", "f"}, []string{"run", "-v", "2", "--log_file", "f"}},
		{[]string{"run", "--zone-name", "-nb", "-identity", "-x"}, []string{"run", "--zone-name", "-nb", "--identity", "-x"}},
		{[]string{"run", "-nb", "unix:/nb", "--", "-nb"}, []string{"run", "--nb", "unix:/nb", "--", "-nb"}},
		{[]string{"sync", "-no-such-flag"}, []string{"sync", "-no-such-flag"}},
		{[]string{"-help"}, []string{"--help"}},
	} {
		assert.Equal(t, c.want, singleDashLongFlags(newRoot(), c.in), "%v", c.in)
	}

	// Through the CLI: sync with single-dash flags writes the examples.
	nb := "unix:" + nbtest.Serve(t)
	r := cliBounded(t, "sync", "-nb", nb, "-from-file", examples, "-timeout=30s")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "Logical_Router               1 created")
	r = cliBounded(t, "sync", "-nb="+nb, "-from-file="+examples, "-dry-run")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "no changes")
}

// A manifest path that does not exist fails sync and run at once, naming
// the path, whatever the NB does (sync retried a refusing or silent NB for
// its whole --timeout and named only the NB; run waited for it forever).
func TestMissingInputFailsAtOnce(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "does", "not", "exist")
	for _, nb := range []string{"tcp:127.0.0.1:1", nbtest.Silent(t)} {
		r := cliBounded(t, "sync", "--nb", nb, "--from-file", missing, "--timeout", "10m")
		assert.Equal(t, 1, r.code, r.stderr)
		assert.Contains(t, r.stderr, "kubevirt-ovn sync: manifest path: stat "+missing+": no such file or directory (nothing written)")

		r = cliBounded(t, "run", "--nb", nb, "--from-file", missing, "--http-addr", "")
		assert.Equal(t, 1, r.code, r.stderr)
		assert.Contains(t, r.stderr, "kubevirt-ovn run: manifest path: stat "+missing+": no such file or directory")
	}
}

// freeAddr is a loopback address no one listens on now.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

// syncWriter is a buffer safe for a command writing while the test reads.
type syncWriter struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *syncWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// run serves /debug/pprof/ on its metrics port only with
// --enable-profiling (it always did, unauthenticated, on every interface
// by default).
func TestProfilingOffByDefault(t *testing.T) {
	nb := "unix:" + nbtest.Serve(t)
	for _, profiling := range []bool{false, true} {
		addr := freeAddr(t)
		args := []string{"run", "--nb", nb, "--from-file", examples, "--http-addr", addr}
		if profiling {
			args = append(args, "--enable-profiling")
		}
		ctx, cancel := context.WithCancel(context.Background())
		var stderr syncWriter
		done := make(chan int, 1)
		go func() { done <- runContext(ctx, args, io.Discard, &stderr) }()
		get := func(path string) int {
			resp, err := http.Get("http://" + addr + path)
			if err != nil {
				return 0
			}
			resp.Body.Close()
			return resp.StatusCode
		}
		require.Eventually(t, func() bool { return get("/healthz") == http.StatusOK }, 30*time.Second, 20*time.Millisecond, "run serving: %s", stderr.String())
		want := map[bool]int{false: http.StatusNotFound, true: http.StatusOK}[profiling]
		assert.Equal(t, want, get("/debug/pprof/"), "--enable-profiling=%v", profiling)
		assert.Equal(t, http.StatusOK, get("/metrics"))
		cancel()
		select {
		case code := <-done:
			assert.Equal(t, 0, code, stderr.String())
		case <-time.After(time.Minute):
			require.FailNow(t, "run did not stop")
		}
	}
}

// The roles run selected with flags before they were commands keep their
// spellings: run --interconnect is the allocator and run --zone-nb a zone
// agent, saying so; neither shows in run --help.
func TestRunKeepsTheOldRoleSpellings(t *testing.T) {
	r := cli("run", "--help")
	require.Equal(t, 0, r.code)
	for _, old := range []string{"--interconnect", "--zone-nb", "--zone-sb", "--zone-name", "--node-name", "--pod-name", "--pod-uid", "--namespace"} {
		assert.NotContains(t, r.stdout, old+" ", "run --help shows no %s", old)
		r := cli("run", old+"=x", "--help")
		if old == "--interconnect" {
			r = cli("run", old, "--help")
		}
		assert.Equal(t, 0, r.code, "run %s is still a flag: %s", old, r.stderr)
	}
	// The allocator, from outside a cluster without a kubeconfig, fails on
	// the configuration, after saying what it is now.
	r = cliBounded(t, "run", "--interconnect", "--kubeconfig", filepath.Join(t.TempDir(), "none"), "--http-addr", "")
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, "kubevirt-ovn run: note: 'run --interconnect' is 'kubevirt-ovn allocator' now")
	assert.Contains(t, r.stderr, "kubevirt-ovn run: kubernetes client configuration")
}

func TestVersionAndCompletion(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}} {
		r := cli(args...)
		assert.Equal(t, 0, r.code)
		assert.True(t, strings.HasPrefix(r.stdout, "kubevirt-ovn "), "%v: %q", args, r.stdout)
	}
	for _, shell := range []string{"bash", "zsh", "fish", "powershell"} {
		r := cli("completion", shell)
		assert.Equal(t, 0, r.code, shell)
		assert.Contains(t, r.stdout, "kubevirt-ovn", shell)
	}
	r := cli("__complete", "sync", "--from")
	assert.Equal(t, 0, r.code)
	assert.Contains(t, r.stdout, "--from-file", "flag names complete")
}
