package integration

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubevirt-ovn/kubevirt-ovn/integration/sandbox"
)

// TestReleaseEveryDaemonIsTheRelease asks each daemon of a sandbox
// (databases, northd, every chassis's ovsdb-server, ovs-vswitchd and
// ovn-controller) its version through its control socket: each is the
// release the suite runs on (make test OVN=...), none the host's. Debian's
// ovs-vswitchd is a link through /etc/alternatives, which outside the
// release's root is the host's own.
func TestReleaseEveryDaemonIsTheRelease(t *testing.T) {
	rel, err := sandbox.CurrentRelease()
	require.NoError(t, err)
	pkg, err := sandbox.RootRelease()
	require.NoError(t, err)
	if pkg != nil {
		assert.True(t, strings.HasPrefix(pkg["ovn"], rel.Version), "root holds OVN %s, ovn-northd says %s", pkg["ovn"], rel.Version)
		assert.True(t, strings.HasPrefix(pkg["ovs"], rel.OVS), "root holds OVS %s, ovs-vswitchd says %s", pkg["ovs"], rel.OVS)
		assert.True(t, strings.HasPrefix(rel.Version, pkg["release"]+"."), "root.sh asked for %s, got %s", pkg["release"], rel.Version)
	}
	l, err := sandbox.StartLocal(t.TempDir(), sandbox.DefaultTopology())
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, l.Stop()) })
	versions, err := l.Versions()
	require.NoError(t, err)
	require.NotEmpty(t, versions)
	for d, v := range versions {
		want := rel.OVS
		if strings.Contains(d, " ovn-") {
			want = rel.Version
		}
		assert.Contains(t, v, " "+want, "%s runs %q, not the suite's %s", d, v, rel)
	}
	t.Logf("%s: %d daemons", rel, len(versions))
}
