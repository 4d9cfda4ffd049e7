package controller

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/fsnotify/fsnotify"
	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func filesRouter(name, ip string) string {
	return "apiVersion: kubevirt.io/v1\nkind: VirtualRouter\nmetadata:\n  name: " + name +
		"\nspec:\n  external:\n    ip: " + ip + "\n    network: public\n"
}

// filesLog collects a FileSource's log lines.
type filesLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *filesLog) logger() logr.Logger {
	return funcr.New(func(prefix, args string) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.lines = append(l.lines, args)
	}, funcr.Options{Verbosity: 2})
}

func (l *filesLog) count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, line := range l.lines {
		if strings.Contains(line, s) {
			n++
		}
	}
	return n
}

func routerIPs(t *testing.T, f *FileSource) []string {
	t.Helper()
	var ips []string
	for _, r := range f.Input().Routers() {
		ip := ""
		if r.External != nil {
			ip = r.External.IP
		}
		ips = append(ips, r.Name+"="+ip)
	}
	return ips
}

func newFiles(t *testing.T, content string, opts FileOptions) (*FileSource, string, *filesLog) {
	t.Helper()
	dir := t.TempDir()
	file := filepath.Join(dir, "router.yaml")
	require.NoError(t, os.WriteFile(file, []byte(content), 0o644))
	log := &filesLog{}
	f, err := NewFileSource([]string{dir}, log.logger(), opts)
	require.NoError(t, err)
	return f, file, log
}

// A change is applied on the poll after the one that saw it, once it is
// stable.
func TestFileSource_SettlesForOnePoll(t *testing.T) {
	f, file, _ := newFiles(t, filesRouter("r1", "172.16.0.100"), FileOptions{})
	assert.False(t, f.poll(), "nothing changed")

	require.NoError(t, os.WriteFile(file, []byte(filesRouter("r1", "172.16.0.101")), 0o644))
	assert.False(t, f.poll(), "seen changed: waits one poll")
	assert.Equal(t, []string{"r1=172.16.0.100"}, routerIPs(t, f))
	assert.True(t, f.poll(), "stable: applied")
	assert.Equal(t, []string{"r1=172.16.0.101"}, routerIPs(t, f))
	assert.False(t, f.poll())
}

// `cat > file` with a pause: the half-written file is never read, whatever
// the number of polls; the last good input stays until the writer is done.
func TestFileSource_WaitsForTheWriter(t *testing.T) {
	content := filesRouter("r1", "172.16.0.100")
	f, file, log := newFiles(t, content, FileOptions{})
	w, err := os.OpenFile(file, os.O_WRONLY|os.O_TRUNC, 0)
	require.NoError(t, err)
	defer w.Close()
	half := strings.Index(content, "spec:")
	_, err = w.WriteString(content[:half])
	require.NoError(t, err)
	for i := 0; i < 5; i++ {
		assert.False(t, f.poll(), "poll %d", i)
		assert.Equal(t, []string{"r1=172.16.0.100"}, routerIPs(t, f), "poll %d", i)
	}
	assert.Equal(t, 4, log.count("manifests are being written"))

	_, err = w.WriteString(strings.Replace(content[half:], "100", "102", 1))
	require.NoError(t, err)
	require.NoError(t, w.Close())
	assert.False(t, f.poll(), "changed since the last poll")
	assert.True(t, f.poll())
	assert.Equal(t, []string{"r1=172.16.0.102"}, routerIPs(t, f))
}

func TestFileSource_BrokenChangeKeepsTheLastGoodInput(t *testing.T) {
	f, file, log := newFiles(t, filesRouter("r1", "172.16.0.100"), FileOptions{})
	require.NoError(t, os.WriteFile(file, []byte("kind: [unclosed\n"), 0o644))
	for i := 0; i < 4; i++ {
		assert.False(t, f.poll())
	}
	assert.Equal(t, []string{"r1=172.16.0.100"}, routerIPs(t, f))
	assert.Equal(t, 1, log.count("do not parse"), "reported once")
}

