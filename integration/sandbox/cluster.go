package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// NBCluster is a Northbound database clustered with Raft, as OVN runs it in
// production: Members ovsdb-servers on loopback (each with its unix socket,
// client TCP port and Raft port), a standalone SB, and ovn-northd on both.
type NBCluster struct {
	Dir string
	// NB lists every member's tcp: endpoint, comma-separated, as clients
	// (ovn-nbctl, ovn-northd, kubevirt-ovn) are given a cluster.
	NB string
	// Members are the members' tcp: endpoints, in start order.
	Members []string
	// SB is the SB's unix: endpoint, SBTCP its tcp: one.
	SB, SBTCP string
	// members are the members' positions among the daemons.
	members []int
	daemons
}

// StartNBCluster starts an n-member Raft NB (ovsdb-tool create-cluster on
// the first member, join-cluster on the others), a standalone SB and
// ovn-northd under dir, and waits until the cluster has a leader and
// northd has processed the NB. On error, whatever started is stopped.
func StartNBCluster(dir string, n int) (_ *NBCluster, err error) {
	if err := Check(); err != nil {
		return nil, err
	}
	c := &NBCluster{Dir: dir}
	defer func() {
		if err != nil {
			c.Stop()
		}
	}()
	var first string
	for i := 0; i < n; i++ {
		d := filepath.Join(dir, fmt.Sprintf("nb%d", i+1))
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
		raftPort, err := freePort()
		if err != nil {
			return nil, err
		}
		clientPort, err := freePort()
		if err != nil {
			return nil, err
		}
		raft := fmt.Sprintf("tcp:127.0.0.1:%d", raftPort)
		file := filepath.Join(d, "ovn-nb.db")
		if i == 0 {
			first = raft
			_, err = run(d, "ovsdb-tool", "create-cluster", file, NBSchema, raft)
		} else {
			_, err = run(d, "ovsdb-tool", "join-cluster", file, "OVN_Northbound", raft, first)
		}
		if err != nil {
			return nil, err
		}
		if err := c.start(d, "ovsdb-server", "ovs-appctl",
			"--remote=punix:"+filepath.Join(d, "ovn-nb.sock"), fmt.Sprintf("--remote=ptcp:%d:127.0.0.1", clientPort), file); err != nil {
			return nil, err
		}
		c.members = append(c.members, len(c.list)-1)
		c.Members = append(c.Members, fmt.Sprintf("tcp:127.0.0.1:%d", clientPort))
	}
	c.NB = strings.Join(c.Members, ",")
	if err := c.waitMembers(30 * time.Second); err != nil {
		return nil, err
	}
	if _, err := c.NBCtl("--timeout=30", "init"); err != nil {
		return nil, err
	}

	if c.SB, c.SBTCP, err = c.serveDB(filepath.Join(dir, "ovn-sb"), "ovn-sb", SBSchema); err != nil {
		return nil, err
	}
	if _, err := c.SBCtl("init"); err != nil {
		return nil, err
	}
	if err := c.startNorthd(dir, c.NB, c.SB, c.NBCtl); err != nil {
		return nil, err
	}
	return c, nil
}

// status is member i's cluster/status of OVN_Northbound.
func (c *NBCluster) status(i int) (string, error) {
	d := c.list[c.members[i]]
	return run(d.dir, "ovs-appctl", "--timeout=5", "-t", ctlPath(d.dir, d.name, 0), "cluster/status", "OVN_Northbound")
}

// waitMembers waits until every member has joined and one leads.
func (c *NBCluster) waitMembers(timeout time.Duration) error {
	return poll(timeout, "every NB member in the cluster and a leader", func() (bool, error) {
		leaders := 0
		for i := range c.members {
			st, err := c.status(i)
			if err != nil {
				return false, err
			}
			if !strings.Contains(st, "Status: cluster member") {
				return false, nil
			}
			if strings.Contains(st, "Role: leader") {
				leaders++
			}
		}
		return leaders == 1, nil
	})
}

// Leader is the index in Members of the member that leads now.
func (c *NBCluster) Leader() (int, error) {
	for i := range c.members {
		st, err := c.status(i)
		if err != nil {
			continue // a killed member
		}
		if strings.Contains(st, "Role: leader") {
			return i, nil
		}
	}
	return 0, fmt.Errorf("no NB member leads")
}

// WaitLeader waits until a member leads and returns its index.
func (c *NBCluster) WaitLeader(timeout time.Duration) (int, error) {
	var leader int
	err := poll(timeout, "an NB leader", func() (bool, error) {
		var err error
		leader, err = c.Leader()
		return err == nil, nil
	})
	return leader, err
}

// Pid is member i's pid.
func (c *NBCluster) Pid(i int) (int, error) { return c.list[c.members[i]].pid() }

// Kill kills member i with SIGKILL and waits until it is gone; it returns
// the pid it killed.
func (c *NBCluster) Kill(i int) (int, error) { return c.list[c.members[i]].kill() }

// Restart starts member i again with its database file (its Raft
// membership) and ports, and waits until it is a cluster member again.
func (c *NBCluster) Restart(i int) error {
	if err := c.list[c.members[i]].restart(); err != nil {
		return err
	}
	return poll(30*time.Second, fmt.Sprintf("NB member %d back in the cluster", i+1), func() (bool, error) {
		st, err := c.status(i)
		return err == nil && strings.Contains(st, "Status: cluster member"), nil
	})
}

// NBCtl runs ovn-nbctl against the cluster (on its leader, as ovn-nbctl
// does by default).
func (c *NBCluster) NBCtl(args ...string) (string, error) {
	return run(c.Dir, "ovn-nbctl", append([]string{"--db=" + c.NB}, args...)...)
}

// SBCtl runs ovn-sbctl against the SB.
func (c *NBCluster) SBCtl(args ...string) (string, error) {
	return run(c.Dir, "ovn-sbctl", append([]string{"--db=" + c.SB}, args...)...)
}
