// Package chain is the work of the chain function (functions/chain): what
// follows a job's end and a batch's accept.
//
//   - Continuations: the markers table's stream brings every settled
//     marker (DONE, FAILED, CANCELLED: a job succeeded, failed or was
//     cancelled); for each, the jobs that wait for that job are released or
//     cancelled (jobs.Store.ReleaseContinuations). The stream retries a
//     batch until it is handled, so no crash between a parent's end and its
//     continuation's send loses the continuation; a release is idempotent,
//     so a record seen twice sends nothing twice.
//   - The chain queue's own jobs, run by the engine's runner like any job:
//     runstwice.batch-finish.v1 finishes a batch whose accept was cut short,
//     and runstwice.continuation-sweep.v1 (a tick every five minutes)
//     decides what no marker shows (a parent that expired, or whose dead
//     letter was dropped) and finishes a release cut short.
package chain

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"

	"github.com/aws/aws-lambda-go/events"

	"github.com/runstwice/runstwice/aws/dynamostore"
	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/jobs"
	"github.com/runstwice/runstwice/internal/obs"
	"github.com/runstwice/runstwice/internal/runner"
	"github.com/runstwice/runstwice/message"
)

// Releaser releases the continuations of a job that ended, says which of
// some jobs have any, and takes a job nothing waits for any more off the
// continuation sweep's list (*jobs.Store is one).
type Releaser interface {
	ReleaseContinuations(ctx context.Context, parentID string, send jobs.SendFunc) (jobs.ReleaseReport, error)
	Parents(ctx context.Context, ids []string) ([]string, error)
	Unlist(ctx context.Context, parentID string, version int64) (kept bool, err error)
}

// Sweeper decides every listed parent's continuations (*jobs.Store is one).
type Sweeper interface {
	SweepContinuations(ctx context.Context, send jobs.SendFunc) (jobs.ContinuationSweepReport, error)
}

// Finisher finishes a batch cut short (*enqueue.Handler is one).
type Finisher interface {
	FinishBatch(ctx context.Context, batchID string) error
}

// Ends are the marker states that end a job: what the stream's filter lets
// through (template.yaml) and the stream handler acts on.
var Ends = []engine.State{engine.StateDone, engine.StateFailed, engine.StateCancelled}

// Stream handles the markers table's stream records.
type Stream struct {
	Releaser Releaser
	// Send hands a released continuation's message to its queue (the
	// enqueue path's).
	Send   jobs.SendFunc
	Logger *slog.Logger
}

