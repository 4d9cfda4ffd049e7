package integration

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubevirt-ovn/kubevirt-ovn/integration/sandbox"
)

// A tunnel key collision in a zone: a datapath not ours (foreignSwitch)
// requests the key our switch requests, and ovn-northd gives it to the
// foreign one and another key to ours. Our key is whatever kubevirt-ovn
// allocates: the tests read it from the NB once our switch is there, and
// only then have the foreign switch request it.

const (
	keyZoneName   = "z1"
	foreignSwitch = "foreign-sw"
	keySwitch     = "kv-net-a"
	keyPort       = "kv-net-a_default_vm-a_eth1"
)

// keyZone is one interconnect zone (NB, SB and ovn-northd of its own, a
// local chassis hv1 registered in its SB without ovn-controller), a switch
// not ours created before ours, and manifests of network net-a with a VM
// interface on hv1.
func keyZone(t *testing.T) (*sandbox.Central, string) {
	t.Helper()
	c := startCentral(t)
	sbctl(t, c, "chassis-add", "hv1", "geneve", "127.0.0.10")
	sbctl(t, c, "set", "Chassis", "hv1", "hostname=hv1")
	nbctl(t, c, "set", "NB_Global", ".", "name="+keyZoneName)
	// More switches than a few: ovn-northd's order of the NB's switches
	// (its table's hash map) then depends on their UUIDs, not on which
	// came last (see TestZoneKeyCollisionSync).
	for i := range 14 {
		nbctl(t, c, "ls-add", fmt.Sprintf("filler-%d", i))
	}
	nbctl(t, c, "--wait=sb", "ls-add", foreignSwitch)
	dir := t.TempDir()
	b, err := os.ReadFile(filepath.Join("..", "deploy", "examples", "networks.yaml"))
	require.NoError(t, err)
	var netA string
	for _, doc := range strings.Split(string(b), "\n---\n") {
		if strings.Contains(doc, "name: net-a\n") {
			netA = doc
		}
	}
	require.NotEmpty(t, netA)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "networks.yaml"), []byte(netA+"\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "vmis.yaml"), []byte(`apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata:
  name: vm-a
  namespace: default
spec:
  networks:
    - name: eth1
      multus:
        networkName: net-a
status:
  nodeName: hv1
  interfaces:
    - name: eth1
      mac: "50:54:00:00:00:05"
      ipAddress: 10.10.0.5
`), 0o644))
	return c, dir
}

func zoneFlag(c *sandbox.Central) string { return keyZoneName + "=" + c.NB + "," + c.SB }

// northd pauses or resumes the zone's ovn-northd (ovn-appctl pause/resume:
// it neither reads the NB nor writes the SB while paused). A resumed
// ovn-northd runs again only once something wakes it up: an NB change
// (ovn-nbctl --wait=sb sync).
func northd(t *testing.T, c *sandbox.Central, cmd string) {
	t.Helper()
	out, err := sandbox.Tool("ovn-appctl", "-t", filepath.Join(c.Dir, "northd", "ovn-northd.ctl"), cmd).CombinedOutput()
	require.NoError(t, err, "ovn-northd %s: %s", cmd, out)
}

// ourKey waits until our switch is in the NB and returns the key it
// requests.
func ourKey(t *testing.T, c *sandbox.Central) string {
	t.Helper()
	var key string
	require.NoError(t, sandbox.Poll(30*time.Second, "our switch requesting a tunnel key in the NB", func() (bool, error) {
		out, err := c.NBCtl("--bare", "--columns=other_config", "find", "Logical_Switch", "name="+keySwitch)
		if err != nil {
			return false, err
		}
		for _, f := range strings.Fields(out) {
			if k, ok := strings.CutPrefix(f, "requested-tnl-key="); ok {
				key = strings.Trim(k, `"`)
			}
		}
		return key != "", nil
	}))
	return key
}

// sbKey is the tunnel key of the SB binding of the switch named name.
func sbKey(t *testing.T, c *sandbox.Central, name string) string {
	t.Helper()
	return strings.TrimSpace(sbctl(t, c, "--bare", "--columns=tunnel_key", "find", "Datapath_Binding", "external_ids:name="+name))
}

