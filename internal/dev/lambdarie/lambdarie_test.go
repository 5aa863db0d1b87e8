//go:build integration

package lambdarie

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/runstwice/runstwice/internal/dev/testenv"
)

// startEcho builds and starts the echo test function.
func startEcho(t *testing.T) *Emulator {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	rie, err := Binary(root)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	bin, err := Build(ctx, root, "internal/dev/lambdarie/testdata/echo", filepath.Join(t.TempDir(), "bootstrap"))
	if err != nil {
		t.Fatal(err)
	}
	em, err := Start(ctx, Config{RIE: rie, Bootstrap: bin, FunctionName: "echo", Env: map[string]string{"ECHO_VAR": "v1"}, Timeout: 2 * time.Second, Output: testWriter{t}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(em.Stop)
	return em
}

func TestEmulatorInvokes(t *testing.T) {
	em := startEcho(t)
	ctx := context.Background()

	tests := []struct {
		name    string
		event   string
		want    map[string]string
		errType string
	}{
		{"reply with env and name", `{"say":"hi"}`, map[string]string{"said": "hi", "var": "v1", "function": "echo"}, ""},
		{"returned error", `{"fail":true}`, nil, "errorString"},
		{"timeout", `{"sleep":true}`, nil, "timeout"},
		{"still serving after errors", `{"say":"again"}`, map[string]string{"said": "again", "var": "v1", "function": "echo"}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			body, err := em.Invoke(ctx, []byte(tc.event))
			if tc.errType != "" {
				var fe *FunctionError
				if !errors.As(err, &fe) {
					t.Fatalf("got %s, %v; want a FunctionError", body, err)
				}
				t.Logf("function error: %v", fe)
				return
			}
			if err != nil {
				t.Fatalf("invoke: %v (%s)", err, body)
			}
			var got map[string]string
			if err := json.Unmarshal(body, &got); err != nil {
				t.Fatalf("response %s: %v", body, err)
			}
			for k, v := range tc.want {
				if got[k] != v {
					t.Errorf("%s = %q, want %q (%s)", k, got[k], v, body)
				}
			}
		})
	}

	// Concurrent callers are serialized, never crash the emulator.
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := em.Invoke(ctx, []byte(`{"say":"x"}`))
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("concurrent invoke: %v", err)
		}
	}
}

// TestInvokeOutlivesItsCaller: a caller that gives up mid-invocation does
// not free the emulator; the next call waits for the running invocation to
// end instead of landing on a busy emulator (which crashes it).
func TestInvokeOutlivesItsCaller(t *testing.T) {
	em := startEcho(t)
	impatient, cancel := context.WithCancel(context.Background())
	first := make(chan error, 1)
	go func() {
		body, err := em.Invoke(impatient, []byte(`{"say":"slow","slowMs":800}`))
		if err == nil && !strings.Contains(string(body), `"said":"slow"`) {
			err = errors.New("first reply: " + string(body))
		}
		first <- err
	}()
	// Wait until the slow invocation holds the slot, then give up on it.
	for len(em.slot) == 0 {
		runtime.Gosched()
	}
	cancel()
	// A new caller with its own short patience is refused, not served by the
	// busy emulator.
	short, cancelShort := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancelShort()
	if _, err := em.Invoke(short, []byte(`{"say":"x"}`)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("invoke while busy = %v; want it to wait for the slot until its deadline", err)
	}
	body, err := em.Invoke(context.Background(), []byte(`{"say":"next"}`))
	if err != nil || !strings.Contains(string(body), `"said":"next"`) {
		t.Fatalf("next invoke = %s, %v; want its own reply", body, err)
	}
	if err := <-first; err != nil {
		t.Fatalf("the abandoned invocation did not run to its end: %v", err)
	}
	if em.Exited() {
		t.Fatal("the emulator crashed")
	}
}

// TestInvokeOnAStoppedEmulator: an emulator that is gone says so.
func TestInvokeOnAStoppedEmulator(t *testing.T) {
	em := startEcho(t)
	em.Stop()
	if _, err := em.Invoke(context.Background(), []byte(`{}`)); !errors.Is(err, ErrExited) || !em.Exited() {
		t.Fatalf("invoke after Stop = %v; want ErrExited", err)
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Logf("%s", p)
	return len(p), nil
}
