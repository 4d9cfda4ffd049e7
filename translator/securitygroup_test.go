package translator

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubevirt-ovn/kubevirt-ovn/nbmodel"
)

func sgUnit(id string) Unit { return Unit{Kind: KindSecurityGroup, Name: id} }

func intp(n int) *int { return &n }

// TestPortGroupName: OVN identifiers, readable when the id is one already,
// and two ids never share a name: the sanitized form carries a '.', which
// the plain form cannot.
func TestPortGroupName(t *testing.T) {
	assert.Equal(t, "kv_sg_web_1", PortGroupName("web_1"))
	dashed := PortGroupName("sg-web")
	assert.Regexp(t, `^kv_sg_sg_web\.[0-9a-f]{8}$`, dashed)
	assert.NotEqual(t, dashed, PortGroupName("sg_web"))
	assert.NotEqual(t, PortGroupName("a-b"), PortGroupName("a.b"))
	assert.NotEqual(t, PortGroupName("a-b"), PortGroupName("a_b"))
	for _, id := range []string{"sg-web", "a.b", "x y", "ünï"} {
		assert.Regexp(t, `^[a-zA-Z_.][a-zA-Z_.0-9]*$`, PortGroupName(id), id)
	}
}

// TestSecurityGroupRuleMatches reads like the README's rule table: each
// rule's ACL, Neutron's semantics (destination ports both ways, ICMP
// min/max = type/code, directional remote groups), or its named error.
// TestSecurityGroupRulesReadAsONOS: rules ONOS gave a meaning that
// kubevirt-ovn would not write itself are read as ONOS read them, with a
// note, not refused (issue 30).
func TestSecurityGroupRulesReadAsONOS(t *testing.T) {
	pg := PortGroupName("sg-web")
	other := PortGroupName("sg-db")
	tests := []struct {
		name        string
		rule        SecurityGroupRule
		match, note string
	}{
		{"both remotes: the group", SecurityGroupRule{Direction: "ingress", RemoteIPPrefix: "10.0.0.0/8", RemoteGroupID: "sg-db"},
			"outport == @" + pg + " && ip4 && ip4.src == $" + other + "_ip4",
			"spec.remoteIpPrefix 10.0.0.0/8 is ignored beside spec.remoteGroupId sg-db, as ONOS ignored it"},
		{"tcp 0 to 0: every port", SecurityGroupRule{Direction: "ingress", Protocol: "tcp", PortRangeMin: intp(0), PortRangeMax: intp(0)},
			"outport == @" + pg + " && ip4 && tcp",
			"spec.portRangeMin 0 with no portRangeMax above it is every port, as ONOS read it"},
		{"udp 0 alone: every port", SecurityGroupRule{Direction: "egress", Protocol: "udp", PortRangeMin: intp(0)},
			"inport == @" + pg + " && ip4 && udp",
			"spec.portRangeMin 0 with no portRangeMax above it is every port, as ONOS read it"},
		{"tcp 0 to 1024: from the first port", SecurityGroupRule{Direction: "ingress", Protocol: "tcp", PortRangeMin: intp(0), PortRangeMax: intp(1024)},
			"outport == @" + pg + " && ip4 && tcp && tcp.dst >= 1 && tcp.dst <= 1024", ""},
		{"protocol any with ports: every protocol", SecurityGroupRule{Direction: "ingress", Protocol: "any", PortRangeMin: intp(80), PortRangeMax: intp(80)},
			"outport == @" + pg + " && ip4",
			"spec.portRangeMin and spec.portRangeMax are ignored with protocol any: the rule allows every protocol, as ONOS read it"},
		{"etherType with spaces", SecurityGroupRule{Direction: "ingress", EtherType: " IPv4 "}, "outport == @" + pg + " && ip4", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sp := planRule(t, tt.rule)
			require.Empty(t, sp.RuleErrors)
			var matches []string
			for _, a := range sp.ACLs {
				if a.ExternalIDs[KeySecurityACL] == "rule/r" {
					matches = append(matches, a.Match)
				}
			}
			assert.Equal(t, []string{tt.match}, matches)
			if tt.note == "" {
				assert.Empty(t, sp.Notes)
			} else {
				assert.Equal(t, []string{"SecurityGroup sg-web rule r: " + tt.note}, sp.Notes)
			}
		})
	}
}

// planRule plans sg-web (beside sg-db) with rule r, named r, as its one
// rule.
func planRule(t *testing.T, r SecurityGroupRule) *SecurityGroupPlan {
	t.Helper()
	in := NewInput()
	r.Name, r.ID, r.SecurityGroupID = "r", "r", "sg-web"
	in.Set("s", Objects{SecurityGroups: []SecurityGroup{{Name: "sg-web", ID: "sg-web"}, {Name: "sg-db", ID: "sg-db"}}, SecurityGroupRules: []SecurityGroupRule{r}})
	sp := in.Plan(sgUnit("sg-web"), testInstance, nil).SecurityGroup
	require.NotNil(t, sp)
	return sp
}

