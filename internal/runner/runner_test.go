package runner_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/runstwice/runstwice/internal/catalog"
	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/email"
	"github.com/runstwice/runstwice/internal/marker"
	"github.com/runstwice/runstwice/internal/marker/markertest"
	"github.com/runstwice/runstwice/internal/obs"
	"github.com/runstwice/runstwice/internal/obs/obstest"
	"github.com/runstwice/runstwice/internal/runner"
)

type toggles map[string]bool

func (t toggles) IsJobEnabled(_ context.Context, jobType string, def bool) bool {
	if v, ok := t[jobType]; ok {
		return v
	}
	return def
}

type parked struct {
	queue contract.Queue
	body  string
	delay time.Duration
}

type fakeQueues struct {
	mu       sync.Mutex
	parked   []parked
	dead     map[string]string // SQS message id -> reason
	parkErr  error
	deadErr  error
	failed   map[string]string // job id -> error class
	failTrac *markertest.Trace
}

func newFakeQueues(tr *markertest.Trace) *fakeQueues {
	return &fakeQueues{dead: map[string]string{}, failed: map[string]string{}, failTrac: tr}
}

func (q *fakeQueues) Park(_ context.Context, queue contract.Queue, _ contract.Envelope, body string, delay time.Duration) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.parkErr != nil {
		return q.parkErr
	}
	q.parked = append(q.parked, parked{queue, body, delay})
	return nil
}

func (q *fakeQueues) DeadLetter(_ context.Context, msg events.SQSMessage, reason string) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.deadErr != nil {
		return q.deadErr
	}
	q.dead[msg.MessageId] = reason
	return nil
}

func (q *fakeQueues) MarkFailed(_ context.Context, jobID, class string) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.failTrac.Add("markFailed")
	q.failed[jobID] = class
	return nil
}

// emailHandler plays an e-mail job: load the user, then send.
type emailHandler struct {
	tr      *markertest.Trace
	sendErr error
	sends   map[string]int
	mu      sync.Mutex
}

func (h *emailHandler) Handle(_ context.Context, job runner.Job) error {
	h.tr.Add("load")
	if h.sendErr != nil {
		return h.sendErr
	}
	h.tr.Add("send")
	h.mu.Lock()
	h.sends[job.Envelope.MessageID]++
	h.mu.Unlock()
	return nil
}

type harness struct {
	tr      *markertest.Trace
	markers markertest.Traced
	queues  *fakeQueues
	handler *emailHandler
	toggles toggles
	metrics *bytes.Buffer
	r       *runner.Runner
}

func newHarness(t testing.TB, mutate func(*runner.Config)) *harness {
	t.Helper()
	h := &harness{tr: &markertest.Trace{}, metrics: &bytes.Buffer{}, toggles: toggles{}}
	h.markers = markertest.Traced{Memory: marker.NewMemory(), Trace: h.tr}
	h.queues = newFakeQueues(h.tr)
	h.handler = &emailHandler{tr: h.tr, sends: map[string]int{}}
	reg := catalog.Registry()
	handlers := map[string]runner.Handler{}
	for _, n := range reg.Names() {
		handlers[n] = h.handler
	}
	cfg := runner.Config{
		Registry: reg, Handlers: handlers, Toggles: h.toggles, Markers: h.markers,
		Parker: h.queues, DeadLetterer: h.queues, Failures: h.queues,
		ParkDelay: 2 * time.Second, MaxReceiveCount: 5,
		Logger: obs.NewLogger(io.Discard, "error"), Metrics: obs.NewMetrics(h.metrics),
	}
	if mutate != nil {
		mutate(&cfg)
	}
	r, err := runner.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h.r = r
	return h
}

var seq int

func envelope(jobType string, args map[string]string) contract.Envelope {
	seq++
	return contract.Envelope{
		V: 1, MessageID: contract.DeriveMessageID("test", fmt.Sprint(seq, time.Now().UnixNano())), Type: jobType,
		Key: fmt.Sprintf("k-%d", seq), CorrelationID: fmt.Sprintf("c-%d", seq), Args: args,
		EnqueuedAt: time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC),
	}
}

func welcome() contract.Envelope {
	return envelope(email.Welcome.Name, map[string]string{"userId": "u-123"})
}

