package nb_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubevirt-ovn/kubevirt-ovn/nbmodel"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/nb"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/nbtest"
)

// TestNudgeBFDKeepsTheValue (on ovsdb-server): each nudge rewrites
// options:bfd-mult with the same number written differently, and leaves
// the other options alone.
func TestNudgeBFDKeepsTheValue(t *testing.T) {
	ours, raw := connect(t, "unix:"+nbtest.Real(t))
	ctx := context.Background()
	op, err := raw.Create(&nbmodel.NBGlobal{Options: map[string]string{"bfd-min-rx": "300"}})
	require.NoError(t, err)
	_, err = nb.Commit(ctx, raw, "seed", op)
	require.NoError(t, err)
	options := func() map[string]string {
		t.Helper()
		var g []*nbmodel.NBGlobal
		require.NoError(t, raw.List(ctx, &g))
		require.Len(t, g, 1)
		return g[0].Options
	}
	for _, want := range []string{"3", "", "3"} {
		require.NoError(t, nb.NudgeBFD(ctx, ours))
		assert.Eventually(t, func() bool { return options()["bfd-mult"] == want }, 5e9, 1e7, "bfd-mult %q, options %v", want, options())
		assert.Equal(t, "300", options()["bfd-min-rx"])
	}
	// An operator's value N alternates with 0N.
	var g []*nbmodel.NBGlobal
	require.NoError(t, raw.List(ctx, &g))
	set := &nbmodel.NBGlobal{UUID: g[0].UUID, Options: map[string]string{"bfd-mult": "5", "bfd-min-rx": "300"}}
	op, err = raw.Where(set).Update(set, &set.Options)
	require.NoError(t, err)
	_, err = nb.Commit(ctx, raw, "operator", op)
	require.NoError(t, err)
	assert.Eventually(t, func() bool { return options()["bfd-mult"] == "5" }, 5e9, 1e7)
	for _, want := range []string{"05", "5"} {
		require.NoError(t, nb.NudgeBFD(ctx, ours))
		assert.Eventually(t, func() bool { return options()["bfd-mult"] == want }, 5e9, 1e7, "bfd-mult %q, options %v", want, options())
	}
}
