package engine

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"strconv"
	"sync"
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
	log *slog.Logger
	// attrs are the attributes of the record's log lines its kind names.
	attrs []slog.Attr
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
	for i := range recs {
		it := &items[i]
		it.msg, it.i, it.jobs = recs[i], i, js
		if src.groups != nil {
			it.group, it.stream = src.groups[i], true
		} else {
			it.group = it.msg.Attributes["MessageGroupId"]
		}
		if !m.decode(ctx, base, it) {
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
// kind refuses, fails as permanent here.
func (m *runner) decode(ctx context.Context, base *slog.Logger, it *item) bool {
	it.trace = RecordTraceHeader(it.msg)
	err := resolveSafely(it)
	// One logger per record, its attributes in one go: the kind's, the SQS
	// message id, the trace.
	attrs := it.attrs
	if !it.bound && it.set.name != "" {
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
	if err != nil {
		it.out = m.deadLetter(ctx, it, malformed(err))
		return false
	}
	return true
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
	asked := make(map[Key]bool, len(its))
	for _, it := range its {
		if !asked[it.key] {
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

// runAll runs do for every pending record, at most limit at once, and sets
// each record's outcome. Records run in lanes: a FIFO group's records in
// one lane, in order, and a standard queue's records in one lane per key,
// so two records of one key never run at once; in a lane, a record after
// one that settled its key is a duplicate, and in a FIFO group the records
// after one that is retried are held (retried with it, never run). A
// record whose goroutine panics ends as a retry (kindPending) with the
// panic logged; its neighbours are untouched. When stop is set, runAll
// returns by then even if a record is still running (work that ignores its
// context): such a record is retried, and what its goroutine decides later
// is dropped.
func (m *runner) runAll(items []item, limit int, stop time.Time, do func(int, *item) outcome) {
	sem := make(chan struct{}, max(limit, 1))
	var (
		wg        sync.WaitGroup
		mu        sync.Mutex // guards every it.out below, and abandoned
		abandoned bool
	)
	set := func(it *item, o outcome) {
		mu.Lock()
		defer mu.Unlock()
		if !abandoned {
			it.out = o
		}
	}
	runOne := func(i int, it *item) {
		sem <- struct{}{}
		defer func() { <-sem }()
		defer func() {
			if v := recover(); v != nil {
				it.log.Error("the runner panicked on this record; it is retried", "panic", panicText(v), "stack", string(debug.Stack()))
				set(it, outcome{kind: kindPending, reason: "the runner panicked on it; SQS retries it", err: &PanicError{Value: panicText(v)}})
			}
		}()
		set(it, do(i, it))
	}
	first, next := lanes(items)
	// settled holds the keys settled earlier in the batch, each with the
	// fingerprint of what settled it (guarded by mu); a key met in two
	// lanes (two FIFO groups, two shards) runs under its lock, one record
	// at a time.
	settled := map[Key]string{}
	locks := sharedKeys(items, first, next)
	// runKey runs a pending record of its lane: a duplicate of what settled
	// its key earlier in the batch, or judged against it, or run.
	runKey := func(i int, it *item) {
		if l := locks[it.key]; l != nil {
			l.Lock()
			defer l.Unlock()
		}
		mu.Lock()
		fp, done := settled[it.key]
		mu.Unlock()
		switch {
		case done && (fp == "" || it.fp == "" || fp == it.fp):
			set(it, outcome{kind: kindDuplicate, reason: "a record of the same key settled it earlier in this batch"})
		case done:
			// Done here with other content: what the peek read before is
			// stale; the runner judges it as done.
			it.seen, it.hasSeen, it.peeked = Record{Key: it.key, State: StateDone, Fingerprint: fp}, true, true
			runOne(i, it)
		default:
			runOne(i, it)
		}
		mu.Lock()
		defer mu.Unlock()
		if _, done := settled[it.key]; !done && settles(it.out.kind) {
			settled[it.key] = it.fp
		}
	}
	for _, head := range first {
		wg.Add(1)
		m.goRecord(func() {
			defer wg.Done()
			if it := &items[head]; next[head] < 0 && it.out.kind == kindPending && locks[it.key] == nil {
				runOne(head, it)
				return
			}
			var held *item // the FIFO record whose retry holds the rest of its group
			for i := head; i >= 0; i = next[i] {
				it := &items[i]
				mu.Lock()
				gone, decided := abandoned, it.out.kind != kindPending
				mu.Unlock()
				switch {
				case gone:
					return
				case held != nil && !decided:
					set(it, outcome{kind: kindHeld, reason: "an earlier record of its group or shard (" + held.msg.MessageId + ") is retried; it keeps its place behind it"})
					continue
				case !decided:
					runKey(i, it)
				}
				mu.Lock()
				o := it.out
				mu.Unlock()
				if it.group != "" && held == nil && outcomes[o.kind].retry {
					held = it
				}
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	if stop.IsZero() {
		<-done
		return
	}
	timer := time.NewTimer(time.Until(stop))
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
		mu.Lock()
		abandoned = true
		mu.Unlock()
		for i := range items {
			if it := &items[i]; it.out.kind == kindPending && it.log != nil {
				it.log.Error("record still running at the deadline; it is retried")
			}
		}
	}
}

// lanes groups the records that must run one after another: a FIFO
// group's records (decided ones too, since a retried one holds the rest),
// and a standard queue's pending records of one key. It returns each
// lane's first record, in the order of the batch; next[i] is the record
// after i in its lane (-1 for none).
func lanes(items []item) (first, next []int) {
	next = make([]int, len(items))
	last := make([]int, 0, len(items)) // the last record of each lane so far
	byKey := make(map[Key]int, len(items))
	var byGroup map[string]int
	for i := range items {
		next[i] = -1
		it := &items[i]
		var n int
		var ok bool
		switch {
		case it.group != "":
			if byGroup == nil {
				byGroup = map[string]int{}
			}
			if n, ok = byGroup[it.group]; !ok {
				n = len(first)
				byGroup[it.group] = n
			}
		case it.out.kind != kindPending:
			continue
		default:
			if n, ok = byKey[it.key]; !ok {
				n = len(first)
				byKey[it.key] = n
			}
		}
		if !ok {
			first, last = append(first, i), append(last, i)
			continue
		}
		next[last[n]], last[n] = i, i
	}
	return first, next
}

// sharedKeys returns a lock for each key whose records are in more than one
// lane (one key in two FIFO groups, or two shards), none for the others.
func sharedKeys(items []item, first, next []int) map[Key]*sync.Mutex {
	var locks map[Key]*sync.Mutex
	if !slices.ContainsFunc(items, func(it item) bool { return it.group != "" }) {
		return nil // a standard queue's lanes are one per key
	}
	laneOf := map[Key]int{}
	for lane, head := range first {
		for i := head; i >= 0; i = next[i] {
			it := &items[i]
			if it.out.kind != kindPending {
				continue
			}
			if l, ok := laneOf[it.key]; !ok {
				laneOf[it.key] = lane
			} else if l != lane {
				if locks == nil {
					locks = map[Key]*sync.Mutex{}
				}
				if locks[it.key] == nil {
					locks[it.key] = &sync.Mutex{}
				}
			}
		}
	}
	return locks
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
