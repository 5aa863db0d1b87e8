package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/runstwice/runstwice/client"
)

// fakeStack is a deployed stack's outputs, alarm names and event source
// mappings.
type fakeStack struct {
	outputs map[string]string
	alarms  []string
	sources []string
	err     error
}

func (f fakeStack) Outputs(context.Context, string) (map[string]string, error) {
	return f.outputs, f.err
}
func (f fakeStack) AlarmNames(context.Context, string) ([]string, error) { return f.alarms, f.err }
func (f fakeStack) EventSources(context.Context, string) ([]string, error) {
	return f.sources, f.err
}

// fakeTopics is SNS's answer for the alarm topic.
type fakeTopics struct {
	subs []Subscription
	err  error
}

func (f fakeTopics) Subscriptions(context.Context, string) ([]Subscription, error) {
	return f.subs, f.err
}

// fakeLambda is Lambda's answer: the account's unreserved concurrency and
// each event source mapping's maximum concurrency.
type fakeLambda struct {
	unreserved int
	maximum    map[string]int
	streams    map[string]bool // the mappings that read a stream, not a queue
	err        error
}

func (f fakeLambda) UnreservedConcurrency(context.Context) (int, error) { return f.unreserved, f.err }
func (f fakeLambda) MaximumConcurrency(_ context.Context, uuid string) (int, bool, error) {
	return f.maximum[uuid], !f.streams[uuid], nil
}

// lastCheck runs one check on a report of the stack "s" and returns the line
// it added.
func lastCheck(t *testing.T, check func(context.Context, Config, *Report), cfg Config) Check {
	t.Helper()
	cfg.StackName = "s"
	rep := &Report{Outputs: map[string]string{"AlarmTopicArn": topic}}
	check(context.Background(), cfg, rep)
	if len(rep.Checks) != 1 {
		t.Fatalf("checks %+v; want one line", rep.Checks)
	}
	return rep.Checks[0]
}

func TestSubscriptionCheck(t *testing.T) {
	confirmed := Subscription{Protocol: "email", Endpoint: "oncall@example.org", ARN: topic + ":0b7e4c1a-2f1d-4c4e-9a51-2c7d6f0e8a11"}
	pending := Subscription{Protocol: "email", Endpoint: "new@example.org", ARN: "PendingConfirmation"}
	for _, tc := range []struct {
		name   string
		topics fakeTopics
		status Status
		detail string
	}{
		{"confirmed", fakeTopics{subs: []Subscription{confirmed}}, Pass, "confirmed: email oncall@example.org"},
		{"one confirmed, one pending", fakeTopics{subs: []Subscription{pending, confirmed}}, Pass, "oncall@example.org"},
		{"only pending", fakeTopics{subs: []Subscription{pending}}, Fail, "not confirmed yet: email new@example.org"},
		{"nobody subscribed", fakeTopics{}, Fail, "has no subscription"},
		{"SNS refuses", fakeTopics{err: errors.New("AuthorizationError")}, Fail, "AuthorizationError"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := lastCheck(t, checkSubscription, Config{Topics: tc.topics})
			if c.Name != "alarm subscription" || c.Status != tc.status || !strings.Contains(c.Detail, tc.detail) {
				t.Fatalf("check %+v; want %s containing %q", c, tc.status, tc.detail)
			}
		})
	}
}