// settle waits until ovn-northd has processed the NB and its own last SB
// changes: the keys of both switches read the same before and after a
// round of ovn-northd.
func settle(t *testing.T, c *sandbox.Central) {
	t.Helper()
	state := func() string { return sbKey(t, c, keySwitch) + "/" + sbKey(t, c, foreignSwitch) }
	require.NoError(t, sandbox.Poll(30*time.Second, "ovn-northd settled", func() (bool, error) {
		before := state()
		if _, err := c.NBCtl("--timeout=10", "--wait=sb", "sync"); err != nil {
			return false, err
		}
		return state() == before, nil
	}))
}

// TestZoneKeyCollisionSync: sync writes its rows, names the collision on
// stderr (zone, switch, requested and actual key, cause) and exits 3; once
// the foreign switch is gone ovn-northd gives ours its key and sync exits
// 0.
//
// ovn-northd is paused while sync commits our new switch and the foreign
// switch, which exists already, starts requesting our key: ovn-northd
// assigns the requested keys of existing datapaths first, so its next
// round gives the key to the foreign switch. In the rounds after that both
// datapaths exist, and the first in ovn-northd's order of the NB's
// switches (a hash map: by UUID) keeps the key: when it is ours, the
// scenario starts over with both switches new (new UUIDs).
func TestZoneKeyCollisionSync(t *testing.T) {
	c, dir := keyZone(t)
	var key, stderr string
	for attempt := 1; ; attempt++ {
		require.LessOrEqual(t, attempt, 30, "ovn-northd never left the requested key to the foreign switch")
		northd(t, c, "pause")
		cmd := exec.Command(binary, "sync", "--from-file", dir, "--zone", zoneFlag(c), "--northd-wait", "60s")
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		require.NoError(t, cmd.Start())
		key = ourKey(t, c)
		nbctl(t, c, "set", "Logical_Switch", foreignSwitch, "other_config:requested-tnl-key="+key)
		northd(t, c, "resume")
		nbctl(t, c, "--timeout=30", "--wait=sb", "sync")
		err := cmd.Wait()
		t.Logf("attempt %d: kubevirt-ovn sync (%v)\n--- stdout\n%s--- stderr\n%s", attempt, err, out.String(), errb.String())
		assert.Contains(t, out.String(), "created", "the rows are written")
		settle(t, c)
		if sbKey(t, c, foreignSwitch) == key {
			var ee *exec.ExitError
			require.ErrorAs(t, err, &ee)
			require.Equal(t, 3, ee.ExitCode())
			stderr = errb.String()
			break
		}
		nbctl(t, c, "ls-del", keySwitch, "--", "ls-del", foreignSwitch)
		nbctl(t, c, "--wait=sb", "ls-add", foreignSwitch)
	}
	actual := sbKey(t, c, keySwitch)
	require.NotEqual(t, key, actual)
	assert.Contains(t, stderr, fmt.Sprintf("tunnel key collision: zone %s: switch %s of network net-a requests tunnel key %s but the SB gave it %s: another datapath (%s) in zone %s requests the same key; ovn-northd gave ours another one: cross-zone traffic of network net-a breaks\n",
		keyZoneName, keySwitch, key, actual, foreignSwitch, keyZoneName))
	assert.Equal(t, key, strings.Trim(strings.TrimSpace(nbctl(t, c, "get", "Logical_Switch", keySwitch, "other_config:requested-tnl-key")), `"`))
	assert.NotEmpty(t, strings.TrimSpace(nbctl(t, c, "--bare", "--columns=name", "find", "Logical_Switch_Port", "external_ids:kubevirt-ovn/owner=net-a")))

	// The foreign switch gone, ovn-northd gives ours the key it requests:
	// by itself before OVN 25.09; from 25.09 on only once our switch's row
	// changes, which sync does (it says so).
	nbctl(t, c, "--wait=sb", "ls-del", foreignSwitch)
	r := kubevirtOVN(t, "sync", "--from-file", dir, "--zone", zoneFlag(c))
	assert.Equal(t, 0, r.code)
	assert.NotContains(t, r.stderr, "collision")
	assert.Equal(t, key, sbKey(t, c, keySwitch))
	nudge := fmt.Sprintf("note: zone %s: switch %s: its tunnel key %s was free but ovn-northd had given it %s", keyZoneName, keySwitch, key, actual)
	if expectFacts(t).keepsFreedKeys {
		assert.Contains(t, r.stderr, nudge)
	} else {
		assert.NotContains(t, r.stderr, "was free but")
	}
}