func TestSecurityGroupRuleMatches(t *testing.T) {
	pg := PortGroupName("sg-web")
	other := PortGroupName("sg-db")
	tests := []struct {
		name string
		rule SecurityGroupRule
		dir  string
		want string // the match, or the error
		err  bool
	}{
		{"ingress, any", SecurityGroupRule{Direction: "ingress"}, "to-lport", "outport == @" + pg + " && ip4", false},
		{"egress, any, IPv4 any case", SecurityGroupRule{Direction: "EGRESS", EtherType: "ipv4"}, "from-lport", "inport == @" + pg + " && ip4", false},
		{"tcp port", SecurityGroupRule{Direction: "ingress", Protocol: "tcp", PortRangeMin: intp(80), PortRangeMax: intp(80)}, "to-lport",
			"outport == @" + pg + " && ip4 && tcp && tcp.dst == 80", false},
		{"tcp min only", SecurityGroupRule{Direction: "ingress", Protocol: "6", PortRangeMin: intp(22)}, "to-lport",
			"outport == @" + pg + " && ip4 && tcp && tcp.dst == 22", false},
		{"udp range, egress: destination port", SecurityGroupRule{Direction: "egress", Protocol: "17", PortRangeMin: intp(5000), PortRangeMax: intp(5100)}, "from-lport",
			"inport == @" + pg + " && ip4 && udp && udp.dst >= 5000 && udp.dst <= 5100", false},
		{"full range is the protocol", SecurityGroupRule{Direction: "ingress", Protocol: "sctp", PortRangeMin: intp(1), PortRangeMax: intp(65535)}, "to-lport",
			"outport == @" + pg + " && ip4 && sctp", false},
		{"icmp type and code", SecurityGroupRule{Direction: "ingress", Protocol: "icmp", PortRangeMin: intp(8), PortRangeMax: intp(0)}, "to-lport",
			"outport == @" + pg + " && ip4 && icmp4 && icmp4.type == 8 && icmp4.code == 0", false},
		{"icmp type 0", SecurityGroupRule{Direction: "egress", Protocol: "1", PortRangeMin: intp(0)}, "from-lport",
			"inport == @" + pg + " && ip4 && icmp4 && icmp4.type == 0", false},
		{"other protocol number", SecurityGroupRule{Direction: "ingress", Protocol: "47"}, "to-lport", "outport == @" + pg + " && ip4 && ip.proto == 47", false},
		{"protocol any and 0", SecurityGroupRule{Direction: "ingress", Protocol: "0"}, "to-lport", "outport == @" + pg + " && ip4", false},
		{"ingress prefix is the source", SecurityGroupRule{Direction: "ingress", RemoteIPPrefix: "192.168.1.7/24"}, "to-lport",
			"outport == @" + pg + " && ip4 && ip4.src == 192.168.1.0/24", false},
		{"egress prefix is the destination, an address a /32", SecurityGroupRule{Direction: "egress", RemoteIPPrefix: "192.168.1.7"}, "from-lport",
			"inport == @" + pg + " && ip4 && ip4.dst == 192.168.1.7", false},
		{"0.0.0.0/0 is any", SecurityGroupRule{Direction: "ingress", RemoteIPPrefix: "0.0.0.0/0"}, "to-lport", "outport == @" + pg + " && ip4", false},
		{"remote group: its address set", SecurityGroupRule{Direction: "ingress", Protocol: "tcp", RemoteGroupID: "sg-db"}, "to-lport",
			"outport == @" + pg + " && ip4 && ip4.src == $" + other + "_ip4 && tcp", false},

		// IPv6 (issue 33): ip6, ICMPv6, prefixes and group sets of the family.
		{"IPv6 ingress, any", SecurityGroupRule{Direction: "ingress", EtherType: "IPv6"}, "to-lport", "outport == @" + pg + " && ip6", false},
		{"IPv6 tcp port from a prefix", SecurityGroupRule{Direction: "ingress", EtherType: "IPv6", Protocol: "tcp", PortRangeMin: intp(443), RemoteIPPrefix: "2001:db8:1::7/32"}, "to-lport",
			"outport == @" + pg + " && ip6 && ip6.src == 2001:db8::/32 && tcp && tcp.dst == 443", false},
		{"IPv6 egress to an address, a /128", SecurityGroupRule{Direction: "egress", EtherType: "ipv6", Protocol: "udp", RemoteIPPrefix: "2001:db8::53"}, "from-lport",
			"inport == @" + pg + " && ip6 && ip6.dst == 2001:db8::53 && udp", false},
		{"::/0 is any", SecurityGroupRule{Direction: "ingress", EtherType: "IPv6", RemoteIPPrefix: "::/0"}, "to-lport", "outport == @" + pg + " && ip6", false},
		{"IPv6 icmp is ICMPv6, type and code", SecurityGroupRule{Direction: "ingress", EtherType: "IPv6", Protocol: "icmp", PortRangeMin: intp(128), PortRangeMax: intp(0)}, "to-lport",
			"outport == @" + pg + " && ip6 && icmp6 && icmp6.type == 128 && icmp6.code == 0", false},
		{"ipv6-icmp and 58 by name and number", SecurityGroupRule{Direction: "egress", EtherType: "IPv6", Protocol: "ipv6-icmp"}, "from-lport",
			"inport == @" + pg + " && ip6 && icmp6", false},
		{"IPv6 remote group: its IPv6 set", SecurityGroupRule{Direction: "ingress", EtherType: "IPv6", RemoteGroupID: "sg-db"}, "to-lport",
			"outport == @" + pg + " && ip6 && ip6.src == $" + other + "_ip6", false},
		{"IPv6 other protocol number", SecurityGroupRule{Direction: "ingress", EtherType: "IPv6", Protocol: "132", PortRangeMin: intp(9)}, "to-lport",
			"outport == @" + pg + " && ip6 && sctp && sctp.dst == 9", false},

		{"direction missing", SecurityGroupRule{}, "", "SecurityGroupRule r: spec.direction is required: ingress or egress", true},
		{"direction bad", SecurityGroupRule{Direction: "in"}, "", `SecurityGroupRule r: spec.direction "in" is neither ingress nor egress`, true},
		{"etherType bad", SecurityGroupRule{Direction: "ingress", EtherType: "arp"}, "", `SecurityGroupRule r: spec.etherType "arp" is neither IPv4 nor IPv6`, true},
		{"protocol bad", SecurityGroupRule{Direction: "ingress", Protocol: "gre"}, "", `SecurityGroupRule r: spec.protocol "gre" is none of tcp, udp, icmp, sctp, any or an IP protocol number 0-255`, true},
		{"ports without protocol", SecurityGroupRule{Direction: "ingress", PortRangeMin: intp(80)}, "", "SecurityGroupRule r: spec.portRangeMin needs a spec.protocol (tcp, udp, sctp or icmp)", true},
		{"max below min", SecurityGroupRule{Direction: "ingress", Protocol: "tcp", PortRangeMin: intp(90), PortRangeMax: intp(80)}, "", "SecurityGroupRule r: spec.portRangeMax 80 is below spec.portRangeMin 90", true},
		{"max without min", SecurityGroupRule{Direction: "ingress", Protocol: "tcp", PortRangeMax: intp(80)}, "", "SecurityGroupRule r: spec.portRangeMin is required with spec.portRangeMax", true},
		{"port out of range", SecurityGroupRule{Direction: "ingress", Protocol: "udp", PortRangeMin: intp(70000)}, "", "SecurityGroupRule r: spec.portRangeMin 70000 is not a port (1-65535)", true},
		{"icmp code without type", SecurityGroupRule{Direction: "ingress", Protocol: "icmp", PortRangeMax: intp(0)}, "", "SecurityGroupRule r: spec.portRangeMax (the ICMP code) needs spec.portRangeMin (the ICMP type)", true},
		{"ports on another protocol", SecurityGroupRule{Direction: "ingress", Protocol: "47", PortRangeMin: intp(1)}, "", "SecurityGroupRule r: spec.portRangeMin is for tcp, udp, sctp and icmp, not protocol 47", true},
		{"prefix of the other family", SecurityGroupRule{Direction: "ingress", RemoteIPPrefix: "fd00::/64"}, "", `SecurityGroupRule r: spec.remoteIpPrefix fd00::/64 is an IPv6 prefix; the rule's spec.etherType is IPv4`, true},
		{"IPv6 rule, IPv4 prefix", SecurityGroupRule{Direction: "ingress", EtherType: "IPv6", RemoteIPPrefix: "10.0.0.0/8"}, "", `SecurityGroupRule r: spec.remoteIpPrefix 10.0.0.0/8 is an IPv4 prefix; the rule's spec.etherType is IPv6`, true},
		{"IPv6 rule, IPv4 address", SecurityGroupRule{Direction: "egress", EtherType: "IPv6", RemoteIPPrefix: "10.0.0.1"}, "", `SecurityGroupRule r: spec.remoteIpPrefix 10.0.0.1 is an IPv4 prefix; the rule's spec.etherType is IPv6`, true},
		{"prefix bad", SecurityGroupRule{Direction: "ingress", RemoteIPPrefix: "10.0.0.300"}, "", `SecurityGroupRule r: spec.remoteIpPrefix "10.0.0.300" is not an IPv4 address or prefix`, true},
		{"IPv6 prefix bad", SecurityGroupRule{Direction: "ingress", EtherType: "IPv6", RemoteIPPrefix: "fd00::/129"}, "", `SecurityGroupRule r: spec.remoteIpPrefix "fd00::/129" is not an IPv6 prefix`, true},
		{"ICMPv6 in an IPv4 rule", SecurityGroupRule{Direction: "ingress", Protocol: "58"}, "", `SecurityGroupRule r: spec.protocol "58" is ICMPv6: the rule's spec.etherType is IPv4`, true},
		{"ICMPv6 type out of range", SecurityGroupRule{Direction: "ingress", EtherType: "IPv6", Protocol: "icmpv6", PortRangeMin: intp(256)}, "", `SecurityGroupRule r: spec.portRangeMin 256 is not an ICMP type (0-255)`, true},
		{"remote group not declared", SecurityGroupRule{Direction: "ingress", RemoteGroupID: "sg-none"}, "", "SecurityGroupRule r: spec.remoteGroupId SecurityGroup sg-none is not declared", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sp := planRule(t, tt.rule)
			if tt.err {
				require.Len(t, sp.RuleErrors, 1)
				assert.EqualError(t, sp.RuleErrors[0], tt.want)
				assert.Equal(t, []string{"rule/r"}, sp.KeepACLs, "the rule's ACL is left as it is")
				return
			}
			require.Empty(t, sp.RuleErrors)
			var acl *nbmodel.ACL
			for _, a := range sp.ACLs {
				if a.ExternalIDs[KeySecurityACL] == "rule/r" {
					acl = a
				}
			}
			require.NotNil(t, acl)
			assert.Equal(t, tt.dir, acl.Direction)
			assert.Equal(t, tt.want, acl.Match)
			assert.Equal(t, nbmodel.ACLActionAllowRelated, acl.Action)
			assert.Equal(t, SGRulePriority, acl.Priority)
		})
	}
}

