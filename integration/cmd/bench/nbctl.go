package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// nbctlPlan is how ovn-nbctl rebuilds a dump of the NB. ovn-nbctl's DHCP
// commands name a DHCP_Options row by its UUID, which dhcp-options-create
// does not print: create makes those rows first, a `list` reads their UUIDs
// back (dhcpCreated), and cmds, which refer to a row by the placeholder
// dhcpRef(its dump UUID), are resolved (resolve) and run after.
type nbctlPlan struct {
	create [][]string
	cmds   [][]string
	// dhcpKeys is the identity (dhcpKey) of each DHCP_Options row of the
	// dump, by its dump UUID.
	dhcpKeys map[string]string
	// skipped are the tables whose rows it does not rebuild, with their
	// row counts.
	skipped map[string]int
}

// dhcpRef stands for the UUID of the row rebuilt from DHCP_Options row u of
// the dump until resolve replaces it.
func dhcpRef(u string) string { return "@dhcp:" + u }

// dhcpKey identifies a DHCP_Options row by its cidr and external_ids (the
// rows kubevirt-ovn writes differ in external_ids:kubevirt-ovn/network).
func dhcpKey(cidr string, ids [][2]string) string {
	var b strings.Builder
	b.WriteString(cidr)
	for _, kv := range ids {
		b.WriteString(" " + kv[0] + "=" + kv[1])
	}
	return b.String()
}

