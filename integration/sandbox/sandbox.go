// Package sandbox runs a real OVN from Debian's packages on one machine, for
// tests and the demo: NB and SB ovsdb-server (unix socket, and a free
// loopback TCP port) and ovn-northd, each in a private directory. Daemons
// are stopped through their control sockets, by pid as a last resort, never
// by name.
package sandbox

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Central is a running NB, SB and ovn-northd.
type Central struct {
	Dir string
	// NB and SB are unix: endpoints; NBTCP and SBTCP tcp:127.0.0.1:PORT.
	NB, SB       string
	NBTCP, SBTCP string
	daemons
}

// daemons are the daemons one sandbox started, in start order.
type daemons struct {
	list []daemon
}

// daemon is a detached OVS/OVN daemon: its pid file and control socket.
type daemon struct {
	name    string
	dir     string
	appctl  string // ovs-appctl or ovn-appctl
	pidfile string
	// args are the full command line after prog, to restart it.
	args []string
}

// Check reports what of OVN is missing on this machine.
func Check() error {
	var missing []string
	for _, bin := range []string{"ovsdb-server", "ovsdb-tool", "ovn-northd", "ovn-nbctl", "ovn-sbctl", "ovs-appctl", "ovn-appctl"} {
		if root != "" {
			if rootBinary(bin) == "" {
				missing = append(missing, bin)
			}
		} else if _, err := exec.LookPath(bin); err != nil {
			missing = append(missing, bin)
		}
	}
	for _, f := range []string{NBSchema, SBSchema} {
		if _, err := os.Stat(f); err != nil {
			missing = append(missing, f)
		}
	}
	if len(missing) > 0 && root != "" {
		return fmt.Errorf("%s holds no OVN (missing %s): build it with integration/releases/root.sh", where(), strings.Join(missing, ", "))
	}
	if len(missing) > 0 {
		return fmt.Errorf("OVN is not installed (missing %s): run 'make deps' (apt-get install ovn-central ovn-host openvswitch-switch)", strings.Join(missing, ", "))
	}
	return nil
}

// StartCentral starts NB, SB and ovn-northd under dir, and returns once
// ovn-northd has processed the NB. On error, whatever started is stopped.
func StartCentral(dir string) (*Central, error) {
	c, err := StartDatabases(dir)
	if err != nil {
		return nil, err
	}
	if err := c.startNorthd(dir, c.NB, c.SB, c.NBCtl); err != nil {
		c.Stop()
		return nil, err
	}
	return c, nil
}

// StartDatabases starts NB and SB under dir, initialized, with no
// ovn-northd. On error, whatever started is stopped.
func StartDatabases(dir string) (_ *Central, err error) {
	if err := Check(); err != nil {
		return nil, err
	}
	c := &Central{Dir: dir}
	defer func() {
		if err != nil {
			c.Stop()
		}
	}()
	for _, db := range []struct {
		name, schema, dbName, global string
		sock, tcp                    *string
	}{
		{"ovn-nb", NBSchema, "OVN_Northbound", "NB_Global", &c.NB, &c.NBTCP},
		{"ovn-sb", SBSchema, "OVN_Southbound", "SB_Global", &c.SB, &c.SBTCP},
	} {
		// Like ovn-ctl: SSL material and further remotes come from the
		// database (ovn-nbctl set-ssl / set-connection).
		ssl := "db:" + db.dbName + ",SSL,"
		if *db.sock, *db.tcp, err = c.serveDB(filepath.Join(dir, db.name), db.name, db.schema,
			"--remote=db:"+db.dbName+","+db.global+",connections",
			"--private-key="+ssl+"private_key", "--certificate="+ssl+"certificate", "--ca-cert="+ssl+"ca_cert"); err != nil {
			return nil, err
		}
	}
	if _, err := c.NBCtl("init"); err != nil {
		return nil, err
	}
	if _, err := c.SBCtl("init"); err != nil {
		return nil, err
	}
	return c, nil
}

