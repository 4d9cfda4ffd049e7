package controller

import (
	"time"

	"k8s.io/client-go/util/workqueue"

	"github.com/kubevirt-ovn/kubevirt-ovn/translator"
)

// Backoff of a unit whose reconcile failed: from backoffBase, doubling
// with each failure in a row, up to backoffMax (client-go's per-item
// default); a success forgets it, and the resync (--resync) and a
// reconnection enqueue every unit meanwhile.
const (
	backoffBase = 5 * time.Millisecond
	backoffMax  = 1000 * time.Second
)

// unitBackoff is how long a failed unit waits before its next reconcile:
// its own failures in a row only.
//
// Not client-go's default controller limiter, which adds one token bucket
// (10 a second, burst 100) shared by every unit. Each retry reserves a
// token whether it needs one or not, so failures run the bucket into debt
// that every later retry of any unit waits out: 30 units failing through
// a 10 s NB outage (11 retries each) had a unit that failed once
// afterwards wait 23 s, where its own backoff is 5 ms. With thousands of
// units an outage's debt is hours. The bucket guards a shared server
// against many units retrying in a hot loop; each unit's doubling already
// ends that, and a worker's batch takes the retries due together.
func unitBackoff() workqueue.TypedRateLimiter[translator.Unit] {
	return workqueue.NewTypedItemExponentialFailureRateLimiter[translator.Unit](backoffBase, backoffMax)
}

// newUnitQueue is the work queue of a controller's or an allocator's
// units, named for its metrics.
func newUnitQueue(name string) workqueue.TypedRateLimitingInterface[translator.Unit] {
	return workqueue.NewTypedRateLimitingQueueWithConfig(unitBackoff(),
		workqueue.TypedRateLimitingQueueConfig[translator.Unit]{Name: name})
}
