package enginetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/engine/memstore"
)

// DoCase is a function to prove under engine.Do.
type DoCase[R any] struct {
	// Name is the calls' namespace (engine.Do's name).
	Name string
	// Fn is the function, wired to fakes the test owns; key is the call's
	// key (a fresh one per scenario).
	Fn func(ctx context.Context, key string) (R, error)
	// Effects reports how often the call with key had its effect so far.
	Effects func(key string) int
	// ExactlyOnce makes the kit strict, as Case.ExactlyOnce does: the
	// crash between the effect and the kept result must show one effect.
	ExactlyOnce bool
}

// DoTwice runs every scenario RunTwice does (twice in sequence, twice at
// once, a crash after the lease, after the effect, after the kept result,
// each followed by a repeat once the lease has run out) against engine.Do
// on the in-memory store, and fails the one whose effect count is wrong.
// A repeat that meets the first call still running gets ErrInProgress and
// tries again later, as a client told Retry-After does.
func DoTwice[R any](t *testing.T, c DoCase[R]) {
	t.Helper()
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			if err := checkDo(c, sc); err != nil {
				t.Error(err)
			}
		})
	}
}

// CheckDo is DoTwice without a testing.T.
func CheckDo[R any](c DoCase[R]) error {
	var errs []error
	for _, sc := range scenarios {
		if err := checkDo(c, sc); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func checkDo[R any](c DoCase[R], sc scenario) error {
	if c.Name == "" || c.Fn == nil || c.Effects == nil {
		return errors.New("enginetest: DoCase needs Name, Fn and Effects")
	}
	lo, hi := 1, sc.maxEffects
	if c.ExactlyOnce {
		hi = 1
	}
	key := uuid.NewString()
	clock := NewClock(time.Now())
	mem := memstore.New()
	mem.Now = clock.Now
	crash := &crashes{at: sc.crash}
	store := crashingMarkers{Store: mem, crash: crash}
	call := func() error {
		done := make(chan error, 1)
		go func() {
			defer close(done) // a crash (Goexit) ends the call without an answer
			_, err := engine.Do(context.Background(), store, c.Name, key, func(ctx context.Context) (R, error) {
				v, err := c.Fn(ctx, key)
				if err == nil {
					crash.here(crashAfterEffect)
				}
				return v, err
			}, engine.WithClock(clock.Now), engine.WithLease(invocationTimeout))
			done <- err
		}()
		return <-done
	}
	if sc.concurrent {
		var wg sync.WaitGroup
		for range 2 {
			wg.Go(func() { _ = call() })
		}
		wg.Wait()
	} else {
		_ = call()
	}
	crash.disarm()
	for range 3 { // the repeats, each after any lease has run out
		clock.Advance(2 * invocationTimeout)
		if err := call(); err == nil {
			break
		}
	}
	if got := c.Effects(key); got < lo || got > hi {
		return fmt.Errorf("%s: the effect happened %d times; want %s", sc.name, got, want(lo, hi))
	}
	return nil
}
