package manifest

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubevirt-ovn/kubevirt-ovn/translator/manifest/configmaptest"
)

func TestFiles_FollowsSymlinks(t *testing.T) {
	root := t.TempDir()
	real := filepath.Join(root, "real")
	writeFile(t, real, "a.yaml", namedRouter("ra"))
	writeFile(t, real, "sub/b.yaml", namedRouter("rb"))
	writeFile(t, root, "elsewhere/c.yaml", namedRouter("rc"))
	writeFile(t, root, "elsewhere/nets/d.yaml", namedRouter("rd"))

	// A symlinked root: how a mounted or versioned directory is often named.
	link := filepath.Join(root, "current")
	require.NoError(t, os.Symlink("real", link))
	s, err := LoadPaths([]string{link})
	require.NoError(t, err)
	assert.Equal(t, []string{"ra", "rb"}, routerNames(s))

	// Symlinked entries: a file, a directory, and cycles back to the root.
	require.NoError(t, os.Symlink(filepath.Join(root, "elsewhere", "c.yaml"), filepath.Join(real, "c.yaml")))
	require.NoError(t, os.Symlink("../elsewhere/nets", filepath.Join(real, "nets")))
	require.NoError(t, os.Symlink("..", filepath.Join(real, "sub", "up")))
	require.NoError(t, os.Symlink(".", filepath.Join(real, "self")))
	s, err = LoadPaths([]string{link})
	require.NoError(t, err)
	assert.Equal(t, []string{"ra", "rc", "rd", "rb"}, routerNames(s), "each object once, cycles cut")

	// The same files named twice, or through two links: read once.
	s, err = LoadPaths([]string{link, real, filepath.Join(real, "a.yaml"), filepath.Join(root, "elsewhere")})
	require.NoError(t, err)
	assert.Equal(t, []string{"ra", "rc", "rd", "rb"}, routerNames(s))
}

func TestFiles_DanglingLinks(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "a.yaml", namedRouter("ra"))
	require.NoError(t, os.Symlink("gone.txt", filepath.Join(dir, "notes.txt")))
	s, err := LoadPaths([]string{dir})
	require.NoError(t, err, "a dangling link that is not a manifest is not read")
	assert.Equal(t, []string{"ra"}, routerNames(s))

	// A manifest that vanished fails the load: its routers would look
	// deleted.
	require.NoError(t, os.Symlink("/nonexistent/b.yaml", filepath.Join(dir, "b.yaml")))
	_, err = LoadPaths([]string{dir})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "b.yaml")
}

func TestFiles_ConfigMapVolume(t *testing.T) {
	dir := t.TempDir()
	configmaptest.Write(t, dir, map[string]string{"router.yaml": routerYAML, "networks.yaml": nadAYAML + "---\n" + nadPublicYAML}, nil)
	// An editor's swap file is not a manifest either.
	writeFile(t, dir, ".router.yaml.swp", "key: [unclosed\n")

	files, err := Files([]string{dir})
	require.NoError(t, err)
	assert.Equal(t, []string{filepath.Join(dir, "networks.yaml"), filepath.Join(dir, "router.yaml")}, files)
	s, err := LoadPaths([]string{dir})
	require.NoError(t, err)
	assert.Equal(t, []string{"router1"}, routerNames(s))
	require.Len(t, s.Objects.Networks, 2, "each network once")

	// An update the kubelet way, adding a key and removing one, seen at
	// every step: the old content until ..data is swapped, the new after.
	update := map[string]string{"router.yaml": namedRouter("router2"), "vmis.yaml": vmiYAML}
	configmaptest.Write(t, dir, update, func() {
		s, err := LoadPaths([]string{dir})
		require.NoError(t, err, "a new key's link dangles until ..data is swapped")
		assert.Equal(t, []string{"router1"}, routerNames(s))
		assert.Len(t, s.Objects.Networks, 2)
	})
	s, err = LoadPaths([]string{dir})
	require.NoError(t, err)
	assert.Equal(t, []string{"router2"}, routerNames(s))
	assert.Empty(t, s.Objects.Networks)
	assert.Len(t, s.Objects.VMs, 1)
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	assert.Len(t, names, 5, "..<ts>, ..data, .router.yaml.swp, router.yaml, vmis.yaml: %v", names)
}