func record(t testing.TB, env contract.Envelope, receiveCount int) events.SQSMessage {
	t.Helper()
	body, err := env.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return rawRecord(string(body), receiveCount)
}

var sqsSeq int

func rawRecord(body string, receiveCount int) events.SQSMessage {
	sqsSeq++
	return events.SQSMessage{
		MessageId:      fmt.Sprintf("sqs-%d", sqsSeq),
		Body:           body,
		Attributes:     map[string]string{"ApproximateReceiveCount": fmt.Sprint(receiveCount)},
		EventSourceARN: "arn:aws:sqs:us-east-1:123456789012:critical",
	}
}

func (h *harness) run(t testing.TB, ctx context.Context, msgs ...events.SQSMessage) []string {
	t.Helper()
	resp, err := h.r.Handle(ctx, events.SQSEvent{Records: msgs})
	if err != nil {
		t.Fatalf("Handle returned an error: %v (failures belong in the batch response)", err)
	}
	var ids []string
	for _, f := range resp.BatchItemFailures {
		ids = append(ids, f.ItemIdentifier)
	}
	return ids
}

// Seed invariant 1: an already-processed message does not send, claim or
// even load.
func TestAlreadyProcessedDoesNothing(t *testing.T) {
	h := newHarness(t, nil)
	env := welcome()
	if _, err := h.markers.Memory.Claim(context.Background(), marker.Key{Handler: env.Type, MessageKey: env.MessageID}, ""); err != nil {
		t.Fatal(err)
	}
	if failed := h.run(t, context.Background(), record(t, env, 2)); len(failed) != 0 {
		t.Fatalf("failures %v; want none", failed)
	}
	for _, op := range []string{"load", "send", "claim", "lease"} {
		if h.tr.Has(op) {
			t.Errorf("already-processed message did %q; trace: %s", op, h.tr)
		}
	}
	if !strings.Contains(h.metrics.String(), `"JobsDuplicate":1`) {
		t.Errorf("want a JobsDuplicate metric; got %s", h.metrics)
	}
}

// Seed invariant 2: the happy path sends, then claims, in that order.
func TestHappyPathSendsThenClaims(t *testing.T) {
	h := newHarness(t, nil)
	env := welcome()
	if failed := h.run(t, context.Background(), record(t, env, 1)); len(failed) != 0 {
		t.Fatalf("failures %v; want none", failed)
	}
	if got, want := h.tr.String(), "peek lease load send claim"; got != want {
		t.Fatalf("trace %q; want %q", got, want)
	}
	rec, ok, _ := h.markers.Memory.Peek(context.Background(), marker.Key{Handler: env.Type, MessageKey: env.MessageID})
	if !ok || !rec.Processed() {
		t.Fatalf("marker after success = %+v; want claimed", rec)
	}
	// The redelivery of the same message is absorbed.
	h.tr.Reset()
	if failed := h.run(t, context.Background(), record(t, env, 1)); len(failed) != 0 || h.handler.sends[env.MessageID] != 1 {
		t.Fatalf("redelivery: failures %v, sends %d; want none and 1", failed, h.handler.sends[env.MessageID])
	}
}

// Seed invariant 3: a failed send propagates and never claims.
func TestFailedSendNeverClaims(t *testing.T) {
	h := newHarness(t, nil)
	h.handler.sendErr = errors.New("SES throttled")
	msg := record(t, welcome(), 1)
	failed := h.run(t, context.Background(), msg)
	if !slices.Equal(failed, []string{msg.MessageId}) {
		t.Fatalf("failures %v; want [%s]", failed, msg.MessageId)
	}
	if h.tr.Has("claim") {
		t.Fatalf("claimed after a failed send; trace: %s", h.tr)
	}
	if !h.tr.Has("release") {
		t.Fatalf("lease not released after a failed send, the retry would wait for it; trace: %s", h.tr)
	}
	if len(h.queues.failed) != 0 {
		t.Fatal("job marked Failed before its final attempt")
	}
}

