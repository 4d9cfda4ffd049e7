package integration

// File-mode input hazards (issue 7, item 5), for `sync --from-file` and
// `run --from-file`: symlinked manifests, ConfigMap volumes, files read while
// being written, and inputs that read as empty.

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ovn-kubernetes/libovsdb/cache"
	"github.com/ovn-kubernetes/libovsdb/client"
	"github.com/ovn-kubernetes/libovsdb/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubevirt-ovn/kubevirt-ovn/integration/sandbox"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/manifest/configmaptest"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/ovn"
)

// filesCentral is NB, SB and northd with ovn-kubernetes-like rows seeded;
// they must read the same when the test ends.
func filesCentral(t *testing.T) *sandbox.Central {
	t.Helper()
	c := startCentral(t)
	keepForeign(t, c)
	return c
}

// filesOwnedTables are the tables whose rows carry our external_ids.
var filesOwnedTables = []string{"Logical_Router", "Logical_Router_Port", "Logical_Switch", "Logical_Switch_Port",
	"NAT", "Logical_Router_Static_Route", "Gateway_Chassis"}

// filesOwned lists the rows we own, by table and _uuid: a row deleted and
// created again reads differently.
func filesOwned(t *testing.T, c *sandbox.Central) string {
	t.Helper()
	var b strings.Builder
	for _, table := range filesOwnedTables {
		out := nbctl(t, c, "--bare", "--columns=_uuid", "find", table,
			fmt.Sprintf(`external_ids:"%s"="%s"`, translator.KeyManagedBy, translator.DefaultInstance))
		uuids := strings.Fields(out)
		slices.Sort(uuids)
		for _, u := range uuids {
			fmt.Fprintf(&b, "%s %s\n", table, u)
		}
	}
	return b.String()
}

// filesDeletes records every row of ours deleted from the NB, through a
// monitor of its own.
type filesDeletes struct {
	mu   sync.Mutex
	rows []string
}

func filesWatchDeletes(t *testing.T, c *sandbox.Central) *filesDeletes {
	t.Helper()
	dbModel, err := ovn.NBModel()
	require.NoError(t, err)
	nb, err := client.NewOVSDBClient(dbModel, client.WithEndpoint(c.NBTCP))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, nb.Connect(ctx))
	t.Cleanup(nb.Close)
	d := &filesDeletes{}
	nb.Cache().AddEventHandler(&cache.EventHandlerFuncs{DeleteFunc: func(table string, m model.Model) {
		row, ok := m.(interface{ GetExternalIDs() map[string]string })
		if !ok || row.GetExternalIDs()[translator.KeyManagedBy] == "" {
			return
		}
		d.mu.Lock()
		defer d.mu.Unlock()
		d.rows = append(d.rows, fmt.Sprintf("%s %v", table, m))
	}})
	_, err = nb.MonitorAll(ctx)
	require.NoError(t, err)
	return d
}

func (d *filesDeletes) list() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.rows)
}

// filesExamples is deploy/examples as a ConfigMap payload, with edits
// (old -> new) applied to router.yaml.
func filesExamples(t *testing.T, edits ...string) map[string]string {
	t.Helper()
	payload := map[string]string{}
	for _, f := range []string{"networks.yaml", "router.yaml", "vmis.yaml"} {
		b, err := os.ReadFile(filepath.Join("..", "deploy", "examples", f))
		require.NoError(t, err)
		payload[f] = string(b)
	}
	for i := 0; i+1 < len(edits); i += 2 {
		require.Contains(t, payload["router.yaml"], edits[i])
		payload["router.yaml"] = strings.Replace(payload["router.yaml"], edits[i], edits[i+1], 1)
	}
	return payload
}

// filesStartRun starts `run --from-file` polling every 100ms.
func filesStartRun(t *testing.T, c *sandbox.Central, paths string, extra ...string) *controllerProc {
	t.Helper()
	args := append([]string{"--nb", c.NBTCP, "--from-file", paths, "--file-poll", "100ms"}, extra...)
	return startController(t, "files", args...)
}

// filesRunExits runs `run` expecting it to exit on its own; it is killed
// after a deadline (then the test fails).
func filesRunExits(t *testing.T, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, append([]string{"run", "--http-addr", ""}, args...)...)
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	err := cmd.Run()
	require.NoError(t, ctx.Err(), "kubevirt-ovn run did not exit:\n%s", out.String())
	r := result{stderr: out.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	}
	t.Logf("kubevirt-ovn run %s (exit %d)\n%s", strings.Join(args, " "), r.code, r.stderr)
	return r
}

