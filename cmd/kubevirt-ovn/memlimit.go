package main

import (
	"bufio"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
)

// memoryShare is the part of its container's memory limit the Go heap is
// held to (debug.SetMemoryLimit) when GOMEMLIMIT is not set: the rest is
// for what is not heap (goroutine stacks, the runtime's own, pages the
// kernel counts before the GC returns them). A GOMEMLIMIT of the whole
// limit, as a resourceFieldRef gives it, leaves none of that room.
const memoryShare = 0.9

// applyContainerMemoryLimit holds the Go heap to memoryShare of the
// process's cgroup memory limit, unless GOMEMLIMIT says otherwise or there
// is no limit.
func applyContainerMemoryLimit() {
	if os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	if limit := cgroupMemoryLimit("/proc/self/cgroup", "/sys/fs/cgroup"); limit > 0 {
		debug.SetMemoryLimit(int64(float64(limit) * memoryShare))
	}
}

// cgroupMemoryLimit is the memory limit of the process's cgroup, as
// procCgroup (/proc/self/cgroup) names it under the cgroup file system
// mounted at root: the smallest limit of the cgroup and its ancestors
// (a pod's limit applies to its containers). cgroup v2 (memory.max) and
// v1 (memory/memory.limit_in_bytes); 0 when there is none or it cannot be
// read. In a container with its own cgroup namespace the path is "/";
// without one it is the host's, which the container's mount may not
// have: the paths that do not exist are skipped.
func cgroupMemoryLimit(procCgroup, root string) int64 {
	f, err := os.Open(procCgroup)
	if err != nil {
		return 0
	}
	defer f.Close()
	var dir, file string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// hierarchy-ID:controller-list:cgroup-path
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		switch {
		case parts[0] == "0" && parts[1] == "":
			if file == "" { // v1's memory controller wins in a hybrid layout
				dir, file = filepath.Join(root, parts[2]), "memory.max"
			}
		case slices.Contains(strings.Split(parts[1], ","), "memory"):
			dir, file = filepath.Join(root, "memory", parts[2]), "memory.limit_in_bytes"
		}
	}
	if file == "" {
		return 0
	}
	base := filepath.Clean(root)
	if file == "memory.limit_in_bytes" {
		base = filepath.Join(root, "memory")
	}
	var limit int64
	for {
		if v, ok := readLimit(filepath.Join(dir, file)); ok && (limit == 0 || v < limit) {
			limit = v
		}
		if dir == base || !strings.HasPrefix(dir, base) {
			return limit
		}
		dir = filepath.Dir(dir)
	}
}

// readLimit reads a cgroup memory limit file: false for "max", an
// unlimited v1 value (the largest page-aligned int64) or no file.
func readLimit(path string) (int64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || v <= 0 || v >= 1<<62 {
		return 0, false
	}
	return v, true
}
