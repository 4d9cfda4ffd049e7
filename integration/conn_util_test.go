package integration

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// connNB is an NB the connection tests drive: a standalone Central or a
// Raft cluster.
type connNB interface {
	NBCtl(args ...string) (string, error)
}

// connTables are the tables we write, with the columns that identify one
// row of a unit (two rows with the same identity are duplicates).
var connTables = []struct {
	table string
	key   []string
}{
	{"Logical_Switch", []string{"name"}},
	{"Logical_Switch_Port", []string{"name"}},
	{"Logical_Router", []string{"name"}},
	{"Logical_Router_Port", []string{"name"}},
	{"NAT", []string{"external_ids", "type", "logical_ip", "external_ip"}},
	{"Logical_Router_Policy", []string{"external_ids", "priority", "match"}},
	{"Logical_Router_Static_Route", []string{"external_ids", "ip_prefix"}},
	{"Gateway_Chassis", []string{"name"}},
	{"Static_MAC_Binding", []string{"logical_port", "ip"}},
	{"DHCP_Options", []string{"external_ids"}},
	{"Port_Group", []string{"name"}},
	// An ACL's external_ids hold its group (owner) and its
	// kubevirt-ovn/sg-acl key; a health check's its load balancer's
	// owner, which tells a router's row from its network's switch's.
	{"ACL", []string{"external_ids"}},
	{"Load_Balancer", []string{"name"}},
	{"Load_Balancer_Health_Check", []string{"external_ids", "vip"}},
}

// connRows are the rows we own in an NB, per table: each row's identity
// and its canonical content (every column, UUIDs blanked: a reference
// column reads as the number of rows it references).
type connRows map[string][]connRow

type connRow struct{ key, content string }

func connOwned(t *testing.T, nb connNB) connRows {
	t.Helper()
	out := connRows{}
	for _, tb := range connTables {
		args := []string{"--format=json", "find", tb.table, "external_ids:kubevirt-ovn/managed-by=kubevirt-ovn"}
		if tb.table == "Static_MAC_Binding" {
			args = []string{"--format=json", "list", tb.table}
		}
		raw := nbctl(t, nb, args...)
		var dump struct {
			Headings []string `json:"headings"`
			Data     [][]any  `json:"data"`
		}
		require.NoError(t, json.Unmarshal([]byte(raw), &dump), "%s", raw)
		for _, row := range dump.Data {
			cols := map[string]string{}
			var content []string
			for i, h := range dump.Headings {
				cols[h] = connCanon(row[i])
				content = append(content, h+"="+cols[h])
			}
			var key []string
			for _, k := range tb.key {
				key = append(key, cols[k])
			}
			out[tb.table] = append(out[tb.table], connRow{key: strings.Join(key, " "), content: strings.Join(content, " ")})
		}
		slices.SortFunc(out[tb.table], func(a, b connRow) int { return strings.Compare(a.content, b.content) })
	}
	return out
}

