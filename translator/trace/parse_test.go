package trace

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func parseFile(t *testing.T, name string) []Event {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	require.NoError(t, err)
	events, err := Parse(string(b))
	require.NoError(t, err)
	return events
}

func ofKind(events []Event, k EventKind) []Event {
	var out []Event
	for _, e := range events {
		if e.Kind == k {
			out = append(out, e)
		}
	}
	return out
}

// ovn-trace 23.03's detailed output of vm-b's floating IP leaving router1:
// every flow with its pipeline, the conntrack SNAT, the outputs.
func TestParseSNAT(t *testing.T) {
	events := parseFile(t, "snat-23.03.txt")
	first := events[0]
	assert.Equal(t, Event{Kind: Flow, Pipeline: "ingress", Datapath: "kv-net-b", InPort: "kv-net-b_default_vm-b_eth1",
		Table: 0, Stage: "ls_in_check_port_sec", Match: "1", Priority: 50, UUID: "99dbf978",
		Actions: []string{"reg0[15] = check_in_port_sec();", "next;"}}, first)
	var snat Event
	for _, e := range events {
		if e.Stage == "lr_out_snat" {
			snat = e
		}
	}
	assert.Equal(t, "egress", snat.Pipeline)
	assert.Equal(t, "kv-router1", snat.Datapath)
	assert.Equal(t, "kv-rtoe-router1", snat.OutPort)
	assert.Equal(t, 161, snat.Priority)
	assert.Equal(t, "5fa40b04", snat.UUID)
	assert.Equal(t, []string{"ct_snat_in_czone(172.16.0.150);"}, snat.Actions)
	assert.Contains(t, ofKind(events, Transform), Event{Kind: Transform, Pipeline: "egress", Datapath: "kv-router1",
		InPort: "kv-rtos-router1_net-b", OutPort: "kv-rtoe-router1", Text: "ct_snatin_czone(ip4.src=172.16.0.150)"})
	outs := ofKind(events, Output)
	require.Len(t, outs, 3)
	assert.Equal(t, []string{"kv-stor-net-b_router1", "kv-rtoe-router1", "kv-ln-public"}, []string{outs[0].Text, outs[1].Text, outs[2].Text})
	assert.Equal(t, []string{"patch", "patch", "localnet"}, []string{outs[0].PortType, outs[1].PortType, outs[2].PortType})
	assert.Equal(t, "kv-public", outs[2].Datapath, "a multicast group's egress pipeline")
}

// The trace of a router without a route ends in lr_in_ip_routing's drop;
// a security group's drop in the ACL stage.
func TestParseDrops(t *testing.T) {
	events := parseFile(t, "no-route-23.03.txt")
	last := events[len(events)-1]
	assert.Equal(t, "lr_in_ip_routing", last.Stage)
	assert.Equal(t, []string{"drop;"}, last.Actions)
	assert.Empty(t, ofKind(events, Output)[1:], "only the patch to the router")

	events = parseFile(t, "acl-drop-23.03.txt")
	last = events[len(events)-1]
	assert.Equal(t, "ls_out_acl", last.Stage)
	assert.Equal(t, "egress", last.Pipeline)
	assert.Equal(t, "kv-net-a_default_vm-a_eth1", last.OutPort)
	assert.Equal(t, []string{"drop;"}, last.Actions)
}

// The other forms of a table line: a stage without a source, a table
// where no flow matches, and ovn-trace's errors.
func TestParseForms(t *testing.T) {
	events, err := Parse(`# icmp,reg14=0x1

ingress(dp="ls", inport="p1")
-----------------------------
 3. ls_in_acl: ip4 && inport == "p1", priority 1001, uuid 0123abcd
    next;
 4. ls_in_qos_mark: no match (implicit drop)
*** no load balancing destination (use --lb-dst)
`)
	require.NoError(t, err)
	require.Len(t, events, 3)
	assert.Equal(t, "ls_in_acl", events[0].Stage)
	assert.Equal(t, `ip4 && inport == "p1"`, events[0].Match)
	assert.Equal(t, 1001, events[0].Priority)
	assert.Equal(t, Event{Kind: Flow, Pipeline: "ingress", Datapath: "ls", InPort: "p1", Table: 4, Stage: "ls_in_qos_mark", Actions: []string{"drop;"}}, events[1])
	assert.Equal(t, Error, events[2].Kind)
	assert.Equal(t, "no load balancing destination (use --lb-dst)", events[2].Text)

	_, err = Parse("ovn-trace: unknown datapath kv-net-z\n")
	assert.ErrorContains(t, err, "ovn-trace printed no logical flow")
}
