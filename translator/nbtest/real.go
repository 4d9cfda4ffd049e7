package nbtest

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// NBSchema and SBSchema are where Debian's ovn-common installs the NB and
// SB schemas.
const (
	NBSchema = "/usr/share/ovn/ovn-nb.ovsschema"
	SBSchema = "/usr/share/ovn/ovn-sb.ovsschema"
)

// Real serves an empty OVN_Northbound from the system's ovsdb-server (OVN
// installed by `make deps`) until the test ends, and returns its unix
// socket path: for what libovsdb's in-process server does not do as
// ovsdb-server does (it ignores monitor conditions, and compares a wait's
// rows one by one against every expected row).
func Real(t testing.TB) string {
	sock, _ := realDB(t, "nb", NBSchema)
	return sock
}

// RealProcess is Real with its ovsdb-server's process, for a test that
// stops it (SIGSTOP: a server busy or hung) and lets it go on.
func RealProcess(t testing.TB) (string, *os.Process) { return realDB(t, "nb", NBSchema) }

// RealSB is Real for an empty OVN_Southbound (the system's SB schema), with
// no northd: the test writes what northd would.
func RealSB(t testing.TB) string {
	sock, _ := realDB(t, "sb", SBSchema)
	return sock
}

func realDB(t testing.TB, name, schema string) (string, *os.Process) {
	t.Helper()
	dir := t.TempDir()
	db := filepath.Join(dir, name+".db")
	out, err := exec.Command("ovsdb-tool", "create", db, schema).CombinedOutput()
	require.NoError(t, err, "ovsdb-tool create (is OVN installed? make deps): %s", out)
	sock := filepath.Join(dir, name+".sock")
	cmd := exec.Command("ovsdb-server", db, "--remote=punix:"+sock, "--unixctl="+filepath.Join(dir, name+".ctl"),
		"--no-chdir", "-vconsole:off", "--log-file="+filepath.Join(dir, name+".log"))
	require.NoError(t, cmd.Start(), "starting ovsdb-server")
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	// The socket's file exists from its bind, before ovsdb-server listens
	// on it: a client connecting in between is refused. Ready is when a
	// connection is accepted.
	deadline := time.Now().Add(30 * time.Second)
	for {
		if c, err := net.Dial("unix", sock); err == nil {
			c.Close()
			return sock, cmd.Process
		}
		require.True(t, time.Now().Before(deadline), "ovsdb-server did not accept connections on %s within 30s", sock)
		time.Sleep(10 * time.Millisecond)
	}
}
