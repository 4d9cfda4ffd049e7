package manifest

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// ErrIncomplete marks a manifest file that was being written when it was
// read: reading it would see half of it, and a router in the other half
// would look deleted.
var ErrIncomplete = errors.New("being written")

// Files lists the manifest files paths name, in the order LoadPaths reads
// them. A path is a file, read whatever its name, or a directory whose
// *.yaml, *.yml and *.json files are read, recursively, in name order.
// Symbolic links are followed (a path, a file or a directory inside one), as
// kubectl does; a directory or file reached twice (a link cycle, two links to
// one target) is read once. Names starting with '.' inside a directory are
// skipped: a ConfigMap volume holds every file twice, as `name.yaml ->
// ..data/name.yaml` and in the `..2006_01_02_15_04_05.*` directory `..data`
// links to, and editors leave swap files. A link to nothing fails the
// listing when its name is a manifest's (its routers would look deleted),
// unless it points into ..data: a ConfigMap volume in the middle of an
// update, whose consistent view does not hold that file.
func Files(paths []string) ([]string, error) {
	w := &walker{}
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("manifest path: %w", err)
		}
		if !st.IsDir() {
			w.file(p, st)
			continue
		}
		if err := w.dir(p, st); err != nil {
			return nil, fmt.Errorf("manifest directory %s: %w", p, err)
		}
	}
	return w.files, nil
}

// walker collects manifest files; seen holds the directories and files
// already visited, whatever the path that led to them.
type walker struct {
	files []string
	// ids are the visited files' device and inode; seen the visited files
	// of a system without them, compared one by one.
	ids  map[string]bool
	seen []fs.FileInfo
}

func (w *walker) visited(st fs.FileInfo) bool {
	if id := FileID(st); id != "" {
		if w.ids == nil {
			w.ids = map[string]bool{}
		}
		if w.ids[id] {
			return true
		}
		w.ids[id] = true
		return false
	}
	for _, s := range w.seen {
		if os.SameFile(s, st) {
			return true
		}
	}
	w.seen = append(w.seen, st)
	return false
}

func (w *walker) file(path string, st fs.FileInfo) {
	if !w.visited(st) {
		w.files = append(w.files, path)
	}
}

func (w *walker) dir(path string, st fs.FileInfo) error {
	if w.visited(st) {
		return nil
	}
	entries, err := os.ReadDir(path)
	if err != nil {
		return err
	}
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".") {
			continue
		}
		full := filepath.Join(path, name)
		manifestName := isManifestName(name)
		if !e.IsDir() && e.Type()&fs.ModeSymlink == 0 {
			if manifestName && e.Type().IsRegular() {
				st, err := e.Info()
				if err != nil {
					return err
				}
				w.file(full, st)
			}
			continue
		}
		st, err := os.Stat(full)
		switch {
		case err != nil && (!manifestName || atomicWriterLink(full)):
			// A dangling link that would not be read anyway, or a
			// ConfigMap volume in the middle of an update: the link of a
			// new key before ..data is swapped, of a removed key after.
			continue
		case err != nil:
			return err
		case st.IsDir():
			if err := w.dir(full, st); err != nil {
				return err
			}
		case manifestName && st.Mode().IsRegular():
			w.file(full, st)
		}
	}
	return nil
}

// atomicWriterLink tells whether path is a symlink into the ..data
// directory of a volume written by kubelet's atomic writer (ConfigMap,
// Secret, projected, downward API).
func atomicWriterLink(path string) bool {
	target, err := os.Readlink(path)
	return err == nil && strings.HasPrefix(target, "..data"+string(filepath.Separator))
}

func isManifestName(name string) bool {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return false
}

// readComplete reads a manifest file only when it is complete: not open for
// writing by another process (where the system can tell), and unchanged
// while it was read (same size and modification time before and after, as
// many bytes as its size). A file that changed is read again, up to three
// times.
func readComplete(path string) ([]byte, error) {
	for try := 1; ; try++ {
		data, changed, err := readOnce(path)
		if err != nil || !changed {
			return data, err
		}
		if try == 3 {
			return nil, fmt.Errorf("manifest %s is %w: it changed while it was read, %d times", path, ErrIncomplete, try)
		}
	}
}

// afterRead, when set (by tests), runs between a file's read and its
// second stat.
var afterRead func(path string)

func readOnce(path string) (data []byte, changed bool, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, false, fmt.Errorf("manifest: %w", err)
	}
	defer f.Close()
	before, err := f.Stat()
	if err != nil {
		return nil, false, fmt.Errorf("manifest: %w", err)
	}
	if before.Mode().IsRegular() && openForWriting(f) {
		return nil, false, fmt.Errorf("manifest %s is %w (open for writing by another process)", path, ErrIncomplete)
	}
	data, err = readAll(f, before.Size())
	if err != nil {
		return nil, false, fmt.Errorf("manifest: %w", err)
	}
	if afterRead != nil {
		afterRead(path)
	}
	after, err := f.Stat()
	if err != nil {
		return nil, false, fmt.Errorf("manifest: %w", err)
	}
	if !before.Mode().IsRegular() {
		return data, false, nil
	}
	changed = before.Size() != after.Size() || !before.ModTime().Equal(after.ModTime()) || int64(len(data)) != after.Size()
	return data, changed, nil
}

// Empty is true when the set declares no router and no network: applied, it
// would delete every row kubevirt-ovn owns.
func (s *Set) Empty() bool {
	return len(s.Objects.Routers) == 0 && len(s.Objects.Networks) == 0 && len(s.Objects.Invalid) == 0
}

// readAll reads r to its end into a buffer sized for a file of size bytes
// (io.ReadAll would grow it, allocating about twice the file).
func readAll(r io.Reader, size int64) ([]byte, error) {
	data := make([]byte, 0, max(size, 0)+1)
	for {
		n, err := r.Read(data[len(data):cap(data)])
		data = data[:len(data)+n]
		if errors.Is(err, io.EOF) {
			return data, nil
		}
		if err != nil {
			return data, err
		}
		if len(data) == cap(data) {
			data = append(data, 0)[:len(data)]
		}
	}
}