// An input that reads as empty deletes nothing unless allowed.
func TestFileSource_Empty(t *testing.T) {
	owned := func(n int) func() (int, error) { return func() (int, error) { return n, nil } }
	notes := "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: x\n"

	t.Run("refused at start while units own rows", func(t *testing.T) {
		dir := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(dir, "x.yaml"), []byte(notes), 0o644))
		_, err := NewFileSource([]string{dir}, logr.Discard(), FileOptions{Owned: owned(4)})
		require.Error(t, err)
		assert.Equal(t, "the manifests in "+dir+" declare no router and no network, but 4 routers and networks own rows in the NB: refusing to delete them all without --allow-empty", err.Error())

		_, err = NewFileSource([]string{dir}, logr.Discard(), FileOptions{Owned: owned(0)})
		assert.NoError(t, err, "nothing to delete")
		_, err = NewFileSource([]string{dir}, logr.Discard(), FileOptions{Owned: owned(4), AllowEmpty: true})
		assert.NoError(t, err)
	})
	t.Run("ignored on change", func(t *testing.T) {
		n := 2
		f, file, log := newFiles(t, filesRouter("r1", "172.16.0.100"), FileOptions{Owned: func() (int, error) { return n, nil }})
		require.NoError(t, os.WriteFile(file, []byte(notes), 0o644))
		for i := 0; i < 3; i++ {
			assert.False(t, f.poll())
		}
		assert.Equal(t, []string{"r1=172.16.0.100"}, routerIPs(t, f))
		assert.Equal(t, 1, log.count("declare no router and no network; keeping the last good input"))
		assert.Equal(t, 1, log.count(`"ownedUnits"=2`))

		// Even when the NB holds nothing yet: the last input was not empty.
		n = 0
		require.NoError(t, os.Remove(file))
		assert.False(t, f.poll())
		assert.False(t, f.poll())
		assert.Equal(t, []string{"r1=172.16.0.100"}, routerIPs(t, f))

		// Files back: applied.
		require.NoError(t, os.WriteFile(file, []byte(filesRouter("r1", "172.16.0.104")), 0o644))
		assert.False(t, f.poll())
		assert.True(t, f.poll())
		assert.Equal(t, []string{"r1=172.16.0.104"}, routerIPs(t, f))
	})
	t.Run("applied with AllowEmpty", func(t *testing.T) {
		f, file, _ := newFiles(t, filesRouter("r1", "172.16.0.100"), FileOptions{Owned: owned(2), AllowEmpty: true})
		require.NoError(t, os.Remove(file))
		assert.False(t, f.poll())
		assert.True(t, f.poll())
		assert.Empty(t, routerIPs(t, f))
	})
}

// A directory reached through a symlink, and a ConfigMap-like layout, are
// fingerprinted through their links: swapping ..data is a change.
func TestFileSource_FollowsDataLinkSwap(t *testing.T) {
	dir := t.TempDir()
	for _, ts := range []string{"..2026_11_30_12_00_00.1", "..2026_11_30_12_00_01.2"} {
		require.NoError(t, os.Mkdir(filepath.Join(dir, ts), 0o755))
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "..2026_11_30_12_00_00.1", "router.yaml"), []byte(filesRouter("r1", "172.16.0.100")), 0o644))
	require.NoError(t, os.Symlink("..2026_11_30_12_00_00.1", filepath.Join(dir, "..data")))
	require.NoError(t, os.Symlink("..data/router.yaml", filepath.Join(dir, "router.yaml")))
	link := filepath.Join(t.TempDir(), "manifests")
	require.NoError(t, os.Symlink(dir, link))

	f, err := NewFileSource([]string{link}, logr.Discard(), FileOptions{})
	require.NoError(t, err)
	assert.Equal(t, []string{"r1=172.16.0.100"}, routerIPs(t, f))

	require.NoError(t, os.WriteFile(filepath.Join(dir, "..2026_11_30_12_00_01.2", "router.yaml"), []byte(filesRouter("r1", "172.16.0.105")), 0o644))
	require.NoError(t, os.Symlink("..2026_11_30_12_00_01.2", filepath.Join(dir, "..data_tmp")))
	require.NoError(t, os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")))
	assert.False(t, f.poll())
	assert.True(t, f.poll())
	assert.Equal(t, []string{"r1=172.16.0.105"}, routerIPs(t, f))
}

// A file added and removed again, each read alone from its event, while
// the periodic full read of the listing falls between the removal and its
// settling: the removal is applied. (The full read compared the listing
// with the one it had last read itself, from before the file was added,
// found them equal and dropped the pending removal: the file's objects
// stayed in the input for good.)
func TestFileSource_FullReadDoesNotDropAnEventsRemoval(t *testing.T) {
	f, file, _ := newFiles(t, filesRouter("r1", "172.16.0.100"), FileOptions{})
	w, err := fsnotify.NewWatcher()
	require.NoError(t, err)
	t.Cleanup(func() { _ = w.Close() })
	extra := filepath.Join(filepath.Dir(file), "extra.yaml")

	require.NoError(t, os.WriteFile(extra, []byte(filesRouter("r2", "172.16.0.102")), 0o644))
	f.noteEvent(fsnotify.Event{Name: extra, Op: fsnotify.Create})
	assert.True(t, f.settle(w), "the new file is read alone")
	routers, _ := f.Input().Counts()
	require.Equal(t, 2, routers, "r1 and r2")

	require.NoError(t, os.Remove(extra))
	f.noteEvent(fsnotify.Event{Name: extra, Op: fsnotify.Remove})
	f.fullPending = true // the 60th interval
	for range 3 {
		f.settle(w)
	}
	routers, _ = f.Input().Counts()
	assert.Equal(t, 1, routers, "extra.yaml's r2 is gone")
}
