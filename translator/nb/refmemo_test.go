package nb_test

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ovn-kubernetes/libovsdb/cache"
	"github.com/ovn-kubernetes/libovsdb/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubevirt-ovn/kubevirt-ovn/nbmodel"
	tr "github.com/kubevirt-ovn/kubevirt-ovn/translator"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/nb"
)

// bigGroup is example() with n more VMs on net-a, vm-a and the first
// members of them in sg-web (a Port_Group big enough for the memo).
func bigGroup(n int, members func(i int) bool) *tr.Snapshot {
	s := example()
	s.VMs[0].SecurityGroups = "sg-web"
	for i := range n {
		v := tr.VMInterface{Namespace: "default", VMI: fmt.Sprintf("vm-%03d", i), Interface: "eth1", Network: "net-a", NetworkNamespace: "default",
			MAC: fmt.Sprintf("50:54:00:00:01:%02x", i), IP: fmt.Sprintf("10.10.0.%d", 10+i)}
		if members(i) {
			v.SecurityGroups = "sg-web"
		}
		s.VMs = append(s.VMs, v)
	}
	s.SecurityGroups = []tr.SecurityGroup{{Name: "sg-web", ID: "sg-web"}}
	return s
}

// TestRefMemoFollowsThePortGroup: with a memo of what sg-web's Port_Group
// held, shown every NB event as a controller shows it, the group's ports
// follow members added and removed, a second sync writes nothing, and a
// held port renamed by another tool is read again (the group no longer
// takes it for its member's port) rather than taken from the memo.
func TestRefMemoFollowsThePortGroup(t *testing.T) {
	ours, raw := connect(t, startNB(t))
	memo := nb.NewRefMemo(nil, instance)
	var renamed atomic.Bool
	ours.Cache().AddEventHandler(&cache.EventHandlerFuncs{
		UpdateFunc: func(table string, old, cur model.Model) {
			memo.Observe(table, old, cur)
			if p, ok := cur.(*nbmodel.LogicalSwitchPort); ok && p.Name == "renamed-by-hand" {
				renamed.Store(true)
			}
		},
		DeleteFunc: func(table string, old model.Model) { memo.Observe(table, old, nil) },
	})
	dryRun := false
	syncWith := func(s *tr.Snapshot, units ...tr.Unit) *nb.SyncResult {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		plan := tr.Build(s, instance)
		opts := nb.SyncOptions{Instance: instance, Memo: memo, DryRun: dryRun}
		var res *nb.SyncResult
		var err error
		if units == nil {
			res, err = nb.Sync(ctx, ours, plan, opts)
		} else {
			res, err = nb.SyncUnits(ctx, ours, plan, units, opts)
		}
		require.NoError(t, err)
		return res
	}
	wantPorts := func(s *tr.Snapshot) []string {
		var out []string
		for _, v := range s.VMs {
			if v.SecurityGroups != "" {
				out = append(out, tr.VMPortName(v.Network, v.Namespace, v.VMI, v.Interface))
			}
		}
		return out
	}
	requirePorts := func(s *tr.Snapshot) {
		t.Helper()
		pg := portGroups(t, raw)[tr.PortGroupName("sg-web")]
		require.NotNil(t, pg)
		require.Eventually(t, func() bool {
			pg = portGroups(t, raw)[tr.PortGroupName("sg-web")]
			return len(pg.Ports) == len(wantPorts(s))
		}, 10*time.Second, 10*time.Millisecond)
		assert.ElementsMatch(t, wantPorts(s), portNames(t, raw, pg))
	}
	idle := func(s *tr.Snapshot) {
		t.Helper()
		res := syncWith(s)
		requireNoFailures(t, res)
		assert.Empty(t, res.Changes(), "a second sync with no input change must change nothing")
	}

	s := bigGroup(90, func(i int) bool { return i < 80 })
	requireNoFailures(t, syncWith(s))
	requirePorts(s)
	idle(s)

	// Diffs that write nothing (as a commit that fails) leave the memo
	// expecting what the NB does not hold: members gone and joined, then
	// others.
	dryRun = true
	requireNoFailures(t, syncWith(bigGroup(90, func(i int) bool { return i < 40 || i == 81 })))
	requireNoFailures(t, syncWith(bigGroup(90, func(i int) bool { return i > 3 })))
	dryRun = false

	// Three members leave, two VMs join: the memo holds the rest.
	s = bigGroup(90, func(i int) bool { return (i < 80 && i%30 != 7) || i == 85 || i == 88 })
	res := syncWith(s)
	requireNoFailures(t, res)
	requirePorts(s)
	assert.Contains(t, fmt.Sprint(res.Changes()), "Port_Group", "the group's ports changed")
	idle(s)

	// Another tool renames a member's port. Read again, the row is no
	// longer the member's: the group alone cannot resolve the member (its
	// network makes the port again), where a memo taken as it was would
	// have found nothing to do.
	held := tr.VMPortName("net-a", "default", "vm-005", "eth1")
	ctx := context.Background()
	p := &nbmodel.LogicalSwitchPort{Name: held}
	require.NoError(t, raw.Get(ctx, p))
	p.Name = "renamed-by-hand"
	ops, err := raw.Where(p).Update(p, &p.Name)
	require.NoError(t, err)
	_, err = raw.Transact(ctx, ops...)
	require.NoError(t, err)
	require.Eventually(t, renamed.Load, 10*time.Second, 10*time.Millisecond)
	group := tr.Unit{Kind: tr.KindSecurityGroup, Name: "sg-web"}
	res = syncWith(s, group)
	require.Len(t, res.Failed(), 1)
	assert.Contains(t, res.Failed()[0].Error(), held)

	// The whole sync heals it: the network makes the port again, and the
	// group holds it.
	requireNoFailures(t, syncWith(s))
	requirePorts(s)
	idle(s)
	assert.False(t, slices.ContainsFunc(list[nbmodel.LogicalSwitchPort](t, raw), func(p *nbmodel.LogicalSwitchPort) bool { return p.Name == "renamed-by-hand" }),
		"the renamed row still carries our keys and its network no longer wants it")
}

// TestAffectedByAReferencedRowRenamed: another tool renaming a port of
// ours that a Port_Group of ours holds concerns the port's network and the
// group (a memo of what the group holds must be read again).
func TestAffectedByAReferencedRowRenamed(t *testing.T) {
	ours, _ := connect(t, startNB(t))
	s := bigGroup(1, func(int) bool { return true })
	requireNoFailures(t, sync(t, ours, s))
	p := &nbmodel.LogicalSwitchPort{Name: tr.VMPortName("net-a", "default", "vm-000", "eth1")}
	require.NoError(t, ours.Get(context.Background(), p))
	renamed := *p
	renamed.Name = "renamed-by-hand"
	got := nb.Affected(ours, nbmodel.LogicalSwitchPortTable, p, &renamed, instance)
	assert.ElementsMatch(t, []tr.Unit{{Kind: tr.KindNetwork, Name: "net-a"}, {Kind: tr.KindSecurityGroup, Name: "sg-web"}}, got)

	// An update that keeps its name and owner concerns its network only.
	tagged := *p
	tagged.Addresses = []string{"50:54:00:00:01:00 10.10.0.99"}
	assert.Equal(t, []tr.Unit{{Kind: tr.KindNetwork, Name: "net-a"}}, nb.Affected(ours, nbmodel.LogicalSwitchPortTable, p, &tagged, instance))
}
