package ssmswitch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	"github.com/aws/aws-sdk-go-v2/service/ssm/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/engine/enginetest"
)

// fakeSSM is an in-memory parameter store behind our SSMAPI port.
type fakeSSM struct {
	mu       sync.Mutex
	params   map[string]string
	err      error
	calls    int
	pageSize int
}

func (f *fakeSSM) GetParametersByPath(_ context.Context, in *ssm.GetParametersByPathInput, _ ...func(*ssm.Options)) (*ssm.GetParametersByPathOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.err != nil {
		return nil, f.err
	}
	var names []string
	for n := range f.params {
		if strings.HasPrefix(n, aws.ToString(in.Path)+"/") {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	start := 0
	if in.NextToken != nil {
		fmt.Sscan(*in.NextToken, &start)
	}
	size := f.pageSize
	if size == 0 {
		size = 10
	}
	out := &ssm.GetParametersByPathOutput{}
	for _, n := range names[start:min(start+size, len(names))] {
		out.Parameters = append(out.Parameters, types.Parameter{Name: aws.String(n), Value: aws.String(f.params[n])})
	}
	if start+size < len(names) {
		out.NextToken = aws.String(fmt.Sprint(start + size))
	}
	return out, nil
}

const (
	digest  = "email.partner-digest.v1"
	welcome = "email.welcome.v1"
)

func known(n string) bool { return n == digest || n == welcome }

type clock struct{ t time.Time }

func (c *clock) Now() time.Time          { return c.t }
func (c *clock) Advance(d time.Duration) { c.t = c.t.Add(d) }

// param is the parameter of typ's switch in stage "test".
func param(typ string) string { return "/runstwice/test/toggles/" + typ }

// sourceOf returns a source of stage "test" on a fake SSM that holds value
// for typ's switch.
func sourceOf(typ, value string) (*Source, *clock, *fakeSSM) {
	f := &fakeSSM{params: map[string]string{param(typ): value}}
	s, c, _ := newSource(f)
	return s, c, f
}

func newSource(f *fakeSSM) (*Source, *clock, *bytes.Buffer) {
	c := &clock{t: time.Unix(1_800_000_000, 0)}
	var metrics bytes.Buffer
	s := New(f, "/runstwice/test/toggles", known)
	s.Now = c.Now
	s.Metrics = engine.NewMetrics(&metrics, "runstwice")
	s.Logger = engine.NewLogger(&bytes.Buffer{}, "error")
	return s, c, &metrics
}

func TestParameterName(t *testing.T) {
	if got := "/runstwice/test/toggles/" + digest; got != "/runstwice/test/toggles/email.partner-digest.v1" {
		t.Fatalf("ParameterName = %q", got)
	}
}

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		raw         string
		enabled, ok bool
	}{
		{"true", true, true}, {"TRUE", true, true}, {" on ", true, true}, {"1", true, true}, {"On", true, true},
		{"false", false, true}, {"Off", false, true}, {"0", false, true}, {"FALSE\n", false, true},
		{"", false, false}, {"ture", false, false}, {"2", false, false}, {"enabled please", false, false},
	} {
		enabled, ok := Parse(tc.raw)
		if enabled != tc.enabled || ok != tc.ok {
			t.Errorf("Parse(%q) = %v, %v; want %v, %v", tc.raw, enabled, ok, tc.enabled, tc.ok)
		}
	}
}

// TestFailClosed: a fail-closed type (default false) never starts by accident.
func TestFailClosed(t *testing.T) {
	for _, tc := range []struct {
		name   string
		params map[string]string
		err    error
		want   bool
	}{
		{"missing parameter", map[string]string{}, nil, false},
		{"typo in the name", map[string]string{param("email.partner-digets.v1"): "true"}, nil, false},
		{"garbage value", map[string]string{param(digest): "yes!"}, nil, false},
		{"empty value", map[string]string{param(digest): ""}, nil, false},
		{"SSM unreachable", map[string]string{param(digest): "true"}, errors.New("dial tcp: connection refused"), false},
		{"explicitly off", map[string]string{param(digest): "off"}, nil, false},
		{"explicitly on", map[string]string{param(digest): "ON"}, nil, true},
		{"other stage's toggle", map[string]string{"/runstwice/prod/toggles/" + digest: "true"}, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _, _ := newSource(&fakeSSM{params: tc.params, err: tc.err})
			if got := s.IsJobEnabled(context.Background(), digest, false); got != tc.want {
				t.Fatalf("IsJobEnabled = %v; want %v", got, tc.want)
			}
		})
	}
}

