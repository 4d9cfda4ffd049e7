package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// pid reads the daemon's pid file.
func (d daemon) pid() (int, error) {
	b, err := os.ReadFile(d.pidfile)
	if err != nil {
		return 0, fmt.Errorf("%s in %s: %w", d.name, d.dir, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, fmt.Errorf("%s: bad pid file %s", d.name, d.pidfile)
	}
	return pid, nil
}

// kill sends SIGKILL to the daemon by pid, as a crash or an OOM kill would
// end it (no clean shutdown, connections drop), and waits until it is gone.
func (d daemon) kill() (int, error) {
	pid, err := d.pid()
	if err != nil {
		return 0, err
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return pid, fmt.Errorf("killing %s (pid %d): %w", d.name, pid, err)
	}
	if !waitExit(pid, 10*time.Second) {
		return pid, fmt.Errorf("%s (pid %d) still runs 10s after SIGKILL", d.name, pid)
	}
	return pid, nil
}

// restart starts the daemon again with the command line it was started
// with: same sockets, ports, database file, pid file and log file.
func (d daemon) restart() error {
	_, err := run(d.dir, d.name, d.args...)
	return err
}

// nbIndex is the position of the NB ovsdb-server among c's daemons.
func (c *Central) nbIndex() (int, error) {
	for i, d := range c.list {
		if d.name == "ovsdb-server" && filepath.Base(d.dir) == "ovn-nb" {
			return i, nil
		}
	}
	return 0, fmt.Errorf("no NB ovsdb-server in %s", c.Dir)
}

// NBPid is the pid of the NB ovsdb-server.
func (c *Central) NBPid() (int, error) {
	i, err := c.nbIndex()
	if err != nil {
		return 0, err
	}
	return c.list[i].pid()
}

// KillNB kills the NB ovsdb-server with SIGKILL and waits until it is gone;
// it returns the pid it killed.
func (c *Central) KillNB() (int, error) {
	i, err := c.nbIndex()
	if err != nil {
		return 0, err
	}
	return c.list[i].kill()
}

// RestartNB starts the NB ovsdb-server again on the same unix socket, TCP
// port and database file, and waits until it answers.
func (c *Central) RestartNB() error {
	i, err := c.nbIndex()
	if err != nil {
		return err
	}
	if err := c.list[i].restart(); err != nil {
		return err
	}
	return poll(10*time.Second, "the restarted NB answering on "+c.NBTCP, func() (bool, error) {
		_, err := run(c.Dir, "ovsdb-client", "list-dbs", c.NBTCP)
		return err == nil, err
	})
}