// nbctlCommands turns a dump of the NB into the ovn-nbctl commands that
// build the same topology: dhcp-options-create and -set-options, ls-add,
// lsp-add, lsp-set-addresses, lsp-set-port-security, lsp-set-type,
// lsp-set-options, lsp-set-dhcpv4-options, lr-add, lrp-add,
// lrp-set-gateway-chassis, lr-nat-add, lr-route-add,
// static-mac-binding-add, pg-add with the group's ports and acl-add
// --type=port-group for its ACLs (after every switch port exists), and
// `set` for the external_ids and options of named rows. NAT, route and ACL
// rows, which have no name to `set`, get no external_ids.
func nbctlCommands(tables []dumpTable) nbctlPlan {
	byUUID := map[string]row{}
	for _, t := range tables {
		for _, r := range t.rows {
			if u, ok := uuidOf(r["_uuid"]); ok {
				byUUID[u] = r
			}
		}
	}
	handled := map[string]bool{"Logical_Switch": true, "Logical_Switch_Port": true, "Logical_Router": true,
		"Logical_Router_Port": true, "Gateway_Chassis": true, "NAT": true, "Logical_Router_Static_Route": true,
		"Static_MAC_Binding": true, "DHCP_Options": true, "Port_Group": true}
	// ACLs are rebuilt as their port group's.
	groupACLs := map[string]bool{}
	for _, t := range tables {
		if t.name == "Port_Group" {
			for _, pg := range t.rows {
				for _, u := range uuids(pg["acls"]) {
					groupACLs[u] = true
				}
			}
		}
	}
	plan := nbctlPlan{dhcpKeys: map[string]string{}, skipped: map[string]int{}}
	for _, t := range tables {
		switch {
		case t.name == "ACL":
			for _, a := range t.rows {
				if u, _ := uuidOf(a["_uuid"]); !groupACLs[u] {
					plan.skipped[t.name]++
				}
			}
		case !handled[t.name]:
			plan.skipped[t.name] += len(t.rows)
		}
	}
	var cmds, groups [][]string
	set := func(table, name string, r row, cols ...string) {
		args := []string{"set", table, name}
		for _, c := range cols {
			for _, kv := range mapOf(r[c]) {
				args = append(args, c+":"+quote(kv[0])+"="+quote(kv[1]))
			}
		}
		if len(args) > 3 {
			cmds = append(cmds, args)
		}
	}
	for _, t := range tables {
		switch t.name {
		case "DHCP_Options":
			for _, d := range t.rows {
				u, _ := uuidOf(d["_uuid"])
				ids := mapOf(d["external_ids"])
				plan.dhcpKeys[u] = dhcpKey(str(d["cidr"]), ids)
				create := []string{"dhcp-options-create", str(d["cidr"])}
				for _, kv := range ids {
					create = append(create, kv[0]+"="+kv[1])
				}
				plan.create = append(plan.create, create)
				if o := mapOf(d["options"]); len(o) > 0 {
					args := []string{"dhcp-options-set-options", dhcpRef(u)}
					for _, kv := range o {
						args = append(args, kv[0]+"="+kv[1])
					}
					cmds = append(cmds, args)
				}
			}
		case "Logical_Switch":
			for _, ls := range t.rows {
				name := str(ls["name"])
				cmds = append(cmds, []string{"ls-add", name})
				set("Logical_Switch", name, ls, "external_ids", "other_config")
				for _, pu := range uuids(ls["ports"]) {
					p := byUUID[pu]
					pn := str(p["name"])
					cmds = append(cmds, []string{"lsp-add", name, pn})
					if a := strs(p["addresses"]); len(a) > 0 {
						cmds = append(cmds, append([]string{"lsp-set-addresses", pn}, a...))
					}
					if a := strs(p["port_security"]); len(a) > 0 {
						cmds = append(cmds, append([]string{"lsp-set-port-security", pn}, a...))
					}
					if ty := str(p["type"]); ty != "" {
						cmds = append(cmds, []string{"lsp-set-type", pn, ty})
					}
					if o := mapOf(p["options"]); len(o) > 0 {
						args := []string{"lsp-set-options", pn}
						for _, kv := range o {
							args = append(args, kv[0]+"="+kv[1])
						}
						cmds = append(cmds, args)
					}
					if du := uuids(p["dhcpv4_options"]); len(du) == 1 {
						cmds = append(cmds, []string{"lsp-set-dhcpv4-options", pn, dhcpRef(du[0])})
					}
					set("Logical_Switch_Port", pn, p, "external_ids")
				}
			}
		case "Static_MAC_Binding":
			for _, b := range t.rows {
				cmds = append(cmds, []string{"static-mac-binding-add", str(b["logical_port"]), str(b["ip"]), str(b["mac"])})
			}
		case "Port_Group":
			// Its commands go last, as pg-add names ports that must exist.
			for _, pg := range t.rows {
				name := str(pg["name"])
				var ports []string
				for _, pu := range uuids(pg["ports"]) {
					ports = append(ports, str(byUUID[pu]["name"]))
				}
				slices.Sort(ports)
				groups = append(groups, append([]string{"pg-add", name}, ports...))
				before := len(cmds)
				set("Port_Group", name, pg, "external_ids")
				groups = append(groups, cmds[before:]...)
				cmds = cmds[:before]
				for _, au := range uuids(pg["acls"]) {
					a := byUUID[au]
					args := []string{"--type=port-group"}
					if n := strs(a["name"]); len(n) > 0 {
						args = append(args, "--name="+n[0])
					}
					if a["log"] == true {
						args = append(args, "--log")
					}
					args = append(args, "acl-add", name, str(a["direction"]), num(a["priority"]), str(a["match"]), str(a["action"]))
					groups = append(groups, args)
				}
			}
		case "Logical_Router":
			for _, lr := range t.rows {
				name := str(lr["name"])
				cmds = append(cmds, []string{"lr-add", name})
				set("Logical_Router", name, lr, "external_ids", "options")
				for _, pu := range uuids(lr["ports"]) {
					p := byUUID[pu]
					pn := str(p["name"])
					cmds = append(cmds, append([]string{"lrp-add", name, pn, str(p["mac"])}, strs(p["networks"])...))
					set("Logical_Router_Port", pn, p, "external_ids", "options")
					for _, gu := range uuids(p["gateway_chassis"]) {
						g := byUUID[gu]
						cmds = append(cmds, []string{"lrp-set-gateway-chassis", pn, str(g["chassis_name"]), num(g["priority"])})
					}
				}
				for _, nu := range uuids(lr["nat"]) {
					n := byUUID[nu]
					var args []string
					pr := str(n["external_port_range"])
					if pr != "" {
						args = append(args, "--portrange")
					}
					args = append(args, "lr-nat-add", name, str(n["type"]), str(n["external_ip"]), str(n["logical_ip"]))
					if lp := strs(n["logical_port"]); len(lp) > 0 {
						args = append(args, lp[0])
						if m := strs(n["external_mac"]); len(m) > 0 {
							args = append(args, m[0])
						}
					}
					if pr != "" {
						args = append(args, pr)
					}
					cmds = append(cmds, args)
				}
				for _, ru := range uuids(lr["static_routes"]) {
					rt := byUUID[ru]
					var args []string
					if p := strs(rt["policy"]); len(p) > 0 {
						args = append(args, "--policy="+p[0])
					}
					args = append(args, "lr-route-add", name, str(rt["ip_prefix"]), str(rt["nexthop"]))
					if op := strs(rt["output_port"]); len(op) > 0 {
						args = append(args, op[0])
					}
					cmds = append(cmds, args)
				}
			}
		}
	}
	plan.cmds = append(cmds, groups...)
	return plan
}