// A symlink to the manifest directory, symlinked files and directories in
// it, and link cycles: each object is read once, nothing is deleted.
func TestFilesSyncFollowsSymlinks(t *testing.T) {
	c := filesCentral(t)
	ex := examples(t)
	r := kubevirtOVN(t, "sync", "--nb", c.NBTCP, "--from-file", ex)
	require.Equal(t, 0, r.code)
	before := filesOwned(t, c)
	require.Contains(t, before, "NAT ")

	link := filepath.Join(t.TempDir(), "manifests")
	require.NoError(t, os.Symlink(ex, link))
	r = kubevirtOVN(t, "sync", "--nb", c.NBTCP, "--from-file", link)
	assert.Equal(t, 0, r.code)
	assert.Equal(t, "no changes\n", r.stdout, "a symlinked directory reads as the directory")

	// networks.yaml linked as a file; router.yaml and vmis.yaml in a linked
	// directory; a link back to the top.
	top, other := t.TempDir(), t.TempDir()
	require.NoError(t, os.Symlink(filepath.Join(ex, "networks.yaml"), filepath.Join(top, "networks.yaml")))
	require.NoError(t, os.Rename(filepath.Join(ex, "router.yaml"), filepath.Join(other, "router.yaml")))
	require.NoError(t, os.Rename(filepath.Join(ex, "vmis.yaml"), filepath.Join(other, "vmis.yaml")))
	require.NoError(t, os.Symlink(other, filepath.Join(top, "more")))
	require.NoError(t, os.Symlink(top, filepath.Join(other, "loop")))
	r = kubevirtOVN(t, "sync", "--nb", c.NBTCP, "--from-file", top)
	assert.Equal(t, 0, r.code)
	assert.Equal(t, "no changes\n", r.stdout)
	assert.Equal(t, before, filesOwned(t, c), "no row of ours deleted or recreated")
}

func TestFilesRunFollowsSymlinks(t *testing.T) {
	c := filesCentral(t)
	ex := examples(t)
	require.Equal(t, 0, kubevirtOVN(t, "sync", "--nb", c.NBTCP, "--from-file", ex).code)
	before := filesOwned(t, c)
	deletes := filesWatchDeletes(t, c)

	link := filepath.Join(t.TempDir(), "manifests")
	require.NoError(t, os.Symlink(ex, link))
	p := filesStartRun(t, c, link)
	waitNB(t, "the controller started", func() bool { return strings.Contains(p.out.String(), "controller started") })
	edit(t, filepath.Join(link, "router.yaml"), "ip: 172.16.0.100", "ip: 172.16.0.103")
	waitNB(t, "an edit through the link is applied", func() bool { return natIPs(t, c, "router1") == "172.16.0.103 172.16.0.103" })
	assert.Empty(t, deletes.list(), "rows of ours deleted")
	assert.Equal(t, before, filesOwned(t, c), "no row of ours deleted or recreated")
}

// A ConfigMap volume as kubelet mounts it: each object once, and an update
// done the kubelet way is applied as an update.
func TestFilesSyncReadsConfigMapVolume(t *testing.T) {
	c := filesCentral(t)
	cm := t.TempDir()
	configmaptest.Write(t, cm, filesExamples(t), nil)
	r := kubevirtOVN(t, "sync", "--nb", c.NBTCP, "--from-file", cm)
	require.Equal(t, 0, r.code, "every object once")
	assert.Equal(t, "172.16.0.100 172.16.0.100", natIPs(t, c, "router1"))
	before := nbctl(t, c, "--bare", "--columns=_uuid", "list", "Logical_Router", "kv-router1")

	configmaptest.Write(t, cm, filesExamples(t, "ip: 172.16.0.100", "ip: 172.16.0.104"), nil)
	r = kubevirtOVN(t, "sync", "--nb", c.NBTCP, "--from-file", cm)
	require.Equal(t, 0, r.code)
	assert.Contains(t, r.stdout, "NAT                          2 updated")
	assert.NotContains(t, r.stdout, "delete")
	assert.Equal(t, "172.16.0.104 172.16.0.104", natIPs(t, c, "router1"))
	assert.Equal(t, before, nbctl(t, c, "--bare", "--columns=_uuid", "list", "Logical_Router", "kv-router1"))
	r = kubevirtOVN(t, "sync", "--nb", c.NBTCP, "--from-file", cm)
	assert.Equal(t, "no changes\n", r.stdout)
}