// connCanon prints an OVSDB JSON value with UUIDs blanked and sets and
// maps sorted.
func connCanon(v any) string {
	a, ok := v.([]any)
	if !ok || len(a) != 2 {
		b, _ := json.Marshal(v)
		return string(b)
	}
	switch a[0] {
	case "uuid", "named-uuid":
		return "<uuid>"
	case "set", "map":
		var parts []string
		for _, e := range a[1].([]any) {
			parts = append(parts, connCanon(e))
		}
		slices.Sort(parts)
		return "[" + strings.Join(parts, ",") + "]"
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// connCompare checks got against want, the rows a sync of the same input
// writes into a fresh NB: per table the same number of rows, no two rows
// with one identity (duplicates), none missing, none extra (orphans), and
// the same content.
func connCompare(t *testing.T, got, want connRows) {
	t.Helper()
	total := 0
	for _, tb := range connTables {
		g, w := got[tb.table], want[tb.table]
		count := map[string]int{}
		for _, r := range g {
			count[r.key]++
		}
		wantKeys := map[string]bool{}
		for _, r := range w {
			wantKeys[r.key] = true
		}
		var dups, missing, orphans []string
		for k, n := range count {
			if n > 1 {
				dups = append(dups, fmt.Sprintf("%s x%d", k, n))
			}
			if !wantKeys[k] {
				orphans = append(orphans, k)
			}
		}
		for k := range wantKeys {
			if count[k] == 0 {
				missing = append(missing, k)
			}
		}
		t.Logf("%-28s %5d rows (fresh NB: %d), %d duplicates, %d missing, %d orphans", tb.table, len(g), len(w), len(dups), len(missing), len(orphans))
		assert.Empty(t, dups, "%s: duplicate rows", tb.table)
		assert.Empty(t, missing, "%s: missing rows", tb.table)
		assert.Empty(t, orphans, "%s: rows a fresh sync does not write", tb.table)
		if assert.Equal(t, len(w), len(g), "%s: rows", tb.table) {
			for i := range g {
				if !assert.Equal(t, w[i].content, g[i].content, "%s: row content", tb.table) {
					break
				}
			}
		}
		total += len(g)
	}
	t.Logf("%d owned rows compared", total)
}

// connFresh is what a sync of manifests writes into a fresh NB.
func connFresh(t *testing.T, manifests string) connRows {
	t.Helper()
	c := startCentral(t)
	r := connStart(t, "sync", "--nb", c.NBTCP, "--from-file", manifests).wait(t, 120*time.Second)
	require.Equal(t, 0, r.code, r.stderr)
	nbctl(t, c, "--timeout=30", "--wait=sb", "sync")
	return connOwned(t, c)
}

// connProc is a kubevirt-ovn process running in the background.
type connProc struct {
	cmd         *exec.Cmd
	stdout, err *syncBuffer
	done        chan struct{}
	res         result
}

func connStart(t *testing.T, args ...string) *connProc {
	t.Helper()
	p := &connProc{stdout: &syncBuffer{}, err: &syncBuffer{}, done: make(chan struct{})}
	p.cmd = exec.Command(binary, args...)
	p.cmd.Stdout, p.cmd.Stderr = p.stdout, p.err
	require.NoError(t, p.cmd.Start())
	go func() {
		err := p.cmd.Wait()
		p.res = result{stdout: p.stdout.String(), stderr: p.err.String()}
		if ee, ok := err.(*exec.ExitError); ok {
			p.res.code = ee.ExitCode()
		}
		close(p.done)
	}()
	t.Cleanup(func() {
		if !p.exited() {
			_ = p.cmd.Process.Signal(syscall.SIGKILL)
			<-p.done
		}
	})
	return p
}

func (p *connProc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// wait waits for the process to exit and logs its output.
func (p *connProc) wait(t *testing.T, timeout time.Duration) result {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(timeout):
		require.FailNow(t, "kubevirt-ovn did not exit", "after %s; stderr so far:\n%s", timeout, p.err.String())
	}
	t.Logf("kubevirt-ovn %s (exit %d)\n--- stdout (%d lines)\n%s--- stderr\n%s", strings.Join(p.cmd.Args[1:], " "), p.res.code,
		strings.Count(p.res.stdout, "\n"), connTail(p.res.stdout, 15), p.res.stderr)
	return p.res
}

// connTail is the last n lines of s.
func connTail(s string, n int) string {
	lines := strings.SplitAfter(s, "\n")
	if len(lines) > n {
		lines = append([]string{"...\n"}, lines[len(lines)-n:]...)
	}
	return strings.Join(lines, "")
}

// connCount counts the rows of table we own.
func connCount(nb connNB, table string) int {
	out, err := nb.NBCtl("--bare", "--columns=_uuid", "find", table, "external_ids:kubevirt-ovn/managed-by=kubevirt-ovn")
	if err != nil {
		return -1
	}
	return len(strings.Fields(out))
}
