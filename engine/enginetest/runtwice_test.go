package enginetest_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/engine/enginetest"
)

// order is a team's own message: any JSON, its own key.
type order struct {
	ID     string `json:"orderId"`
	Amount int    `json:"amount"`
}

// effects counts a fake effect per order.
type effects struct {
	mu sync.Mutex
	n  map[string]int
	// times is how often one call performs the effect (broken work
	// performs it twice).
	times int
}

func (e *effects) work(_ context.Context, job engine.Job[order]) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.n[job.Payload.ID] += e.times
	return nil
}

func (e *effects) count(id string) int { e.mu.Lock(); defer e.mu.Unlock(); return e.n[id] }

func kind(bias engine.Bias, lease bool) engine.Kind[order] {
	return engine.Kind[order]{
		Name: "orders.ship", Key: func(o order) (string, error) { return o.ID, nil },
		Bias: bias, Lease: lease,
	}
}

func newOrder(key string) order { return order{ID: key, Amount: 12} }

func orderCase(e *effects, bias engine.Bias, lease bool) enginetest.Case[order] {
	return enginetest.Case[order]{Kind: kind(bias, lease), Work: e.work, New: newOrder, Effects: e.count}
}

// Converging work passes every scenario, with either bias.
func TestRunTwicePassesAConvergingJob(t *testing.T) {
	for _, bias := range []engine.Bias{engine.EffectThenClaim, engine.ClaimThenEffect} {
		t.Run(bias.String(), func(t *testing.T) {
			e := &effects{n: map[string]int{}, times: 1}
			enginetest.RunTwice(t, orderCase(e, bias, true))
		})
	}
}

// The kit can fail: it names the scenarios where the effect happened too
// often (work that performs its effect twice per call).
func TestCheckNamesTheFailingCase(t *testing.T) {
	e := &effects{n: map[string]int{}, times: 2}
	err := enginetest.Check(orderCase(e, engine.EffectThenClaim, true))
	if err == nil || !strings.Contains(err.Error(), "twice in sequence: the effect happened 2 times; want exactly 1") {
		t.Fatalf("Check = %v; want the sequence case named", err)
	}
}

// keyed is work whose effect is idempotent on its own: the provider dedups
// by the order id, so a repeat of the call is no second effect.
type keyed struct {
	mu   sync.Mutex
	seen map[string]bool
}

func (k *keyed) work(_ context.Context, job engine.Job[order]) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.seen[job.Key] = true
	return nil
}

func (k *keyed) count(id string) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.seen[id] {
		return 1
	}
	return 0
}

// Strict mode fails a bare counter (its effect repeats after a crash
// between effect and claim, which the default mode allows) and passes work
// keyed by the order id.
func TestExactlyOnceFailsACounterAndPassesKeyedWork(t *testing.T) {
	counter := &effects{n: map[string]int{}, times: 1}
	lenient := orderCase(counter, engine.EffectThenClaim, true)
	if err := enginetest.Check(lenient); err != nil {
		t.Fatalf("the default mode refused a counter: %v", err)
	}
	strict := lenient
	strict.ExactlyOnce = true
	err := enginetest.Check(strict)
	if err == nil || !strings.Contains(err.Error(), "crash after effect, before claim, then redelivery: the effect happened 2 times; want exactly 1") {
		t.Fatalf("strict Check of a counter = %v; want the crash between effect and claim named", err)
	}
	k := &keyed{seen: map[string]bool{}}
	enginetest.RunTwice(t, enginetest.Case[order]{Kind: kind(engine.EffectThenClaim, true), Work: k.work, New: newOrder, Effects: k.count, ExactlyOnce: true})
}

// A Case whose New does not give the payload the key it was asked for is
// refused: the kit could not count its effects.
func TestCheckRefusesANewThatIgnoresTheKey(t *testing.T) {
	e := &effects{n: map[string]int{}, times: 1}
	c := orderCase(e, engine.EffectThenClaim, true)
	c.New = func(string) order { return order{ID: "always-the-same"} }
	if err := enginetest.Check(c); err == nil || !strings.Contains(err.Error(), "New(") {
		t.Fatalf("Check = %v; want New named", err)
	}
}

// A stream's records are proved as a queue's are: from Kinesis data and
// from a DynamoDB stream's new image.
func TestRunTwiceOnStreams(t *testing.T) {
	for _, src := range []enginetest.Source{enginetest.Kinesis, enginetest.DynamoDB} {
		e := &effects{n: map[string]int{}, times: 1}
		c := orderCase(e, engine.EffectThenClaim, true)
		c.Source = src
		enginetest.RunTwice(t, c)
		broken := &effects{n: map[string]int{}, times: 2}
		bc := orderCase(broken, engine.EffectThenClaim, true)
		bc.Source = src
		if err := enginetest.Check(bc); err == nil {
			t.Fatalf("source %d: the kit passed work that doubles its effect", src)
		}
	}
}

// DoTwice proves a function under engine.Do, and fails one that doubles
// its effect or, strict, one a crash between its effect and its kept
// result repeats.
func TestDoTwice(t *testing.T) {
	var mu sync.Mutex
	made := map[string]int{}
	charge := func(times int) func(context.Context, string) (string, error) {
		return func(_ context.Context, key string) (string, error) {
			mu.Lock()
			defer mu.Unlock()
			made[key] += times
			return "ch-" + key, nil
		}
	}
	count := func(key string) int { mu.Lock(); defer mu.Unlock(); return made[key] }
	enginetest.DoTwice(t, enginetest.DoCase[string]{Name: "payments.charge", Fn: charge(1), Effects: count})
	if err := enginetest.CheckDo(enginetest.DoCase[string]{Name: "payments.charge", Fn: charge(2), Effects: count}); err == nil {
		t.Fatal("the kit passed a function that charges twice per call")
	}
	err := enginetest.CheckDo(enginetest.DoCase[string]{Name: "payments.charge", Fn: charge(1), Effects: count, ExactlyOnce: true})
	if err == nil || !strings.Contains(err.Error(), "crash after effect, before claim") {
		t.Fatalf("strict CheckDo of a bare counter = %v; want the crash between effect and kept result named", err)
	}
}
