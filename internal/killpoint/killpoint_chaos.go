//go:build chaos

package killpoint

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"syscall"
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
