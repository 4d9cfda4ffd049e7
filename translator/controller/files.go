package controller

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/ovn-kubernetes/libovsdb/client"

	"github.com/kubevirt-ovn/kubevirt-ovn/translator"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/manifest"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/nb"
)

// FileOptions configure a FileSource.
type FileOptions struct {
	// AllowEmpty lets an input without routers and networks be applied
	// while units own rows in the NB: every row we own is then deleted.
	// Without it such an input is refused (at start) or ignored (on change).
	AllowEmpty bool
	// Owned counts the units owning rows in the NB; nil counts none.
	Owned func() (int, error)
}

// OwnedUnits counts the units (routers and networks) that own rows of
// instance in the NB client's cache.
func OwnedUnits(ctx context.Context, nbc client.Client, instance string) func() (int, error) {
	return func() (int, error) {
		units, err := nb.PresentUnits(ctx, nbc, instance)
		return len(units), err
	}
}

// FileSource is manifests on disk, re-read when they change. A change is
// read once it is complete: its fingerprint (names, sizes, times) stayed the
// same for one more poll, no file is open for writing by another process and
// none changed while it was read. A change that does not parse, or that
// reads as empty while we own rows (unless AllowEmpty), is reported and
// ignored: the last good input stays, so a half-written file or a vanished
// directory deletes nothing.
type FileSource struct {
	paths []string
	log   logr.Logger
	opts  FileOptions

	// loader re-decodes only the files that changed; input holds each
	// file's objects as one source, so a change enqueues only the units
	// whose plan it may change.
	loader *manifest.Loader
	input  *translator.Input
	// applied are the files input holds objects of.
	applied map[string]bool
	// affected are the units the changes applied since the last
	// takeAffected may have changed.
	affected []translator.Unit

	mu   sync.Mutex
	snap *translator.Snapshot

	// Used by poll only. empty says whether snap is empty; digest is the
	// fingerprint of the input last read (applied or refused), pending a
	// new fingerprint waiting for the next poll to be stable; waits counts
	// the polls that found files being written since the input was last
	// read; lastErr is the last error logged, not repeated on every poll.
	empty   bool
	digest  string
	pending string
	waits   int
	lastErr string
}

// NewFileSource reads paths once; it fails when they do not parse, are
// being written, or read as empty while units own rows in the NB (without
// opts.AllowEmpty).
func NewFileSource(paths []string, log logr.Logger, opts FileOptions) (*FileSource, error) {
	f := &FileSource{paths: paths, log: log, opts: opts, loader: manifest.NewLoader(), input: translator.NewInput(), applied: map[string]bool{}}
	digest, err := fingerprint(paths)
	if err != nil {
		return nil, err
	}
	set, changes, err := f.loader.Load(paths)
	if err != nil {
		return nil, err
	}
	if set.Empty() && !opts.AllowEmpty {
		owned, err := f.owned()
		if err != nil {
			return nil, err
		}
		if owned > 0 {
			return nil, fmt.Errorf("the manifests in %s declare no router and no network, but %d routers and networks own rows in the NB: refusing to delete them all without --allow-empty", strings.Join(paths, ", "), owned)
		}
	}
	f.apply(set, changes, digest)
	f.affected = nil // the controller starts with every unit
	return f, nil
}

// Input is the last good input.
func (f *FileSource) Input() *translator.Input { return f.input }

// Snapshot is the last good input as one snapshot.
func (f *FileSource) Snapshot() (*translator.Snapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	cp := *f.snap
	return &cp, nil
}

// HasSynced is true: the files were read by NewFileSource.
func (f *FileSource) HasSynced() bool { return true }

// Watch polls the files every interval and, after a reload that was
// applied, calls changed with the units it may have changed, until ctx
// ends.
func (f *FileSource) Watch(ctx context.Context, interval time.Duration, changed func([]translator.Unit)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if f.poll() {
				changed(f.takeAffected())
			}
		}
	}
}

