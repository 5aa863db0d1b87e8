package engine

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/google/uuid"
	"go.opentelemetry.io/otel/trace"
)

// runner is the pipeline every record goes through, whatever its payload:
// a Mux (and so a Handler) resolves each record's kind and job, and the
// runner does the rest.
type runner struct {
	o Options
	// jobsOf makes what a batch of n records keeps of their jobs while it
	// runs (a Mux's typed payloads).
	jobsOf func(n int) jobs
	// tracer makes the records' spans (nil: Options.TracerProvider is).
	tracer trace.Tracer
	// cache holds the keys seen done (nil: Options.DoneCache is 0).
	cache *doneCache
	// spans keeps how each queue's record spans start.
	spans spanStarts
}

func newRunner(o Options) (*runner, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	m := &runner{o: o}
	if o.TracerProvider != nil {
		m.tracer = o.TracerProvider.Tracer(tracerName)
	}
	if o.DoneCache > 0 {
		m.cache = newDoneCache(o.DoneCache)
	}
	return m, nil
}

// expires is when a marker written now for it may be forgotten.
func (m *runner) expires(it *item) time.Time {
	return SettledUntil(m.o.Now(), it.due, m.o.Retention)
}

func (m *runner) at(s Step) {
	if m.o.AtStep != nil {
		m.o.AtStep(s)
	}
}

// jobs is a batch's jobs as the Mux that decoded them keeps them, typed:
// resolve decodes record i and binds its kind; run and admit call its
// work and its kind's Admit.
type jobs interface {
	resolve(i int, it *item) error
	run(ctx context.Context, i, attempt int, log *slog.Logger) error
	admit(ctx context.Context, i, attempt int, log *slog.Logger) error
}

// item is one record on its way through the pipeline.
type item struct {
	// i is the record's index in its batch, and jobs the batch's jobs.
	i    int
	jobs jobs
	msg  events.SQSMessage
	// set is the record's kind (its name is "" when the record has none:
	// no route, or its route was refused).
	set settings
	key Key
	// fp is the payload's fingerprint ("" for none); due its run time.
	fp  string
	due time.Time
	// log is the record's logger; its goroutine gives it the attributes of
	// the record's span. rec is the logger decode made, never changed: what
	// the batch logs a record with once it no longer waits for its
	// goroutine (see logger).
	log, rec *slog.Logger
	// attrs are the attributes of the record's log lines its kind names;
	// keyAttrs: its kind names none, so they are its name and the key.
	attrs    []slog.Attr
	keyAttrs bool
	// bound: its payload decoded and its kind's job bound; admits: its kind
	// has an Admit.
	bound, admits bool
	seen          Record // the batch peek's marker, when hasSeen
	// hasSeen: the peek found a marker; peeked: the peek ran.
	hasSeen, peeked bool
	// disabled: the kind's kill switch is off.
	disabled bool
	// group is the FIFO message group, or the stream's shard ("" for a
	// standard queue); stream: the record is a stream's.
	group  string
	stream bool
	out    outcome
	// before it comes back (0: the back-off's schedule).
	// retryIn is how long a retry was postponed (Backoff), 0 if it was not.
	retryIn time.Duration
	// trace is the X-Ray trace header the record continues.
	trace string
	// sends is the trace header of what the record's job sends (the
	// record's, else its span's), and job the job its span is about: the
	// record's context points at them.
	sends string
	job   tracedJob
}

// logger is the logger the batch logs the record with after runAll: its
// own (with its span's attributes) once its goroutine is done, the one
// decode made while its goroutine may still run (a record still pending:
// abandoned at the deadline, or never started).
func (it *item) logger() *slog.Logger {
	if it.out.kind == kindPending {
		return it.rec
	}
	return it.log
}

// metricType is the type dimension of the record's metrics: its kind's
// name when it has one, else "unknown".
func (it *item) metricType() string {
	if it.set.name != "" {
		return it.set.name
	}
	return "unknown"
}