func TestFinalAttemptMarksFailedBeforeReturning(t *testing.T) {
	h := newHarness(t, nil)
	h.handler.sendErr = errors.New("SES down")
	env := welcome()
	msg := record(t, env, 5)
	if failed := h.run(t, context.Background(), msg); len(failed) != 1 {
		t.Fatalf("failures %v; want the record", failed)
	}
	if h.queues.failed[env.MessageID] != "transient" {
		t.Fatalf("final attempt did not mark the job Failed: %v", h.queues.failed)
	}
	if !strings.Contains(h.metrics.String(), `"JobsFailed":1`) {
		t.Errorf("want JobsFailed; got %s", h.metrics)
	}
}

func TestDeadlineIsRetryNotFailure(t *testing.T) {
	for _, tc := range []struct {
		name string
		ctx  func() context.Context
		err  error
	}{
		{"context already cancelled", func() context.Context {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return ctx
		}, nil},
		{"handler hits the deadline", context.Background, context.DeadlineExceeded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, nil)
			h.handler.sendErr = tc.err
			msg := record(t, welcome(), 5) // even on the final attempt
			if failed := h.run(t, tc.ctx(), msg); len(failed) != 1 {
				t.Fatalf("failures %v; want a retry", failed)
			}
			if len(h.queues.failed) != 0 || len(h.queues.dead) != 0 {
				t.Fatalf("a deadline marked the job failed or dead: %v %v", h.queues.failed, h.queues.dead)
			}
			if strings.Contains(h.metrics.String(), "JobsFailed") {
				t.Fatalf("a deadline counted as a failure: %s", h.metrics)
			}
		})
	}
}

func TestPermanentFailuresGoStraightToTheDLQ(t *testing.T) {
	good := welcome()
	goodBody, _ := good.Encode()
	unknown := welcome()
	unknown.Type = "email.welcome.v9"
	unknownBody, _ := unknown.Encode()
	badArgs := envelope(email.Welcome.Name, map[string]string{"userId": "bob@example.com"})
	badArgsBody, _ := json(badArgs)
	extraArg := envelope(email.Welcome.Name, map[string]string{"userId": "u-1", "email": "x"})
	extraArgBody, _ := json(extraArg)
	for _, tc := range []struct {
		name, body, reason string
		handlerErr         error
	}{
		{"not JSON", "hello", "invalid JSON", nil},
		{"empty", "", "body", nil},
		{"JSON array", "[1,2]", "wrong type", nil},
		{"unknown field", strings.Replace(string(goodBody), `"v":1`, `"v":1,"secret":"x"`, 1), "unknown field", nil},
		{"nested args", strings.Replace(string(goodBody), `"userId":"u-123"`, `"userId":{"id":"u-123"}`, 1), "flat object of string IDs", nil},
		{"unknown type", string(unknownBody), "unknown job type", nil},
		{"e-mail address as arg", badArgsBody, "e-mail address", nil},
		{"undeclared arg", extraArgBody, "not an argument", nil},
		{"handler says permanent", string(goodBody), "user record corrupt", runner.Permanent(errors.New("user record corrupt"))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, nil)
			h.handler.sendErr = tc.handlerErr
			msg := rawRecord(tc.body, 1)
			if failed := h.run(t, context.Background(), msg); len(failed) != 0 {
				t.Fatalf("failures %v; a permanent failure must not be retried", failed)
			}
			reason, ok := h.queues.dead[msg.MessageId]
			if !ok || !strings.Contains(reason, tc.reason) {
				t.Fatalf("dead letter reason %q (sent %v); want it to mention %q", reason, ok, tc.reason)
			}
			if h.tr.Has("send") {
				t.Fatal("sent mail for a permanently failed message")
			}
		})
	}
}

func json(env contract.Envelope) (string, error) {
	// Encode checks only the envelope fields, so it also builds messages
	// whose args are invalid for their type.
	b, err := env.Encode()
	return string(b), err
}

func TestDeadLetterSendFailureIsRetried(t *testing.T) {
	h := newHarness(t, nil)
	h.queues.deadErr = errors.New("SQS down")
	msg := rawRecord("not json", 1)
	if failed := h.run(t, context.Background(), msg); !slices.Equal(failed, []string{msg.MessageId}) {
		t.Fatalf("failures %v; a message that could not be dead-lettered must be retried, never dropped", failed)
	}
}