// TestSecurityGroupIPv6RuleIsApplied: an IPv6 rule is an ip6 ACL, with
// no note (ONOS installed it as IPv4; issue 33).
func TestSecurityGroupIPv6RuleIsApplied(t *testing.T) {
	in := NewInput()
	in.Set("s", Objects{SecurityGroups: []SecurityGroup{{Name: "g", ID: "g", Rules: []SecurityGroupRule{{ID: "v6", Direction: "ingress", EtherType: "IPv6"}}}}})
	sp := in.Plan(sgUnit("g"), testInstance, nil).SecurityGroup
	require.NotNil(t, sp)
	assert.Empty(t, sp.RuleErrors)
	assert.Empty(t, sp.Notes)
	var matches []string
	for _, a := range sp.ACLs {
		if a.ExternalIDs[KeySecurityACL] == "rule/v6" {
			matches = append(matches, a.Match)
		}
	}
	assert.Equal(t, []string{"outport == @kv_sg_g && ip6"}, matches)
}

// TestSecurityGroupDuplicates: a spec.id declared by two groups fails the
// unit (its rows stay); a rule id twice in one group keeps its ACL and
// names both.
func TestSecurityGroupDuplicates(t *testing.T) {
	in := NewInput()
	in.Set("s", Objects{SecurityGroups: []SecurityGroup{{Name: "a", ID: "g"}, {Name: "b", ID: "g"}}})
	up := in.Plan(sgUnit("g"), testInstance, nil)
	assert.Nil(t, up.SecurityGroup)
	require.Len(t, up.Errs, 2)
	assert.EqualError(t, up.Errs[0], "SecurityGroup a: spec.id g is declared by 2 SecurityGroups (a, b); a spec.id names one group")

	in = NewInput()
	in.Set("s", Objects{
		SecurityGroups:     []SecurityGroup{{Name: "g", ID: "g", Rules: []SecurityGroupRule{{ID: "x", Direction: "ingress"}}}},
		SecurityGroupRules: []SecurityGroupRule{{Name: "rx", ID: "x", SecurityGroupID: "g", Direction: "egress"}},
	})
	sp := in.Plan(sgUnit("g"), testInstance, nil).SecurityGroup
	require.NotNil(t, sp)
	assert.Equal(t, []string{"rule/x"}, sp.KeepACLs)
	require.Len(t, sp.RuleErrors, 2)
	assert.EqualError(t, sp.RuleErrors[0], "SecurityGroup g: spec.rules[x].id x is declared 2 times in SecurityGroup g")
	assert.EqualError(t, sp.RuleErrors[1], "SecurityGroupRule rx: spec.id x is declared 2 times in SecurityGroup g")
}