// handle runs a batch: decode each record and read its switch, peek the
// markers in one read, run the records (concurrently, one at a time per key
// and in order per FIFO group), back off the retries, and answer.
func (m *runner) handle(ctx context.Context, recs []events.SQSMessage, src source) []int {
	defer m.o.Metrics.Flush()
	start := time.Now() // the real clock, as SQS counts a receipt's 12 h
	base := withRequest(ctx, m.o.Logger)
	// Leases last until the real deadline; the work stops a margin before
	// it, so the response (and with it every success) reaches SQS.
	leaseUntil := m.leaseUntil(ctx)
	var stop time.Time // when the batch stops waiting for its records (zero: no deadline)
	if d, ok := ctx.Deadline(); ok {
		stop = d.Add(-m.o.DeadlineMargin / waitStopShare)
		ctx = withWriteStop(ctx, d.Add(-m.o.DeadlineMargin/writeStopShare))
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, d.Add(-m.o.DeadlineMargin))
		defer cancel()
	}
	items := make([]item, len(recs))
	js := m.jobsOf(len(items))
	// One random token per invocation names each record's lease and claim
	// (token:index): unique across workers, cheap per record.
	batch := uuid.NewString()
	var toPeek []*item
	var arena attrArena
	for i := range recs {
		it := &items[i]
		it.msg, it.i, it.jobs = recs[i], i, js
		if src.groups != nil {
			it.group, it.stream = src.groups[i], true
		} else {
			it.group = it.msg.Attributes["MessageGroupId"]
		}
		if !m.decode(ctx, base, it, &arena, len(recs)-i) {
			continue
		}
		// The switch decides first whether the job may run. A disabled
		// record is peeked too, so a late copy of a job that is done or
		// cancelled is dropped instead of parked again and again.
		if m.o.Switch != nil {
			it.disabled = !m.o.Switch.IsJobEnabled(ctx, it.set.name, !it.set.failClosed)
		}
		if m.fromCache(it) {
			continue
		}
		toPeek = append(toPeek, it)
	}
	m.at(StepAfterDecode)
	m.peek(ctx, base, toPeek)

	limit := m.o.Concurrency
	if limit <= 0 {
		limit = len(items)
	}
	m.runAll(items, limit, stop, func(i int, it *item) outcome {
		if ctx.Err() != nil {
			// Nothing starts after the deadline margin.
			return outcome{kind: kindInterrupted, reason: "the invocation's deadline came first", err: ctx.Err()}
		}
		owner := batch + ":" + strconv.Itoa(i)
		if m.tracer == nil {
			return m.process(ctx, it, leaseUntil, owner)
		}
		return m.traced(ctx, it, func(ctx context.Context) outcome { return m.process(ctx, it, leaseUntil, owner) })
	})

	m.backOff(ctx, base, items, start)
	var failed []int
	for i := range items {
		if m.finish(ctx, &items[i]) {
			failed = append(failed, i)
		}
	}
	m.at(StepBeforeResponse)
	return failed
}

// source says where a batch's records came from: an SQS queue (groups
// nil: a FIFO record names its group in its attributes), or a stream,
// whose records are in order per shard (groups: each record's shard).
type source struct {
	groups []string
}

// decode finds the record's route and decodes its payload, and reports
// whether the record goes on: one that has no route, or whose payload its
// kind refuses, fails as permanent here. Its logger's attributes are cut
// from the batch's arena, left records (this one included) still to come.
func (m *runner) decode(ctx context.Context, base *slog.Logger, it *item, arena *attrArena, left int) bool {
	it.trace = RecordTraceHeader(it.msg)
	err := resolveSafely(it)
	// One logger per record, its attributes in one go: the kind's (or its
	// name and the key), the SQS message id or sequence number, the trace.
	attrs := arena.room(max(len(it.attrs), 2)+2, left)
	switch {
	case it.bound && it.keyAttrs:
		attrs = append(attrs, slog.String(keyType, it.set.name), slog.String(keyKey, it.key.JobID))
	case it.bound:
		attrs = append(attrs, it.attrs...)
	case it.set.name != "":
		attrs = append(attrs, slog.String(keyType, it.set.name)) // refused before its kind's attributes were known
	}
	if it.stream {
		attrs = append(attrs, slog.String("sequenceNumber", it.msg.MessageId))
	} else {
		attrs = append(attrs, slog.String("sqsMessageId", it.msg.MessageId))
	}
	if root := traceRoot(it.trace); root != "" {
		attrs = append(attrs, slog.String(keyTraceID, root))
	}
	it.log = slog.New(base.Handler().WithAttrs(attrs))
	it.rec = it.log
	if err != nil {
		it.out = m.deadLetter(ctx, it, malformed(err))
		return false
	}
	return true
}

