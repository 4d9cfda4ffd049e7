package integration

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSyncReportsWhatAnotherToolAddedToOurRows: another tool adds a port
// and a column to a switch of ours and a policy to a router of ours. sync
// leaves each alone, does not count it as a change of its own, and says so;
// removing the network says its switch takes that port with it.
func TestSyncReportsWhatAnotherToolAddedToOurRows(t *testing.T) {
	c := startCentral(t)
	keepForeign(t, c)
	ex := examples(t)
	require.Equal(t, 0, kubevirtOVN(t, "sync", "--nb", c.NBTCP, "--from-file", ex).code)

	nbctl(t, c, "lsp-add", "kv-net-a", "other-tool-port")
	nbctl(t, c, "set", "Logical_Switch", "kv-net-a", "other_config:other-tool=yes")
	nbctl(t, c, "lr-policy-add", "kv-router1", "100", "ip4.src == 10.10.0.0/24", "allow")
	added := nbctl(t, c, "--bare", "--columns=_uuid", "list", "Logical_Switch_Port", "other-tool-port")
	policy := nbctl(t, c, "--bare", "--columns=_uuid", "find", "Logical_Router_Policy", "priority=100")

	r := kubevirtOVN(t, "sync", "--nb", c.NBTCP, "--from-file", ex)
	assert.Equal(t, 0, r.code)
	assert.Equal(t, "no changes\n", r.stdout, "another tool's additions are not changes of ours")
	for _, want := range []string{
		"note: Logical_Switch kv-net-a holds 1 Logical_Switch_Port row(s) that are not kubevirt-ovn's (" + strings.TrimSpace(added) + "); left as they are",
		"note: Logical_Switch kv-net-a: column(s) other_config hold values kubevirt-ovn did not write; left as they are",
		"note: Logical_Router kv-router1 holds 1 Logical_Router_Policy row(s) that are not kubevirt-ovn's (" + strings.TrimSpace(policy) + "); left as they are",
	} {
		assert.Contains(t, r.stderr, want)
	}
	assert.Equal(t, "yes", strings.TrimSpace(nbctl(t, c, "get", "Logical_Switch", "kv-net-a", "other_config:other-tool")))
	assert.Contains(t, nbctl(t, c, "lsp-list", "kv-net-a"), "other-tool-port")
	assert.Contains(t, nbctl(t, c, "lr-policy-list", "kv-router1"), "ip4.src == 10.10.0.0/24")

	// Removing net-a deletes its switch, and the other tool's port with it:
	// said before it happens (--dry-run) and when it does.
	edit(t, filepath.Join(ex, "router.yaml"), "    - net-a\n", "")
	nets := readFile(t, ex, "networks.yaml")
	i := strings.Index(nets, "---\napiVersion: k8s.cni.cncf.io/v1\nkind: NetworkAttachmentDefinition\nmetadata:\n  name: net-a\n")
	require.Positive(t, i)
	j := strings.Index(nets[i+4:], "---\n")
	require.Positive(t, j)
	edit(t, filepath.Join(ex, "networks.yaml"), nets[i:i+4+j], "")
	for _, args := range [][]string{{"--dry-run"}, nil} {
		r = kubevirtOVN(t, append([]string{"sync", "--nb", c.NBTCP, "--from-file", ex}, args...)...)
		assert.Equal(t, 0, r.code)
		assert.Contains(t, r.stderr, "note: Logical_Switch kv-net-a is deleted with 1 Logical_Switch_Port row(s) that are not kubevirt-ovn's")
	}
	assert.NotContains(t, nbctl(t, c, "show"), "kv-net-a")
}
