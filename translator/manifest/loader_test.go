package manifest

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// countDecodes records the files Loaders decode until the test ends.
func countDecodes(t *testing.T) *[]string {
	t.Helper()
	var decoded []string
	decodeHook = func(path string) { decoded = append(decoded, filepath.Base(path)) }
	t.Cleanup(func() { decodeHook = nil })
	return &decoded
}

// requireSameAsLoadPaths checks that a Loader's aggregate is what
// LoadPaths reads from the same files.
func requireSameAsLoadPaths(t *testing.T, paths []string, got *Set) {
	t.Helper()
	want, err := LoadPaths(paths)
	require.NoError(t, err)
	require.Equal(t, want.Objects, got.Objects)
	require.Equal(t, want.Notes, got.Notes)
}

type change struct {
	path     string
	old, new bool
}

func changesOf(cs []FileChange) []change {
	var out []change
	for _, c := range cs {
		out = append(out, change{filepath.Base(c.Path), c.Old != nil, c.New != nil})
	}
	return out
}

func TestLoader_ReDecodesOnlyChangedFiles(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "a.yaml", routerYAML)
	writeFile(t, dir, "b.yaml", nadAYAML+"---\n"+nadPublicYAML)
	writeFile(t, dir, "c.json", vmiJSON)
	paths := []string{dir}
	decoded := countDecodes(t)
	l := NewLoader()

	s, cs, err := l.Load(paths)
	require.NoError(t, err)
	assert.Equal(t, []string{"a.yaml", "b.yaml", "c.json"}, *decoded)
	assert.Equal(t, []change{{"a.yaml", false, true}, {"b.yaml", false, true}, {"c.json", false, true}}, changesOf(cs))
	assert.Equal(t, wantFullObjects(), s.Objects)
	requireSameAsLoadPaths(t, paths, s)
	first := map[string]*FileObjects{}
	for _, c := range cs {
		first[filepath.Base(c.Path)] = c.New
	}
	require.Len(t, first["a.yaml"].Objects.Routers, 1)
	assert.Empty(t, first["a.yaml"].Objects.Networks)
	assert.Len(t, first["b.yaml"].Objects.Networks, 2)
	assert.Len(t, first["c.json"].Objects.VMs, 1)

	// Nothing changed: nothing read, nothing reported.
	*decoded = nil
	s, cs, err = l.Load(paths)
	require.NoError(t, err)
	assert.Empty(t, *decoded)
	assert.Empty(t, cs)
	assert.Equal(t, wantFullObjects(), s.Objects)

	// One file changed: it alone is decoded; the change carries the
	// objects before and after.
	*decoded = nil
	writeFile(t, dir, "b.yaml", nadAYAML)
	s, cs, err = l.Load(paths)
	require.NoError(t, err)
	assert.Equal(t, []string{"b.yaml"}, *decoded)
	require.Equal(t, []change{{"b.yaml", true, true}}, changesOf(cs))
	assert.Same(t, first["b.yaml"], cs[0].Old)
	assert.Len(t, cs[0].New.Objects.Networks, 1)
	assert.Same(t, first["a.yaml"], l.files[filepath.Join(dir, "a.yaml")].objects, "unchanged files keep their objects")
	assert.Same(t, first["c.json"], l.files[filepath.Join(dir, "c.json")].objects)
	requireSameAsLoadPaths(t, paths, s)

	// A file replaced by one with the same content, size and time (a new
	// inode) is read again but is not a change.
	*decoded = nil
	a := filepath.Join(dir, "a.yaml")
	st, err := os.Stat(a)
	require.NoError(t, err)
	tmp := writeFile(t, dir, ".a.yaml.tmp", routerYAML)
	require.NoError(t, os.Chtimes(tmp, st.ModTime(), st.ModTime()))
	require.NoError(t, os.Rename(tmp, a))
	_, cs, err = l.Load(paths)
	require.NoError(t, err)
	assert.Equal(t, []string{"a.yaml"}, *decoded)
	assert.Empty(t, cs)
	assert.Same(t, first["a.yaml"], l.files[a].objects)

	// A file removed and one added.
	*decoded = nil
	require.NoError(t, os.Remove(filepath.Join(dir, "c.json")))
	writeFile(t, dir, "d.yaml", vmiYAML)
	s, cs, err = l.Load(paths)
	require.NoError(t, err)
	assert.Equal(t, []string{"d.yaml"}, *decoded)
	require.Equal(t, []change{{"d.yaml", false, true}, {"c.json", true, false}}, changesOf(cs))
	assert.Same(t, first["c.json"], cs[1].Old)
	requireSameAsLoadPaths(t, paths, s)
}