// serveDB creates a database of schema (a .ovsschema file) as d/name.db and
// serves it with ovsdb-server on d/name.sock and a free loopback TCP port,
// with the further options extra; it returns both endpoints.
func (ds *daemons) serveDB(d, name, schema string, extra ...string) (unix, tcp string, err error) {
	if err := os.MkdirAll(d, 0o755); err != nil {
		return "", "", err
	}
	file := filepath.Join(d, name+".db")
	if _, err := run(d, "ovsdb-tool", "create", file, schema); err != nil {
		return "", "", err
	}
	port, err := freePort()
	if err != nil {
		return "", "", err
	}
	sock := filepath.Join(d, name+".sock")
	args := append([]string{"--remote=punix:" + sock, fmt.Sprintf("--remote=ptcp:%d:127.0.0.1", port)}, extra...)
	if err := ds.start(d, "ovsdb-server", "ovs-appctl", append(args, file)...); err != nil {
		return "", "", err
	}
	return "unix:" + sock, fmt.Sprintf("tcp:127.0.0.1:%d", port), nil
}

// DB is a standalone ovsdb-server with no northd, serving one database
// (for tests of a schema alone: other OVN versions' schemas, say) or
// several on one socket (a zone of the 50-zone bench: its NB and SB in one
// lighter process).
type DB struct {
	Dir string
	// Unix and TCP are its endpoints.
	Unix, TCP string
	daemons
}

// StartDB creates a database of schema (a .ovsschema file) under dir and
// serves it.
func StartDB(dir, schema string) (*DB, error) { return StartDBs(dir, schema) }

// StartDBs creates a database of each schema under dir (dir/db.db for the
// first, dir/db1.db for the second...) and serves them all with one
// ovsdb-server on dir/db.sock and a free loopback TCP port.
func StartDBs(dir string, schemas ...string) (*DB, error) {
	if err := Check(); err != nil {
		return nil, err
	}
	if len(schemas) == 0 {
		return nil, errors.New("StartDBs: no schema")
	}
	db := &DB{Dir: dir}
	var more []string
	for i, schema := range schemas[1:] {
		file := filepath.Join(dir, fmt.Sprintf("db%d.db", i+1))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		if _, err := run(dir, "ovsdb-tool", "create", file, schema); err != nil {
			return nil, err
		}
		more = append(more, file)
	}
	var err error
	if db.Unix, db.TCP, err = db.serveDB(dir, "db", schemas[0], more...); err != nil {
		db.Stop()
		return nil, err
	}
	return db, nil
}

// startNorthd starts ovn-northd under dir/northd on nb and sb, and waits
// until it has processed the NB (nbctl is how to reach it).
func (ds *daemons) startNorthd(dir, nb, sb string, nbctl func(...string) (string, error)) error {
	nd := filepath.Join(dir, "northd")
	if err := os.MkdirAll(nd, 0o755); err != nil {
		return err
	}
	if err := ds.start(nd, "ovn-northd", "ovn-appctl", "--ovnnb-db="+nb, "--ovnsb-db="+sb); err != nil {
		return err
	}
	_, err := nbctl("--timeout=30", "--wait=sb", "sync")
	return err
}

// start runs a daemon detached with its pid file, log file and control
// socket in dir (the OVS/OVN rundir of that daemon).
func (ds *daemons) start(dir, prog, appctl string, args ...string) error {
	pidfile := filepath.Join(dir, prog+".pid")
	full := []string{"-vconsole:off", "--detach", "--no-chdir",
		"--pidfile=" + pidfile, "--log-file=" + filepath.Join(dir, prog+".log")}
	// ovn-controller has no --unixctl: its socket is <rundir>/ovn-controller.<pid>.ctl.
	if prog != "ovn-controller" {
		full = append(full, "--unixctl="+filepath.Join(dir, prog+".ctl"))
	}
	full = append(full, args...)
	if _, err := run(dir, prog, full...); err != nil {
		return err
	}
	ds.list = append(ds.list, daemon{name: prog, dir: dir, appctl: appctl, pidfile: pidfile, args: full})
	return nil
}

