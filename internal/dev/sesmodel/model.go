package sesmodel

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/engine/memstore"
	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/email"
	"github.com/runstwice/runstwice/internal/email/sendrate"
	"github.com/runstwice/runstwice/internal/jobs"
	"github.com/runstwice/runstwice/internal/obs"
	"github.com/runstwice/runstwice/internal/runner"
	"github.com/runstwice/runstwice/internal/testkit"
	"github.com/runstwice/runstwice/message"
)

// Source is a backlog on one event source: Jobs mails of Type, all in the
// queue when the model starts.
type Source struct {
	Settings Settings
	Type     message.JobType
	Jobs     int
}

// Config is one run of the model.
type Config struct {
	// Rate is the account's SES rate (SesMaxSendRate), mails per second.
	Rate    int
	Sources []Source
	// Latency is the simulated calls' (DefaultLatency if zero).
	Latency Latency
	// QuotaAfter, when positive, is SES's daily quota: the sends after it
	// are refused until QuotaReset after the start.
	QuotaAfter int
	QuotaReset time.Duration
	// ParkDelay is the function's PARK_DELAY (engine.MaxDelay if 0).
	ParkDelay time.Duration
	// Limit stops a run that has not drained by then.
	Limit time.Duration
}

// Result is what a run did.
type Result struct {
	Jobs int
	// Mails is the mails SES accepted; Unique the jobs that got one;
	// Duplicates the mails beyond one per job.
	Mails, Unique, Duplicates int
	// DeadLettered counts the runner's dead letters and the redrive
	// policy's moves.
	DeadLettered int
	// Throttled is the sends SES refused for the rate; Refused those it
	// refused for the quota.
	Throttled, Refused int
	// MostInASecond is the most mails SES accepted within any one second.
	MostInASecond int
	// Drain is from the start to the last mail.
	Drain time.Duration
	// Copies counts the messages re-sent (snoozes and parks); Bookings the
	// schedule's bookings and ScheduleWrites the UpdateItems the DynamoDB
	// schedule makes for them; Invocations and TimedOut the Lambda
	// invocations.
	Copies, Bookings, ScheduleWrites, Invocations, TimedOut int
	// MostReceives is the highest receive count any delivery had.
	MostReceives int
	// Parked is the jobs whose record says Parked, with the reason of one.
	Parked       int
	ParkedReason string
	// InvocationTime is the Lambda time all invocations took together.
	InvocationTime time.Duration
}

// world is one run: the account's schedule and SES, the queues, the
// markers, the job records.
type world struct {
	cfg      Config
	ses      *ses
	schedule *schedule
	sqs      *sqs
	markers  markers
	records  *testkit.Jobs
	reg      *message.Registry
	stop     atomic.Bool

	mu           sync.Mutex
	invocations  int
	timedOut     int
	mostReceives int
	busy         time.Duration
}

