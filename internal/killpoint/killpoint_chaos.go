//go:build chaos

package killpoint

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/internal/runner"
	"github.com/runstwice/runstwice/internal/vclock"
)

// Enabled reports whether this build can be killed at a step: true.
const Enabled = true

// probabilities is read once, from the variable named by EnvVar.
var probabilities = parse(os.Getenv("RUNSTWICE_KILL_AT"))

// mutations is read once, from the variable named by MutateEnvVar.
var mutations = parseMutations(os.Getenv("RUNSTWICE_MUTATE"))

func parseMutations(v string) map[string]bool {
	out := map[string]bool{}
	for _, name := range strings.Split(v, ",") {
		if name = strings.TrimSpace(name); name != "" {
			out[name] = true
		}
	}
	return out
}

// Mutated reports whether this process was told to make the named
// mutation (one of Mutations) to break the runner on purpose.
func Mutated(name string) bool { return mutations[name] }

func parse(v string) map[string]float64 {
	out := map[string]float64{}
	for _, part := range strings.Split(v, ",") {
		name, p, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			continue
		}
		if f, err := strconv.ParseFloat(p, 64); err == nil && f > 0 {
			out[name] = min(f, 1)
		}
	}
	return out
}

// At kills this process with SIGKILL at step with the configured
// probability, after writing one line that says where (the ledger counts
// kills by step).
func At(step string) {
	p := probabilities[step]
	if p <= 0 || rand.Float64() >= p {
		return
	}
	fmt.Fprintf(os.Stdout, "{\"msg\":\"killpoint\",\"step\":%q,\"pid\":%d}\n", step, os.Getpid())
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {}
}

// Wire hooks the kill points into cfg (AtStep), sets its clock to the
// campaign's virtual one (vclock.Now; a lease, which ends at the Lambda
// deadline on the wall clock, is moved by the same offset, so the marker
// store compares like with like), and makes the mutations this process was
// told to make by wrapping cfg's marker store, kill switch and handlers.
func Wire(cfg *runner.Config) {
	cfg.AtStep = func(s engine.Step) { At(string(s)) }
	cfg.Now = vclock.Now
	if Mutated(IgnoreSwitch) {
		cfg.Switch = allOn{}
	}
	cfg.Markers = mutatedStore{cfg.Markers}
	if Mutated(NoSweep) {
		wrapHandler(cfg, sweepType, func(runner.Handler) runner.Handler { return noSweep{} })
	}
	if Mutated(SkipPages) && cfg.Switch != nil {
		real := cfg.Switch
		cfg.Switch = pagesOn{real}
		wrapHandler(cfg, fanoutType, func(h runner.Handler) runner.Handler { return skipWhileOff{h, real} })
	}
}

// The job types two mutations change (the schedule sweep's and the digest
// fan-out's), by name: their packages import this one's users.
const (
	sweepType  = "runstwice.schedule-sweep.v1"
	fanoutType = "email.partner-digest-fanout.v1"
)

func wrapHandler(cfg *runner.Config, name string, wrap func(runner.Handler) runner.Handler) {
	if h, ok := cfg.Handlers[name]; ok {
		cfg.Handlers[name] = wrap(h)
	}
}

// noSweep is the schedule sweep that deletes nothing (NoSweep).
type noSweep struct{}

func (noSweep) Handle(context.Context, runner.Job) error { return nil }

// pagesOn reports the fan-out's switch on, so that no page parks
// (SkipPages); skipWhileOff then ends the job without work when the real
// switch is off, as a skip does.
type pagesOn struct{ engine.Switch }

func (p pagesOn) IsJobEnabled(ctx context.Context, name string, def bool) bool {
	return name == fanoutType || p.Switch.IsJobEnabled(ctx, name, def)
}

type skipWhileOff struct {
	runner.Handler
	real engine.Switch
}

func (s skipWhileOff) Handle(ctx context.Context, job runner.Job) error {
	if !s.real.IsJobEnabled(ctx, fanoutType, false) {
		return nil
	}
	return s.Handler.Handle(ctx, job)
}

// allOn is a kill switch that is always on (IgnoreSwitch).
type allOn struct{}

func (allOn) IsJobEnabled(context.Context, string, bool) bool { return true }

// mutatedStore is the marker store on the virtual clock, with the
// guarantees the mutations remove: NoPeek sees no marker (the batch peek finds none, and a lease
// refused because the job is done is taken as granted), NoLease takes no
// lease, NoClaim never writes the claim.
type mutatedStore struct{ engine.Store }

func (m mutatedStore) PeekBatch(ctx context.Context, keys []engine.Key) (map[engine.Key]engine.Record, error) {
	if Mutated(NoPeek) {
		return map[engine.Key]engine.Record{}, nil
	}
	return m.Store.PeekBatch(ctx, keys)
}

func (m mutatedStore) Lease(ctx context.Context, k engine.Key, mk engine.Mark) (engine.Record, error) {
	mk.Until = mk.Until.Add(vclock.Offset()) // the Lambda deadline, on the virtual clock
	if Mutated(NoLease) {
		return engine.Record{Key: k, State: engine.StateLeased, Owner: mk.Owner, LeaseUntil: mk.Until}, nil
	}
	r, err := m.Store.Lease(ctx, k, mk)
	if Mutated(NoPeek) && errors.Is(err, engine.ErrProcessed) {
		return r, nil
	}
	return r, err
}

func (m mutatedStore) Claim(ctx context.Context, k engine.Key, mk engine.Mark) (bool, error) {
	if Mutated(NoClaim) {
		return true, nil
	}
	return m.Store.Claim(ctx, k, mk)
}

func (m mutatedStore) Release(ctx context.Context, k engine.Key, owner string) error {
	if Mutated(NoLease) {
		return nil
	}
	return m.Store.Release(ctx, k, owner)
}

// RelayKey returns the key the outbox relay stores its decision for an item
// under: the item's own Idempotency-Key, or, with RelayForgets, a key of
// this relay alone, so that no later relay of the item finds the decision.
func RelayKey(key string) string {
	if Mutated(RelayForgets) {
		return fmt.Sprintf("%s.forgotten-%d", key, rand.Int64())
	}
	return key
}
