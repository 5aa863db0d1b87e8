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
	"time"

	"github.com/runstwice/runstwice/engine"
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

// Wire hooks the kill points into cfg (AtStep) and makes the mutations this
// process was told to make by wrapping cfg's marker store and kill switch.
func Wire(cfg *engine.Config) {
	cfg.AtStep = func(s engine.Step) { At(string(s)) }
	if Mutated(IgnoreSwitch) {
		cfg.Switch = allOn{}
	}
	if Mutated(NoClaim) || Mutated(NoPeek) || Mutated(NoLease) {
		cfg.Markers = mutatedStore{cfg.Markers}
	}
}

// allOn is a kill switch that is always on (IgnoreSwitch).
type allOn struct{}

func (allOn) IsJobEnabled(context.Context, string, bool) bool { return true }

// mutatedStore is the marker store with the guarantees the mutations
// remove: NoPeek sees no marker (the batch peek finds none, and a lease
// refused because the job is done is taken as granted), NoLease takes no
// lease, NoClaim never writes the claim.
type mutatedStore struct{ engine.Store }

func (m mutatedStore) PeekBatch(ctx context.Context, keys []engine.Key) (map[engine.Key]engine.Record, error) {
	if Mutated(NoPeek) {
		return map[engine.Key]engine.Record{}, nil
	}
	return m.Store.PeekBatch(ctx, keys)
}

func (m mutatedStore) Lease(ctx context.Context, k engine.Key, owner string, until time.Time) (engine.Record, error) {
	if Mutated(NoLease) {
		return engine.Record{Key: k, State: engine.StateLeased, Owner: owner, LeaseUntil: until}, nil
	}
	r, err := m.Store.Lease(ctx, k, owner, until)
	if Mutated(NoPeek) && errors.Is(err, engine.ErrProcessed) {
		return r, nil
	}
	return r, err
}

func (m mutatedStore) Claim(ctx context.Context, k engine.Key, owner string, due time.Time) (bool, error) {
	if Mutated(NoClaim) {
		return true, nil
	}
	return m.Store.Claim(ctx, k, owner, due)
}

func (m mutatedStore) Release(ctx context.Context, k engine.Key, owner string) error {
	if Mutated(NoLease) {
		return nil
	}
	return m.Store.Release(ctx, k, owner)
}
