package engine_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/engine/enginetest"
	"github.com/runstwice/runstwice/engine/memstore"
)

type charge struct {
	ID     string `json:"id"`
	Amount int    `json:"amount"`
}

// doWorld is a store on a clock, and a count of the charges made.
type doWorld struct {
	store *enginetest.Traced
	clock *enginetest.Clock
	mu    sync.Mutex
	runs  int
}

func newDoWorld() *doWorld {
	w := &doWorld{clock: enginetest.NewClock(time.Now())}
	mem := memstore.New()
	mem.Now = w.clock.Now
	w.store = &enginetest.Traced{Store: mem, Trace: &enginetest.Trace{}}
	return w
}

func (w *doWorld) do(ctx context.Context, key string, amount int, opts ...engine.DoOption) (charge, error) {
	opts = append([]engine.DoOption{engine.WithClock(w.clock.Now)}, opts...)
	return engine.Do(ctx, w.store, "payments.charge", key, func(context.Context) (charge, error) {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.runs++
		return charge{ID: "ch-" + key, Amount: amount}, nil
	}, opts...)
}

// The first call runs the function and keeps its result; a repeat returns
// the kept result without running it: one read and two writes, then one
// read.
func TestDoRunsOnceAndReplays(t *testing.T) {
	w := newDoWorld()
	ctx := context.Background()
	first, err := w.do(ctx, "k-1", 12)
	if err != nil || first.ID != "ch-k-1" {
		t.Fatalf("first call: %+v, %v", first, err)
	}
	if got := w.store.Trace.String(); got != "peek lease claim" {
		t.Fatalf("the first call made %q; want peek lease claim", got)
	}
	w.store.Trace.Reset()
	var replayed bool
	again, err := w.do(ctx, "k-1", 12, engine.WithReplayed(&replayed))
	if err != nil || again != first || !replayed || w.runs != 1 {
		t.Fatalf("repeat: %+v, %v, replayed %v, runs %d; want the kept result, not run", again, err, replayed, w.runs)
	}
	if got := w.store.Trace.String(); got != "peek" {
		t.Fatalf("the repeat made %q; want one read", got)
	}
}

