package integration

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubevirt-ovn/kubevirt-ovn/translator/nbtest"
)

// A silent endpoint listed first: sync and run say which endpoint did not
// answer and use the next one at once; when the NB they use is killed and
// restarted, run reconnects to it without getting stuck on the silent one.
func TestConnSilentEndpointListedFirst(t *testing.T) {
	c := startCentral(t)
	keepForeign(t, c)
	silent := nbtest.Silent(t)
	nb := silent + "," + c.NBTCP
	ex := examples(t)
	silentLog := func(out string) bool {
		return strings.Contains(out, silent) && strings.Contains(out, "did not answer list_dbs within 1s")
	}

	start := time.Now()
	r := kubevirtOVN(t, "sync", "--nb", nb, "--from-file", ex, "--endpoint-timeout", "1s", "--timeout", "30s")
	t.Logf("sync took %s with the silent endpoint first", time.Since(start).Round(time.Millisecond))
	require.Equal(t, 0, r.code)
	assert.True(t, silentLog(r.stderr), "sync names the silent endpoint:\n%s", r.stderr)
	assert.Equal(t, "172.16.0.100 172.16.0.100", natIPs(t, c, "router1"))

	ctrl := startController(t, "conn-silent", "--nb", nb, "--from-file", ex, "--file-poll", "100ms", "--resync", "10m", "--endpoint-timeout", "1s")
	assert.True(t, silentLog(ctrl.out.String()), "run names the silent endpoint")
	edit(t, ex+"/router.yaml", "ip: 172.16.0.100", "ip: 172.16.0.101")
	waitNB(t, "run applies an edit", func() bool { return natIPs(t, c, "router1") == "172.16.0.101 172.16.0.101" })

	_, err := c.KillNB()
	require.NoError(t, err)
	waitNB(t, "the controller noticing the lost NB", func() bool { return strings.Contains(ctrl.out.String(), "NB connection lost") })
	edit(t, ex+"/router.yaml", "ip: 172.16.0.101", "ip: 172.16.0.102")
	waitNB(t, "the controller reading the edit", func() bool {
		return strings.Count(ctrl.out.String(), "manifests changed; reconciling") >= 2
	})
	require.NoError(t, c.RestartNB())
	restarted := time.Now()
	waitNB(t, "the edit made while the NB was down applied", func() bool { return natIPs(t, c, "router1") == "172.16.0.102 172.16.0.102" })
	t.Logf("edit applied %s after the NB restarted", time.Since(restarted).Round(time.Millisecond))
	waitNB(t, "the controller logging the reconnection to "+c.NBTCP, func() bool {
		return strings.Contains(ctrl.out.String(), `"NB connection back; reconciling every unit" logger="controller" endpoint="`+c.NBTCP+`"`)
	})
	assert.NotContains(t, ctrl.out.String(), "panic")
}
