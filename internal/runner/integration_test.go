//go:build integration

package runner_test

import (
	"context"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"

	"github.com/runstwice/runstwice/aws/dynamostore"
	"github.com/runstwice/runstwice/aws/sqsqueue"
	"github.com/runstwice/runstwice/aws/ssmswitch"
	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/dev/testenv"
	"github.com/runstwice/runstwice/internal/obs"
	"github.com/runstwice/runstwice/internal/runner"
	"github.com/runstwice/runstwice/internal/testkit"
	"github.com/runstwice/runstwice/message"
)

// stack is the real AWS side of a runner on moto: a marker table, the work
// queues and a DLQ, and the toggle parameters of one stage.
type stack struct {
	counter *testenv.CallCounter
	ddb     *dynamodb.Client
	sqs     *sqs.Client
	ssm     *ssm.Client
	markers *dynamostore.Store
	testenv.WorkQueues
	stage string
}

func newStack(t *testing.T) *stack {
	t.Helper()
	moto := testenv.Moto(t)
	s := &stack{counter: testenv.NewCallCounter(), stage: testenv.Name(t, "stage")}
	cfg := moto.Config(s.counter.Option)
	s.ddb, s.sqs, s.ssm = dynamodb.NewFromConfig(cfg), sqs.NewFromConfig(cfg), ssm.NewFromConfig(cfg)
	table := testenv.NewTable(t, s.ddb, "markers", dynamostore.AttrHandler, dynamostore.AttrMessageKey)
	s.markers = dynamostore.New(s.ddb, table)
	s.WorkQueues = testenv.CreateWorkQueues(t, s.sqs, testenv.Name(t, "q")+"-", 5)
	return s
}

