package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The container's memory limit is found in the layouts a kubelet gives:
// cgroup v2 with and without a cgroup namespace (a pod's limit above the
// container's counts), v1, and none.
func TestCgroupMemoryLimit(t *testing.T) {
	write := func(t *testing.T, path, content string) {
		t.Helper()
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
	}
	for _, tc := range []struct {
		name   string
		cgroup string
		files  map[string]string
		want   int64
	}{
		{name: "v2 in its own namespace", cgroup: "0::/\n",
			files: map[string]string{"memory.max": "536870912\n"}, want: 512 << 20},
		{name: "v2 without a limit", cgroup: "0::/\n",
			files: map[string]string{"memory.max": "max\n"}, want: 0},
		{name: "v2 host path, the pod's limit below the container's", cgroup: "0::/kubepods/pod1/ctr\n",
			files: map[string]string{
				"kubepods/pod1/ctr/memory.max": "max\n",
				"kubepods/pod1/memory.max":     "1073741824\n",
				"kubepods/memory.max":          "max\n",
			}, want: 1 << 30},
		{name: "v2 host path the container's mount does not have", cgroup: "0::/kubepods/pod1/ctr\n",
			files: map[string]string{"memory.max": "2147483648\n"}, want: 2 << 30},
		{name: "v1", cgroup: "12:cpu,cpuacct:/kubepods/pod1/ctr\n5:memory:/kubepods/pod1/ctr\n0::/\n",
			files: map[string]string{
				"memory/kubepods/pod1/ctr/memory.limit_in_bytes": "268435456\n",
				"memory/memory.limit_in_bytes":                   "9223372036854771712\n",
			}, want: 256 << 20},
		{name: "v1 unlimited", cgroup: "5:memory:/\n",
			files: map[string]string{"memory/memory.limit_in_bytes": "9223372036854771712\n"}, want: 0},
		{name: "no cgroup", cgroup: "", want: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			root := filepath.Join(dir, "sys/fs/cgroup")
			require.NoError(t, os.MkdirAll(root, 0o755))
			for p, c := range tc.files {
				write(t, filepath.Join(root, p), c)
			}
			proc := filepath.Join(dir, "cgroup")
			write(t, proc, tc.cgroup)
			assert.Equal(t, tc.want, cgroupMemoryLimit(proc, root))
		})
	}
}