// Run runs the model until every job has its mail or is dead-lettered (or
// Limit passes). It must run inside a testing/synctest bubble.
func Run(cfg Config) (Result, error) {
	if cfg.Latency == (Latency{}) {
		cfg.Latency = DefaultLatency
	}
	if cfg.ParkDelay <= 0 {
		cfg.ParkDelay = engine.MaxDelay
	}
	began := time.Now()
	w := &world{
		cfg:      cfg,
		ses:      &ses{rate: cfg.Rate, latency: cfg.Latency.SES, quotaAfter: cfg.QuotaAfter, quotaUntil: began.Add(cfg.QuotaReset), byID: map[string]int{}},
		schedule: &schedule{mem: sendrate.NewMemory(float64(cfg.Rate)), latency: cfg.Latency.DynamoDB},
		sqs:      &sqs{queues: map[message.Queue]*queue{}, byARN: map[string]*queue{}, reasons: map[string]int{}},
		markers:  markers{Store: memstore.New(), latency: cfg.Latency.DynamoDB},
		records:  &testkit.Jobs{},
		reg:      contract.Registry(),
	}
	jobCount := 0
	for i, src := range cfg.Sources {
		q := newQueue(src.Settings.Event, src.Settings.Visibility, src.Settings.MaxReceives, 0)
		for j := range src.Jobs {
			env := message.Envelope{V: message.Version, MessageID: message.DeriveMessageID("model", fmt.Sprint(i, "-", j)), Type: src.Type.Name,
				Key: fmt.Sprint("k-", i, "-", j), CorrelationID: fmt.Sprint("c-", i, "-", j), EnqueuedAt: began,
				Args: args(src.Type, fmt.Sprintf("u-%d-%d", i, j))}
			body, err := env.Encode()
			if err != nil {
				return Result{}, err
			}
			q.send(string(body), env.Type, 0)
		}
		q.latency = cfg.Latency.SQS
		w.sqs.queues[src.Type.Queue], w.sqs.byARN[q.arn] = q, q
		jobCount += src.Jobs
	}
	var pollers sync.WaitGroup
	for _, src := range cfg.Sources {
		q := w.sqs.queues[src.Type.Queue]
		for range src.Settings.Concurrency {
			r, err := w.container()
			if err != nil {
				return Result{}, err
			}
			pollers.Go(func() { w.poll(src.Settings, q, r) })
		}
	}
	for !w.drained() && time.Since(began) < cfg.Limit {
		time.Sleep(time.Second)
	}
	w.stop.Store(true)
	pollers.Wait()
	res := w.result(began, jobCount)
	if !w.drained() {
		return res, fmt.Errorf("sesmodel: not drained after %v: %+v", cfg.Limit, res)
	}
	return res, nil
}

// container is one Lambda container of the e-mail function: its runner,
// with its own pacing on the account's one schedule, wired as main.go
// wires it.
func (w *world) container() (*runner.Runner, error) {
	paced, err := email.NewPaced(w.ses, email.Pacing{Slots: &view{s: w.schedule}, QuotaWait: w.cfg.ParkDelay})
	if err != nil {
		return nil, err
	}
	handlers, err := email.Handlers(email.Config{Users: users{latency: w.cfg.Latency.DynamoDB}, Sender: paced, BaseURL: "https://app.example.com"})
	if err != nil {
		return nil, err
	}
	var s Settings
	for _, src := range w.cfg.Sources {
		s = src.Settings
	}
	return runner.New(runner.Config{
		Registry: w.reg, Handlers: handlers, Switch: on{}, Markers: w.markers,
		Parker: w.sqs, DeadLetterer: w.sqs, Jobs: jobs.ForEngine(w.records), Backoff: w.sqs,
		ParkDelay: w.cfg.ParkDelay, MaxReceiveCount: s.MaxReceives, Concurrency: s.BatchConcurrency,
		Logger: obs.NewLogger(io.Discard, "error"),
		Go:     func(f func()) { go f() },
	})
}

// poll is one of an event source's pollers: it receives a batch (waiting
// up to the batching window for a full one), invokes the function and
// deletes what succeeded, until the run stops.
func (w *world) poll(s Settings, q *queue, r *runner.Runner) {
	for !w.stop.Load() {
		batch, next, changed := q.receive(s.BatchSize)
		windowEnds := time.Now().Add(s.BatchingWindow)
		for len(batch) > 0 && len(batch) < s.BatchSize && time.Now().Before(windowEnds) && !w.stop.Load() {
			wait(changed, next, windowEnds)
			var more []events.SQSMessage
			more, next, changed = q.receive(s.BatchSize - len(batch))
			batch = append(batch, more...)
		}
		if len(batch) == 0 {
			wait(changed, next, time.Now().Add(20*time.Second)) // long polling
			continue
		}
		w.invoke(s, q, r, batch)
	}
}