// poll looks at the files once and reports whether it applied a new input.
func (f *FileSource) poll() bool {
	digest, err := fingerprint(f.paths)
	if err != nil {
		f.report("manifests cannot be listed; keeping the last good input", err)
		return false
	}
	if digest == f.digest {
		f.pending, f.waits = "", 0
		return false
	}
	if digest != f.pending {
		// Changed since the last poll: maybe still being written.
		f.pending = digest
		return false
	}
	set, changes, err := f.loader.Load(f.paths)
	if errors.Is(err, manifest.ErrIncomplete) {
		f.waits++
		log := f.log
		if f.waits > 1 {
			log = log.V(1) // said once at the default level
		}
		log.Info("manifests are being written; keeping the last good input until they are complete", "error", err.Error(), "polls", f.waits)
		return false
	}
	if after, ferr := fingerprint(f.paths); ferr != nil || after != digest {
		f.pending = after
		f.log.V(1).Info("manifests changed while they were read; reading them again")
		return false
	}
	f.pending, f.waits = "", 0
	if err != nil {
		f.digest = digest
		f.log.Info("manifests changed but do not parse; keeping the last good input", "error", err.Error())
		return false
	}
	if set.Empty() && !f.opts.AllowEmpty {
		owned, err := f.owned()
		if err != nil || owned > 0 || !f.empty {
			f.digest = digest
			log := f.log.WithValues("paths", f.paths, "ownedUnits", owned)
			if err != nil {
				log = log.WithValues("error", err.Error())
			}
			log.Info("manifests changed and declare no router and no network; keeping the last good input (run with --allow-empty to let an empty input delete the rows we own)")
			// The loader has moved on to the refused files: the next
			// input is read whole and compared with what is applied.
			f.loader = manifest.NewLoader()
			return false
		}
	}
	f.apply(set, changes, digest)
	f.lastErr = ""
	f.log.Info("manifests changed; reconciling")
	return true
}

// apply sets each changed file's objects as one source of the input. A
// file the input holds that is neither changed nor still read (after a
// refused input, the loader reads everything anew) is gone.
func (f *FileSource) apply(set *manifest.Set, changes []manifest.FileChange, digest string) {
	for _, n := range set.Notes {
		f.log.V(1).Info("note", "note", n)
	}
	seen := map[string]bool{}
	for _, ch := range changes {
		seen[ch.Path] = true
		var objs translator.Objects
		if ch.New != nil {
			s := &ch.New.Snapshot
			objs = translator.Objects{Routers: s.Routers, Networks: s.Networks, VMs: s.VMs, Invalid: s.Invalid}
			f.applied[ch.Path] = true
		} else {
			delete(f.applied, ch.Path)
		}
		f.affected = append(f.affected, f.input.Set(ch.Path, objs)...)
	}
	if files, err := manifest.Files(f.paths); err == nil {
		current := map[string]bool{}
		for _, p := range files {
			current[p] = true
		}
		for p := range f.applied {
			if !current[p] && !seen[p] {
				delete(f.applied, p)
				f.affected = append(f.affected, f.input.Set(p, translator.Objects{})...)
			}
		}
	}
	f.mu.Lock()
	f.snap = &set.Snapshot
	f.mu.Unlock()
	f.empty, f.digest = set.Empty(), digest
}

// takeAffected returns the units the applied changes may have changed.
func (f *FileSource) takeAffected() []translator.Unit {
	out := f.affected
	f.affected = nil
	return out
}

func (f *FileSource) owned() (int, error) {
	if f.opts.Owned == nil {
		return 0, nil
	}
	n, err := f.opts.Owned()
	if err != nil {
		return 0, fmt.Errorf("counting the units that own rows in the NB: %w", err)
	}
	return n, nil
}

// report logs an error once, not on every poll that meets it again.
func (f *FileSource) report(msg string, err error) {
	if err.Error() == f.lastErr {
		return
	}
	f.lastErr = err.Error()
	f.log.Info(msg, "error", err.Error())
}

// fingerprint identifies the content of the manifest files without reading
// them: their paths, the files they resolve to, sizes and modification
// times.
func fingerprint(paths []string) (string, error) {
	files, err := manifest.Files(paths)
	if err != nil {
		return "", err
	}
	lines := make([]string, 0, len(files))
	for _, path := range files {
		st, err := os.Stat(path)
		if err != nil {
			return "", err
		}
		lines = append(lines, fmt.Sprintf("%s %s %d %d", path, manifest.FileID(st), st.Size(), st.ModTime().UnixNano()))
	}
	sort.Strings(lines)
	sum := sha256.Sum256([]byte(strings.Join(lines, "\n")))
	return fmt.Sprintf("%x", sum), nil
}