// sgSnapshot: vm-a (net-a) in sg-web and sg-db, vm-b (net-b) in sg-db, a
// VM in no group, sg-web open to HTTP from anywhere, sg-db to its port
// from sg-web's members only.
func sgSnapshot() *Snapshot {
	s := examplesSnapshot()
	s.VMs[0].SecurityGroups = "sg-db,sg-web"
	s.VMs[1].SecurityGroups = "sg-db"
	s.VMs = append(s.VMs, VMInterface{Namespace: "default", VMI: "vm-c", Interface: "eth1", Network: "net-a", NetworkNamespace: "default", MAC: "50:54:00:00:00:07", IP: "10.10.0.7", Node: "hv1"})
	s.SecurityGroups = []SecurityGroup{
		{Name: "sg-web", ID: "sg-web", DisplayName: "web", Rules: []SecurityGroupRule{
			{ID: "web-http", Direction: "ingress", Protocol: "tcp", PortRangeMin: intp(80), PortRangeMax: intp(80)},
		}},
		{Name: "sg-db", ID: "sg-db", DisplayName: "db"},
	}
	s.SecurityGroupRules = []SecurityGroupRule{
		{Name: "db-pg", ID: "db-pg", SecurityGroupID: "sg-db", Direction: "ingress", Protocol: "tcp", PortRangeMin: intp(5432), RemoteGroupID: "sg-web"},
		{Name: "db-out", ID: "db-out", SecurityGroupID: "sg-db", Direction: "egress", RemoteIPPrefix: "10.0.0.0/8"},
	}
	return s
}