// wait sleeps until changed closes, next (when set) or until.
func wait(changed <-chan struct{}, next, until time.Time) {
	if !next.IsZero() && next.Before(until) {
		until = next
	}
	timer := time.NewTimer(max(time.Until(until), time.Millisecond))
	defer timer.Stop()
	select {
	case <-changed:
	case <-timer.C:
	}
}

// invoke runs one invocation under the function's timeout and deletes the
// records the response does not name. An invocation that outlives its
// timeout deletes nothing: Lambda ended it, and its records return after
// the visibility timeout.
func (w *world) invoke(s Settings, q *queue, r *runner.Runner, batch []events.SQSMessage) {
	began := time.Now()
	time.Sleep(w.cfg.Latency.Invoke)
	ctx, cancel := context.WithDeadline(context.Background(), began.Add(s.Timeout))
	defer cancel()
	resp, _ := r.Handle(ctx, events.SQSEvent{Records: batch})
	timedOut := ctx.Err() != nil && time.Now().After(began.Add(s.Timeout))
	w.mu.Lock()
	w.invocations++
	w.busy += time.Since(began)
	for _, m := range batch {
		w.mostReceives = max(w.mostReceives, engine.ReceiveCount(m))
	}
	if timedOut {
		w.timedOut++
	}
	w.mu.Unlock()
	if timedOut {
		return
	}
	failed := map[string]bool{}
	for _, f := range resp.BatchItemFailures {
		failed[f.ItemIdentifier] = true
	}
	var done []string
	for _, m := range batch {
		if !failed[m.MessageId] {
			done = append(done, m.ReceiptHandle)
		}
	}
	q.deleteReceived(done)
}

// drained reports whether every queue is empty: each job has its mail or
// was dead-lettered.
func (w *world) drained() bool {
	for _, q := range w.sqs.queues {
		if q.remaining() > 0 {
			return false
		}
	}
	return true
}

func (w *world) result(began time.Time, jobCount int) Result {
	w.ses.mu.Lock()
	at := slices.Clone(w.ses.at)
	res := Result{Jobs: jobCount, Mails: len(at), Unique: len(w.ses.byID), Throttled: w.ses.throttled, Refused: w.ses.refused}
	w.ses.mu.Unlock()
	res.Duplicates = res.Mails - res.Unique
	if len(at) > 0 {
		res.Drain = at[len(at)-1].Sub(began)
	}
	for i, j := 0, 0; j < len(at); j++ {
		for at[j].Sub(at[i]) >= time.Second {
			i++
		}
		res.MostInASecond = max(res.MostInASecond, j-i+1)
	}
	w.sqs.mu.Lock()
	res.DeadLettered, res.Copies = w.sqs.dead, w.sqs.copies
	w.sqs.mu.Unlock()
	for _, q := range w.sqs.queues {
		res.DeadLettered += q.movedToDLQ()
	}
	w.schedule.mu.Lock()
	res.Bookings, res.ScheduleWrites = w.schedule.bookings, w.schedule.writes
	w.schedule.mu.Unlock()
	w.mu.Lock()
	res.Invocations, res.TimedOut, res.MostReceives, res.InvocationTime = w.invocations, w.timedOut, w.mostReceives, w.busy
	w.mu.Unlock()
	for i, src := range w.cfg.Sources {
		for j := range src.Jobs {
			id := message.DeriveMessageID("model", fmt.Sprint(i, "-", j))
			if st, ok := w.records.State(id); ok && st == jobs.StateParked {
				res.Parked++
				_, res.ParkedReason = w.records.Outcome(id)
			}
		}
	}
	return res
}

// args are valid args of jt for user id: each declared arg's example,
// userId the user's.
func args(jt message.JobType, id string) map[string]string {
	out := make(map[string]string, len(jt.Args))
	for _, a := range jt.Args {
		out[a.Name] = a.Format.Example()
	}
	out["userId"] = id
	return out
}
