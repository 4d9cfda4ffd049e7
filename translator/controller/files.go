package controller

import (
	"io/fs"
	"path/filepath"
	"slices"

	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"
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
	// Used by Watch only: pendingFiles are the files events named, with
	// their state at the last interval; fullPending says the listing must
	// be read whole.
	pendingFiles map[string]string
	fullPending  bool

	// Used by poll only. empty says whether the input is empty; digest is the
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

// EmptyInputError refuses manifests that declare no router and no network
// while Owned units own rows in the NB: a directory that vanished, a
// symlink not followed or a mistyped path would otherwise delete every row
// we own (--allow-empty lets it).
type EmptyInputError struct {
	Paths []string
	Owned int
}

func (e *EmptyInputError) Error() string {
	return fmt.Sprintf("the manifests in %s declare no router and no network, but %d routers and networks own rows in the NB: refusing to delete them all without --allow-empty", strings.Join(e.Paths, ", "), e.Owned)
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
			return nil, &EmptyInputError{Paths: paths, Owned: owned}
		}
	}
	f.apply(set, changes, digest)
	f.affected = nil // the controller starts with every unit
	return f, nil
}

// Input is the last good input.
func (f *FileSource) Input() *translator.Input { return f.input }

// HasSynced is true: the files were read by NewFileSource.
func (f *FileSource) HasSynced() bool { return true }

// Watch follows the files until ctx ends and, after a change that was
// applied, calls changed with the units it may have changed. The
// directories are watched (inotify): a manifest file an event names is
// read alone once it has stayed the same for one interval, so that an
// event costs what that file costs; anything else (a ConfigMap's ..data
// swap, a new directory, a symlink, a lost event) reads the listing again,
// as a full poll does every fullPollRounds intervals whatever happens.
// Without a watcher it polls every interval.
func (f *FileSource) Watch(ctx context.Context, interval time.Duration, changed func([]translator.Unit)) {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		f.log.Info("cannot watch the manifest directories; polling them", "interval", interval.String(), "error", err.Error())
		f.pollEvery(ctx, interval, changed)
		return
	}
	defer w.Close()
	f.watchDirs(w)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	rounds := 0
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-w.Events:
			if !ok {
				f.pollEvery(ctx, interval, changed)
				return
			}
			f.noteEvent(ev)
		case err, ok := <-w.Errors:
			if !ok {
				f.pollEvery(ctx, interval, changed)
				return
			}
			// An overflow: events were lost.
			f.log.V(1).Info("file watcher error; reading the listing again", "error", err.Error())
			f.fullPending = true
		case <-tick.C:
			if rounds++; rounds >= fullPollRounds {
				rounds, f.fullPending = 0, true
			}
			if f.settle(w) {
				changed(f.takeAffected())
			}
		}
	}
}

// fullPollRounds is how many intervals a watching FileSource goes without
// reading the whole listing.
const fullPollRounds = 60