func TestFailOpenDefaultStaysOnWhenUnreadable(t *testing.T) {
	s, _, _ := sourceOf(welcome, "maybe")
	if !s.IsJobEnabled(context.Background(), welcome, true) {
		t.Fatal("unreadable value must fall back to the default (true)")
	}
}

func TestUnknownToggleCounted(t *testing.T) {
	f := &fakeSSM{params: map[string]string{param("email.partner-digets.v1"): "true"}}
	s, _, metrics := newSource(f)
	s.IsJobEnabled(context.Background(), digest, false)
	s.Metrics.Flush()
	if enginetest.MetricCount(metrics.String(), "email.partner-digets.v1", engine.UnknownToggle) != 1 {
		t.Fatalf("want an UnknownToggle metric for the typo; got %s", metrics.String())
	}
}

func TestCachedForTTL(t *testing.T) {
	s, c, f := sourceOf(welcome, "true")
	ctx := context.Background()
	for range 1000 {
		if !s.IsJobEnabled(ctx, welcome, false) {
			t.Fatal("want enabled")
		}
	}
	if f.calls != 1 {
		t.Fatalf("%d SSM calls for 1000 checks within the TTL; want 1", f.calls)
	}
	f.params[param(welcome)] = "false"
	c.Advance(DefaultTTL - time.Second)
	if !s.IsJobEnabled(ctx, welcome, false) {
		t.Fatal("flip seen before the TTL passed")
	}
	c.Advance(2 * time.Second)
	if s.IsJobEnabled(ctx, welcome, true) {
		t.Fatal("flip not seen after the TTL passed")
	}
	if f.calls != 2 {
		t.Fatalf("%d SSM calls; want 2 (one per TTL)", f.calls)
	}
}

func TestSSMErrorKeepsLastValues(t *testing.T) {
	s, c, f := sourceOf(digest, "true")
	ctx := context.Background()
	if !s.IsJobEnabled(ctx, digest, false) {
		t.Fatal("want enabled")
	}
	f.err = errors.New("ThrottlingException")
	c.Advance(DefaultTTL + time.Second)
	if !s.IsJobEnabled(ctx, digest, false) {
		t.Fatal("an SSM error must keep the last value read")
	}
	// Errors do not turn every check into a call: one retry per TTL.
	for range 100 {
		s.IsJobEnabled(ctx, digest, false)
	}
	if f.calls != 2 {
		t.Fatalf("%d SSM calls while failing; want 2", f.calls)
	}
}

func TestPagination(t *testing.T) {
	params := map[string]string{}
	for i := range 25 {
		params[param(fmt.Sprintf("x%02d.v1", i))] = "true"
	}
	params[param(digest)] = "on"
	f := &fakeSSM{params: params, pageSize: 10}
	s, _, _ := newSource(f)
	if !s.IsJobEnabled(context.Background(), digest, false) {
		t.Fatal("value on the last page not read")
	}
	if f.calls != 3 {
		t.Fatalf("%d calls for 26 parameters at 10 a page; want 3", f.calls)
	}
}

func TestUnreadableValueFlaggedOncePerRefresh(t *testing.T) {
	s, _, _ := sourceOf(digest, "yes!")
	var logs bytes.Buffer
	s.Logger = engine.NewLogger(&logs, "warn")
	for range 100 {
		if s.IsJobEnabled(context.Background(), digest, false) {
			t.Fatal("unreadable value enabled a fail-closed type")
		}
	}
	if n := strings.Count(logs.String(), "toggle value unreadable"); n != 1 {
		t.Fatalf("flagged %d times in one TTL; want once:\n%s", n, logs.String())
	}
}

// countWhileOff checks the fail-closed digest type n times, each of which
// must find it off, flushes the metrics and returns metric's count for typ.
func countWhileOff(t *testing.T, s *Source, metrics *bytes.Buffer, n int, typ, metric string) int {
	t.Helper()
	for range n {
		if s.IsJobEnabled(context.Background(), digest, false) {
			t.Fatal("a fail-closed type ran although its switch could not be read")
		}
	}
	s.Metrics.Flush()
	return enginetest.MetricCount(metrics.String(), typ, metric)
}