// TestGoldenSecurityGroups keeps the whole plan of sgSnapshot's groups
// reviewable: their Port_Groups, ports and ACLs.
func TestGoldenSecurityGroups(t *testing.T) {
	p := Build(sgSnapshot(), testInstance)
	require.Empty(t, p.Errors)
	require.Empty(t, p.Failed)
	require.Len(t, p.SecurityGroups, 2)
	// Matches unescaped (&&), to read as ovn-nbctl prints them.
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	require.NoError(t, enc.Encode(p.SecurityGroups))
	got := buf.Bytes()
	path := filepath.Join("testdata", "securitygroups.plan.golden")
	if *update {
		require.NoError(t, os.WriteFile(path, got, 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run go test ./translator -run TestGoldenSecurityGroups -update to create it")
	assert.Equal(t, string(want), string(got))
}

// TestSecurityGroupPlan: members are the VM ports bound to the group; the
// base ACLs drop both ways below the rules and let DHCP and ping to the
// members' gateways out.
func TestSecurityGroupPlan(t *testing.T) {
	in := NewInputFrom(sgSnapshot())
	sp := in.Plan(sgUnit("sg-db"), testInstance, nil).SecurityGroup
	require.NotNil(t, sp)
	pg := PortGroupName("sg-db")
	assert.Equal(t, pg, sp.PortGroup.Name)
	assert.Equal(t, "sg-db", sp.PortGroup.ExternalIDs[KeySecurityGroup])
	assert.True(t, OwnedBy(sp.PortGroup.ExternalIDs, testInstance, sgUnit("sg-db")))
	assert.Equal(t, []string{VMPortName("net-a", "default", "vm-a", "eth1"), VMPortName("net-b", "default", "vm-b", "eth1")}, sp.Ports)
	byKey := map[string]*nbmodel.ACL{}
	for _, a := range sp.ACLs {
		byKey[a.ExternalIDs[KeySecurityACL]] = a
		assert.True(t, OwnedBy(a.ExternalIDs, testInstance, sgUnit("sg-db")))
	}
	assert.Equal(t, &nbmodel.ACL{Direction: "from-lport", Priority: SGDropPriority, Action: "drop", Match: "inport == @" + pg + " && ip"}, withoutIDs(byKey["base/drop-egress"]))
	assert.Equal(t, &nbmodel.ACL{Direction: "to-lport", Priority: SGDropPriority, Action: "drop", Match: "outport == @" + pg + " && ip"}, withoutIDs(byKey["base/drop-ingress"]))
	assert.Equal(t, "inport == @"+pg+" && ip4 && udp.src == 68 && udp.dst == 67", byKey["base/dhcp"].Match)
	assert.Equal(t, "inport == @"+pg+" && ip4.dst == {10.10.0.1, 10.20.0.1} && icmp4 && icmp4.type == 8", byKey["base/ping-gateway"].Match)
	assert.Len(t, sp.ACLs, 6)

	rows := sp.Rows()
	require.Len(t, rows, 7)
	assert.Equal(t, []Ref{{Column: "ports", Key: sp.Ports[0]}, {Column: "ports", Key: sp.Ports[1]}}, rows[0].Refs)
	for _, r := range rows[1:] {
		assert.Equal(t, pg, r.Parent)
	}
}

// TestSecurityGroupRowsAreNoLegacyOVNKRows: a group's Port_Group and every
// ACL carry ovn-kubernetes' owner-controller key with a value that is no
// controller name of it, so its v1.0.0 start-up syncers, which take every
// Port_Group, ACL and Address_Set without the key for a legacy row of
// their own (rewriting, deleting, or failing on it), leave ours alone.
func TestSecurityGroupRowsAreNoLegacyOVNKRows(t *testing.T) {
	in := NewInputFrom(sgSnapshot())
	for _, id := range []string{"sg-db", "sg-web"} {
		sp := in.Plan(sgUnit(id), testInstance, nil).SecurityGroup
		require.NotNil(t, sp, id)
		require.NotEmpty(t, sp.ACLs, id)
		all := []map[string]string{sp.PortGroup.ExternalIDs}
		for _, a := range sp.ACLs {
			all = append(all, a.ExternalIDs)
		}
		for _, ids := range all {
			assert.Equal(t, NotAnOVNKNetwork, ids[KeyOVNKOwnerController], "%s: %v", id, ids)
			assert.True(t, OwnedBy(ids, testInstance, sgUnit(id)), "%s: %v", id, ids)
			u, ok := OwnerOf(ids, testInstance)
			assert.True(t, ok)
			assert.Equal(t, sgUnit(id), u)
		}
	}
	// ovn-kubernetes names its controllers "<network>-network-controller"
	// (default-network-controller and others like it); a network name
	// has no "/", and ours does.
	assert.Contains(t, NotAnOVNKNetwork, "/")
	assert.NotContains(t, NotAnOVNKNetwork, "-network-controller")
}

func withoutIDs(a *nbmodel.ACL) *nbmodel.ACL {
	if a == nil {
		return nil
	}
	c := *a
	c.ExternalIDs = nil
	return &c
}

// TestSecurityGroupSetAffects: a rule's change re-plans its group; a VM's
// binding change the groups it joins and leaves; a group's declaration the
// groups whose rules name it as remote; a network's change the groups of
// its VMs; nothing else.
func TestSecurityGroupSetAffects(t *testing.T) {
	s := sgSnapshot()
	in := NewInput()
	in.Set("nets", Objects{Routers: s.Routers, Networks: s.Networks, VMs: s.VMs})
	in.Set("sgs", Objects{SecurityGroups: s.SecurityGroups})
	in.Set("rules", Objects{SecurityGroupRules: s.SecurityGroupRules})
	assert.Empty(t, in.Set("rules", Objects{SecurityGroupRules: s.SecurityGroupRules}), "the same rules again")

	// A rule edit: its group only.
	rules := append([]SecurityGroupRule(nil), s.SecurityGroupRules...)
	rules[1].RemoteIPPrefix = "10.10.0.0/16"
	assert.Equal(t, []Unit{sgUnit("sg-db")}, in.Set("rules", Objects{SecurityGroupRules: rules}))
	assert.Contains(t, aclMatches(in, "sg-db"), "inport == @"+PortGroupName("sg-db")+" && ip4 && ip4.dst == 10.10.0.0/16")

	// vm-c joins sg-web: its network and sg-web; leaves it: the same.
	vms := append([]VMInterface(nil), s.VMs...)
	vms[2].SecurityGroups = "sg-web"
	assert.Equal(t, []Unit{networkUnit("net-a"), sgUnit("sg-web")}, in.Set("nets", Objects{Routers: s.Routers, Networks: s.Networks, VMs: vms}))
	assert.Contains(t, in.Plan(sgUnit("sg-web"), testInstance, nil).SecurityGroup.Ports, VMPortName("net-a", "default", "vm-c", "eth1"))
	vms[0].SecurityGroups = "sg-web"
	assert.Equal(t, []Unit{networkUnit("net-a"), sgUnit("sg-db")}, in.Set("nets", Objects{Routers: s.Routers, Networks: s.Networks, VMs: vms}),
		"vm-a leaves sg-db: sg-db only; sg-web, which it stays in, plans the same rows")
	assert.Equal(t, []string{VMPortName("net-b", "default", "vm-b", "eth1")}, in.Plan(sgUnit("sg-db"), testInstance, nil).SecurityGroup.Ports)
	// vm-a back in sg-db with another MAC: every group it was or is in
	// (its port changed).
	vms[0].SecurityGroups, vms[0].MAC = "sg-db,sg-web", "50:54:00:00:00:55"
	assert.Equal(t, []Unit{networkUnit("net-a"), sgUnit("sg-db"), sgUnit("sg-web")}, in.Set("nets", Objects{Routers: s.Routers, Networks: s.Networks, VMs: vms}))
	vms[0].SecurityGroups, vms[0].MAC = "sg-web", s.VMs[0].MAC
	in.Set("nets", Objects{Routers: s.Routers, Networks: s.Networks, VMs: vms})

	// sg-web goes: it and sg-db (its rule names sg-web), whose rule now
	// fails and keeps its ACL.
	assert.Equal(t, []Unit{sgUnit("sg-db"), sgUnit("sg-web")}, in.Set("sgs", Objects{SecurityGroups: s.SecurityGroups[1:]}))
	sp := in.Plan(sgUnit("sg-db"), testInstance, nil).SecurityGroup
	assert.Equal(t, []string{"rule/db-pg"}, sp.KeepACLs)
	up := in.Plan(sgUnit("sg-web"), testInstance, nil)
	assert.False(t, up.InInput)
	assert.Nil(t, up.SecurityGroup, "its rows go")
}

func aclMatches(in *Input, id string) []string {
	var out []string
	for _, a := range in.Plan(sgUnit(id), testInstance, nil).SecurityGroup.ACLs {
		out = append(out, a.Match)
	}
	return out
}

// TestSecurityGroupInBuildAndOrder: Build lists the groups, their rules'
// errors among its Errors and their notes among its Notes; a start
// reconciles the groups after every network (their Port_Groups refer to
// the networks' VM ports).
func TestSecurityGroupInBuildAndOrder(t *testing.T) {
	s := sgSnapshot()
	s.SecurityGroupRules = append(s.SecurityGroupRules,
		SecurityGroupRule{Name: "bad", ID: "bad", SecurityGroupID: "sg-web", Direction: "sideways"},
		SecurityGroupRule{Name: "v6", ID: "v6", SecurityGroupID: "sg-web", Direction: "ingress", EtherType: "IPv6"})
	p := Build(s, testInstance)
	require.Len(t, p.SecurityGroups, 2)
	assert.Empty(t, p.Failed, "a rule's error fails no unit")
	require.Len(t, p.Errors, 1)
	assert.EqualError(t, p.Errors[0], `SecurityGroupRule bad: spec.direction "sideways" is neither ingress nor egress`)
	assert.NotContains(t, p.Notes, "SecurityGroup sg-web rule v6: etherType IPv6 is not applied: kubevirt-ovn networks are IPv4 (ONOS installed it as IPv4)")

	order := NewInputFrom(s).ReconcileOrder()
	lastNetwork, firstGroup := -1, len(order)
	for i, u := range order {
		switch u.Kind {
		case KindNetwork:
			lastNetwork = i
		case KindSecurityGroup:
			firstGroup = min(firstGroup, i)
		}
	}
	assert.Less(t, lastNetwork, firstGroup, "%v", order)
	assert.Contains(t, order, sgUnit("sg-web"))
	assert.Contains(t, order, sgUnit("sg-db"))
}

// TestSecurityGroupMembersArePlannedPorts: a member whose address the
// network gives another VM has no port, so its group does not refer to
// it; when the other VM goes, the member's group is re-planned with it.
func TestSecurityGroupMembersArePlannedPorts(t *testing.T) {
	s := sgSnapshot()
	in := NewInput()
	in.Set("sgs", Objects{SecurityGroups: s.SecurityGroups})
	in.Set("nets", Objects{Routers: s.Routers, Networks: s.Networks, VMs: s.VMs})
	// vm-0 on net-a, created first by port name, takes vm-a's IP.
	thief := VMInterface{Namespace: "default", VMI: "vm-0", Interface: "eth1", Network: "net-a", NetworkNamespace: "default", MAC: "50:54:00:00:00:99", IP: "10.10.0.5"}
	assert.Contains(t, in.Set("thief", Objects{VMs: []VMInterface{thief}}), sgUnit("sg-web"), "vm-a's groups: its address changes hands")
	assert.Empty(t, in.Plan(sgUnit("sg-web"), testInstance, nil).SecurityGroup.Ports, "vm-a has no port")
	assert.Equal(t, []Unit{networkUnit("net-a"), sgUnit("sg-db"), sgUnit("sg-web")}, in.Set("thief", Objects{}))
	assert.Equal(t, []string{VMPortName("net-a", "default", "vm-a", "eth1")}, in.Plan(sgUnit("sg-web"), testInstance, nil).SecurityGroup.Ports)
}

// TestSecurityGroupMembersFollowHeldClaimsAndNetworkEdits: a network's
// planned ports are kept between plans of its groups only while nothing
// they depend on changed. Two VMs claiming one IP: the NB's claim (held)
// decides which is a member, plan by plan, without an input change in
// between; a VM interface that changes on the network, and the network
// itself, change the members at once.
func TestSecurityGroupMembersFollowHeldClaimsAndNetworkEdits(t *testing.T) {
	s := sgSnapshot()
	in := NewInput()
	in.Set("sgs", Objects{SecurityGroups: s.SecurityGroups})
	in.Set("nets", Objects{Routers: s.Routers, Networks: s.Networks, VMs: s.VMs})
	portA := VMPortName("net-a", "default", "vm-a", "eth1")
	portC := VMPortName("net-a", "default", "vm-c", "eth1")
	members := func(held Held) []string { return in.Plan(sgUnit("sg-web"), testInstance, held).SecurityGroup.Ports }
	require.Equal(t, []string{portA}, members(nil))
	require.Equal(t, []string{portA}, members(nil), "planned again: the same")

	// vm-c, in sg-web too, takes vm-a's IP: the NB's claim decides.
	vms := append([]VMInterface(nil), s.VMs...)
	vms[2].SecurityGroups, vms[2].IP = "sg-web", "10.10.0.5"
	in.Set("nets", Objects{Routers: s.Routers, Networks: s.Networks, VMs: vms})
	heldBy := func(port string) Held {
		return Claims{VMAddresses: map[string]string{"net-a 10.10.0.5": port}}
	}
	assert.Equal(t, []string{portC}, members(heldBy(portC)))
	assert.Equal(t, []string{portA}, members(heldBy(portA)), "the claim moved in the NB, the input did not")
	assert.Equal(t, []string{portC}, members(heldBy(portC)))

	// vm-c on its own IP again: both.
	vms[2].IP = "10.10.0.7"
	in.Set("nets", Objects{Routers: s.Routers, Networks: s.Networks, VMs: vms})
	assert.Equal(t, []string{portA, portC}, members(heldBy(portC)))

	// net-a's gateway moves to vm-a's IP: vm-a has no port; back: both
	// again.
	nets := append([]Network(nil), s.Networks...)
	for i := range nets {
		if nets[i].Name == "net-a" {
			nets[i].GatewayIP = "10.10.0.5"
		}
	}
	in.Set("nets", Objects{Routers: s.Routers, Networks: nets, VMs: vms})
	assert.Equal(t, []string{portC}, members(nil), "the network changed, its VMs did not")
	in.Set("nets", Objects{Routers: s.Routers, Networks: s.Networks, VMs: vms})
	assert.Equal(t, []string{portA, portC}, members(nil))
}

// TestSecurityGroupMembersFollowNetworkVMs: a group's members are its
// networks' planned ports as they are now, though each network's ports
// are kept between plans: a VM interface added on a member network (from
// another source), changed to an invalid address, made valid again and
// removed changes the group's ports each time.
func TestSecurityGroupMembersFollowNetworkVMs(t *testing.T) {
	s := sgSnapshot()
	in := NewInputFrom(s)
	portA := VMPortName("net-a", "default", "vm-a", "eth1")
	portD := VMPortName("net-a", "default", "vm-d", "eth1")
	ports := func() []string { return in.Plan(sgUnit("sg-web"), testInstance, nil).SecurityGroup.Ports }
	require.Equal(t, []string{portA}, ports())

	vmD := VMInterface{Namespace: "default", VMI: "vm-d", Interface: "eth1", Network: "net-a", NetworkNamespace: "default",
		MAC: "50:54:00:00:00:0d", IP: "10.10.0.13", Node: "hv1", SecurityGroups: "sg-web"}
	in.Set("more", Objects{VMs: []VMInterface{vmD}})
	assert.Equal(t, []string{portA, portD}, ports(), "vm-d joins")

	bad := vmD
	bad.IP = "not-an-ip"
	in.Set("more", Objects{VMs: []VMInterface{bad}})
	assert.Equal(t, []string{portA}, ports(), "vm-d's interface is invalid: no port")

	in.Set("more", Objects{VMs: []VMInterface{vmD}})
	assert.Equal(t, []string{portA, portD}, ports(), "valid again")

	in.Set("more", Objects{})
	assert.Equal(t, []string{portA}, ports(), "vm-d gone")
}

// TestSecurityGroupEmbeddedRuleEdit: a group whose embedded rule alone
// changes (no generation, as a file source gives) is re-planned with the
// new rule. It was not: the group compared equal without its rules.
func TestSecurityGroupEmbeddedRuleEdit(t *testing.T) {
	in := NewInput()
	in.Set("s", Objects{SecurityGroups: []SecurityGroup{{Name: "g", ID: "g", Rules: []SecurityGroupRule{{ID: "a", Direction: "ingress"}}}}})
	match := func() string {
		for _, a := range in.Plan(sgUnit("g"), testInstance, nil).SecurityGroup.ACLs {
			if a.ExternalIDs[KeySecurityACL] == "rule/a" {
				return a.Match
			}
		}
		return ""
	}
	assert.Equal(t, "outport == @kv_sg_g && ip4", match())
	assert.Equal(t, []Unit{sgUnit("g")}, in.Set("s", Objects{SecurityGroups: []SecurityGroup{{Name: "g", ID: "g", Rules: []SecurityGroupRule{{ID: "a", Direction: "egress"}}}}}))
	assert.Equal(t, "inport == @kv_sg_g && ip4", match())
}