func TestDisabledJobIsParkedNotLost(t *testing.T) {
	for _, tc := range []struct {
		name    string
		env     contract.Envelope
		toggles toggles
	}{
		{"fail-closed default", envelope(email.PartnerDigest.Name, map[string]string{"userId": "u-1", "digestId": "2026-W48"}), toggles{}},
		{"switched off", welcome(), toggles{email.Welcome.Name: false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, func(c *runner.Config) { c.Toggles = tc.toggles })
			msg := record(t, tc.env, 1)
			if failed := h.run(t, context.Background(), msg); len(failed) != 0 {
				t.Fatalf("failures %v; a parked job succeeds so the original is deleted", failed)
			}
			jt, _ := catalog.Registry().Lookup(tc.env.Type)
			if len(h.queues.parked) != 1 || h.queues.parked[0].body != msg.Body || h.queues.parked[0].queue != jt.Queue || h.queues.parked[0].delay != 2*time.Second {
				t.Fatalf("parked %+v; want the same body on %s after 2s", h.queues.parked, jt.Queue)
			}
			if h.tr.Has("load") || h.tr.Has("peek") || h.tr.Has("claim") {
				t.Fatalf("a disabled job touched markers or ran; trace: %s", h.tr)
			}
			for _, m := range []string{`"JobsSkipped":1`, `"JobsParked":1`} {
				if !strings.Contains(h.metrics.String(), m) {
					t.Errorf("want %s; got %s", m, h.metrics)
				}
			}
		})
	}
}

func TestParkFailureIsRetried(t *testing.T) {
	h := newHarness(t, func(c *runner.Config) { c.Toggles = toggles{email.Welcome.Name: false} })
	h.queues.parkErr = errors.New("SQS down")
	msg := record(t, welcome(), 1)
	if failed := h.run(t, context.Background(), msg); !slices.Equal(failed, []string{msg.MessageId}) {
		t.Fatalf("failures %v; an unparked job must be retried, never dropped", failed)
	}
}

