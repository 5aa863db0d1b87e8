package faults

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	"github.com/aws/aws-sdk-go-v2/service/sesv2"
	sestypes "github.com/aws/aws-sdk-go-v2/service/sesv2/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/runstwice/runstwice/internal/dev/awsproxy"
	"github.com/runstwice/runstwice/internal/dev/moto"
)

// upstream is a stand-in for AWS that answers each service's call with a
// success and counts the calls that reached it.
type upstream struct {
	mu    sync.Mutex
	calls map[string]int
}

func (u *upstream) count(op string) int { u.mu.Lock(); defer u.mu.Unlock(); return u.calls[op] }

func (u *upstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	c := awsproxy.Identify(r, body)
	u.mu.Lock()
	u.calls[c.Operation]++
	u.mu.Unlock()
	switch c.Service {
	case "dynamodb":
		w.Header().Set("Content-Type", json10)
		_, _ = io.WriteString(w, `{}`)
	case "sqs":
		var in struct{ MessageBody string }
		_ = json.Unmarshal(body, &in)
		sum := md5.Sum([]byte(in.MessageBody))
		w.Header().Set("Content-Type", json10)
		_ = json.NewEncoder(w).Encode(map[string]string{"MessageId": "m-1", "MD5OfMessageBody": hex.EncodeToString(sum[:])})
	case "ssm":
		w.Header().Set("Content-Type", json11)
		_, _ = io.WriteString(w, `{"Parameters":[]}`)
	case "ses":
		w.Header().Set("Content-Type", restJSON)
		_, _ = io.WriteString(w, `{"MessageId":"ses-1"}`)
	case "scheduler":
		w.Header().Set("Content-Type", restJSON)
		_, _ = io.WriteString(w, `{}`)
	default:
		http.Error(w, "unknown call", http.StatusBadRequest)
	}
}

// calls are one call per service through the real SDK clients.
var calls = []struct {
	service, op string
	do          func(ctx context.Context, cfg aws.Config) error
}{
	{"dynamodb", "PutItem", func(ctx context.Context, cfg aws.Config) error {
		_, err := dynamodb.NewFromConfig(cfg).PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("t"),
			Item: map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: "job-7"}}})
		return err
	}},
	{"sqs", "SendMessage", func(ctx context.Context, cfg aws.Config) error {
		_, err := sqs.NewFromConfig(cfg).SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String("http://q/1/q"), MessageBody: aws.String("job-7")})
		return err
	}},
	{"ssm", "GetParametersByPath", func(ctx context.Context, cfg aws.Config) error {
		_, err := ssm.NewFromConfig(cfg).GetParametersByPath(ctx, &ssm.GetParametersByPathInput{Path: aws.String("/job-7")})
		return err
	}},
	{"ses", "SendEmail", func(ctx context.Context, cfg aws.Config) error {
		_, err := sesv2.NewFromConfig(cfg).SendEmail(ctx, &sesv2.SendEmailInput{FromEmailAddress: aws.String("a@example.com"),
			Destination: &sestypes.Destination{ToAddresses: []string{"b@example.com"}},
			Content:     &sestypes.EmailContent{Simple: &sestypes.Message{Subject: &sestypes.Content{Data: aws.String("job-7")}, Body: &sestypes.Body{Text: &sestypes.Content{Data: aws.String("hi")}}}},
		})
		return err
	}},
}

// through starts a proxy with rules in front of a fresh upstream and
// returns SDK configurations for it without retries and with the
// standard retryer.
func through(t *testing.T, rules ...Rule) (noRetry, retried aws.Config, up *upstream, in *Injector) {
	t.Helper()
	up = &upstream{calls: map[string]int{}}
	srv := httptest.NewServer(up)
	t.Cleanup(srv.Close)
	in = New(rules, 1)
	ps, err := awsproxy.Start(srv.URL, in.Hook)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ps.Close)
	noRetry = moto.Config(ps.URL, moto.Region)
	retried = noRetry
	retried.Retryer = func() aws.Retryer {
		return retry.NewStandard(func(o *retry.StandardOptions) { o.Backoff = retry.BackoffDelayerFunc(noBackoff) })
	}
	return noRetry, retried, up, in
}

func noBackoff(int, error) (time.Duration, error) { return 0, nil }