func TestConcurrencyCheck(t *testing.T) {
	sources := []string{"uuid-critical", "uuid-default", "uuid-bulk", "uuid-dlq"}
	template := map[string]int{"uuid-critical": 10, "uuid-default": 5, "uuid-bulk": 2, "uuid-dlq": 2} // 19 together
	for _, tc := range []struct {
		name   string
		stack  fakeStack
		lambda fakeLambda
		status Status
		detail string
	}{
		{"a new account's 1000", fakeStack{sources: sources}, fakeLambda{unreserved: 1000, maximum: template}, Pass, "unreserved 1000 covers the 4 queue event sources' maximum of 19"},
		// The outbox relay's stream mapping has no ScalingConfig: it is not
		// a queue source, so no maximum is asked of it.
		{"beside the outbox stream's mapping", fakeStack{sources: append(slices.Clone(sources), "uuid-outbox")},
			fakeLambda{unreserved: 1000, maximum: template, streams: map[string]bool{"uuid-outbox": true}}, Pass, "4 queue event sources' maximum of 19"},
		{"only a stream", fakeStack{sources: []string{"uuid-outbox"}}, fakeLambda{unreserved: 1000, streams: map[string]bool{"uuid-outbox": true}}, Fail, "no SQS event source mappings"},
		{"exactly enough", fakeStack{sources: sources}, fakeLambda{unreserved: 19, maximum: template}, Pass, "maximum of 19"},
		{"a limited new account", fakeStack{sources: sources}, fakeLambda{unreserved: 10, maximum: template}, Fail, "unreserved concurrency is 10, below the 19"},
		{"a source without a maximum", fakeStack{sources: sources}, fakeLambda{unreserved: 1000, maximum: map[string]int{"uuid-critical": 10}}, Fail, "uuid-default sets no maximum concurrency"},
		{"no event sources", fakeStack{}, fakeLambda{unreserved: 1000}, Fail, "no event source mappings"},
		{"Lambda refuses", fakeStack{sources: sources}, fakeLambda{maximum: template, err: errors.New("AccessDeniedException")}, Fail, "AccessDeniedException"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := lastCheck(t, checkConcurrency, Config{Stack: tc.stack, Lambda: tc.lambda})
			if c.Name != "concurrency" || c.Status != tc.status || !strings.Contains(c.Detail, tc.detail) {
				t.Fatalf("check %+v; want %s containing %q", c, tc.status, tc.detail)
			}
		})
	}
}

// fakeAlarms are CloudWatch's alarms.
type fakeAlarms struct {
	alarms []Alarm
	prefix *string
}

func (f fakeAlarms) Alarms(_ context.Context, prefix string) ([]Alarm, error) {
	if f.prefix != nil {
		*f.prefix = prefix
	}
	var out []Alarm
	for _, a := range f.alarms {
		if strings.HasPrefix(a.Name, prefix) {
			out = append(out, a)
		}
	}
	return out, nil
}

const topic = "arn:aws:sns:us-east-1:123456789012:alarms"

func TestAlarmChecks(t *testing.T) {
	ok := func(name string) Alarm { return Alarm{Name: name, State: "OK", Actions: []string{topic}} }
	names := []string{"s-dlq-received", "s-dead-letters", "s-enqueue-5xx"}
	for _, tc := range []struct {
		name   string
		stack  fakeStack
		alarms []Alarm
		status Status
		detail string
	}{
		{"all present and quiet", fakeStack{alarms: names}, []Alarm{ok("s-dlq-received"), ok("s-dead-letters"), ok("s-enqueue-5xx"), ok("other-x")},
			Pass, "3 of 3 exist"},
		{"no data yet is fine and said", fakeStack{alarms: names}, []Alarm{ok("s-dlq-received"), ok("s-dead-letters"), {Name: "s-enqueue-5xx", State: "INSUFFICIENT_DATA", Actions: []string{topic}}},
			Pass, "1 without data yet: s-enqueue-5xx"},
		{"one missing", fakeStack{alarms: names}, []Alarm{ok("s-dlq-received"), ok("s-enqueue-5xx")}, Fail, "2 of 3"},
		{"one in ALARM", fakeStack{alarms: names}, []Alarm{ok("s-dlq-received"), ok("s-dead-letters"), {Name: "s-enqueue-5xx", State: "ALARM", Actions: []string{topic}}},
			Fail, "2 of 3"},
		{"one notifies nobody", fakeStack{alarms: names}, []Alarm{ok("s-dlq-received"), ok("s-dead-letters"), {Name: "s-enqueue-5xx", State: "OK"}},
			Fail, "2 of 3"},
		{"no alarms declared", fakeStack{}, nil, Fail, "declares no alarms"},
		{"stack unreadable", fakeStack{err: errors.New("AccessDenied")}, nil, Fail, "AccessDenied"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var prefix string
			rep := &Report{Outputs: map[string]string{"AlarmTopicArn": topic}}
			checkAlarms(context.Background(), Config{StackName: "s", Stack: tc.stack, Alarms: fakeAlarms{alarms: tc.alarms, prefix: &prefix}}, rep)
			last := rep.Checks[len(rep.Checks)-1]
			if last.Status != tc.status || !strings.Contains(last.Detail, tc.detail) || rep.OK() != (tc.status == Pass) {
				t.Fatalf("checks %+v; want the last %s containing %q", rep.Checks, tc.status, tc.detail)
			}
			if len(tc.stack.alarms) > 0 && prefix != "s-" {
				t.Fatalf("described alarms with prefix %q; want the names' common prefix", prefix)
			}
		})
	}
}

