package message

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/runstwice/runstwice/engine"
)

// Queue names the work queue a job type is sent to: the application's own
// name for it ("critical", "webhooks"), 1-64 lower-case letters, digits or
// '-', starting with a letter. The runner hands it to the Parker, which
// knows each queue's URL; the engine gives queues no meaning of its own.
type Queue string

// valid reports whether q has a queue name's shape.
func (q Queue) valid() bool { return len(q) <= 64 && validSegment(string(q)) }

// JobType declares one versioned job type. The registry is the one place that
// says what a type carries, where it goes and how it runs.
type JobType struct {
	// Name is the versioned type name, e.g. "email.welcome.v1".
	Name string
	// Args declares every argument the type accepts.
	Args []ArgSpec
	// Queue is the work queue the type is sent to.
	Queue Queue
	// EnabledByDefault is the kill-switch value when its parameter is
	// missing or unreadable. False makes the type fail-closed.
	EnabledByDefault bool
	// Bias orders effect and claim.
	Bias engine.Bias
	// Lease makes the runner take a lease on the marker before the effect, so
	// a concurrent twin does not run the effect at the same time.
	Lease bool
	// KeyPrefix and KeyArgs derive the natural idempotency key when the
	// caller gives none: KeyPrefix + ":" + the values of KeyArgs joined by
	// ":" (e.g. "partner-verification:u-123").
	KeyPrefix string
	KeyArgs   []string
	// WhileOff says what a job of the type does while its kill switch is
	// off: Park (the default) or Skip. Of a tick type, only a tick skips:
	// any other job of it (a page a tick's job enqueued) parks.
	WhileOff engine.WhileOff
	// TickArgs, when set, makes the type a tick type: a recurring
	// schedule's tick of it (see Tick) becomes a job with these args,
	// derived from the tick's scheduled time. A tick type skips while off.
	TickArgs func(scheduledTime time.Time) map[string]string
}

// DeriveKey returns the natural idempotency key of a job with these args.
func (t JobType) DeriveKey(args map[string]string) string {
	parts := make([]string, 0, len(t.KeyArgs)+1)
	parts = append(parts, t.KeyPrefix)
	for _, name := range t.KeyArgs {
		parts = append(parts, args[name])
	}
	return strings.Join(parts, ":")
}

// ValidateArgs checks args against the type's declared args.
func (t JobType) ValidateArgs(args map[string]string) error {
	return ValidateArgs(t.Args, args)
}

// Registry holds the registered job types. It is built once at start-up and
// only read afterwards, so it is safe for concurrent use.
type Registry struct {
	types map[string]JobType
	names []string
}

// NewRegistry builds a registry of the given types. It refuses a malformed or
// duplicate name, a missing or malformed queue name, a format that
// cannot check, and key args that are not declared.
func NewRegistry(types ...JobType) (*Registry, error) {
	r := &Registry{types: make(map[string]JobType, len(types))}
	for _, t := range types {
		if err := r.register(t); err != nil {
			return nil, err
		}
	}
	return r, nil
}

func (r *Registry) register(t JobType) error {
	if !ValidTypeName(t.Name) {
		return fmt.Errorf("message: type name %q is not of the form name.vN", t.Name)
	}
	if _, dup := r.types[t.Name]; dup {
		return fmt.Errorf("message: type %q registered twice", t.Name)
	}
	if !t.Queue.valid() {
		return fmt.Errorf("message: type %q: queue %q is not a queue name (lower-case letters, digits and '-', starting with a letter)", t.Name, t.Queue)
	}
	if t.KeyPrefix == "" {
		return fmt.Errorf("message: type %q: empty key prefix", t.Name)
	}
	for _, a := range t.Args {
		if reason := a.Format.check(); reason != "" {
			return fmt.Errorf("message: type %q: arg %q %s", t.Name, a.Name, reason)
		}
	}
	for _, k := range t.KeyArgs {
		i := slices.IndexFunc(t.Args, func(a ArgSpec) bool { return a.Name == k })
		if i < 0 || !t.Args[i].Required {
			return fmt.Errorf("message: type %q: key arg %q is not a required arg", t.Name, k)
		}
	}
	if t.TickArgs != nil && t.WhileOff != engine.Skip {
		return fmt.Errorf("message: type %q: a tick type must skip while off (WhileOff Skip), or a week of ticks piles up behind its switch", t.Name)
	}
	r.types[t.Name] = t
	r.names = append(r.names, t.Name)
	slices.Sort(r.names)
	return nil
}

// Lookup returns the type registered under name.
func (r *Registry) Lookup(name string) (JobType, error) {
	t, ok := r.types[name]
	if !ok {
		return JobType{}, &UnknownTypeError{Type: name}
	}
	return t, nil
}

// Names returns the registered type names, sorted.
func (r *Registry) Names() []string { return slices.Clone(r.names) }

// Types returns the registered types, sorted by name.
func (r *Registry) Types() []JobType {
	out := make([]JobType, len(r.names))
	for i, n := range r.names {
		out[i] = r.types[n]
	}
	return out
}

// Validate checks that env names a registered type and carries valid args for
// it. Decode has already checked the envelope's own fields.
func (r *Registry) Validate(env Envelope) (JobType, error) {
	t, err := r.Lookup(env.Type)
	if err != nil {
		return JobType{}, err
	}
	if err := t.ValidateArgs(env.Args); err != nil {
		return JobType{}, err
	}
	return t, nil
}

// Nearest returns the registered name closest to name by edit distance, for a
// did-you-mean hint, and whether one is close enough to suggest.
func (r *Registry) Nearest(name string) (string, bool) {
	best, bestD := "", -1
	for _, n := range r.names {
		d := levenshtein(name, n)
		if bestD < 0 || d < bestD {
			best, bestD = n, d
		}
	}
	if bestD < 0 || bestD > max(3, len(name)/4) {
		return "", false
	}
	return best, true
}

func levenshtein(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