// attrArena hands out the attributes of a batch's loggers from one
// allocation. Each record's slice is its own, capped at its length, so no
// record's attributes are ever appended over another's (a handler may keep
// the slice it is given), and a kind's LogAttrs slice is only read.
type attrArena struct{ buf []slog.Attr }

// room returns an empty slice with room for n attributes, refilling the
// arena for left records of about n each when it runs short.
func (a *attrArena) room(n, left int) []slog.Attr {
	if cap(a.buf)-len(a.buf) < n {
		a.buf = make([]slog.Attr, 0, n*max(left, 1))
	}
	at := len(a.buf)
	a.buf = a.buf[:at+n]
	return a.buf[at : at : at+n]
}

// resolveSafely resolves the record, turning a panic in a function of its
// kind (Decode, Key, Fingerprint, Due, Traceparent, LogAttrs, the route)
// into that record's permanent failure: one poison record never fails its
// batch.
func resolveSafely(it *item) (err error) {
	defer func() {
		if v := recover(); v != nil {
			it.bound = false
			err = malformed(fmt.Errorf("a function of its kind panicked: %w", &PanicError{Value: panicText(v)}))
		}
	}()
	return it.jobs.resolve(it.i, it)
}

// peek reads the markers of the batch with one read. A failed peek is not
// fatal: the lease is conditional and doubles as a peek, so records of kinds
// with a lease go on; the others are retried rather than run blind.
func (m *runner) peek(ctx context.Context, base *slog.Logger, its []*item) {
	if len(its) == 0 {
		return
	}
	keys := make([]Key, 0, len(its))
	var asked map[Key]bool // a long batch's keys asked so far (a short one's are searched)
	if len(its) > shortBatch {
		asked = make(map[Key]bool, len(its))
	}
	for _, it := range its {
		switch {
		case asked == nil && slices.Contains(keys, it.key):
		case asked == nil:
			keys = append(keys, it.key)
		case !asked[it.key]:
			asked[it.key] = true
			keys = append(keys, it.key)
		}
	}
	seen, err := m.o.Store.PeekBatch(ctx, keys)
	if err != nil {
		base.Warn("marker peek failed; records with a lease go on, the others are retried", keyError, Redact(err))
		return
	}
	for _, it := range its {
		it.seen, it.hasSeen = seen[it.key]
		it.peeked = true
		if it.hasSeen && it.seen.Processed() {
			m.remember(it.key, it.seen.Fingerprint, it.seen.ExpiresAt)
		}
	}
}

// writeStopKey carries, in an invocation's context, the time by which every
// write must have ended.
type writeStopKey struct{}

func withWriteStop(ctx context.Context, stop time.Time) context.Context {
	return context.WithValue(ctx, writeStopKey{}, stop)
}

// writeStop is the time by which every write of the invocation must have
// ended; ok is false when the invocation has no deadline.
func writeStop(ctx context.Context) (time.Time, bool) {
	stop, ok := ctx.Value(writeStopKey{}).(time.Time)
	return stop, ok
}

// leaseUntil is the Lambda deadline: a crash never holds the lease longer.
func (m *runner) leaseUntil(ctx context.Context) time.Time {
	if d, ok := ctx.Deadline(); ok {
		return d
	}
	return m.o.Now().Add(DefaultLease)
}