func TestFilesRunReadsConfigMapVolume(t *testing.T) {
	c := filesCentral(t)
	cm := t.TempDir()
	configmaptest.Write(t, cm, filesExamples(t), nil)
	p := filesStartRun(t, c, cm)
	waitNB(t, "router1's NAT in the NB", func() bool { return natIPs(t, c, "router1") == "172.16.0.100 172.16.0.100" })
	before := filesOwned(t, c)
	deletes := filesWatchDeletes(t, c)

	configmaptest.Write(t, cm, filesExamples(t, "ip: 172.16.0.100", "ip: 172.16.0.104"), nil)
	waitNB(t, "the ConfigMap update is applied", func() bool { return natIPs(t, c, "router1") == "172.16.0.104 172.16.0.104" })
	assert.Empty(t, deletes.list(), "rows of ours deleted")
	assert.Equal(t, before, filesOwned(t, c), "no row of ours deleted or recreated")
	assert.NotContains(t, p.out.String(), "defined in namespaces")
}

// filesHalf opens router.yaml as `cat > router.yaml` does (truncated) and
// writes its first part, up to the spec; the caller writes the rest and
// closes it.
func filesHalf(t *testing.T, dir string) (w *os.File, rest string) {
	t.Helper()
	content := readFile(t, dir, "router.yaml")
	cut := strings.Index(content, "spec:")
	require.Positive(t, cut)
	w, err := os.OpenFile(filepath.Join(dir, "router.yaml"), os.O_WRONLY|os.O_TRUNC, 0)
	require.NoError(t, err)
	t.Cleanup(func() { w.Close() })
	_, err = w.WriteString(content[:cut])
	require.NoError(t, err)
	return w, content[cut:]
}

// A file being rewritten in place is not read half-written: sync refuses
// it and writes nothing.
func TestFilesSyncRefusesFileBeingWritten(t *testing.T) {
	c := filesCentral(t)
	ex := examples(t)
	require.Equal(t, 0, kubevirtOVN(t, "sync", "--nb", c.NBTCP, "--from-file", ex).code)
	before := filesOwned(t, c)

	w, rest := filesHalf(t, ex)
	r := kubevirtOVN(t, "sync", "--nb", c.NBTCP, "--from-file", ex)
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, "router.yaml is being written (open for writing by another process) (nothing written)")
	assert.Equal(t, before, filesOwned(t, c), "nothing written")

	_, err := w.WriteString(rest)
	require.NoError(t, err)
	require.NoError(t, w.Close())
	r = kubevirtOVN(t, "sync", "--nb", c.NBTCP, "--from-file", ex)
	assert.Equal(t, 0, r.code)
	assert.Equal(t, "no changes\n", r.stdout)
}

// `run` keeps the last good input while a file is half-written, however
// many polls see it so, and applies it once complete: the router's rows are
// never deleted.
func TestFilesRunWaitsForFileBeingWritten(t *testing.T) {
	c := filesCentral(t)
	ex := examples(t)
	p := filesStartRun(t, c, ex)
	waitNB(t, "router1's NAT in the NB", func() bool { return natIPs(t, c, "router1") == "172.16.0.100 172.16.0.100" })
	before := filesOwned(t, c)
	deletes := filesWatchDeletes(t, c)

	w, rest := filesHalf(t, ex)
	const waiting = "manifests are being written"
	start := time.Now()
	waitNB(t, "two polls saw the half-written file (or rows were deleted)", func() bool {
		return strings.Count(p.out.String(), waiting) >= 2 || len(deletes.list()) > 0 || filesOwned(t, c) != before
	})
	t.Logf("waited %s for two polls to see the half-written file", time.Since(start))
	assert.Empty(t, deletes.list(), "rows of ours deleted while the file was half-written")
	assert.Equal(t, before, filesOwned(t, c))

	_, err := w.WriteString(strings.Replace(rest, "ip: 172.16.0.100", "ip: 172.16.0.103", 1))
	require.NoError(t, err)
	require.NoError(t, w.Close())
	waitNB(t, "the complete file is applied", func() bool { return natIPs(t, c, "router1") == "172.16.0.103 172.16.0.103" })
	assert.Empty(t, deletes.list(), "rows of ours deleted")
	assert.Equal(t, before, filesOwned(t, c), "no row of ours deleted or recreated")
}

// filesNotesOnly is a directory whose manifests declare nothing of ours.
func filesNotesOnly(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "other.yaml"), []byte("apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: unrelated\n"), 0o644))
	return dir
}