// pollEvery polls the whole listing every interval.
func (f *FileSource) pollEvery(ctx context.Context, interval time.Duration, changed func([]translator.Unit)) {
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

// watchDirs watches the directories the manifests are in (also those of
// the files symlinks resolve to).
func (f *FileSource) watchDirs(w *fsnotify.Watcher) {
	dirs := map[string]bool{}
	for _, p := range f.paths {
		if st, err := os.Stat(p); err == nil && st.IsDir() {
			dirs[p] = true
		} else {
			dirs[filepath.Dir(p)] = true
		}
	}
	if files, err := manifest.Files(f.paths); err == nil {
		for _, file := range files {
			dirs[filepath.Dir(file)] = true
			if real, err := filepath.EvalSymlinks(file); err == nil {
				dirs[filepath.Dir(real)] = true
			}
		}
	}
	for d := range dirs {
		if err := w.Add(d); err != nil {
			f.log.V(1).Info("cannot watch a manifest directory; the periodic full poll covers it", "dir", d, "error", err.Error())
		}
	}
}

// noteEvent sorts an event: a manifest file (a regular file, or one gone)
// is read alone; a name starting with ".." (a ConfigMap volume's swap), a
// symlink or a directory reads the listing again; other names are not
// manifests.
func (f *FileSource) noteEvent(ev fsnotify.Event) {
	base := filepath.Base(ev.Name)
	switch {
	case strings.HasPrefix(base, ".."):
		f.fullPending = true
		return
	case strings.HasPrefix(base, "."):
		return
	}
	st, err := os.Lstat(ev.Name)
	switch {
	case err == nil && st.IsDir(), err == nil && st.Mode()&fs.ModeSymlink != 0:
		f.fullPending = true
	case !manifest.IsManifestName(base):
	case err == nil && !st.Mode().IsRegular():
	default:
		if f.pendingFiles == nil {
			f.pendingFiles = map[string]string{}
		}
		if _, ok := f.pendingFiles[ev.Name]; !ok {
			f.pendingFiles[ev.Name] = fileState(ev.Name)
		}
	}
}

// fileState identifies a file's content by device, inode, size and
// time; "gone" when it is not there.
func fileState(path string) string {
	st, err := os.Stat(path)
	if err != nil {
		return "gone"
	}
	return fmt.Sprintf("%s %d %d", manifest.FileID(st), st.Size(), st.ModTime().UnixNano())
}

// settle reads what the events said changed, once it has stayed the same
// for one interval, and reports whether it applied a change.
func (f *FileSource) settle(w *fsnotify.Watcher) bool {
	if f.fullPending {
		applied := f.poll()
		if f.pending == "" && f.waits == 0 {
			// The listing was read whole: it covers the files events named.
			f.fullPending = false
			f.pendingFiles = nil
			f.watchDirs(w)
		}
		return applied
	}
	var ready []string
	for path, seen := range f.pendingFiles {
		if now := fileState(path); now != seen {
			f.pendingFiles[path] = now
			continue
		}
		ready = append(ready, path)
	}
	if len(ready) == 0 {
		return false
	}
	slices.Sort(ready)
	changes, err := f.loader.LoadFiles(ready)
	switch {
	case errors.Is(err, manifest.ErrIncomplete):
		f.log.V(1).Info("a manifest is being written; keeping the last good input until it is complete", "error", err.Error())
		for _, p := range ready {
			f.pendingFiles[p] = ""
		}
		return false
	case err != nil:
		for _, p := range ready {
			delete(f.pendingFiles, p)
		}
		f.log.Info("manifests changed but do not parse; keeping the last good input", "error", err.Error())
		return false
	}
	for _, p := range ready {
		delete(f.pendingFiles, p)
	}
	// The listing is no longer the one the last full read applied: the
	// next full read must load it (the loader compares it with what it
	// read file by file) rather than find it equal to an older listing
	// and drop the events pending meanwhile.
	f.digest = ""
	if len(changes) == 0 {
		return false
	}
	if !f.opts.AllowEmpty && f.wouldEmpty(changes) {
		// Let the full poll decide, with everything it knows of an empty
		// input; the loader reads everything anew.
		f.loader = manifest.NewLoader()
		f.fullPending = true
		return false
	}
	for _, ch := range changes {
		f.applyChange(ch)
	}
	f.log.Info("manifests changed; reconciling", "files", ready)
	return true
}

// wouldEmpty says whether changes would leave the input without routers
// and networks.
func (f *FileSource) wouldEmpty(changes []manifest.FileChange) bool {
	routers, networks := f.input.Counts()
	n := routers + networks
	for _, ch := range changes {
		if ch.Old != nil {
			n -= len(ch.Old.Objects.Routers) + len(ch.Old.Objects.Networks)
		}
		if ch.New != nil {
			n += len(ch.New.Objects.Routers) + len(ch.New.Objects.Networks)
		}
	}
	return n <= 0
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
	if len(changes) == 0 {
		// Files touched, or read alone since the last full read.
		return false
	}
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
		f.applyChange(ch)
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
	f.empty, f.digest = set.Empty(), digest
}

// applyChange sets one file's objects as one source of the input.
func (f *FileSource) applyChange(ch manifest.FileChange) {
	var objs translator.Objects
	if ch.New != nil {
		objs = ch.New.Objects
		f.applied[ch.Path] = true
	} else {
		delete(f.applied, ch.Path)
	}
	f.affected = append(f.affected, f.input.Set(ch.Path, objs)...)
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
