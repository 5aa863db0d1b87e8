// Package scalemodel is the scale model of continuations (make
// scale-model; docs/scale.md): the real reservation, release, chain stream
// handler and continuation sweep of internal/jobs and internal/chain
// against a simulated jobs table (DB) that enforces what one DynamoDB item
// and one partition key take (400 KB, about 1,000 writes a second), on the
// clock of a testing/synctest bubble, so an hour of continuations at 1,000
// a second runs in minutes. Parents end as their workers' claims, as ends
// the markers stream never brings (only the sweep sees them), or by
// expiring; the model checks that every continuation is decided once,
// within a sweep period (and the sweep's own run) of its parent's end.
package scalemodel

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/runstwice/runstwice/aws/dynamostore"
	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/internal/chain"
	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/jobs"
	"github.com/runstwice/runstwice/internal/jobs/sweepindex"
	"github.com/runstwice/runstwice/internal/obs"
	"github.com/runstwice/runstwice/message"
)

// Config is one run of the model.
type Config struct {
	// Rate is how many continuations are enqueued a second, each after a
	// new parent, for Load.
	Rate int
	Load time.Duration
	// Wait is how long a parent runs before it ends, on average (uniform
	// up to twice it): Rate × Wait parents wait at once.
	Wait time.Duration
	// Unseen is the share of parents whose end the markers stream never
	// brings to the chain function (its source gave up), Expired the share
	// that expire without a marker: only the sweep decides theirs.
	Unseen, Expired float64
	// SweepPeriod is the sweep's schedule (five minutes), SweepTimeout the
	// chain function's timeout its run has (30 s).
	SweepPeriod, SweepTimeout time.Duration
	// Latency is what each DynamoDB call takes.
	Latency time.Duration
	Seed    uint64
	// Logf, when set, is told every virtual minute how far the run is.
	Logf func(format string, args ...any)
}

// Result is what a run did.
type Result struct {
	Continuations int
	// Sent and Cancelled count the continuations decided so; Duplicates
	// the sends beyond one; Undecided those still waiting at the end.
	Sent, Cancelled, Duplicates, Undecided int
	// MostWaiting is the most parents waiting at once.
	MostWaiting int
	// LongestWait is the longest from a parent's end to its continuation's
	// decision; LongestSweepWait the same for those the sweep alone saw.
	LongestWait, LongestSweepWait time.Duration
	// Sweeps counts the sweep's runs; LongestSweep is the longest run,
	// MostSwept the most parents one run took on; UnfinishedSweeps the
	// runs that stopped for time before every listed parent (a tick of
	// the stack would be retried).
	Sweeps           int
	UnfinishedSweeps int
	LongestSweep     time.Duration
	MostSwept        int
	// Refused counts the reservations and releases that failed (Error is
	// one of them).
	Refused int
	Error   string
	// Held counts the jobs' items and markers left at the end: the model
	// drops every pair's once checked (as their TTLs would, days later), so
	// its memory holds what still waits, and none at the end.
	Held int
	// PeakMemory is the most memory the process held from the OS, sampled
	// every virtual minute.
	PeakMemory uint64
	DB         Stats
}

// end is how a parent ends.
type end int

const (
	claimed end = iota // its worker's claim: a marker on the stream
	unseen             // a claim the stream never brings
	expired            // its record expires without a marker
)

// jobType is the type of every job of the model.
const jobType = "email.welcome.v1"

// link is a parent and its continuation: their ids and the natural key
// both carry (after "p-" and "c-"), all the model needs to end the parent
// and drop the pair's items once checked, not the jobs themselves.
type link struct {
	parent, child, key string
	how                end
	endedAt            time.Time
	counted            bool
}

// parentMarker is the marker key of l's parent.
func (l *link) parentMarker() engine.Key { return engine.Key{Type: jobType, JobID: l.parent} }

// world is one run.
type world struct {
	cfg     Config
	db      *DB
	markers *Markers
	store   *jobs.Store
	stream  *chain.Stream
	rng     *rand.Rand

	mu        sync.Mutex
	byChild   map[string]*link
	decidedAt map[string]time.Time
	sends     map[string]int
	due       map[int64][]*link // by 100 ms slot of the clock
	waiting   int
	checked   []*link
	res       Result
}