// A failed Load leaves the Loader as it was: the next Load reports the
// changes since the last successful one, with the same errors LoadPaths
// gives.
func TestLoader_FailedLoadChangesNothing(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "a.yaml", routerYAML)
	b := writeFile(t, dir, "b.yaml", nadAYAML)
	paths := []string{dir}
	l := NewLoader()
	_, cs, err := l.Load(paths)
	require.NoError(t, err)
	oldB := cs[1].New

	writeFile(t, dir, "b.yaml", nadAYAML+"---\nkind: [unclosed\n")
	s, cs, err := l.Load(paths)
	require.Error(t, err)
	assert.Nil(t, s)
	assert.Nil(t, cs)
	_, lerr := LoadPaths(paths)
	assert.Equal(t, lerr.Error(), err.Error())
	assert.Contains(t, err.Error(), b+": document 2")

	// Being written: ErrIncomplete, as LoadPaths says it.
	w, err := os.OpenFile(b, os.O_WRONLY|os.O_TRUNC, 0)
	require.NoError(t, err)
	defer w.Close()
	_, err = w.WriteString(nadPublicYAML)
	require.NoError(t, err)
	_, _, err = l.Load(paths)
	assert.ErrorIs(t, err, ErrIncomplete)
	_, lerr = LoadPaths(paths)
	assert.Equal(t, lerr.Error(), err.Error())
	require.NoError(t, w.Close())

	s, cs, err = l.Load(paths)
	require.NoError(t, err)
	require.Equal(t, []change{{"b.yaml", true, true}}, changesOf(cs))
	assert.Same(t, oldB, cs[0].Old, "compared with the last successful Load")
	assert.Equal(t, "public", cs[0].New.Objects.Networks[0].Name)
	requireSameAsLoadPaths(t, paths, s)

	// A file that vanished fails the listing, as it does LoadPaths'.
	require.NoError(t, os.Symlink("/nonexistent/c.yaml", filepath.Join(dir, "c.yaml")))
	_, _, err = l.Load(paths)
	require.Error(t, err)
	_, lerr = LoadPaths(paths)
	assert.Equal(t, lerr.Error(), err.Error())
}

// Files that are not read are not checked: an unchanged file held open for
// writing does not stop a Load, as it does LoadPaths.
func TestLoader_UnchangedFilesAreNotRead(t *testing.T) {
	dir := t.TempDir()
	a := writeFile(t, dir, "a.yaml", routerYAML)
	l := NewLoader()
	_, _, err := l.Load([]string{dir})
	require.NoError(t, err)
	w, err := os.OpenFile(a, os.O_WRONLY, 0)
	require.NoError(t, err)
	defer w.Close()
	_, err = LoadPaths([]string{dir})
	require.ErrorIs(t, err, ErrIncomplete)
	s, cs, err := l.Load([]string{dir})
	require.NoError(t, err)
	assert.Empty(t, cs)
	assert.Equal(t, []string{"router1"}, routerNames(s))
}

// The aggregate is what LoadPaths reads, whatever the files hold: objects
// of every kind and format, notes, and invalid routers whose later entry
// wins across files.
func TestLoader_AggregateEqualsLoadPaths(t *testing.T) {
	dir := t.TempDir()
	invalid := func(spec string) string {
		return "apiVersion: kubevirt.io/v1\nkind: VirtualRouter\nmetadata: {name: twice}\nspec: {name: " + spec + "}\n"
	}
	writeFile(t, dir, "a.yaml", invalid("one")+"---\n"+routerYAML+"---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\n")
	writeFile(t, dir, "b/list.yaml", "apiVersion: v1\nkind: List\nitems:\n"+yamlListItem(nadAYAML)+yamlListItem(nadPublicYAML))
	writeFile(t, dir, "c.json", vmiJSON)
	writeFile(t, dir, "d.yaml", invalid("two")+"---\n"+namedRouter("other"))
	// The general path's share: anchors and a block scalar.
	writeFile(t, dir, "e.yaml", "apiVersion: kubevirt.io/v1\nkind: VirtualRouter\nmetadata: &m\n  name: anchored\nspec:\n  description: |\n    two\n    lines\n")
	writeFile(t, dir, "f.yaml", string(genManifest(20)))
	paths := []string{dir, filepath.Join(dir, "c.json")}

	l := NewLoader()
	s, cs, err := l.Load(paths)
	require.NoError(t, err)
	assert.Len(t, cs, 6)
	requireSameAsLoadPaths(t, paths, s)
	require.Len(t, s.Objects.Invalid, 1)
	for _, err := range s.Objects.Invalid {
		assert.Contains(t, err.Error(), "spec.name two")
	}
	assert.Len(t, s.Notes, 1)

	writeFile(t, dir, "d.yaml", namedRouter("other"))
	writeFile(t, dir, "f.yaml", string(genManifest(21)))
	s, cs, err = l.Load(paths)
	require.NoError(t, err)
	assert.Len(t, cs, 2)
	requireSameAsLoadPaths(t, paths, s)
	for _, err := range s.Objects.Invalid {
		assert.Contains(t, err.Error(), "spec.name one")
	}
}

// A pipe has no fingerprint: it is read on every Load.
func TestLoader_Pipe(t *testing.T) {
	l := NewLoader()
	for i := range 2 {
		r, w, err := os.Pipe()
		require.NoError(t, err)
		go func() {
			_, _ = w.WriteString(namedRouter(strings.Repeat("r", i+1)))
			w.Close()
		}()
		s, cs, err := l.Load([]string{"/proc/self/fd/" + strconv.Itoa(int(r.Fd()))})
		r.Close()
		require.NoError(t, err)
		assert.Equal(t, []string{strings.Repeat("r", i+1)}, routerNames(s))
		require.NotEmpty(t, cs)
		assert.Equal(t, s.Objects.Routers, cs[0].New.Objects.Routers, "read again")
	}
}