// dhcpCreated reads the UUIDs of the DHCP_Options rows that create made,
// by their identity (dhcpKey), from the output of
// `ovn-nbctl --format=json --columns=_uuid,cidr,external_ids list DHCP_Options`.
func dhcpCreated(listJSON string) (map[string]string, error) {
	var out struct {
		Headings []string `json:"headings"`
		Data     [][]any  `json:"data"`
	}
	if err := json.Unmarshal([]byte(listJSON), &out); err != nil {
		return nil, fmt.Errorf("reading ovn-nbctl's list of DHCP_Options: %w", err)
	}
	if !slices.Equal(out.Headings, []string{"_uuid", "cidr", "external_ids"}) {
		return nil, fmt.Errorf("ovn-nbctl's list of DHCP_Options has columns %v, want _uuid, cidr, external_ids", out.Headings)
	}
	byKey := map[string]string{}
	for _, r := range out.Data {
		u, ok := uuidOf(r[0])
		if len(r) != 3 || !ok {
			return nil, fmt.Errorf("ovn-nbctl's list of DHCP_Options: row %v is not a UUID, a cidr and external_ids", r)
		}
		k := dhcpKey(str(r[1]), mapOf(r[2]))
		if _, dup := byKey[k]; dup {
			return nil, fmt.Errorf("two DHCP_Options rows are %q: the rebuild cannot tell them apart", k)
		}
		byKey[k] = u
	}
	return byKey, nil
}

// resolve replaces the placeholders of DHCP_Options rows in cmds by the
// UUIDs of the rows created for them (created: by dhcpKey).
func (p nbctlPlan) resolve(created map[string]string) ([][]string, error) {
	out := make([][]string, len(p.cmds))
	for i, c := range p.cmds {
		out[i] = slices.Clone(c)
		for j, a := range c {
			u, ok := strings.CutPrefix(a, "@dhcp:")
			if !ok {
				continue
			}
			k, ok := p.dhcpKeys[u]
			if !ok {
				return nil, fmt.Errorf("%s: DHCP_Options row %s is not in the dump", joinCmd(c), u)
			}
			if out[i][j], ok = created[k]; !ok {
				return nil, fmt.Errorf("%s: ovn-nbctl created no DHCP_Options row %q", joinCmd(c), k)
			}
		}
	}
	return out, nil
}

// batches joins commands into invocations of at most size commands each.
func batches(cmds [][]string, size int) [][]string {
	var out [][]string
	for len(cmds) > 0 {
		k := min(size, len(cmds))
		var args []string
		for i, c := range cmds[:k] {
			if i > 0 {
				args = append(args, "--")
			}
			args = append(args, c...)
		}
		out = append(out, args)
		cmds = cmds[k:]
	}
	return out
}

// quote makes s one OVSDB atom on ovn-nbctl's command line.
func quote(s string) string { return strconv.Quote(s) }

func str(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	if a := strs(v); len(a) == 1 {
		return a[0]
	}
	return ""
}

func num(v any) string {
	if f, ok := v.(float64); ok {
		return strconv.FormatInt(int64(f), 10)
	}
	return fmt.Sprint(v)
}

// strs is a string or a set of strings.
func strs(v any) []string {
	switch x := v.(type) {
	case string:
		return []string{x}
	case []any:
		if len(x) == 2 && x[0] == "set" {
			var out []string
			for _, e := range x[1].([]any) {
				if s, ok := e.(string); ok {
					out = append(out, s)
				}
			}
			return out
		}
	}
	return nil
}

// uuids is a reference or a set of references.
func uuids(v any) []string {
	if u, ok := uuidOf(v); ok {
		return []string{u}
	}
	x, ok := v.([]any)
	if !ok || len(x) != 2 || x[0] != "set" {
		return nil
	}
	var out []string
	for _, e := range x[1].([]any) {
		if u, ok := uuidOf(e); ok {
			out = append(out, u)
		}
	}
	return out
}

// mapOf is a string map's pairs, sorted by key.
func mapOf(v any) [][2]string {
	x, ok := v.([]any)
	if !ok || len(x) != 2 || x[0] != "map" {
		return nil
	}
	var out [][2]string
	for _, e := range x[1].([]any) {
		kv, ok := e.([]any)
		if !ok || len(kv) != 2 {
			continue
		}
		out = append(out, [2]string{fmt.Sprint(kv[0]), fmt.Sprint(kv[1])})
	}
	sort.Slice(out, func(i, j int) bool { return out[i][0] < out[j][0] })
	return out
}

func joinCmd(c []string) string { return strings.Join(c, " ") }