// Stop stops every daemon in reverse start order and waits for each to
// exit.
func (ds *daemons) Stop() error {
	var errs []error
	for i := len(ds.list) - 1; i >= 0; i-- {
		if err := ds.list[i].stop(); err != nil {
			errs = append(errs, err)
		}
	}
	ds.list = nil
	return errors.Join(errs...)
}

func (d daemon) stop() error {
	b, err := os.ReadFile(d.pidfile)
	if err != nil {
		return nil // never started or already gone
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return fmt.Errorf("%s: bad pid file %s", d.name, d.pidfile)
	}
	ctl := ctlPath(d.dir, d.name, pid)
	args := []string{"--timeout=10", "-t", ctl, "exit"}
	if d.name == "ovs-vswitchd" {
		args = append(args, "--cleanup")
	}
	_, _ = run(d.dir, d.appctl, args...)
	if waitExit(pid, 5*time.Second) {
		return nil
	}
	if p, err := os.FindProcess(pid); err == nil {
		_ = p.Signal(os.Kill)
	}
	if waitExit(pid, 5*time.Second) {
		return fmt.Errorf("%s (pid %d) ignored exit and was killed", d.name, pid)
	}
	return fmt.Errorf("%s (pid %d) did not exit", d.name, pid)
}

// ctlPath is the control socket of daemon prog with pid in dir.
func ctlPath(dir, prog string, pid int) string {
	if prog == "ovn-controller" {
		return filepath.Join(dir, fmt.Sprintf("%s.%d.ctl", prog, pid))
	}
	return filepath.Join(dir, prog+".ctl")
}

// Alive reports whether pid runs and is not a zombie: detached daemons are
// re-parented to an init that may reap them late.
func Alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "State:") {
			return !strings.Contains(line, "Z")
		}
	}
	return true
}

func waitExit(pid int, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if !Alive(pid) {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}

// Pids returns the pids of the running daemons.
func (ds *daemons) Pids() []int {
	var pids []int
	for _, d := range ds.list {
		if b, err := os.ReadFile(d.pidfile); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

// NBCtl runs ovn-nbctl against the NB.
func (c *Central) NBCtl(args ...string) (string, error) {
	return run(c.Dir, "ovn-nbctl", append([]string{"--db=" + c.NB}, args...)...)
}

// SBCtl runs ovn-sbctl against the SB.
func (c *Central) SBCtl(args ...string) (string, error) {
	return run(c.Dir, "ovn-sbctl", append([]string{"--db=" + c.SB}, args...)...)
}

// Logs lists the daemons' log files, for a failing test to point at.
func (ds *daemons) Logs() []string {
	var out []string
	for _, d := range ds.list {
		out = append(out, filepath.Join(d.dir, d.name+".log"))
	}
	return out
}

// Run runs an OVS/OVN tool of the OVN the sandbox runs (Tool) with its
// directories set to dir, for tests.
func Run(dir, prog string, args ...string) (string, error) { return run(dir, prog, args...) }

// run runs an OVS/OVN tool (Tool: the host's or the release's) with its
// run, log and db directories set to dir so that nothing touches the
// system's /var/run/openvswitch.
func run(dir, prog string, args ...string) (string, error) {
	cmd := Tool(prog, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"OVS_RUNDIR="+dir, "OVS_LOGDIR="+dir, "OVS_DBDIR="+dir, "OVS_SYSCONFDIR="+dir,
		"OVN_RUNDIR="+dir, "OVN_LOGDIR="+dir, "OVN_DBDIR="+dir, "OVN_SYSCONFDIR="+dir)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%s %s: %w: %s", prog, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// FreePort asks the kernel for a free loopback TCP port.
func FreePort() (int, error) { return freePort() }

// freePort asks the kernel for a free loopback TCP port.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
