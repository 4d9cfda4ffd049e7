// Package chassiszone keeps the interconnect rule that a chassis is local
// to one zone. A chassis two zones' SBs both list as local (neither marks
// it other_config:is-remote=true) has no zone kubevirt-ovn could trust:
// its VMs' ports and the routers whose gateway it is would go to whichever
// zone was read last. Every reader of the zones' chassis goes through this
// package: `sync --zone` refuses such an input (Check), and the long-running
// roles (`run --zone`, the allocator and the zone agents) keep the chassis
// in the zone that had it first and refuse the later claim (Claims).
package chassiszone

import (
	"errors"
	"fmt"
	"slices"

	"github.com/kubevirt-ovn/kubevirt-ovn/translator"
)

// Conflict is a chassis that two zones list as local: Kept keeps it,
// Refused's claim is refused. Its Error names the chassis and both zones.
type Conflict struct {
	Chassis string
	Kept    string
	Refused string
}

func (c Conflict) Error() string {
	return fmt.Sprintf("chassis %s is a local chassis of zones %s and %s (not other_config:is-remote=true in either SB)", c.Chassis, c.Kept, c.Refused)
}

// Claims remembers which zone holds each chassis, so that a zone that
// claims a chassis another zone already holds is the one refused, whatever
// the order the zones are read in. The zero value is ready to use; a
// Claims is not safe for concurrent use.
type Claims struct {
	zoneOf map[string]string // chassis -> zone, from the last Resolve
}

// Resolve returns chassis with each chassis in one zone, in the order
// given, and the conflicts it resolved. A chassis listed by several zones
// stays in the zone that held it at the last Resolve; one that no zone
// held goes to the first zone that lists it (callers list the zones in a
// stable order, by name). Chassis without a zone (one central SB) are not
// subject to the rule and pass unchanged; a chassis a zone lists twice is
// kept once.
func (c *Claims) Resolve(chassis []translator.Chassis) ([]translator.Chassis, []Conflict) {
	listed := map[string][]string{} // chassis -> the zones that list it, in order
	for _, ch := range chassis {
		if ch.Zone == "" {
			continue
		}
		zones := listed[ch.Name]
		if !slices.Contains(zones, ch.Zone) {
			listed[ch.Name] = append(zones, ch.Zone)
		}
	}
	owner := make(map[string]string, len(listed))
	var conflicts []Conflict
	for _, ch := range chassis {
		zones, ok := listed[ch.Name]
		if !ok {
			continue
		}
		if _, done := owner[ch.Name]; done {
			continue
		}
		kept := zones[0]
		if prev, held := c.zoneOf[ch.Name]; held && slices.Contains(zones, prev) {
			kept = prev
		}
		owner[ch.Name] = kept
		for _, z := range zones {
			if z != kept {
				conflicts = append(conflicts, Conflict{Chassis: ch.Name, Kept: kept, Refused: z})
			}
		}
	}
	out := make([]translator.Chassis, 0, len(chassis))
	placed := map[string]bool{}
	for _, ch := range chassis {
		if ch.Zone != "" {
			if owner[ch.Name] != ch.Zone || placed[ch.Name] {
				continue
			}
			placed[ch.Name] = true
		}
		out = append(out, ch)
	}
	c.zoneOf = owner
	return out, conflicts
}

// Check is the rule for a one-shot reading of the zones: an error naming
// every chassis that two zones list as local, and both zones.
func Check(chassis []translator.Chassis) error {
	var c Claims
	_, conflicts := c.Resolve(chassis)
	errs := make([]error, len(conflicts))
	for i, cf := range conflicts {
		errs[i] = cf
	}
	return errors.Join(errs...)
}
