package sandbox

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
)

// RootEnv names the root file system whose OVN the sandbox runs
// (integration/releases/root.sh builds one per release from Debian's
// archive). Unset, the host's OVN runs, as installed by `make deps`.
const RootEnv = "KUBEVIRT_OVN_ROOT"

// root is the release's root file system, "" for the host.
var root = strings.TrimRight(os.Getenv(RootEnv), "/")

// Schemas of the OVN the sandbox runs: the release's own files, not the
// host's, when it runs a release's root.
var (
	NBSchema      = inRoot("/usr/share/ovn/ovn-nb.ovsschema")
	SBSchema      = inRoot("/usr/share/ovn/ovn-sb.ovsschema")
	VSwitchSchema = inRoot("/usr/share/openvswitch/vswitch.ovsschema")
)

func inRoot(path string) string { return root + path }

// Tool returns the command that runs an OVS/OVN program (ovsdb-server,
// ovn-nbctl, ...) of the OVN the sandbox runs. For a release's root it is
// the release's binary started through the release's own dynamic loader
// with the release's libraries: a host process on the host's loopback and
// scratch paths, no chroot or mount, and whatever it starts (nothing, for
// these programs) would get the host's libraries again, since the loader's
// --library-path is not inherited.
func Tool(prog string, args ...string) *exec.Cmd {
	if root == "" {
		return exec.Command(prog, args...)
	}
	bin := rootBinary(prog)
	libs := strings.Join([]string{root + "/usr/lib/" + multiarch(), root + "/lib/" + multiarch(), root + "/usr/lib"}, ":")
	return exec.Command(loader(), append([]string{"--inhibit-cache", "--library-path", libs, bin}, args...)...)
}

// rootBinary is prog's path in the release's root ("" when it has none),
// its symbolic links followed inside the root: Debian's
// /usr/sbin/ovs-vswitchd links to /etc/alternatives/ovs-vswitchd, which
// outside the root is the host's own vswitchd.
func rootBinary(prog string) string {
	for _, d := range []string{"/usr/bin/", "/usr/sbin/"} {
		if p, ok := resolveInRoot(root + d + prog); ok {
			return p
		}
	}
	return ""
}

// resolveInRoot follows path's symbolic links as if root were /.
func resolveInRoot(path string) (string, bool) {
	for range 40 {
		fi, err := os.Lstat(path)
		if err != nil {
			return "", false
		}
		if fi.Mode()&os.ModeSymlink == 0 {
			return path, true
		}
		target, err := os.Readlink(path)
		if err != nil {
			return "", false
		}
		if filepath.IsAbs(target) {
			path = root + target
		} else {
			path = filepath.Join(filepath.Dir(path), target)
		}
	}
	return "", false
}

var (
	loaderOnce sync.Once
	loaderPath string
)

// loader is the root's dynamic loader (ld-linux-*.so.*).
func loader() string {
	loaderOnce.Do(func() {
		for _, pat := range []string{"/usr/lib/" + multiarch() + "/ld-linux*.so.*", "/lib64/ld-linux*.so.*", "/lib/ld-linux*.so.*"} {
			if m, _ := filepath.Glob(root + pat); len(m) > 0 {
				loaderPath = m[0]
				return
			}
		}
		loaderPath = root + "/lib64/ld-linux-x86-64.so.2" // fails with its own path in the error
	})
	return loaderPath
}

// multiarch is Debian's multiarch directory name for this machine.
func multiarch() string {
	matches, _ := filepath.Glob(root + "/usr/lib/*-linux-gnu*")
	for _, m := range matches {
		if fi, err := os.Stat(m); err == nil && fi.IsDir() {
			return filepath.Base(m)
		}
	}
	return "x86_64-linux-gnu"
}

// Release is the OVN release the sandbox runs.
type Release struct {
	// Version is OVN's full version (23.03.1, 26.03.1, ...); OVS is Open
	// vSwitch's.
	Version, OVS string
	// Major and Minor are the release's year and month (26, 3).
	Major, Minor, Patch int
	// Root is the release's root file system, "" for the host's OVN.
	Root string
}

// String is how tests and reports name it: "OVN 26.03.1 (root ...)".
func (r Release) String() string {
	where := "host"
	if r.Root != "" {
		where = r.Root
	}
	return fmt.Sprintf("OVN %s, OVS %s (%s)", r.Version, r.OVS, where)
}

