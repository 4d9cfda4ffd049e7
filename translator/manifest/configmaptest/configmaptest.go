// Package configmaptest lays out directories the way kubelet mounts a
// ConfigMap volume, for tests of the file source.
package configmaptest

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Write projects payload (file name -> content) into dir the way
// kubelet's atomic writer (pkg/volume/util/atomic_writer.go) does for a
// ConfigMap volume: the files in a new ..<timestamp>.<random> directory,
// user-visible links name -> ..data/name for new keys, a ..data_tmp link to
// the new directory renamed over ..data, then the links of removed keys and
// the previous directory removed. between, when set, runs before the rename.
func Write(t testing.TB, dir string, payload map[string]string, between func()) {
	t.Helper()
	data := filepath.Join(dir, "..data")
	old, err := os.Readlink(data)
	if err != nil && !os.IsNotExist(err) {
		require.NoError(t, err)
	}
	ts, err := os.MkdirTemp(dir, time.Now().UTC().Format("..2006_01_02_15_04_05."))
	require.NoError(t, err)
	require.NoError(t, os.Chmod(ts, 0o755))
	for name, content := range payload {
		require.NoError(t, os.WriteFile(filepath.Join(ts, name), []byte(content), 0o644))
	}
	for name := range payload {
		if _, err := os.Readlink(filepath.Join(dir, name)); os.IsNotExist(err) {
			require.NoError(t, os.Symlink(filepath.Join("..data", name), filepath.Join(dir, name)))
		}
	}
	require.NoError(t, os.Symlink(filepath.Base(ts), filepath.Join(dir, "..data_tmp")))
	if between != nil {
		between()
	}
	require.NoError(t, os.Rename(filepath.Join(dir, "..data_tmp"), data))
	if old == "" {
		return
	}
	entries, err := os.ReadDir(filepath.Join(dir, old))
	require.NoError(t, err)
	for _, e := range entries {
		if _, ok := payload[e.Name()]; !ok {
			require.NoError(t, os.Remove(filepath.Join(dir, e.Name())))
		}
	}
	require.NoError(t, os.RemoveAll(filepath.Join(dir, old)))
}