// Handle releases the continuations of every job whose marker a record
// shows settled (each job once per batch, however many of its records the
// batch holds): one read says which of the batch's ended jobs have any, and
// only those are released, ReleasesAtOnce at a time; a job whose release
// left nothing waiting is taken off the continuation sweep's list. A record whose release failed is reported by
// its sequence number, so the event source retries it (and what follows it
// in its shard); every other record is done.
func (s *Stream) Handle(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
	log := s.Logger
	if log == nil {
		log = obs.DefaultLogger()
	}
	var resp events.DynamoDBEventResponse
	var ended []string
	for _, r := range ev.Records {
		if id, ok := endedJob(r); ok && !slices.Contains(ended, id) {
			ended = append(ended, id)
		}
	}
	if len(ended) == 0 {
		return resp, nil
	}
	failed := map[string]error{}
	parents, err := s.Releaser.Parents(ctx, ended)
	if err != nil {
		for _, id := range ended {
			failed[id] = err
		}
	}
	var (
		mu  sync.Mutex
		wg  sync.WaitGroup
		sem = make(chan struct{}, ReleasesAtOnce)
	)
	for _, id := range parents {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := s.release(ctx, log, id); err != nil {
				mu.Lock()
				failed[id] = err
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	for _, r := range ev.Records {
		id, ok := endedJob(r)
		if err := failed[id]; ok && err != nil {
			log.Warn("chain: release failed; the stream retries it", obs.KeyJobID, id, obs.KeyError, obs.Redact(err))
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.DynamoDBBatchItemFailure{ItemIdentifier: r.Change.SequenceNumber})
		}
	}
	return resp, nil
}

// ReleasesAtOnce is how many parents of one stream batch Handle releases
// at once: the releases of different parents are independent, and one
// after another they would cap a stream shard at about 30 parents a
// second (docs/scale.md).
const ReleasesAtOnce = 10

// release releases the continuations of parent id and, when that left
// nothing waiting, takes it off the continuation sweep's list.
func (s *Stream) release(ctx context.Context, log *slog.Logger, id string) error {
	rep, err := s.Releaser.ReleaseContinuations(ctx, id, s.Send)
	if err != nil {
		return err
	}
	if len(rep.Sent)+len(rep.Cancelled) > 0 {
		log.Info("chain: continuations released", obs.KeyJobID, id, "parentState", string(rep.State),
			"sent", rep.Sent, "cancelled", rep.Cancelled, "waiting", len(rep.Waiting))
	}
	if len(rep.Waiting) == 0 && rep.Version > 0 {
		// Nothing waits for it any more: off the sweep's list now, so the
		// sweep looks only at parents still waiting. Best effort: the
		// sweep takes off what stays.
		if _, err := s.Releaser.Unlist(ctx, id, rep.Version); err != nil {
			log.Warn("chain: a released parent stays listed for the sweep", obs.KeyJobID, id, obs.KeyError, obs.Redact(err))
		}
	}
	return nil
}

// endedJob is the job id of a stream record that shows a marker settled.
func endedJob(r events.DynamoDBEventRecord) (string, bool) {
	if r.EventName != "INSERT" && r.EventName != "MODIFY" {
		return "", false
	}
	img := r.Change.NewImage
	state, ok := img["state"]
	if !ok || state.DataType() != events.DataTypeString || !slices.Contains(Ends, engine.State(state.String())) {
		return "", false
	}
	id, ok := img[dynamostore.AttrMessageKey]
	if !ok || id.DataType() != events.DataTypeString || !message.CanonicalUUID(id.String()) {
		return "", false
	}
	return id.String(), true
}

// Handlers returns the runner's handlers of the chain queue's types.
func Handlers(f Finisher, s Sweeper, send jobs.SendFunc) (map[string]runner.Handler, error) {
	if f == nil || s == nil || send == nil {
		return nil, errors.New("chain: a Finisher, a Sweeper and a send are required")
	}
	return map[string]runner.Handler{
		contract.BatchFinish.Name: runner.HandlerFunc(func(ctx context.Context, job runner.Job) error {
			return f.FinishBatch(ctx, job.Envelope.Args["batchId"])
		}),
		contract.ContinuationSweep.Name: runner.HandlerFunc(func(ctx context.Context, job runner.Job) error {
			rep, err := s.SweepContinuations(ctx, send)
			if job.Logger != nil {
				job.Logger.Info("chain: continuation sweep", "parents", rep.Parents, "sent", rep.Sent, "cancelled", rep.Cancelled, "kept", len(rep.Kept),
					"unfinished", rep.Unfinished, "covered", rep.Covered)
			}
			if rep.Unfinished {
				// Retried: the retry goes on from where the run stopped.
				err = errors.Join(err, jobs.ErrSweepUnfinished)
			}
			if err != nil {
				return fmt.Errorf("chain: continuation sweep: %w", err)
			}
			return nil
		}),
	}, nil
}

// SQSHandler is what the chain queue's records go to (*runner.Runner is
// one).
type SQSHandler interface {
	Handle(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error)
}

// Function is the chain function's handler: it serves both of its event
// sources, the chain queue's records (to the runner) and the markers
// table's stream records (to Stream), telling them apart by their
// eventSource. It implements lambda.Handler.
type Function struct {
	Runner SQSHandler
	Stream *Stream
}

// Invoke serves one invocation.
func (f *Function) Invoke(ctx context.Context, payload []byte) ([]byte, error) {
	var probe struct {
		Records []struct {
			EventSource  string `json:"eventSource"`
			EventSource2 string `json:"EventSource"`
		} `json:"Records"`
	}
	if err := json.Unmarshal(payload, &probe); err != nil {
		return nil, fmt.Errorf("chain: the event is not a batch of records: %w", err)
	}
	source := ""
	if len(probe.Records) > 0 {
		source = probe.Records[0].EventSource + probe.Records[0].EventSource2
	}
	switch source {
	case "aws:dynamodb":
		return serve(ctx, payload, "stream event", f.Stream.Handle)
	case "aws:sqs", "":
		return serve(ctx, payload, "SQS event", f.Runner.Handle)
	}
	return nil, fmt.Errorf("chain: records from %q, neither the chain queue nor the markers stream", source)
}

// serve decodes payload as an event of type E (what, in errors), hands it
// to handle and encodes its response.
func serve[E, R any](ctx context.Context, payload []byte, what string, handle func(context.Context, E) (R, error)) ([]byte, error) {
	var ev E
	if err := json.Unmarshal(payload, &ev); err != nil {
		return nil, fmt.Errorf("chain: %s: %w", what, err)
	}
	resp, err := handle(ctx, ev)
	if err != nil {
		return nil, err
	}
	return json.Marshal(resp)
}
