package controller

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"
)

// ReasonOVNSocketUnavailable is the reason of the Warning Event a zone
// agent records while its zone's NB or SB does not answer.
const ReasonOVNSocketUnavailable = "OVNSocketUnavailable"

// DefaultAwaitEvery is how often Await checks again, and logs, by default.
const DefaultAwaitEvery = 3 * time.Second

// awaitEventEvery is how often the Event of a wait that goes on is recorded
// again: Events expire (an hour by default), a missing socket may not.
const awaitEventEvery = 10 * time.Minute

// Waiting is why a process is not ready yet, for /readyz: what it waits for
// before it starts, nil once it has it all.
type Waiting struct {
	mu  sync.Mutex
	err error
}

// NewWaiting is a Waiting not ready for reason until Await says otherwise.
func NewWaiting(reason string) *Waiting { return &Waiting{err: errors.New(reason)} }

// Err is why the process is not ready, nil once Done.
func (w *Waiting) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// Done says the process has all it waited for.
func (w *Waiting) Done() { w.set(nil) }

func (w *Waiting) set(err error) {
	w.mu.Lock()
	w.err = err
	w.mu.Unlock()
}

// Await waits for what a process needs before it can start (a zone agent:
// its NB's and SB's sockets, its zone's name), saying why it waits: not
// ready, a log line per check, and an Event.
type Await struct {
	// Waiting holds the failure of the last check while Until waits; the
	// caller says Done once it has all it waits for.
	Waiting *Waiting
	Log     logr.Logger
	// Events and Object: where Until records a Warning Event (none when
	// either is nil), e.g. the agent's Pod.
	Events record.EventRecorder
	Object runtime.Object
	// Every is how often to check again; DefaultAwaitEvery when zero.
	Every time.Duration
}

// Until calls check until it returns nil, or ctx ends (ctx's error). While
// check fails, Waiting holds its error, every failure is logged with it,
// and, with a reason, a Warning Event of that reason with the error as its
// message is recorded when the failure begins, when its message changes and
// every 10 minutes while it goes on. check's error says what is missing,
// where and why, as the user reads it.
func (a Await) Until(ctx context.Context, reason string, check func(context.Context) error) error {
	every := a.Every
	if every <= 0 {
		every = DefaultAwaitEvery
	}
	log := a.Log
	if reason != "" {
		log = log.WithValues("reason", reason)
	}
	var last string
	var recorded time.Time
	waited := false
	for {
		err := check(ctx)
		if err == nil {
			if waited {
				log.Info("no longer waiting")
			}
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		waited = true
		a.Waiting.set(err)
		log.Info("not ready: waiting", "error", err.Error(), "retryIn", every.String())
		if msg := err.Error(); reason != "" && a.Events != nil && a.Object != nil && (msg != last || time.Since(recorded) >= awaitEventEvery) {
			a.Events.Event(a.Object, corev1.EventTypeWarning, reason, msg)
			last, recorded = msg, time.Now()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(every):
		}
	}
}