const filesRefusal = "declare no router and no network, but 4 routers and networks own rows in the NB: refusing to delete them all without --allow-empty"

// An input that reads as empty deletes nothing unless --allow-empty says
// so; with it, every row we own goes.
func TestFilesSyncEmptyInputNeedsAllowEmpty(t *testing.T) {
	c := filesCentral(t)
	ex := examples(t)
	require.Equal(t, 0, kubevirtOVN(t, "sync", "--nb", c.NBTCP, "--from-file", ex).code)
	before := filesOwned(t, c)
	empty := filesNotesOnly(t)

	for _, extra := range [][]string{nil, {"--dry-run"}} {
		r := kubevirtOVN(t, append([]string{"sync", "--nb", c.NBTCP, "--from-file", empty}, extra...)...)
		assert.Equal(t, 1, r.code)
		assert.Contains(t, r.stderr, "kubevirt-ovn sync: the manifests in "+empty+" "+filesRefusal+" (nothing written)")
		assert.Empty(t, r.stdout)
		assert.Equal(t, before, filesOwned(t, c), "nothing deleted")
	}

	r := kubevirtOVN(t, "sync", "--nb", c.NBTCP, "--from-file", empty, "--allow-empty")
	assert.Equal(t, 0, r.code)
	assert.Contains(t, r.stdout, "Logical_Router               1 deleted")
	assert.Empty(t, filesOwned(t, c), "every row of ours deleted")
	r = kubevirtOVN(t, "sync", "--nb", c.NBTCP, "--from-file", empty)
	assert.Equal(t, 0, r.code, "nothing owned: nothing to refuse")
	assert.Equal(t, "no changes\n", r.stdout)
}

func TestFilesRunEmptyInputNeedsAllowEmpty(t *testing.T) {
	c := filesCentral(t)
	ex := examples(t)
	require.Equal(t, 0, kubevirtOVN(t, "sync", "--nb", c.NBTCP, "--from-file", ex).code)
	before := filesOwned(t, c)
	empty := filesNotesOnly(t)

	// At start: refused.
	r := filesRunExits(t, "--nb", c.NBTCP, "--from-file", empty)
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, "kubevirt-ovn run: the manifests in "+empty+" "+filesRefusal)
	assert.Equal(t, before, filesOwned(t, c), "nothing deleted")

	// On change: ignored, with the reason in the log; files back: applied.
	p := filesStartRun(t, c, ex)
	waitNB(t, "the controller started", func() bool { return strings.Contains(p.out.String(), "controller started") })
	for _, f := range []string{"networks.yaml", "router.yaml", "vmis.yaml"} {
		require.NoError(t, os.Rename(filepath.Join(ex, f), filepath.Join(empty, f+".bak")))
	}
	const ignored = "manifests changed and declare no router and no network; keeping the last good input"
	waitNB(t, "the empty input ignored (or rows deleted)", func() bool {
		return strings.Contains(p.out.String(), ignored) || filesOwned(t, c) != before
	})
	assert.Equal(t, before, filesOwned(t, c), "nothing deleted")
	for _, f := range []string{"networks.yaml", "router.yaml", "vmis.yaml"} {
		require.NoError(t, os.Rename(filepath.Join(empty, f+".bak"), filepath.Join(ex, f)))
	}
	edit(t, filepath.Join(ex, "router.yaml"), "ip: 172.16.0.100", "ip: 172.16.0.103")
	waitNB(t, "the files back are applied", func() bool { return natIPs(t, c, "router1") == "172.16.0.103 172.16.0.103" })
	p.stop()

	// With --allow-empty, on change: every row of ours goes.
	p = filesStartRun(t, c, ex, "--allow-empty")
	waitNB(t, "the controller started", func() bool { return strings.Contains(p.out.String(), "controller started") })
	for _, f := range []string{"networks.yaml", "router.yaml", "vmis.yaml"} {
		require.NoError(t, os.Remove(filepath.Join(ex, f)))
	}
	waitNB(t, "every row of ours deleted", func() bool { return filesOwned(t, c) == "" })
	p.stop()

	// With --allow-empty, at start: every row of ours goes.
	require.Equal(t, 0, kubevirtOVN(t, "sync", "--nb", c.NBTCP, "--from-file", filepath.Join("..", "deploy", "examples")).code)
	require.NotEmpty(t, filesOwned(t, c))
	p = filesStartRun(t, c, empty, "--allow-empty")
	waitNB(t, "every row of ours deleted", func() bool { return filesOwned(t, c) == "" })
}
