package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"

	"github.com/aws/aws-lambda-go/events"
)

// Mux runs the records of one event source whose payloads share a type
// but whose kinds differ: one function that consumes many kinds of job.
// Its decode turns every record's body into a T, its route function names
// the route of each payload, and Handle registers a kind and its work under
// a route. (A Handler is a Mux of one kind.) It is safe for concurrent use
// once its routes are registered.
type Mux[T any] struct {
	core   *runner
	decode func([]byte) (T, error)
	pick   func(T) string
	routes map[string]*kindRoute[T]
	// only is the route of a Handler's one kind: a body it cannot decode
	// is still counted and named under that kind.
	only *kindRoute[T]
}

// NewMux returns a Mux with o whose decode turns each record's body into a
// payload and whose route names the payload's route. A record whose body
// decode refuses, or whose route is not registered, fails as permanent
// with that reason (its metrics' type is "unknown").
func NewMux[T any](o Options, decode func([]byte) (T, error), route func(T) string) (*Mux[T], error) {
	core, err := newRunner(o)
	if err != nil {
		return nil, err
	}
	if decode == nil || route == nil {
		return nil, errors.New("engine: NewMux needs decode and route")
	}
	m := &Mux[T]{core: core, decode: decode, pick: route, routes: map[string]*kindRoute[T]{}}
	core.jobsOf = func(n int) jobs {
		return &muxBatch[T]{m: m, payloads: make([]T, n), routes: make([]*kindRoute[T], n), keys: make([]string, n)}
	}
	return m, nil
}

// Handle registers route: its payloads are of kind k and run work. A kind
// must have a name and a key function; a kind that parks while off needs
// Options.Parker when Options.Switch is set. Kind.Decode is not used in a
// Mux (its decode is).
func (m *Mux[T]) Handle(route string, k Kind[T], work func(context.Context, Job[T]) error) error {
	switch {
	case k.Name == "":
		return errors.New("engine: Kind.Name is required")
	case k.Key == nil:
		return fmt.Errorf("engine: kind %s: Kind.Key is required", k.Name)
	case work == nil:
		return fmt.Errorf("engine: kind %s: its work is nil", k.Name)
	case m.core.o.Switch != nil && m.core.o.Parker == nil && k.WhileOff == Park:
		return fmt.Errorf("engine: kind %s parks while its switch is off: Options.Parker is required with a Switch", k.Name)
	}
	if _, dup := m.routes[route]; dup {
		return fmt.Errorf("engine: route %q registered twice", route)
	}
	m.routes[route] = &kindRoute[T]{k: k, work: work}
	return nil
}

// Handles reports whether m has the route named route.
func (m *Mux[T]) Handles(route string) bool { return m.routes[route] != nil }

// HandleSQS runs an SQS batch and reports the records SQS must retry
// (ReportBatchItemFailures), as Handler.HandleSQS does.
func (m *Mux[T]) HandleSQS(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	return m.core.handleSQS(ctx, ev), nil
}

// muxBatch is what a Mux keeps of one batch while it runs: each record's
// payload, route and key, typed (so binding a record's job to its work
// allocates nothing per record).
type muxBatch[T any] struct {
	m        *Mux[T]
	payloads []T
	routes   []*kindRoute[T]
	keys     []string
}

// resolve decodes record i's body, finds its route and binds its job.
func (b *muxBatch[T]) resolve(i int, it *item) error {
	m := b.m
	p, err := m.decode([]byte(it.msg.Body))
	if err != nil {
		if m.only != nil {
			it.set.name = m.only.k.Name
			return malformed(fmt.Errorf("%s: the body does not decode: %w", m.only.k.Name, err))
		}
		return malformed(err)
	}
	name := m.pick(p)
	r := m.routes[name]
	if r == nil {
		return fmt.Errorf("%w: no handler for %s in this function", ErrUnknownType, name)
	}
	b.payloads[i], b.routes[i] = p, r
	key, err := r.bind(it, p)
	b.keys[i] = key
	return err
}

// run runs record i's work.
func (b *muxBatch[T]) run(ctx context.Context, i, attempt int, log *slog.Logger) error {
	return b.routes[i].work(ctx, Job[T]{Key: b.keys[i], Payload: b.payloads[i], Attempt: attempt, Logger: log})
}

// admit runs record i's Admit (bind set it.admits only when its kind has
// one).
func (b *muxBatch[T]) admit(ctx context.Context, i, attempt int, log *slog.Logger) error {
	return b.routes[i].k.Admit(ctx, Job[T]{Key: b.keys[i], Payload: b.payloads[i], Attempt: attempt, Logger: log})
}

func decodeJSON[T any](b []byte) (T, error) {
	var v T
	err := json.Unmarshal(b, &v)
	return v, err
}

// settings are what the pipeline needs of a record's kind.
type settings struct {
	name       string
	bias       Bias
	lease      bool
	failClosed bool
	whileOff   WhileOff
}

// kindRoute is one registered kind with its work.
type kindRoute[T any] struct {
	k    Kind[T]
	work func(context.Context, Job[T]) error
}

// errNoKey is the permanent failure of a record whose payload has no key.
var errNoKey = errors.New("the payload has no key")

// bind sets the record's kind and what the pipeline needs of payload p:
// the key (returned), the fingerprint, the run time, the trace and the log
// attributes. An error is a permanent failure of the record.
func (r *kindRoute[T]) bind(it *item, p T) (string, error) {
	it.set = settings{name: r.k.Name, bias: r.k.Bias, lease: r.k.Lease, failClosed: r.k.FailClosed, whileOff: r.k.WhileOff}
	key, err := r.k.Key(p)
	switch {
	case err != nil && (errors.Is(err, ErrMalformed) || errors.Is(err, ErrUnknownType)):
		return "", err
	case err != nil:
		return "", malformed(fmt.Errorf("%s: %w: %w", r.k.Name, errNoKey, err))
	case key == "":
		return "", malformed(fmt.Errorf("%s: %w", r.k.Name, errNoKey))
	case len(key) > MaxKeyBytes:
		return "", malformed(fmt.Errorf("%s: the key is %d bytes; at most %d", r.k.Name, len(key), MaxKeyBytes))
	}
	if r.k.Fingerprint != nil {
		b, err := r.k.Fingerprint(p)
		if err != nil {
			return "", malformed(fmt.Errorf("%s: its fingerprint: %w", r.k.Name, err))
		}
		sum := sha256.Sum256(b)
		it.fp = hex.EncodeToString(sum[:])
	}
	it.key = Key{Type: r.k.Name, JobID: key}
	if r.k.Due != nil {
		it.due = r.k.Due(p)
	}
	if it.trace == "" && r.k.Traceparent != nil {
		if sc, ok := ParseTraceparent(r.k.Traceparent(p)); ok {
			it.trace = FormatXRay(sc)
		}
	}
	if r.k.LogAttrs != nil {
		it.attrs = r.k.LogAttrs(p)
	} else {
		it.keyAttrs = true
	}
	it.bound, it.admits = true, r.k.Admit != nil
	return key, nil
}
