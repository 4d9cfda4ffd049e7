package integration

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/kubevirt-ovn/kubevirt-ovn/integration/sandbox"
)

// ctrlOwnedIdentity is what makes a row of ours unique, per table: its name,
// or for unnamed rows what it does and who owns it.
var ctrlOwnedIdentity = map[string]string{
	"Logical_Router":              "name",
	"Logical_Router_Port":         "name",
	"Logical_Switch":              "name",
	"Logical_Switch_Port":         "name",
	"Gateway_Chassis":             "name",
	"NAT":                         "type,logical_ip,external_ip,external_ids",
	"Logical_Router_Static_Route": "ip_prefix,nexthop,output_port,external_ids",
}

// ctrlDuplicates lists the rows of ours that exist more than once.
func ctrlDuplicates(t *testing.T, c *sandbox.Central) []string {
	t.Helper()
	var dups []string
	for _, table := range slices.Sorted(func(yield func(string) bool) {
		for k := range ctrlOwnedIdentity {
			if !yield(k) {
				return
			}
		}
	}) {
		out := nbctl(t, c, "--format=csv", "--data=bare", "--no-headings", "--columns="+ctrlOwnedIdentity[table],
			"find", table, "external_ids:kubevirt-ovn/managed-by=kubevirt-ovn")
		seen := map[string]int{}
		for _, row := range strings.Split(strings.TrimSpace(out), "\n") {
			if row != "" {
				seen[row]++
			}
		}
		for row, n := range seen {
			if n > 1 {
				dups = append(dups, fmt.Sprintf("%s %s ×%d", table, row, n))
			}
		}
	}
	slices.Sort(dups)
	return dups
}

// ctrlNATs is the external and logical IP of each NAT row a router
// references.
func ctrlNATs(t *testing.T, c *sandbox.Central, router string) []string {
	t.Helper()
	out := nbctl(t, c, "--format=csv", "--data=bare", "--no-headings", "--columns=external_ip,logical_ip",
		"find", "NAT", "external_ids:kubevirt-ovn/owner="+router)
	rows := strings.Fields(out)
	slices.Sort(rows)
	return rows
}

// Two `run --from-file` processes (file mode has no Lease) on one NB, same
// input; NAT rows deleted by hand, again and again: both repair them at
// once, racing. Once they settle, every owned row is there exactly once.
func TestCtrlTwoWritersNoDuplicatesNoneMissing(t *testing.T) {
	c := startCentral(t)
	keepForeign(t, c)
	const n = 20
	dir := ctrlInput(t, n)
	startController(t, "ctrl-w1", "--nb", c.NBTCP, "--from-file", dir, "--resync", "1h")
	startController(t, "ctrl-w2", "--nb", c.NBTCP, "--from-file", dir, "--resync", "1h")

	want := func(i int) []string {
		_, _, ip, cidr := ctrlRouter(i)
		return []string{ip + "," + cidr}
	}
	waitNB(t, "every router's NAT", func() bool {
		for i := 0; i < n; i++ {
			name, _, _, _ := ctrlRouter(i)
			if len(ctrlNATs(t, c, name)) == 0 {
				return false
			}
		}
		return true
	})

	deleted, raced := 0, 0
	for round := 0; round < 10; round++ {
		var args, routers []string
		for i := round % 3; i < n; i += 3 {
			name, _, _, _ := ctrlRouter(i)
			routers = append(routers, name)
			args = append(args, "--", "clear", "Logical_Router", "kv-"+name, "nat")
		}
		nbctl(t, c, args[1:]...)
		deleted += len(routers)
		waitNB(t, fmt.Sprintf("round %d: the NATs of %d routers repaired", round, len(routers)), func() bool {
			for _, r := range routers {
				if len(ctrlNATs(t, c, r)) == 0 {
					return false
				}
			}
			return true
		})
		raced += len(ctrlDuplicates(t, c))
	}

	var dups, missing []string
	err := sandbox.Poll(60*time.Second, "no duplicate and no missing row", func() (bool, error) {
		dups, missing = ctrlDuplicates(t, c), nil
		for i := 0; i < n; i++ {
			name, _, _, _ := ctrlRouter(i)
			if got := ctrlNATs(t, c, name); !slices.Equal(got, want(i)) {
				missing = append(missing, fmt.Sprintf("%s: NAT %v, want %v", name, got, want(i)))
			}
		}
		return len(dups) == 0 && len(missing) == 0, nil
	})
	t.Logf("%d NAT rows deleted by hand in 10 rounds; %d duplicates still there right after the repairs", deleted, raced)
	assert.NoError(t, err, "duplicates:\n%s\nwrong NATs:\n%s", strings.Join(dups, "\n"), strings.Join(missing, "\n"))
	assert.Contains(t, ctrlDryRun(t, c, dir), "\nno changes\n", "a sync finds nothing missing or extra")
}