// Run runs the model. It must run inside a testing/synctest bubble.
func Run(cfg Config) (Result, error) {
	w := &world{
		cfg: cfg, db: NewDB(), markers: NewMarkers(), rng: rand.New(rand.NewPCG(cfg.Seed, 1)),
		byChild: map[string]*link{}, decidedAt: map[string]time.Time{}, sends: map[string]int{}, due: map[int64][]*link{},
	}
	w.db.Latency, w.markers.Latency = cfg.Latency, cfg.Latency
	w.db.OnWrite = w.observe
	w.store = jobs.NewStore(w.db, "jobs", w.markers)
	w.store.Index = sweepindex.New(w.db, "jobs")
	w.stream = &chain.Stream{Releaser: w.store, Send: w.send, Logger: obs.NewLogger(discard{}, "error")}

	start := time.Now()
	stop := start.Add(cfg.Load + 2*cfg.Wait + 2*cfg.SweepPeriod)
	var wg sync.WaitGroup
	wg.Go(func() { w.enqueue(start.Add(cfg.Load)) })
	wg.Go(func() { w.ends(stop) })
	wg.Go(func() { w.sweeps(stop) })
	wg.Go(func() { w.progress(stop) })
	wg.Wait()
	return w.result(), nil
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// enqueue makes Rate links a second, a tenth of them each 100 ms, until
// until.
func (w *world) enqueue(until time.Time) {
	var wg sync.WaitGroup
	for tick := 0; time.Now().Before(until); tick++ {
		n := w.cfg.Rate / 10
		if tick%10 < w.cfg.Rate%10 {
			n++
		}
		for range n {
			wg.Go(w.link)
		}
		time.Sleep(100 * time.Millisecond)
	}
	wg.Wait()
}

// link reserves and promotes a parent, then reserves its continuation, as
// the enqueue function does, and books the parent's end.
func (w *world) link() {
	ctx := context.Background()
	now := time.Now()
	job := func(key string) jobs.Job {
		return jobs.Job{ID: message.NewMessageID(), Caller: "c", Type: jobType, Key: key, Queue: string(contract.QueueDefault),
			CorrelationID: "c-" + key, Message: `{"v":1}`, CreatedAt: now, RunAt: now}
	}
	key := message.NewMessageID()
	d, err := w.store.Reserve(ctx, job("p-"+key), contract.AllowAfterFailed)
	if err == nil {
		err = w.store.Promote(ctx, d.Job)
	}
	if err != nil {
		w.refused(err)
		return
	}
	c := job("c-" + key)
	c.After, c.AfterPolicy = d.Job.ID, contract.OnSucceeded
	cd, err := w.store.Reserve(ctx, c, contract.AllowAfterFailed)
	if err != nil {
		w.refused(err)
		return
	}
	l := &link{parent: d.Job.ID, child: cd.Job.ID, key: key, how: claimed}
	w.mu.Lock()
	defer w.mu.Unlock()
	switch u := w.rng.Float64(); {
	case u < w.cfg.Expired:
		l.how = expired
	case u < w.cfg.Expired+w.cfg.Unseen:
		l.how = unseen
	}
	// From the next slot on: the ends loop may be past this one already.
	at := time.Now().Add(100*time.Millisecond + time.Duration(w.rng.Float64()*2*float64(w.cfg.Wait)))
	w.byChild[l.child] = l
	w.due[slot(at)] = append(w.due[slot(at)], l)
	w.res.Continuations++
	w.waiting++
	w.res.MostWaiting = max(w.res.MostWaiting, w.waiting)
}

func slot(t time.Time) int64 { return t.UnixMilli() / 100 }

func (w *world) refused(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.res.Refused++
	w.res.Error = err.Error()
}

// ends ends the parents due each 100 ms: a claim's marker (on the stream,
// in batches of 100 as its event source hands them on, or not), or the
// record gone; every ten seconds it drops the links it has checked.
func (w *world) ends(stop time.Time) {
	var wg sync.WaitGroup
	for tick := 0; time.Now().Before(stop); tick++ {
		w.mu.Lock()
		now := time.Now()
		due := w.due[slot(now)]
		delete(w.due, slot(now))
		w.waiting -= len(due)
		w.mu.Unlock()
		var ev events.DynamoDBEvent
		for _, l := range due {
			l.endedAt = now
			switch l.how {
			case expired:
				w.db.Drop(jobs.JobPK(l.parent))
			default:
				w.markers.Settle(l.parentMarker(), engine.StateDone)
			}
			if l.how == claimed {
				ev.Records = append(ev.Records, events.DynamoDBEventRecord{EventName: "MODIFY", EventSource: "aws:dynamodb",
					Change: events.DynamoDBStreamRecord{SequenceNumber: l.parent, NewImage: map[string]events.DynamoDBAttributeValue{
						"state": events.NewStringAttribute(string(engine.StateDone)), dynamostore.AttrMessageKey: events.NewStringAttribute(l.parent)}}})
			}
			if len(ev.Records) == 100 {
				wg.Go(w.handle(ev))
				ev = events.DynamoDBEvent{}
			}
		}
		if len(ev.Records) > 0 {
			wg.Go(w.handle(ev))
		}
		if tick%100 == 0 {
			w.drop()
		}
		time.Sleep(100 * time.Millisecond)
	}
	wg.Wait()
}

// handle is the chain function's invocation with ev, retried (as its event
// source retries what it reports) until every record is done.
func (w *world) handle(ev events.DynamoDBEvent) func() {
	return func() {
		for try := 0; len(ev.Records) > 0 && try < 10; try++ {
			resp, err := w.stream.Handle(context.Background(), ev)
			if err != nil {
				w.refused(err)
				return
			}
			failed := map[string]bool{}
			for _, f := range resp.BatchItemFailures {
				failed[f.ItemIdentifier] = true
			}
			var again []events.DynamoDBEventRecord
			for _, r := range ev.Records {
				if failed[r.Change.SequenceNumber] {
					again = append(again, r)
				}
			}
			ev.Records = again
			time.Sleep(time.Second)
		}
	}
}

// sweeps runs the continuation sweep every SweepPeriod, each run with
// SweepTimeout.
func (w *world) sweeps(stop time.Time) {
	for time.Now().Before(stop) {
		time.Sleep(w.cfg.SweepPeriod)
		ctx, cancel := context.WithTimeout(context.Background(), w.cfg.SweepTimeout)
		began := time.Now()
		rep, err := w.store.SweepContinuations(ctx, w.send)
		cancel()
		if err != nil {
			w.refused(fmt.Errorf("sweep: %w", err))
		}
		w.mu.Lock()
		w.res.Sweeps++
		if rep.Unfinished {
			w.res.UnfinishedSweeps++
		}
		w.res.LongestSweep = max(w.res.LongestSweep, time.Since(began))
		w.res.MostSwept = max(w.res.MostSwept, rep.Parents)
		w.mu.Unlock()
	}
}

// send is the send of a released continuation to its queue.
func (w *world) send(_ context.Context, j jobs.Job) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.sends[j.ID]++
	return nil
}

