package manifest

import (
	"errors"
	"io/fs"
	"os"
	"slices"
)

// LoadFiles re-reads only files, as Load would have read them, for a
// watcher that knows which files changed: each is decoded again if its
// fingerprint changed, and one that is gone is removed. It returns the
// per-file changes; a failure changes nothing in the Loader. files are
// paths a Load lists (a file new to the Loader is added after the others).
func (l *Loader) LoadFiles(files []string) ([]FileChange, error) {
	type update struct {
		path string
		lf   loadedFile
		gone bool
	}
	var updates []update
	var changes []FileChange
	for _, path := range files {
		prev, had := l.files[path]
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			if had {
				updates = append(updates, update{path: path, gone: true})
				changes = append(changes, FileChange{Path: path, Old: prev.objects})
			}
			continue
		}
		cur, change, err := l.reload(path)
		if err != nil {
			return nil, err
		}
		if change == nil && had && cur.fp == prev.fp {
			continue
		}
		if change != nil {
			changes = append(changes, *change)
		}
		updates = append(updates, update{path: path, lf: cur})
	}
	for _, u := range updates {
		_, had := l.files[u.path]
		switch {
		case u.gone:
			delete(l.files, u.path)
			l.order = slices.DeleteFunc(l.order, func(p string) bool { return p == u.path })
		default:
			l.files[u.path] = u.lf
			if !had {
				l.order = append(l.order, u.path)
			}
		}
	}
	return changes, nil
}

// Objects are the objects the Loader last read from file, nil when it has
// not read it.
func (l *Loader) Objects(file string) *FileObjects {
	return l.files[file].objects
}

// IsManifestName says whether a file of that name in a directory is read
// as a manifest (*.yaml, *.yml, *.json).
func IsManifestName(name string) bool { return isManifestName(name) }