func TestLeaseHeldByTwinRetries(t *testing.T) {
	h := newHarness(t, nil)
	env := welcome()
	if _, err := h.markers.Memory.Lease(context.Background(), marker.Key{Handler: env.Type, MessageKey: env.MessageID}, "twin", time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	msg := record(t, env, 1)
	if failed := h.run(t, context.Background(), msg); !slices.Equal(failed, []string{msg.MessageId}) {
		t.Fatalf("failures %v; want a retry while the twin holds the lease", failed)
	}
	if h.tr.Has("load") || h.tr.Has("release") {
		t.Fatalf("ran or released the twin's lease; trace: %s", h.tr)
	}
	if strings.Contains(h.metrics.String(), "JobsFailed") {
		t.Fatal("a busy lease counted as a failure")
	}
}

func TestPeekFailureFallsBackToConditionalWrites(t *testing.T) {
	h := newHarness(t, nil)
	env := welcome()
	k := marker.Key{Handler: env.Type, MessageKey: env.MessageID}
	if _, err := h.markers.Memory.Claim(context.Background(), k, ""); err != nil {
		t.Fatal(err)
	}
	h2 := newHarness(t, func(c *runner.Config) { c.Markers = peekFails{h.markers} })
	if failed := h2.run(t, context.Background(), record(t, env, 1)); len(failed) != 0 {
		t.Fatalf("failures %v", failed)
	}
	if h.tr.Has("load") || h2.tr.Has("load") {
		t.Fatal("ran a processed job because the peek failed; the lease must catch it")
	}
}

type peekFails struct{ markertest.Traced }

func (peekFails) PeekBatch(context.Context, []marker.Key) (map[marker.Key]marker.Record, error) {
	return nil, errors.New("throttled")
}

type claimFails struct{ markertest.Traced }

func (claimFails) Claim(context.Context, marker.Key, string) (bool, error) {
	return false, errors.New("ProvisionedThroughputExceeded")
}

func TestClaimFailureAfterEffectRetries(t *testing.T) {
	h := newHarness(t, nil)
	h2 := newHarness(t, func(c *runner.Config) { c.Markers = claimFails{h.markers} })
	msg := record(t, welcome(), 1)
	if failed := h2.run(t, context.Background(), msg); !slices.Equal(failed, []string{msg.MessageId}) {
		t.Fatalf("failures %v; an unrecorded effect must be retried (duplicates over loss)", failed)
	}
}

func TestMixedBatchPartialResponse(t *testing.T) {
	h := newHarness(t, nil)
	ok1, ok2 := record(t, welcome(), 1), record(t, welcome(), 1)
	poison := rawRecord(`{"v":1}`, 1)
	digest := record(t, envelope(email.PartnerDigest.Name, map[string]string{"userId": "u-9", "digestId": "2026-W48"}), 1)
	busyEnv := welcome()
	if _, err := h.markers.Memory.Lease(context.Background(), marker.Key{Handler: busyEnv.Type, MessageKey: busyEnv.MessageID}, "twin", time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	busy := record(t, busyEnv, 1)
	dupEnv := welcome()
	if _, err := h.markers.Memory.Claim(context.Background(), marker.Key{Handler: dupEnv.Type, MessageKey: dupEnv.MessageID}, ""); err != nil {
		t.Fatal(err)
	}
	dup := record(t, dupEnv, 1)
	failed := h.run(t, context.Background(), ok1, poison, busy, digest, dup, ok2)
	if !slices.Equal(failed, []string{busy.MessageId}) {
		t.Fatalf("failures %v; want only the busy record %s", failed, busy.MessageId)
	}
	if len(h.queues.dead) != 1 || len(h.queues.parked) != 1 || len(h.handler.sends) != 2 {
		t.Fatalf("dead %d parked %d sent %d; want 1 1 2", len(h.queues.dead), len(h.queues.parked), len(h.handler.sends))
	}
	if strings.Count(h.tr.String(), "peek") != 1 {
		t.Fatalf("want one peek for the whole batch; trace %s", h.tr)
	}
}

func TestSameMessageTwiceInOneBatchSendsOnce(t *testing.T) {
	h := newHarness(t, nil)
	env := welcome()
	if failed := h.run(t, context.Background(), record(t, env, 1), record(t, env, 1)); len(failed) != 0 {
		t.Fatalf("failures %v", failed)
	}
	if n := h.handler.sends[env.MessageID]; n != 1 {
		t.Fatalf("sent %d times; want 1", n)
	}
}

// A money-like type chooses claim-then-effect: it must never run twice.
func moneyRegistry(t testing.TB) *contract.Registry {
	t.Helper()
	reg, err := contract.NewRegistry(append(email.Types(), contract.JobType{
		Name: "payout.transfer.v1", Args: []contract.ArgSpec{{Name: "payoutId", Format: contract.FormatID, Required: true}},
		Queue: contract.QueueCritical, EnabledByDefault: true, Bias: contract.ClaimThenEffect,
		KeyPrefix: "payout", KeyArgs: []string{"payoutId"},
	})...)
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

func TestClaimThenEffectBias(t *testing.T) {
	var h *harness
	h = newHarness(t, func(c *runner.Config) {
		c.Registry = moneyRegistry(t)
		c.Handlers["payout.transfer.v1"] = runner.HandlerFunc(func(ctx context.Context, job runner.Job) error {
			h.tr.Add("effect")
			return h.handler.sendErr
		})
	})
	env := envelope("payout.transfer.v1", map[string]string{"payoutId": "p-1"})
	if failed := h.run(t, context.Background(), record(t, env, 1)); len(failed) != 0 {
		t.Fatalf("failures %v", failed)
	}
	if got, want := h.tr.String(), "peek claim effect"; got != want {
		t.Fatalf("trace %q; want %q (claim before effect)", got, want)
	}
	h.tr.Reset()
	h.run(t, context.Background(), record(t, env, 1))
	if h.tr.Has("effect") {
		t.Fatal("claim-then-effect type ran twice")
	}

	// An effect that fails after its claim is never retried into a skip: a
	// person must look, so it goes to the DLQ with the reason.
	h.handler.sendErr = errors.New("bank said no")
	env2 := envelope("payout.transfer.v1", map[string]string{"payoutId": "p-2"})
	msg := record(t, env2, 1)
	if failed := h.run(t, context.Background(), msg); len(failed) != 0 {
		t.Fatalf("failures %v", failed)
	}
	if !strings.Contains(h.queues.dead[msg.MessageId], "effect failed after claim") {
		t.Fatalf("dead letters %v; want the failed claimed effect recorded", h.queues.dead)
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	reg := catalog.Registry()
	for name, cfg := range map[string]runner.Config{
		"no registry": {Toggles: toggles{}, Markers: markertest.Traced{}, Parker: newFakeQueues(nil)},
		"no toggles":  {Registry: reg, Markers: markertest.Traced{}, Parker: newFakeQueues(nil)},
		"no markers":  {Registry: reg, Toggles: toggles{}, Parker: newFakeQueues(nil)},
		"no parker":   {Registry: reg, Toggles: toggles{}, Markers: markertest.Traced{}},
		"handler for unknown type": {Registry: reg, Toggles: toggles{}, Markers: markertest.Traced{}, Parker: newFakeQueues(nil),
			Handlers: map[string]runner.Handler{"email.nope.v1": runner.HandlerFunc(nil)}},
	} {
		if _, err := runner.New(cfg); err == nil {
			t.Errorf("%s: New accepted it", name)
		}
	}
}

func TestNothingStartsInsideTheDeadlineMargin(t *testing.T) {
	h := newHarness(t, func(c *runner.Config) { c.DeadlineMargin = 2 * time.Second })
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	msgs := []events.SQSMessage{record(t, welcome(), 5), record(t, welcome(), 1)}
	if failed := h.run(t, ctx, msgs...); len(failed) != 2 {
		t.Fatalf("failures %v; want both retried", failed)
	}
	if h.tr.Has("load") || len(h.queues.failed) != 0 {
		t.Fatalf("work started or a job was marked Failed inside the margin; trace %s", h.tr)
	}
}

func TestSlowEffectIsCutOffBeforeTheDeadline(t *testing.T) {
	h := newHarness(t, func(c *runner.Config) {
		c.DeadlineMargin = 500 * time.Millisecond
		c.Handlers[email.Welcome.Name] = runner.HandlerFunc(func(ctx context.Context, _ runner.Job) error {
			<-ctx.Done()
			return ctx.Err()
		})
	})
	deadline := time.Now().Add(time.Second)
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	if failed := h.run(t, ctx, record(t, welcome(), 1)); len(failed) != 1 {
		t.Fatalf("failures %v; want a retry", failed)
	}
	if time.Now().After(deadline) {
		t.Fatal("the batch response came back after the deadline")
	}
	if h.tr.Has("claim") {
		t.Fatal("claimed an effect that did not finish")
	}
}

func TestTwinClaimedFirstCountsAsDuplicate(t *testing.T) {
	var h *harness
	h = newHarness(t, func(c *runner.Config) {
		c.Registry = registry(t, false)
		c.Handlers[email.Welcome.Name] = runner.HandlerFunc(func(ctx context.Context, job runner.Job) error {
			// A twin without a lease finishes while this effect runs.
			_, err := h.markers.Memory.Claim(ctx, marker.Key{Handler: job.Envelope.Type, MessageKey: job.Envelope.MessageID}, "")
			return err
		})
	})
	if failed := h.run(t, context.Background(), record(t, welcome(), 1)); len(failed) != 0 {
		t.Fatalf("failures %v", failed)
	}
	if !strings.Contains(h.metrics.String(), `"JobsDuplicate":1`) || strings.Contains(h.metrics.String(), "JobsSucceeded") {
		t.Fatalf("metrics %s; want the twin's claim counted as a duplicate", h.metrics)
	}
}

func TestInvalidArgsKeepTheTypeDimension(t *testing.T) {
	h := newHarness(t, nil)
	bad := envelope(email.Welcome.Name, map[string]string{"userId": "a@b.c"})
	body, _ := json(bad)
	h.run(t, context.Background(), rawRecord(body, 1))
	if obstest.Count(h.metrics.String(), "email.welcome.v1", obs.JobsFailed) != 1 {
		t.Fatalf("metrics %s; want JobsFailed under the job's type", h.metrics)
	}
}

// registry is the e-mail registry with leases on or off for every type.
func registry(t testing.TB, lease bool) *contract.Registry {
	t.Helper()
	types := email.Types()
	for i := range types {
		types[i].Lease = lease
	}
	reg, err := contract.NewRegistry(types...)
	if err != nil {
		t.Fatal(err)
	}
	return reg
}