func TestCommonPrefix(t *testing.T) {
	for _, tc := range []struct {
		names []string
		want  string
	}{
		{[]string{"s-a"}, "s-a"},
		{[]string{"stack-dlq-received", "stack-dead-letters", "stack-enqueue-5xx"}, "stack-"},
		{[]string{"a", "b"}, ""},
	} {
		if got := commonPrefix(tc.names); got != tc.want {
			t.Errorf("commonPrefix(%v) = %q; want %q", tc.names, got, tc.want)
		}
	}
}

// fakeJobAPI creates job j-1 and then reports it in the given states, one
// per read (the last repeats); "State/outcome" also sets lastOutcome.
func fakeJobAPI(t *testing.T, states ...string) *httptest.Server {
	t.Helper()
	var reads atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.Method == http.MethodPost {
			w.WriteHeader(http.StatusAccepted)
			_, _ = io.WriteString(w, `{"jobId":"j-1","type":"email.welcome.v1","state":"Enqueued"}`)
			return
		}
		s, outcome, _ := strings.Cut(states[min(int(reads.Add(1))-1, len(states)-1)], "/")
		_, _ = io.WriteString(w, `{"jobId":"j-1","type":"email.welcome.v1","key":"other","state":"`+s+`","lastOutcome":"`+outcome+`","lastReason":"dead-lettered"}`)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestJobFailures(t *testing.T) {
	for _, tc := range []struct {
		name   string
		states []string
		check  string
		detail string
	}{
		{"the job failed", []string{"Enqueued", "Failed"}, "succeeded", `reason "dead-lettered"`},
		{"the job never finished", []string{"Enqueued"}, "succeeded", "still Enqueued"},
		{"the job read back is another", []string{"Succeeded"}, "read back", "want j-1"},
		{"the job sent no mail", []string{"Enqueued", "Succeeded/noop"}, "succeeded", "without sending a mail"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := fakeJobAPI(t, tc.states...)
			rep, err := Run(context.Background(), Config{API: srv.URL, User: "u-1", Timeout: 50 * time.Millisecond, Poll: time.Millisecond,
				Client: func(api string) (*client.Client, error) { return client.New(api, client.WithCaller("smoke")) }})
			if err != nil {
				t.Fatal(err)
			}
			var found bool
			for _, c := range rep.Checks {
				if c.Name == tc.check {
					found = c.Status == Fail && strings.Contains(c.Detail, tc.detail)
				}
			}
			if !found || rep.OK() {
				t.Fatalf("checks %+v; want %q to fail with %q", rep.Checks, tc.check, tc.detail)
			}
		})
	}
}

func TestUsage(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"--stack", "s"},
		{"--user", "u-1"},
		{"--user", "u-1", "--api", "http://127.0.0.1:1", "extra"},
		{"--user", "u-1", "--api", "http://127.0.0.1:1", "--timeout", "0s"},
		{"--bogus"},
	} {
		var out, errOut bytes.Buffer
		if code := run(context.Background(), args, &out, &errOut); code != 2 || errOut.Len() == 0 {
			t.Errorf("smoke %v: exit %d, stderr %q; want 2 and a message", args, code, errOut.String())
		}
	}
}