func (s *stack) runner(t *testing.T, reg *message.Registry, handler runner.Handler) *runner.Runner {
	t.Helper()
	qs := sqsqueue.New(s.sqs, s.URLs(), s.DLQ.URL)
	handlers := map[string]runner.Handler{}
	for _, n := range reg.Names() {
		handlers[n] = handler
	}
	src := ssmswitch.New(s.ssm, contract.SwitchPath(s.stage), func(n string) bool { _, err := reg.Lookup(n); return err == nil })
	src.Logger = obs.NewLogger(io.Discard, "error")
	r, err := runner.New(runner.Config{
		Registry: reg, Handlers: handlers, Switch: src, Markers: s.markers, Parker: qs, DeadLetterer: qs,
		ParkDelay: 2 * time.Second, Logger: obs.NewLogger(io.Discard, "error"),
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func batch(t *testing.T, n int) events.SQSEvent {
	var ev events.SQSEvent
	for range n {
		ev.Records = append(ev.Records, testkit.Record(t, notifyJob(), 1))
	}
	return ev
}

// countingHandler counts effects per job and can be slowed down so twins
// overlap.
type countingHandler struct {
	mu      sync.Mutex
	effects map[string]int
	delay   time.Duration
}

func (h *countingHandler) Handle(ctx context.Context, job runner.Job) error {
	time.Sleep(h.delay)
	h.mu.Lock()
	h.effects[job.Envelope.MessageID]++
	h.mu.Unlock()
	return nil
}

// TestTwoRunnersOneEffectInLeaseMode: two workers get the same batch at the
// same time; with leases every message's effect runs exactly once, and the
// records a twin held are retried and then absorbed as duplicates.
func TestTwoRunnersOneEffectInLeaseMode(t *testing.T) {
	s := newStack(t)
	h := &countingHandler{effects: map[string]int{}, delay: 30 * time.Millisecond}
	reg := registry(t, true)
	a, b := s.runner(t, reg, h), s.runner(t, reg, h)
	ev := batch(t, 10)

	var wg sync.WaitGroup
	var retried atomic.Int32
	for _, r := range []*runner.Runner{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			resp, _ := r.Handle(ctx, ev)
			retried.Add(int32(len(resp.BatchItemFailures)))
		}()
	}
	wg.Wait()
	// SQS redelivers what was retried: everything converges.
	resp, _ := a.Handle(context.Background(), ev)
	if len(resp.BatchItemFailures) != 0 {
		t.Fatalf("redelivery still failing: %v", resp.BatchItemFailures)
	}
	for _, rec := range ev.Records {
		env, _ := message.Decode([]byte(rec.Body))
		if n := h.effects[env.MessageID]; n != 1 {
			t.Errorf("message %s: %d effects; want exactly 1", env.MessageID, n)
		}
	}
	t.Logf("two concurrent runners: %d records deferred to a retry because the twin held the lease", retried.Load())
}

// TestCallsPerJob measures the AWS calls of a 10-record batch, the cost of a
// job: seed mode ≤ 0.1 peek calls + 1 claim write per job, lease mode ≤ 2
// writes per job, SSM at most one call per TTL.
func TestCallsPerJob(t *testing.T) {
	for _, tc := range []struct {
		name      string
		lease     bool
		maxWrites int
	}{
		{"seed", false, 10},
		{"lease", true, 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStack(t)
			h := &countingHandler{effects: map[string]int{}}
			r := s.runner(t, registry(t, tc.lease), h)
			ev := batch(t, 10)
			s.counter.Reset()
			if resp, _ := r.Handle(context.Background(), ev); len(resp.BatchItemFailures) != 0 {
				t.Fatalf("failures: %v", resp.BatchItemFailures)
			}
			peeks := s.counter.Sum("DynamoDB.BatchGetItem", "DynamoDB.GetItem")
			writes := s.counter.Sum("DynamoDB.PutItem", "DynamoDB.UpdateItem", "DynamoDB.DeleteItem")
			ssmCalls := s.counter.Get("SSM.GetParametersByPath")
			t.Logf("%s mode, 10 jobs: %s → %.1f peek calls, %.1f writes, %.1f SSM calls per job",
				tc.name, s.counter, float64(peeks)/10, float64(writes)/10, float64(ssmCalls)/10)
			if peeks > 1 || writes > tc.maxWrites || ssmCalls > 1 {
				t.Fatalf("calls %s; want ≤ 1 peek call, ≤ %d writes, ≤ 1 SSM call for 10 jobs", s.counter, tc.maxWrites)
			}
			// A second batch inside the TTL costs no SSM call at all.
			s.counter.Reset()
			r.Handle(context.Background(), batch(t, 10))
			if n := s.counter.Get("SSM.GetParametersByPath"); n != 0 {
				t.Fatalf("%d SSM calls inside the TTL; want 0", n)
			}
		})
	}
}

// TestParkSendsDelayedCopy: a disabled job is re-sent to its queue with a
// delay under the same messageId, and the original succeeds.
func TestParkSendsDelayedCopy(t *testing.T) {
	s := newStack(t)
	if _, err := s.ssm.PutParameter(context.Background(), &ssm.PutParameterInput{
		Name: aws.String(contract.SwitchParameter(s.stage, notify.Name)), Value: aws.String("off"), Type: ssmtypes.ParameterTypeString,
	}); err != nil {
		t.Fatal(err)
	}
	h := &countingHandler{effects: map[string]int{}}
	r := s.runner(t, registry(t, true), h)
	env := notifyJob()
	q := s.Queues["default"]
	msg := testkit.Record(t, env, 3)
	msg.EventSourceARN = q.ARN // the queue it came from, and goes back to
	if resp, _ := r.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{msg}}); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures %v; a parked job succeeds so its original is deleted", resp.BatchItemFailures)
	}
	if len(h.effects) != 0 {
		t.Fatal("a disabled job ran")
	}
	if got := testenv.Receive(t, s.sqs, q.URL, 0); len(got) != 0 {
		t.Fatalf("parked copy visible at once; want it delayed")
	}
	got := testenv.Receive(t, s.sqs, q.URL, 5*time.Second)
	if len(got) != 1 {
		t.Fatalf("received %d messages after the park delay; want 1", len(got))
	}
	parkedEnv, err := message.Decode([]byte(aws.ToString(got[0].Body)))
	if err != nil || parkedEnv.MessageID != env.MessageID {
		t.Fatalf("parked copy %+v, %v; want the same messageId %s", parkedEnv, err, env.MessageID)
	}
	if rc := got[0].Attributes["ApproximateReceiveCount"]; rc != "1" {
		t.Fatalf("parked copy receive count %s; want a fresh 1 (parking never burns the receive count)", rc)
	}
	if a := got[0].MessageAttributes[sqsqueue.AttrType]; aws.ToString(a.StringValue) != notify.Name {
		t.Fatalf("parked copy lost its type attribute: %v", got[0].MessageAttributes)
	}
}

// TestPoisonMessageReachesDLQWithReason sends a malformed record through the
// runner: it lands on the real DLQ with its reason, at once.
func TestPoisonMessageReachesDLQWithReason(t *testing.T) {
	s := newStack(t)
	r := s.runner(t, registry(t, true), &countingHandler{effects: map[string]int{}})
	msg := testkit.RawRecord(`{"v":1,"type":"test.notify.v1"}`, 1)
	msg.EventSourceARN = s.Queues["default"].ARN
	if resp, _ := r.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{msg}}); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures %v; a poison message is not retried", resp.BatchItemFailures)
	}
	got := testenv.Receive(t, s.sqs, s.DLQ.URL, time.Second)
	if len(got) != 1 || aws.ToString(got[0].Body) != msg.Body {
		t.Fatalf("DLQ holds %v; want the raw poison body", got)
	}
	attrs := got[0].MessageAttributes
	if reason := aws.ToString(attrs[sqsqueue.AttrReason].StringValue); reason == "" ||
		aws.ToString(attrs[sqsqueue.AttrSourceQueue].StringValue) != msg.EventSourceARN ||
		aws.ToString(attrs[sqsqueue.AttrReceiveCount].StringValue) != "1" {
		t.Fatalf("DLQ attributes %v; want reason, source queue and receive count", attrs)
	}
}