func TestUnreadableToggleCountedOncePerRefresh(t *testing.T) {
	f := &fakeSSM{params: map[string]string{
		param(digest):  `{"enabled":true,"untill":"2030-01-01T00:00:00Z"}`,
		param(welcome): "off",
	}}
	s, c, metrics := newSource(f)
	ctx := context.Background()
	if n := countWhileOff(t, s, metrics, 50, digest, engine.UnreadableToggle); n != 1 {
		t.Fatalf("UnreadableToggle = %d after 50 checks in one TTL; want 1:\n%s", n, metrics)
	}
	if n := enginetest.MetricCount(metrics.String(), welcome, engine.UnreadableToggle); n != 0 {
		t.Fatalf("a readable value counted as unreadable:\n%s", metrics)
	}
	metrics.Reset()
	c.Advance(DefaultTTL)
	s.IsJobEnabled(ctx, digest, false)
	s.Metrics.Flush()
	if n := enginetest.MetricCount(metrics.String(), digest, engine.UnreadableToggle); n != 1 {
		t.Fatalf("UnreadableToggle = %d after the next refresh; want 1 again:\n%s", n, metrics)
	}
}

// TestTimeBoxedSwitchReverts: past "until" a switch goes back to the type's
// registered default by itself, between two refreshes as well as after one,
// and never to the opposite of what was set.
func TestTimeBoxedSwitchReverts(t *testing.T) {
	for _, tc := range []struct {
		name string
		typ  string
		def  bool
		set  bool
	}{
		{"fail-open type switched off for 2s comes back on", welcome, true, false},
		{"fail-closed type switched on for 2s goes back off", digest, false, true},
		{"fail-closed type switched off for 2s stays off", digest, false, false},
		{"fail-open type switched on for 2s stays on", welcome, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeSSM{}
			s, c, _ := newSource(f)
			s.TTL = 5 * time.Second
			v, err := Value{Enabled: tc.set, Until: c.Now().Add(2 * time.Second), Reason: "test"}.Encode()
			if err != nil {
				t.Fatal(err)
			}
			f.params = map[string]string{param(tc.typ): v}
			ctx := context.Background()
			if got := s.IsJobEnabled(ctx, tc.typ, tc.def); got != tc.set {
				t.Fatalf("during the time box: %v; want %v", got, tc.set)
			}
			c.Advance(1999 * time.Millisecond)
			if got := s.IsJobEnabled(ctx, tc.typ, tc.def); got != tc.set {
				t.Fatalf("just before until: %v; want %v", got, tc.set)
			}
			c.Advance(time.Millisecond)
			if got := s.IsJobEnabled(ctx, tc.typ, tc.def); got != tc.def {
				t.Fatalf("at until (cached value, no refresh yet): %v; want the default %v", got, tc.def)
			}
			c.Advance(time.Minute) // refreshed: the stored value is still the expired one
			if got := s.IsJobEnabled(ctx, tc.typ, tc.def); got != tc.def {
				t.Fatalf("after a refresh: %v; want the default %v", got, tc.def)
			}
			if f.calls != 2 {
				t.Fatalf("%d SSM calls; want 2 (the expiry needs no extra read)", f.calls)
			}
		})
	}
}

// TestExpiredValueReadBeforeOutageReverts: a time-boxed value read before SSM
// became unreachable still expires on time: the last values read are kept,
// and their expiry is judged at each decision.
func TestExpiredValueReadBeforeOutageReverts(t *testing.T) {
	f := &fakeSSM{}
	s, c, _ := newSource(f)
	v, _ := Value{Enabled: true, Until: c.Now().Add(2 * time.Second), Reason: "backfill"}.Encode()
	f.params = map[string]string{param(digest): v}
	ctx := context.Background()
	if !s.IsJobEnabled(ctx, digest, false) {
		t.Fatal("fail-closed type not on during its time box")
	}
	f.err = errors.New("dial tcp: i/o timeout")
	c.Advance(DefaultTTL + time.Second) // a refresh fails: the last values stay
	if s.IsJobEnabled(ctx, digest, false) {
		t.Fatal("an expired value kept a fail-closed type on through an SSM outage")
	}
	if f.calls != 2 {
		t.Fatalf("%d SSM calls; want 2 (the failed refresh included)", f.calls)
	}
}