// A call while another holds the key gets ErrInProgress, with when the
// other's lease ends, and runs nothing.
func TestDoInProgress(t *testing.T) {
	w := newDoWorld()
	ctx := context.Background()
	hold, release := make(chan struct{}), make(chan struct{})
	done := make(chan error)
	go func() {
		_, err := engine.Do(ctx, w.store, "payments.charge", "k-1", func(context.Context) (charge, error) {
			close(hold)
			<-release
			return charge{ID: "ch"}, nil
		}, engine.WithClock(w.clock.Now), engine.WithLease(time.Minute))
		done <- err
	}()
	<-hold
	_, err := w.do(ctx, "k-1", 12)
	var ip *engine.InProgressError
	if !errors.Is(err, engine.ErrInProgress) || !errors.As(err, &ip) || !ip.Until.Equal(w.clock.Now().Add(time.Minute)) || w.runs != 0 {
		t.Fatalf("concurrent call: %v (%+v), runs %d; want ErrInProgress until the holder's lease ends", err, ip, w.runs)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// Another fingerprint on a kept or held key is ErrFingerprint, and the
// function never runs.
func TestDoFingerprint(t *testing.T) {
	w := newDoWorld()
	ctx := context.Background()
	if _, err := w.do(ctx, "k-1", 12, engine.WithFingerprint([]byte("POST /charges amount=12"))); err != nil {
		t.Fatal(err)
	}
	_, err := w.do(ctx, "k-1", 99, engine.WithFingerprint([]byte("POST /charges amount=99")))
	if !errors.Is(err, engine.ErrFingerprint) || !strings.Contains(err.Error(), `"k-1"`) || w.runs != 1 {
		t.Fatalf("other fingerprint: %v, runs %d; want ErrFingerprint naming the key, not run", err, w.runs)
	}
	if got, err := w.do(ctx, "k-1", 12, engine.WithFingerprint([]byte("POST /charges amount=12"))); err != nil || got.Amount != 12 {
		t.Fatalf("same fingerprint: %+v, %v; want the kept result", got, err)
	}
}

// An fn error keeps nothing: the next call runs fn again, at once (the
// failed call released its lease).
func TestDoErrorKeepsNothing(t *testing.T) {
	w := newDoWorld()
	ctx := context.Background()
	boom := errors.New("card declined")
	_, err := engine.Do(ctx, w.store, "payments.charge", "k-1", func(context.Context) (charge, error) { return charge{}, boom }, engine.WithClock(w.clock.Now))
	if !errors.Is(err, boom) {
		t.Fatalf("err %v; want fn's", err)
	}
	if got, err := w.do(ctx, "k-1", 12); err != nil || got.Amount != 12 || w.runs != 1 {
		t.Fatalf("the next call: %+v, %v, runs %d; want fn run", got, err, w.runs)
	}
}

// A call whose lease ran out, and which a newer call took over, never
// overwrites the newer call's result or releases its lease: the stale
// holder's completion and release are conditional on its lease (the bug
// class of Powertools TypeScript's #5675 and #5715).
func TestDoStaleHolderNeverOverwritesTheNewer(t *testing.T) {
	for _, newerDone := range []bool{true, false} {
		name := map[bool]string{true: "newer done first", false: "newer still running"}[newerDone]
		t.Run(name, func(t *testing.T) {
			w := newDoWorld()
			ctx := context.Background()
			staleRunning, staleGo := make(chan struct{}), make(chan struct{})
			staleDone := make(chan error)
			go func() {
				_, err := engine.Do(ctx, w.store, "payments.charge", "k-1", func(context.Context) (charge, error) {
					close(staleRunning)
					<-staleGo
					return charge{ID: "stale"}, nil
				}, engine.WithClock(w.clock.Now), engine.WithLease(time.Minute))
				staleDone <- err
			}()
			<-staleRunning
			w.clock.Advance(2 * time.Minute) // the stale call's lease ran out
			newerRunning, newerGo := make(chan struct{}), make(chan struct{})
			newerDoneCh := make(chan error)
			go func() {
				_, err := engine.Do(ctx, w.store, "payments.charge", "k-1", func(context.Context) (charge, error) {
					close(newerRunning)
					<-newerGo
					return charge{ID: "newer"}, nil
				}, engine.WithClock(w.clock.Now), engine.WithLease(time.Minute))
				newerDoneCh <- err
			}()
			<-newerRunning
			if newerDone {
				close(newerGo)
				if err := <-newerDoneCh; err != nil {
					t.Fatal(err)
				}
			}
			close(staleGo)
			if err := <-staleDone; err != nil {
				t.Fatalf("the stale call: %v; its own result stands for its caller", err)
			}
			if !newerDone {
				// The stale call's release must not have freed the newer's lease.
				if _, err := w.do(ctx, "k-1", 1); !errors.Is(err, engine.ErrInProgress) {
					t.Fatalf("while the newer call runs: %v; want ErrInProgress", err)
				}
				close(newerGo)
				if err := <-newerDoneCh; err != nil {
					t.Fatal(err)
				}
			}
			got, err := w.do(ctx, "k-1", 1)
			if err != nil || got.ID != "newer" {
				t.Fatalf("kept result %+v, %v; want the newer call's, never the stale one's", got, err)
			}
		})
	}
}

// A result too large for an item is an error, returned with the result to
// the call that ran it, and to every repeat, which never runs fn again.
func TestDoResultTooLarge(t *testing.T) {
	w := newDoWorld()
	ctx := context.Background()
	big := strings.Repeat("x", engine.MaxResultBytes)
	v, err := engine.Do(ctx, w.store, "reports.render", "r-1", func(context.Context) (string, error) { return big, nil }, engine.WithClock(w.clock.Now))
	if !errors.Is(err, engine.ErrResultTooLarge) || v != big {
		t.Fatalf("first call: %d bytes, %v; want the result with ErrResultTooLarge", len(v), err)
	}
	ran := false
	_, err = engine.Do(ctx, w.store, "reports.render", "r-1", func(context.Context) (string, error) { ran = true; return "", nil }, engine.WithClock(w.clock.Now))
	if !errors.Is(err, engine.ErrResultTooLarge) || ran {
		t.Fatalf("repeat: %v, ran %v; want ErrResultTooLarge, not run", err, ran)
	}
}

// KeepUntil keeps the result past a later time than the retention alone.
func TestDoKeepUntil(t *testing.T) {
	w := newDoWorld()
	ctx := context.Background()
	runAt := w.clock.Now().Add(10 * 24 * time.Hour)
	_, err := engine.Do(ctx, w.store, "jobs.enqueue", "k-1", func(ctx context.Context) (int, error) {
		engine.KeepUntil(ctx, runAt)
		return 1, nil
	}, engine.WithClock(w.clock.Now), engine.WithRetention(24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	w.clock.Advance(10*24*time.Hour + 23*time.Hour)
	var replayed bool
	if _, err := engine.Do(ctx, w.store, "jobs.enqueue", "k-1", func(context.Context) (int, error) { return 2, nil },
		engine.WithClock(w.clock.Now), engine.WithReplayed(&replayed)); err != nil || !replayed {
		t.Fatalf("within the retention past runAt: %v, replayed %v; want the kept result", err, replayed)
	}
}