// TestWhatTheSDKSees: each fault reaches the SDK the way the real fault
// would: the error it decodes (code, HTTP status or a cut connection),
// whether it retries it, and, for a lost response, that the call was
// applied upstream all the same.
func TestWhatTheSDKSees(t *testing.T) {
	throttleCode := map[string]string{"dynamodb": "", "sqs": "ThrottlingException", "ssm": "ThrottlingException", "ses": "TooManyRequestsException"}
	for _, call := range calls {
		for _, tc := range []struct {
			kind Kind
			// check the error the SDK returns without retries
			check func(t *testing.T, err error)
			// applied: how many calls reach the upstream without retries
			applied int
		}{
			{Throttle, func(t *testing.T, err error) {
				var ae smithy.APIError
				if !errors.As(err, &ae) {
					t.Fatalf("err %v; want an API error", err)
				}
				want := throttleCode[call.service]
				if call.service == "dynamodb" {
					var pte *ddbtypes.ProvisionedThroughputExceededException
					if !errors.As(err, &pte) && ae.ErrorCode() != "ThrottlingException" {
						t.Fatalf("code %q; want ProvisionedThroughputExceededException or ThrottlingException", ae.ErrorCode())
					}
				} else if ae.ErrorCode() != want {
					t.Fatalf("code %q; want %q", ae.ErrorCode(), want)
				}
				if retry.IsErrorThrottles(retry.DefaultThrottles).IsErrorThrottle(err) != aws.TrueTernary {
					t.Fatalf("the SDK does not take %v for a throttle", err)
				}
			}, 0},
			{Error500, wantStatus(http.StatusInternalServerError), 0},
			{Error503, wantStatus(http.StatusServiceUnavailable), 0},
			{Reset, wantCut, 0},
			{Down, wantCut, 0},
			{Drop, wantCut, 1},
			{Drop500, wantStatus(http.StatusInternalServerError), 1},
		} {
			t.Run(call.service+"/"+string(tc.kind), func(t *testing.T) {
				ctx := context.Background()
				noRetry, retried, up, in := through(t, Rule{Service: call.service, Operation: "*", Kind: tc.kind, P: 1, Limit: 1})
				err := call.do(ctx, noRetry)
				if err == nil {
					t.Fatal("the call succeeded; want the fault")
				}
				tc.check(t, err)
				if got := up.count(call.op); got != tc.applied {
					t.Fatalf("upstream got %d calls; want %d", got, tc.applied)
				}
				if ev := in.Events(); len(ev) != 1 || ev[0].Kind != tc.kind || ev[0].Service != call.service || ev[0].Operation != call.op || !ev[0].Mentions("job-7") {
					t.Fatalf("events %+v; want one %s on %s.%s mentioning job-7", ev, tc.kind, call.service, call.op)
				}
				// The standard retryer retries it: with the rule spent, the
				// retry succeeds (and a lost response was applied twice).
				in2 := in.Add(Rule{Service: call.service, Operation: "*", Kind: tc.kind, P: 1, Limit: 1})
				defer in2()
				if err := call.do(ctx, retried); err != nil {
					t.Fatalf("with retries: %v; want the retry to succeed", err)
				}
				if got := up.count(call.op); got != 2*tc.applied+1 {
					t.Fatalf("upstream got %d calls in all; want %d", got, 2*tc.applied+1)
				}
			})
		}
	}
}

func wantStatus(status int) func(t *testing.T, err error) {
	return func(t *testing.T, err error) {
		t.Helper()
		var re *smithyhttp.ResponseError
		if !errors.As(err, &re) || re.HTTPStatusCode() != status {
			t.Fatalf("err %v; want HTTP %d", err, status)
		}
	}
}

func wantCut(t *testing.T, err error) {
	t.Helper()
	if !retry.IsErrorRetryables(retry.DefaultRetryables).IsErrorRetryable(err).Bool() {
		t.Fatalf("err %v; want an error the SDK retries", err)
	}
	if !strings.Contains(err.Error(), "connection reset") && !strings.Contains(err.Error(), "EOF") {
		t.Fatalf("err %v; want a cut connection", err)
	}
}

// A rule with a text matches EventBridge Scheduler's REST calls by the
// schedule their path names: the delete of one job's schedule fails, the
// delete of another's goes through.
func TestSchedulerDeleteOfOneSchedule(t *testing.T) {
	noRetry, _, up, in := through(t, Rule{Service: "scheduler", Operation: "DeleteSchedule", Contains: []string{"job-7"}, Kind: Error503, P: 1})
	del := func(name string) error {
		_, err := scheduler.NewFromConfig(noRetry).DeleteSchedule(context.Background(), &scheduler.DeleteScheduleInput{Name: aws.String(name), GroupName: aws.String("g")})
		return err
	}
	wantStatus(http.StatusServiceUnavailable)(t, del("job-7"))
	if err := del("job-8"); err != nil {
		t.Fatalf("the delete of another schedule: %v", err)
	}
	if got := up.count("DeleteSchedule"); got != 1 {
		t.Fatalf("upstream got %d deletes; want 1 (job-8's)", got)
	}
	if ev := in.Events(); len(ev) != 1 || ev[0].Operation != "DeleteSchedule" {
		t.Fatalf("events %+v; want one on DeleteSchedule", ev)
	}
}

// A delay holds the call and then forwards it.
func TestDelayForwards(t *testing.T) {
	noRetry, _, up, in := through(t, Rule{Service: "*", Operation: "*", Kind: Delay, P: 1})
	for _, call := range calls {
		if err := call.do(context.Background(), noRetry); err != nil {
			t.Fatalf("%s: %v", call.service, err)
		}
		if up.count(call.op) != 1 {
			t.Fatalf("%s reached the upstream %d times; want 1", call.op, up.count(call.op))
		}
	}
	if n := in.Counts()[Delay]; n != len(calls) {
		t.Fatalf("%d delays; want %d", n, len(calls))
	}
}

