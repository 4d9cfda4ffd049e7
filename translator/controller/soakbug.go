//go:build soakbug

package controller

import (
	"strings"
	"sync"

	"github.com/kubevirt-ovn/kubevirt-ovn/translator"
)

// The bug `make soak SOAK_BUG=1` builds in, for the soak to catch and its
// seed to reproduce: the controller of the files input loses the deletion
// of the first router of the soak's workload (f-r<n>) that leaves its
// input. Each time the router is reconciled it is skipped as if
// written (skipped once only, a later NB event for its rows would heal
// it: the deletions of its networks' switches do), so its rows stay until
// the process restarts.
func init() {
	var mu sync.Mutex
	lost := ""
	dropDeletion = func(u translator.Unit) bool {
		if u.Kind != translator.KindRouter || !strings.HasPrefix(u.Name, "f-r") {
			return false
		}
		mu.Lock()
		defer mu.Unlock()
		if lost == "" {
			lost = u.Name
		}
		return u.Name == lost
	}
}