// AtLeast reports whether the release is major.minor.patch or later.
func (r Release) AtLeast(major, minor, patch int) bool {
	if r.Major != major {
		return r.Major > major
	}
	if r.Minor != minor {
		return r.Minor > minor
	}
	return r.Patch >= patch
}

// Series is "26.03": the release without its patch level.
func (r Release) Series() string { return fmt.Sprintf("%d.%02d", r.Major, r.Minor) }

var (
	releaseOnce sync.Once
	release     Release
	releaseErr  error
)

var versionRE = regexp.MustCompile(`(\d+)\.(\d+)\.(\d+)`)

// CurrentRelease is the OVN the sandbox runs, from its ovn-northd's and
// ovs-vswitchd's --version.
func CurrentRelease() (Release, error) {
	releaseOnce.Do(func() {
		release.Root = root
		ovn, err := Tool("ovn-northd", "--version").Output()
		if err != nil {
			releaseErr = fmt.Errorf("ovn-northd --version (%s): %w", where(), err)
			return
		}
		line, _, _ := strings.Cut(string(ovn), "\n")
		m := versionRE.FindStringSubmatch(line)
		if m == nil {
			releaseErr = fmt.Errorf("ovn-northd --version (%s): no version in %q", where(), line)
			return
		}
		release.Version = m[0]
		release.Major, _ = strconv.Atoi(m[1])
		release.Minor, _ = strconv.Atoi(m[2])
		release.Patch, _ = strconv.Atoi(m[3])
		if out, err := Tool("ovs-vswitchd", "--version").Output(); err == nil {
			sc := bufio.NewScanner(strings.NewReader(string(out)))
			if sc.Scan() {
				if m := versionRE.FindString(sc.Text()); m != "" {
					release.OVS = m
				}
			}
		}
	})
	return release, releaseErr
}

func where() string {
	if root == "" {
		return "host"
	}
	return RootEnv + "=" + root
}

// Versions asks every running daemon its version through its control
// socket ("ovn-controller" → "ovn-controller 26.03.1 ..."), by pid file:
// what runs, not what was meant to.
func (ds *daemons) Versions() (map[string]string, error) {
	out := map[string]string{}
	for _, d := range ds.list {
		b, err := os.ReadFile(d.pidfile)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", d.name, err)
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			return nil, fmt.Errorf("%s: bad pid file %s", d.name, d.pidfile)
		}
		v, err := run(d.dir, d.appctl, "--timeout=10", "-t", ctlPath(d.dir, d.name, pid), "version")
		if err != nil {
			return nil, err
		}
		line, _, _ := strings.Cut(v, "\n")
		out[d.dir+" "+d.name] = line
	}
	return out, nil
}

// RootRelease is what the root file system says it holds (its
// .kubevirt-ovn-release: release, suite, ovn and ovs package versions),
// nil for the host.
func RootRelease() (map[string]string, error) {
	if root == "" {
		return nil, nil
	}
	b, err := os.ReadFile(root + "/.kubevirt-ovn-release")
	if err != nil {
		return nil, fmt.Errorf("%s is no complete root file system of integration/releases/root.sh: %w", root, err)
	}
	m := map[string]string{}
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, "="); ok {
			m[k] = v
		}
	}
	return m, nil
}

// Versions is every daemon's version (daemons.Versions), the chassis'
// too.
func (l *Local) Versions() (map[string]string, error) {
	out, err := l.Central.Versions()
	if err != nil {
		return nil, err
	}
	sims, err := l.sims.Versions()
	for k, v := range sims {
		out[k] = v
	}
	return out, err
}

// ToolScript writes in dir an executable script that runs prog of the OVN
// the sandbox runs (Tool) with the script's arguments, and returns its
// path: for a command that takes a program's path, as kubevirt-ovn
// trace's --ovn-trace.
func ToolScript(dir, prog string) (string, error) {
	cmd := Tool(prog)
	quoted := make([]string, len(cmd.Args))
	for i, a := range cmd.Args {
		if i == 0 {
			a = cmd.Path
		}
		quoted[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	path := filepath.Join(dir, prog)
	script := "#!/bin/sh\nexec " + strings.Join(quoted, " ") + ` "$@"` + "\n"
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		return "", err
	}
	return path, nil
}