func TestLoadPaths_FileBeingWritten(t *testing.T) {
	dir := t.TempDir()
	p := writeFile(t, dir, "router.yaml", routerYAML)
	// As `cat > router.yaml` does: truncated, half written, still open.
	w, err := os.OpenFile(p, os.O_WRONLY|os.O_TRUNC, 0)
	require.NoError(t, err)
	half := strings.Index(routerYAML, "  external:")
	_, err = w.WriteString(routerYAML[:half])
	require.NoError(t, err)

	_, err = LoadPaths([]string{dir})
	require.Error(t, err)
	assert.True(t, errors.Is(err, ErrIncomplete), "%v", err)
	assert.Equal(t, "manifest "+p+" is being written (open for writing by another process)", err.Error())

	_, err = w.WriteString(routerYAML[half:])
	require.NoError(t, err)
	require.NoError(t, w.Close())
	s, err := LoadPaths([]string{dir})
	require.NoError(t, err)
	require.Len(t, s.Objects.Routers, 1)
	assert.NotNil(t, s.Objects.Routers[0].External, "the whole file")
}

// A file that changed while it was read is read again; one that keeps
// changing is not read.
func TestLoadPaths_FileChangedWhileRead(t *testing.T) {
	dir := t.TempDir()
	p := writeFile(t, dir, "router.yaml", namedRouter("r1"))
	t.Cleanup(func() { afterRead = nil })
	reads := 0
	afterRead = func(string) {
		reads++
		if reads == 1 {
			// A writer appends a second router during the first read.
			f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
			require.NoError(t, err)
			_, err = f.WriteString("---\n" + namedRouter("r2"))
			require.NoError(t, err)
			require.NoError(t, f.Close())
		}
	}
	s, err := LoadPaths([]string{dir})
	require.NoError(t, err)
	assert.Equal(t, 2, reads)
	assert.Equal(t, []string{"r1", "r2"}, routerNames(s), "the second, complete read")

	afterRead = func(string) {
		reads++
		// A different size each time: a same-size rewrite within one tick
		// of the file system clock is invisible to stat.
		require.NoError(t, os.WriteFile(p, []byte(namedRouter(strings.Repeat("r", reads))), 0o644))
	}
	_, err = LoadPaths([]string{dir})
	require.Error(t, err)
	assert.ErrorIs(t, err, ErrIncomplete)
	assert.Equal(t, "manifest "+p+" is being written: it changed while it was read, 3 times", err.Error())
}

// A file that is not a regular file (a pipe, as `--from-file <(cmd)` gives)
// is read as it comes.
func TestLoadPaths_Pipe(t *testing.T) {
	r, w, err := os.Pipe()
	require.NoError(t, err)
	defer r.Close()
	go func() {
		_, _ = w.WriteString(routerYAML)
		w.Close()
	}()
	s, err := LoadPaths([]string{"/proc/self/fd/" + strconv.Itoa(int(r.Fd()))})
	require.NoError(t, err)
	assert.Equal(t, []string{"router1"}, routerNames(s))
}

func TestSetEmpty(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "other.yaml", "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: x\n")
	s, err := LoadPaths([]string{dir})
	require.NoError(t, err)
	assert.True(t, s.Empty(), "notes only")
	writeFile(t, dir, "vmi.yaml", vmiYAML)
	s, err = LoadPaths([]string{dir})
	require.NoError(t, err)
	assert.True(t, s.Empty(), "VMs without networks or routers write nothing")
	writeFile(t, dir, "nad.yaml", nadAYAML)
	s, err = LoadPaths([]string{dir})
	require.NoError(t, err)
	assert.False(t, s.Empty())
}