// Rules apply by service, operation, window and limit; Pause stops them;
// the same seed draws the same faults.
func TestRulesSelectCalls(t *testing.T) {
	now := time.Unix(1000, 0)
	in := New([]Rule{
		{Service: "ssm", Operation: "*", Kind: Down, P: 1, From: 10 * time.Second, Until: 20 * time.Second},
		{Service: "dynamodb", Operation: "PutItem", Kind: Drop, P: 1, Limit: 2},
		{Service: "dynamodb", Operation: "UpdateItem", Contains: []string{"markers", "DONE"}, Kind: Error500, P: 1},
	}, 7)
	in.start, in.Now = now, func() time.Time { return now }
	hit := func(svc, op string, body ...string) Kind {
		r, _, ok := in.draw(svc, op, []byte(strings.Join(body, "")))
		if !ok {
			return ""
		}
		return r.Kind
	}
	for _, tc := range []struct {
		at      time.Duration
		svc, op string
		want    Kind
	}{
		{0, "ssm", "GetParametersByPath", ""},
		{10 * time.Second, "ssm", "GetParametersByPath", Down},
		{19 * time.Second, "ssm", "GetParameter", Down},
		{20 * time.Second, "ssm", "GetParametersByPath", ""},
		{0, "dynamodb", "GetItem", ""},
		{0, "dynamodb", "PutItem", Drop},
		{0, "dynamodb", "PutItem", Drop},
		{0, "dynamodb", "PutItem", ""}, // limit 2 reached
		{0, "", "PutItem", ""},         // not an AWS call
	} {
		now = time.Unix(1000, 0).Add(tc.at)
		if got := hit(tc.svc, tc.op); got != tc.want {
			t.Errorf("at %s, %s:%s got %q; want %q", tc.at, tc.svc, tc.op, got, tc.want)
		}
	}
	// A rule with texts applies only to bodies holding every one of them.
	now = time.Unix(1000, 0)
	for body, want := range map[string]Kind{
		`{"TableName":"markers","Item":{"state":{"S":"DONE"}}}`:   Error500,
		`{"TableName":"markers","Item":{"state":{"S":"LEASED"}}}`: "",
		`{"TableName":"jobs","Item":{"state":{"S":"DONE"}}}`:      "",
	} {
		if got := hit("dynamodb", "UpdateItem", body); got != want {
			t.Errorf("UpdateItem %s got %q; want %q", body, got, want)
		}
	}
	now = time.Unix(1015, 0)
	in.Pause()
	if got := hit("ssm", "GetParametersByPath"); got != "" {
		t.Errorf("paused: %q; want no fault", got)
	}
	in.Resume()
	if got := hit("ssm", "GetParametersByPath"); got != Down {
		t.Errorf("resumed: %q; want down", got)
	}

	draws := func() []bool {
		in := New([]Rule{{Service: "*", Operation: "*", Kind: Throttle, P: 0.3}}, 42)
		out := make([]bool, 50)
		for i := range out {
			_, _, out[i] = in.draw("sqs", "SendMessage", nil)
		}
		return out
	}
	if a, b := draws(), draws(); !slices.Equal(a, b) || !slices.Contains(a, true) || !slices.Contains(a, false) {
		t.Fatalf("two injectors with one seed drew %v and %v; want the same mix", a, b)
	}
}

// A rated throttle lets RATE calls a second through (a bucket of RATE
// calls, refilled continuously) and throttles the rest; other services'
// calls are not counted.
func TestRatedThrottle(t *testing.T) {
	start := time.Unix(1000, 0)
	now := start
	in := New([]Rule{{Service: "ses", Operation: "SendEmail", Kind: Throttle, P: 1, Rate: 2}}, 1)
	in.start, in.Now = start, func() time.Time { return now }
	passed := func(n int) int {
		ok := 0
		for range n {
			if _, _, hit := in.draw("ses", "SendEmail", nil); !hit {
				ok++
			}
		}
		return ok
	}
	for _, tc := range []struct {
		at    time.Duration
		calls int
		want  int // calls that go through
	}{
		{0, 10, 2},                      // the full bucket: 2
		{100 * time.Millisecond, 5, 0},  // a fifth of a token
		{500 * time.Millisecond, 5, 1},  // one token refilled
		{1500 * time.Millisecond, 5, 2}, // two more
		{10 * time.Second, 10, 2},       // idle: the bucket holds no more than 2
	} {
		now = start.Add(tc.at)
		if got := passed(tc.calls); got != tc.want {
			t.Errorf("at %v: %d of %d calls went through, want %d", tc.at, got, tc.calls, tc.want)
		}
	}
	if _, _, hit := in.draw("ses", "GetAccount", nil); hit {
		t.Error("a call the rule does not match was throttled")
	}
	if n := in.Counts()[Throttle]; n != 0 {
		t.Errorf("draw recorded %d events; only the hook records", n)
	}
}
