package controller

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"

	"github.com/kubevirt-ovn/kubevirt-ovn/translator"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/manifest"
)

// FileSource is manifests on disk, re-read when they change. A change that
// does not parse is reported and ignored: the last good input stays, so a
// half-written file deletes nothing.
type FileSource struct {
	paths []string
	log   logr.Logger

	mu     sync.Mutex
	snap   *translator.Snapshot
	digest string
}

// NewFileSource reads paths once; it fails when they do not parse.
func NewFileSource(paths []string, log logr.Logger) (*FileSource, error) {
	f := &FileSource{paths: paths, log: log}
	if _, err := f.reload(); err != nil {
		return nil, err
	}
	return f, nil
}

// Snapshot is the last good input.
func (f *FileSource) Snapshot() (*translator.Snapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	cp := *f.snap
	return &cp, nil
}

// HasSynced is true: the files were read by NewFileSource.
func (f *FileSource) HasSynced() bool { return true }

// Watch polls the files every interval and calls changed after a reload
// that parsed, until ctx ends.
func (f *FileSource) Watch(ctx context.Context, interval time.Duration, changed func()) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			ok, err := f.reload()
			if err != nil {
				f.log.Info("manifests changed but do not parse; keeping the last good input", "error", err.Error())
				continue
			}
			if ok {
				f.log.Info("manifests changed; reconciling")
				changed()
			}
		}
	}
}

// reload re-reads the manifests when their names, sizes or modification
// times changed; it reports whether it loaded anything new.
func (f *FileSource) reload() (bool, error) {
	digest, err := fingerprint(f.paths)
	if err != nil {
		return false, err
	}
	f.mu.Lock()
	same := digest == f.digest
	f.mu.Unlock()
	if same {
		return false, nil
	}
	set, err := manifest.LoadPaths(f.paths)
	if err != nil {
		return false, err
	}
	for _, n := range set.Notes {
		f.log.V(1).Info("note", "note", n)
	}
	f.mu.Lock()
	f.snap, f.digest = &set.Snapshot, digest
	f.mu.Unlock()
	return true, nil
}

func fingerprint(paths []string) (string, error) {
	var lines []string
	for _, p := range paths {
		err := filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				return nil
			}
			st, err := os.Stat(path)
			if err != nil {
				return err
			}
			lines = append(lines, fmt.Sprintf("%s %d %d", path, st.Size(), st.ModTime().UnixNano()))
			return nil
		})
		if err != nil {
			return "", err
		}
	}
	sort.Strings(lines)
	sum := sha256.Sum256([]byte(strings.Join(lines, "\n")))
	return fmt.Sprintf("%x", sum), nil
}
