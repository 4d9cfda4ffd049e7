package main

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// nbctlCommands turns a dump of the NB into the ovn-nbctl commands that
// build the same topology: ls-add, lsp-add, lsp-set-addresses,
// lsp-set-port-security, lsp-set-type, lsp-set-options, lr-add, lrp-add,
// lrp-set-gateway-chassis, lr-nat-add, lr-route-add, static-mac-binding-add, and `set` for the
// external_ids and options of named rows. NAT and route rows, which have no
// name to `set`, get no external_ids. It also returns the tables whose rows
// it did not rebuild, with their row counts.
func nbctlCommands(tables []dumpTable) (cmds [][]string, skipped map[string]int) {
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
		"Static_MAC_Binding": true}
	skipped = map[string]int{}
	for _, t := range tables {
		if !handled[t.name] {
			skipped[t.name] += len(t.rows)
		}
	}
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
					set("Logical_Switch_Port", pn, p, "external_ids")
				}
			}
		case "Static_MAC_Binding":
			for _, b := range t.rows {
				cmds = append(cmds, []string{"static-mac-binding-add", str(b["logical_port"]), str(b["ip"]), str(b["mac"])})
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
					args := []string{"lr-nat-add", name, str(n["type"]), str(n["external_ip"]), str(n["logical_ip"])}
					if lp := strs(n["logical_port"]); len(lp) > 0 {
						args = append(args, lp[0])
						if m := strs(n["external_mac"]); len(m) > 0 {
							args = append(args, m[0])
						}
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
	return cmds, skipped
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
