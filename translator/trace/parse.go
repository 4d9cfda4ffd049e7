package trace

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Event is one thing ovn-trace's detailed output says happened to the
// packet, in the order it happened.
type Event struct {
	Kind EventKind
	// Datapath, InPort and OutPort are those of the pipeline the event is
	// in (OutPort only in an egress pipeline).
	Datapath, InPort, OutPort string
	// Pipeline is "ingress" or "egress".
	Pipeline string
	// For a Flow: the logical flow that matched.
	Table    int
	Stage    string
	Match    string
	Priority int
	UUID     string // the first 8 hex digits of its SB _uuid
	Actions  []string
	// Text is a Transform's title (ct_snat(ip4.src=...), arp, ...), an
	// Output's port, an Error's message.
	Text string
	// PortType is an Output's port's type ("" for a VM port, "remote",
	// "localnet", "patch", ...).
	PortType string
}

// EventKind says what an Event is.
type EventKind int

// The events ovn-trace reports.
const (
	// Flow is a logical flow that matched, with the actions it ran.
	Flow EventKind = iota
	// Transform is a new packet or a conntrack fork: ct_lb_mark,
	// ct_dnat(...), ct_snat(...), arp, icmp4, clone, ...
	Transform
	// Output is a packet leaving a datapath's egress pipeline to a port
	// with no peer in the trace: a VM, a localnet, a remote port.
	Output
	// Error is ovn-trace's "*** ..." (no such port, no backend, ...).
	Error
)

var (
	pipelineRE = regexp.MustCompile(`^(ingress|egress)\(dp="([^"]*)", inport="([^"]*)"(?:, outport="([^"]*)")?\)$`)
	flowRE     = regexp.MustCompile(`^(\d+)\. (\S+?)(?: \([^)]*\))?: (.*), priority (\d+), uuid ([0-9a-f]+)$`)
	noMatchRE  = regexp.MustCompile(`^(\d+)\. (?:(\S+): )?no match \(implicit drop\)$`)
	outputRE   = regexp.MustCompile(`^/\* output to "([^"]*)", type "([^"]*)" \*/$`)
)

// Parse reads ovn-trace's --detailed output into events.
func Parse(out string) ([]Event, error) {
	lines := strings.Split(out, "\n")
	var events []Event
	var cur Event // the pipeline the lines are in
	var last *Event
	for i := 0; i < len(lines); i++ {
		line := strings.TrimSpace(lines[i])
		underlined := i+1 < len(lines) && isRule(strings.TrimSpace(lines[i+1]))
		switch {
		case line == "" || isRule(line) || strings.HasPrefix(line, "# "):
			continue
		case underlined && pipelineRE.MatchString(line):
			m := pipelineRE.FindStringSubmatch(line)
			cur = Event{Pipeline: m[1], Datapath: m[2], InPort: m[3], OutPort: m[4]}
			last = nil
			i++
		case underlined && strings.HasPrefix(line, "multicast("):
			last = nil
			i++
		case underlined:
			e := cur
			e.Kind, e.Text = Transform, line
			events = append(events, e)
			last = nil
			i++
		case flowRE.MatchString(line):
			m := flowRE.FindStringSubmatch(line)
			e := cur
			e.Kind, e.Stage, e.Match, e.UUID = Flow, m[2], m[3], m[5]
			e.Table, _ = strconv.Atoi(m[1])
			e.Priority, _ = strconv.Atoi(m[4])
			events = append(events, e)
			last = &events[len(events)-1]
		case noMatchRE.MatchString(line):
			// A table where no flow matches: ovn-trace's implicit drop,
			// a Flow with no UUID.
			m := noMatchRE.FindStringSubmatch(line)
			e := cur
			e.Kind, e.Stage, e.Actions = Flow, m[2], []string{"drop;"}
			e.Table, _ = strconv.Atoi(m[1])
			events = append(events, e)
			last = nil
		case outputRE.MatchString(line):
			m := outputRE.FindStringSubmatch(line)
			e := cur
			e.Kind, e.Text, e.PortType = Output, m[1], m[2]
			events = append(events, e)
		case strings.HasPrefix(line, "*** "):
			e := cur
			e.Kind, e.Text = Error, strings.TrimPrefix(line, "*** ")
			events = append(events, e)
		default:
			if last == nil {
				// An action of a transformation (arp's, icmp4's), which
				// the flows after it show the effect of.
				continue
			}
			last.Actions = append(last.Actions, line)
		}
	}
	if len(events) == 0 {
		return nil, fmt.Errorf("ovn-trace printed no logical flow: %q", firstLine(out))
	}
	return events, nil
}

// isRule says whether a line underlines a title: dashes only.
func isRule(s string) bool { return s != "" && strings.Trim(s, "-") == "" }

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}