func TestParseValue(t *testing.T) {
	until := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		raw  string
		want Value
		ok   bool
	}{
		{"off", Value{}, true},
		{" TRUE ", Value{Enabled: true}, true},
		{`{"enabled":false,"until":"2026-12-01T10:00:00Z","reason":"SES incident 4711"}`, Value{Until: until, Reason: "SES incident 4711"}, true},
		{`{"enabled":true,"until":"2026-12-01T11:00:00+01:00"}`, Value{Enabled: true, Until: until}, true},
		{` {"enabled":true} `, Value{Enabled: true}, true},
		{`{"enabled":"false"}`, Value{}, false},
		{`{"until":"2026-12-01T10:00:00Z"}`, Value{}, false},
		{`{"enabled":false,"until":"tomorrow"}`, Value{}, false},
		{`{"enabled":false,"untill":"2026-12-01T10:00:00Z"}`, Value{}, false},
		{`{"enabled":false} {}`, Value{}, false},
		{`{"enabled":false`, Value{}, false},
		{"maybe", Value{}, false},
	} {
		got, err := ParseValue(tc.raw)
		if (err == nil) != tc.ok || (tc.ok && (got.Enabled != tc.want.Enabled || !got.Until.Equal(tc.want.Until) || got.Reason != tc.want.Reason)) {
			t.Errorf("ParseValue(%q) = %+v, %v; want %+v, ok=%v", tc.raw, got, err, tc.want, tc.ok)
		}
		if err != nil && !errors.Is(err, ErrUnreadable) {
			t.Errorf("ParseValue(%q) error %v does not match ErrUnreadable", tc.raw, err)
		}
	}
}

func TestEncodeRoundTrip(t *testing.T) {
	for _, v := range []Value{
		{Enabled: true},
		{Enabled: false},
		{Enabled: false, Reason: `quotes " and <html> & ünïcode`},
		{Enabled: true, Until: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC), Reason: "SES incident 4711"},
	} {
		raw, err := v.Encode()
		if err != nil {
			t.Fatal(err)
		}
		back, err := ParseValue(raw)
		if err != nil || back.Enabled != v.Enabled || !back.Until.Equal(v.Until) || back.Reason != v.Reason {
			t.Errorf("%+v -> %q -> %+v, %v", v, raw, back, err)
		}
	}
	if raw, _ := (Value{Enabled: true}).Encode(); raw != "on" {
		t.Errorf("a plain value encodes as %q; want on", raw)
	}
	if _, err := (Value{Reason: strings.Repeat("x", MaxReason+1)}).Encode(); err == nil {
		t.Error("an overlong reason was accepted")
	}
}

// TestToggleReadFailedCounted: a read of the switches that fails, for any
// reason, is counted as ToggleReadFailed under the failure's name, once per
// refresh, while the type keeps its default (fail-closed stays off); a read
// that works counts nothing.
func TestToggleReadFailedCounted(t *testing.T) {
	op := func(err error) error {
		return &smithy.OperationError{ServiceID: "SSM", OperationName: "GetParametersByPath", Err: err}
	}
	for _, tc := range []struct {
		name string
		err  error
		kind string
	}{
		{"access denied", op(&smithy.GenericAPIError{Code: "AccessDeniedException", Message: "not authorized to perform ssm:GetParametersByPath"}), "AccessDeniedException"},
		{"throttled", op(&retry.MaxAttemptsError{Attempt: 3, Err: &smithy.GenericAPIError{Code: "ThrottlingException", Message: "Rate exceeded"}}), "ThrottlingException"},
		{"unreachable", op(&smithyhttp.RequestSendError{Err: &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}}), "unreachable"},
		{"timed out", op(fmt.Errorf("request: %w", context.DeadlineExceeded)), "unreachable"},
		{"anything else", errors.New("toggle: more than 100 pages"), "other"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeSSM{params: map[string]string{param(digest): "true"}, err: tc.err}
			s, c, metrics := newSource(f)
			ctx := context.Background()
			if n := countWhileOff(t, s, metrics, 20, tc.kind, engine.ToggleReadFailed); n != 1 {
				t.Fatalf("ToggleReadFailed{type=%s} = %d after 20 checks in one TTL; want 1:\n%s", tc.kind, n, metrics)
			}
			metrics.Reset()
			c.Advance(DefaultTTL)
			s.IsJobEnabled(ctx, digest, false)
			s.Metrics.Flush()
			if n := enginetest.MetricCount(metrics.String(), tc.kind, engine.ToggleReadFailed); n != 1 {
				t.Fatalf("ToggleReadFailed = %d after the next failed refresh; want 1 again:\n%s", n, metrics)
			}
			metrics.Reset()
			f.err = nil
			c.Advance(DefaultTTL)
			if !s.IsJobEnabled(ctx, digest, false) {
				t.Fatal("the switch read once SSM answers again is not used")
			}
			s.Metrics.Flush()
			if strings.Contains(metrics.String(), engine.ToggleReadFailed) {
				t.Fatalf("a read that worked counted ToggleReadFailed:\n%s", metrics)
			}
		})
	}
}
