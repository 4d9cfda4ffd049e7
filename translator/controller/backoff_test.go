package controller

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"

	tr "github.com/kubevirt-ovn/kubevirt-ovn/translator"
)

// A unit's retry waits for its own failures only. With client-go's default
// controller limiter, the other units' failures through a 10 s NB outage
// (30 units, 11 retries each) had a unit that then failed once wait 23 s
// instead of 5 ms: its token bucket, shared by every unit, was that far
// in debt.
func TestUnitBackoffIsEachUnitsOwn(t *testing.T) {
	backoff := unitBackoff()
	for i := range 30 {
		u := tr.Unit{Kind: tr.KindRouter, Name: fmt.Sprintf("router-%d", i)}
		for range 11 {
			backoff.When(u)
		}
	}
	fresh := tr.Unit{Kind: tr.KindNetwork, Name: "net-a"}
	assert.Equal(t, backoffBase, backoff.When(fresh), "a unit's first failure after the others' outage")

	// Its own failures in a row still double its wait, and a success
	// forgets them.
	for range 9 {
		backoff.When(fresh)
	}
	assert.Equal(t, backoffBase<<10, backoff.When(fresh), "its eleventh failure in a row")
	backoff.Forget(fresh)
	assert.Equal(t, backoffBase, backoff.When(fresh), "its first failure after a success")

	many := tr.Unit{Kind: tr.KindRouter, Name: "router-0"}
	for range 40 {
		backoff.When(many)
	}
	assert.Equal(t, backoffMax, backoff.When(many), "at most backoffMax; the resync enqueues it meanwhile")
}
