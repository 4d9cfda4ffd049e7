package translator

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The planner is pure: it depends on the nbmodel rows, never on an OVSDB
// client (the NB side is translator/nb).
func TestPlannerImportsNoOVSDBClient(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	require.NoError(t, err, "%s", out)
	for _, dep := range strings.Fields(string(out)) {
		require.NotContains(t, []string{"github.com/ovn-kubernetes/libovsdb/client", "github.com/ovn-kubernetes/libovsdb/cache"}, dep,
			"translator must not depend on an OVSDB client or cache")
	}
}
