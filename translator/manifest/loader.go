package manifest

import (
	"os"
	"path/filepath"
	"reflect"

	"github.com/kubevirt-ovn/kubevirt-ovn/translator"
)

// FileObjects are the objects one file declares. A Loader keeps them to
// compare with the next Load, and the Sets it returns share their contents:
// read them, do not change them.
type FileObjects struct {
	Path    string
	Objects translator.Objects
	Notes   []string
}

// FileChange is how one file's objects changed between two successful
// Loads: Old is nil for a new file, New is nil for a file gone.
type FileChange struct {
	Path     string
	Old, New *FileObjects
}

// Loader loads manifests, re-decoding only the files whose fingerprint
// (resolved path, inode/dev, size, mtime ns) changed since its last Load.
// It is not safe for concurrent use.
type Loader struct {
	files map[string]loadedFile
	order []string
}

type loadedFile struct {
	fp      fileFingerprint
	objects *FileObjects
}

// fileFingerprint identifies a file's content without reading it. A file
// that is not regular (a pipe) has none: it is read on every Load.
type fileFingerprint struct {
	resolved string
	id       string
	size     int64
	mtime    int64
}

// NewLoader returns a Loader that has loaded nothing yet.
func NewLoader() *Loader {
	return &Loader{files: map[string]loadedFile{}}
}

// decodeHook, when set (by tests), is called with each file a Loader
// decodes.
var decodeHook func(path string)

// Load reads paths like LoadPaths (same errors, same ErrIncomplete handling,
// same completeness checks for the files it reads) and returns the aggregate
// Set (as LoadPaths does) plus the per-file changes since the previous
// successful Load: files added, changed (old and new objects) or removed, in
// the order of the listing, removed files last. A file whose fingerprint
// changed but whose objects did not (touched, or rewritten the same) is not
// a change. A failed Load changes nothing in the Loader.
func (l *Loader) Load(paths []string) (*Set, []FileChange, error) {
	files, err := Files(paths)
	if err != nil {
		return nil, nil, err
	}
	next := make(map[string]loadedFile, len(files))
	set := &Set{}
	var changes []FileChange
	for _, path := range files {
		cur, change, err := l.reload(path)
		if err != nil {
			return nil, nil, err
		}
		if change != nil {
			changes = append(changes, *change)
		}
		next[path] = cur
	}
	set.mergeAll(files, next)
	for _, path := range l.order {
		if _, ok := next[path]; !ok {
			changes = append(changes, FileChange{Path: path, Old: l.files[path].objects})
		}
	}
	l.files, l.order = next, files
	return set, changes, nil
}

// fingerprintOf returns the fingerprint of the regular file path names;
// ok is false when it has none (not a regular file, or it cannot be
// looked at: reading it then says why). Where files have an identity
// (FileID: device and inode), it stands for the resolved path: another
// file behind the same path (a ConfigMap volume's ..data swapped) is
// another inode.
func fingerprintOf(path string) (fileFingerprint, bool) {
	st, err := os.Stat(path)
	if err != nil || !st.Mode().IsRegular() {
		return fileFingerprint{}, false
	}
	fp := fileFingerprint{id: FileID(st), size: st.Size(), mtime: st.ModTime().UnixNano()}
	if fp.id == "" {
		if fp.resolved, err = filepath.EvalSymlinks(path); err != nil {
			return fileFingerprint{}, false
		}
	}
	return fp, true
}

// loadFile reads and decodes one manifest file, as LoadPaths does.
func loadFile(path string) (*FileObjects, error) {
	data, err := readComplete(path)
	if err != nil {
		return nil, err
	}
	if decodeHook != nil {
		decodeHook(path)
	}
	s, err := decodeFile(path, data)
	if err != nil {
		return nil, err
	}
	return &FileObjects{Path: path, Objects: s.Objects, Notes: s.Notes}, nil
}

// decodeFile decodes one file's manifests into a new set.
func decodeFile(source string, data []byte) (*Set, error) {
	if s, err := decodeFast(source, data); err == nil {
		return s, nil
	}
	s := &Set{}
	if err := s.addGeneral(source, data); err != nil {
		return nil, err
	}
	return s, nil
}

// mergeAll adds the objects of files, in order, with the slices sized once.
func (s *Set) mergeAll(files []string, loaded map[string]loadedFile) {
	var routers, networks, vms, fips, notes int
	for _, path := range files {
		o := loaded[path].objects
		routers += len(o.Objects.Routers)
		networks += len(o.Objects.Networks)
		vms += len(o.Objects.VMs)
		fips += len(o.Objects.FloatingIPs)
		notes += len(o.Notes)
	}
	if routers > 0 {
		s.Objects.Routers = make([]translator.Router, 0, routers)
	}
	if networks > 0 {
		s.Objects.Networks = make([]translator.Network, 0, networks)
	}
	if vms > 0 {
		s.Objects.VMs = make([]translator.VMInterface, 0, vms)
	}
	if fips > 0 {
		s.Objects.FloatingIPs = make([]translator.FloatingIP, 0, fips)
	}
	if notes > 0 {
		s.Notes = make([]string, 0, notes)
	}
	for _, path := range files {
		o := loaded[path].objects
		s.merge(&o.Objects, o.Notes)
	}
}

// reload reads path again when its fingerprint changed since the Loader
// last read it, and says how its objects changed (nil: they did not).
func (l *Loader) reload(path string) (loadedFile, *FileChange, error) {
	fp, ok := fingerprintOf(path)
	prev, had := l.files[path]
	if ok && had && fp == prev.fp {
		return prev, nil, nil
	}
	objects, err := loadFile(path)
	if err != nil {
		return loadedFile{}, nil, err
	}
	cur := loadedFile{fp: fp, objects: objects}
	if !ok {
		// Without a fingerprint the file is read again next time.
		cur.fp = fileFingerprint{}
	}
	switch {
	case !had:
		return cur, &FileChange{Path: path, New: objects}, nil
	case reflect.DeepEqual(prev.objects, objects):
		cur.objects = prev.objects
		return cur, nil, nil
	}
	return cur, &FileChange{Path: path, Old: prev.objects, New: objects}, nil
}