// observe sees every write of the table: a continuation's record leaving
// AwaitingContinuation is its decision.
func (w *world) observe(key string, old, new map[string]types.AttributeValue) {
	id, ok := strings.CutPrefix(key, jobs.JobPK(""))
	if !ok || state(old) != string(jobs.StateAwaitingContinuation) || state(new) == state(old) {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, seen := w.decidedAt[id]; !seen {
		w.decidedAt[id] = time.Now()
	}
}

func state(it map[string]types.AttributeValue) string {
	if s, ok := it[jobs.AttrState].(*types.AttributeValueMemberS); ok {
		return s.Value
	}
	return ""
}

// drop checks every decided link and drops its items once its parent is
// off the sweep's list (as their TTLs would, days later), so the model's
// memory holds what still waits.
func (w *world) drop() {
	w.mu.Lock()
	var done []*link
	for id, l := range w.byChild {
		if at, ok := w.decidedAt[id]; ok && !l.endedAt.IsZero() {
			w.check(l, at)
			done = append(done, l)
		}
	}
	w.mu.Unlock()
	for _, l := range done {
		pk := jobs.ContinuationsOfPK(l.parent)
		if sweepOf(w.db.Item(pk)) != "" {
			continue
		}
		w.db.Drop(pk, jobs.JobPK(l.parent), jobs.JobPK(l.child), jobs.DedupPK("c", jobType, "p-"+l.key),
			jobs.DedupPK("c", jobType, "c-"+l.key))
		w.markers.Drop(l.parentMarker())
		w.mu.Lock()
		delete(w.byChild, l.child)
		delete(w.decidedAt, l.child)
		w.mu.Unlock()
	}
}

// check counts link l's decision at at (w.mu held), once.
func (w *world) check(l *link, at time.Time) {
	if l.counted {
		return
	}
	l.counted = true
	wait := at.Sub(l.endedAt)
	w.res.LongestWait = max(w.res.LongestWait, wait)
	if l.how != claimed {
		w.res.LongestSweepWait = max(w.res.LongestSweepWait, wait)
	}
	switch n := w.sends[l.child]; {
	case n > 0:
		w.res.Sent++
		w.res.Duplicates += n - 1
	default:
		w.res.Cancelled++
	}
	delete(w.sends, l.child)
}

func (w *world) result() Result {
	w.drop()
	w.mu.Lock()
	defer w.mu.Unlock()
	for id := range w.byChild {
		if _, ok := w.decidedAt[id]; !ok {
			w.res.Undecided++
		}
	}
	w.res.DB = w.db.Stats()
	w.res.Held = w.db.Count(jobs.JobPK(""), jobs.ContinuationsOfPK(""), jobs.DedupPK("c", jobType, "")) + w.markers.Len()
	return w.res
}