// TestZoneKeyCollisionRun: run --from-file --zone logs the collision and
// counts it in kubevirt_ovn_tunnel_key_mismatches{zone}, which returns to
// 0 once the foreign switch is gone. The collisions are written in the SB
// as ovn-northd writes them (the foreign switch has our key, ours another;
// our VM port another key), with ovn-northd paused so that it does not
// undo them until it resumes.
func TestZoneKeyCollisionRun(t *testing.T) {
	c, dir := keyZone(t)
	p := startController(t, "zone", "--zone", zoneFlag(c), "--from-file", dir, "--file-poll", "100ms")
	const gauge = "kubevirt_ovn_tunnel_key_mismatches"
	key := ourKey(t, c)
	require.NoError(t, sandbox.Poll(30*time.Second, "our switch bound with its key in the SB", func() (bool, error) {
		out, err := c.SBCtl("--bare", "--columns=tunnel_key", "find", "Datapath_Binding", "external_ids:name="+keySwitch)
		return strings.TrimSpace(out) == key, err
	}))
	_, body := p.get("/metrics")
	assert.Contains(t, body, gauge+`{zone="`+keyZoneName+`"} 0`)

	northd(t, c, "pause")
	nbctl(t, c, "set", "Logical_Switch", foreignSwitch, "other_config:requested-tnl-key="+key)
	actual := sbKey(t, c, foreignSwitch)
	uuid := func(name string) string {
		return strings.TrimSpace(sbctl(t, c, "--bare", "--columns=_uuid", "find", "Datapath_Binding", "external_ids:name="+name))
	}
	sbctl(t, c, "set", "Datapath_Binding", uuid(keySwitch), "tunnel_key="+actual, "--", "set", "Datapath_Binding", uuid(foreignSwitch), "tunnel_key="+key)
	// And our VM port another key than the one it requests.
	portKey := strings.Trim(strings.TrimSpace(nbctl(t, c, "get", "Logical_Switch_Port", keyPort, "options:requested-tnl-key")), `"`)
	require.NotEqual(t, "100", portKey)
	sbctl(t, c, "set", "Port_Binding", keyPort, "tunnel_key=100")
	require.NoError(t, sandbox.Poll(30*time.Second, "two mismatches counted", func() (bool, error) {
		return p.metric(gauge) == 2, nil
	}))
	_, body = p.get("/metrics")
	assert.Contains(t, body, gauge+`{zone="`+keyZoneName+`"} 2`)
	assert.Contains(t, p.out.String(), fmt.Sprintf("zone %s: port %s of switch %s (network net-a) requests tunnel key %s but the SB gave it 100", keyZoneName, keyPort, keySwitch, portKey))
	assert.Contains(t, p.out.String(), "tunnel key collision")
	assert.Contains(t, p.out.String(), fmt.Sprintf("zone %s: switch %s of network net-a requests tunnel key %s but the SB gave it %s: another datapath (%s)", keyZoneName, keySwitch, key, actual, foreignSwitch))

	nbctl(t, c, "ls-del", foreignSwitch)
	northd(t, c, "resume")
	nbctl(t, c, "--timeout=30", "--wait=sb", "sync")
	require.NoError(t, sandbox.Poll(30*time.Second, "the mismatch cleared", func() (bool, error) {
		return p.metric(gauge) == 0, nil
	}))
	assert.Equal(t, key, sbKey(t, c, keySwitch))
	assert.Equal(t, portKey, strings.TrimSpace(sbctl(t, c, "get", "Port_Binding", keyPort, "tunnel_key")))
	assert.Contains(t, p.out.String(), "tunnel key collision resolved")
}
