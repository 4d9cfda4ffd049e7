package controller

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/kubevirt-ovn/kubevirt-ovn/translator/nbtest"
	"github.com/kubevirt-ovn/kubevirt-ovn/translator/ovn"
)

// A zone agent whose NB socket is missing, then refuses connections, then
// answers: not ready with the socket's path and why all along, logging it
// at every check and recording a Warning Event per cause; ready once the NB
// answers.
func TestAwaitSocketMissingRefusedThenAnswering(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "ovnnb_db.sock")
	ep := ovn.Endpoint{Address: "unix:" + sock, Timeout: time.Second}

	var mu sync.Mutex
	var logs []string
	log := funcr.New(func(prefix, args string) {
		mu.Lock()
		logs = append(logs, args)
		mu.Unlock()
	}, funcr.Options{})
	logged := func(substr string) int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, l := range logs {
			if strings.Contains(l, substr) {
				n++
			}
		}
		return n
	}
	events := record.NewFakeRecorder(10)
	pod := &corev1.ObjectReference{Kind: "Pod", Namespace: "kubevirt-ovn", Name: "agent-x"}
	waiting := NewWaiting("starting")
	a := Await{Waiting: waiting, Log: log, Events: events, Object: pod, Every: 20 * time.Millisecond}
	hint := " (hint)"
	check := func(ctx context.Context) error {
		if err := ovn.ProbeNB(ctx, ep); err != nil {
			return fmt.Errorf("%w%s", err, hint)
		}
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	done := make(chan error, 1)
	go func() { done <- a.Until(ctx, ReasonOVNSocketUnavailable, check) }()

	notReadyWith := func(why string) {
		t.Helper()
		require.Eventually(t, func() bool {
			err := waiting.Err()
			return err != nil && strings.Contains(err.Error(), why)
		}, 5*time.Second, 10*time.Millisecond, "not ready because %s; /readyz says %v", why, waiting.Err())
		assert.Contains(t, waiting.Err().Error(), sock)
		assert.Contains(t, waiting.Err().Error(), hint)
	}
	event := func(why string) {
		t.Helper()
		select {
		case e := <-events.Events:
			assert.True(t, strings.HasPrefix(e, "Warning "+ReasonOVNSocketUnavailable+" NB: unix:"+sock+": "), e)
			assert.Contains(t, e, why)
			assert.Contains(t, e, hint)
		case <-time.After(5 * time.Second):
			t.Fatalf("no Event for %s", why)
		}
	}

	// Missing: every check logs the path and the error; one Event.
	notReadyWith("no such file or directory")
	event("no such file or directory")
	require.Eventually(t, func() bool { return logged("no such file or directory") >= 3 }, 5*time.Second, 10*time.Millisecond)
	assert.Positive(t, logged(sock))
	assert.Empty(t, events.Events, "one Event while the cause stays the same")

	// A socket nobody listens on (the server died and left it).
	l, err := net.Listen("unix", sock)
	require.NoError(t, err)
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	require.NoError(t, l.Close())
	notReadyWith("connection refused")
	event("connection refused")

	// The NB appears: ready, and no more Events.
	// (Replaced in one rename: a check between a remove and a create
	// would see the socket missing again, a new cause and a new Event.)
	require.NoError(t, os.Symlink(nbtest.Serve(t), sock+".new"))
	require.NoError(t, os.Rename(sock+".new", sock))
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatalf("still waiting once the NB answers: %v", waiting.Err())
	}
	waiting.Done()
	assert.NoError(t, waiting.Err())
	assert.Empty(t, events.Events)
	assert.Equal(t, 1, logged("no longer waiting"))
}

// A wait ends with its context; without a reason it records no Event.
func TestAwaitEndsWithContextAndRecordsNoEventWithoutReason(t *testing.T) {
	events := record.NewFakeRecorder(10)
	waiting := NewWaiting("starting")
	a := Await{Waiting: waiting, Events: events, Object: &corev1.ObjectReference{Kind: "Pod", Name: "p"}, Every: 10 * time.Millisecond}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	err := a.Until(ctx, "", func(context.Context) error { return assert.AnError })
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Equal(t, assert.AnError, waiting.Err())
	assert.Empty(t, events.Events)
}
