package envvar

import (
	"strings"
	"testing"
	"time"

	"github.com/runstwice/runstwice/internal/contract"
)

func TestEnv(t *testing.T) {
	vars := map[string]string{
		"QUEUE_URL_CRITICAL": "http://q/c", "QUEUE_URL_DEFAULT": "http://q/d", "PARK_DELAY": "60", "TOGGLE_TTL": "5s", "BAD_INT": "x",
	}
	e := New(func(k string) string { return vars[k] })
	urls := e.QueueURLs()
	if urls[string(contract.QueueCritical)] != "http://q/c" || urls[string(contract.QueueDefault)] != "http://q/d" {
		t.Fatalf("urls %v", urls)
	}
	if d := e.Seconds("PARK_DELAY", 0); d != time.Minute {
		t.Fatalf("park delay %v", d)
	}
	if d := e.Duration("TOGGLE_TTL", 0); d != 5*time.Second {
		t.Fatalf("ttl %v", d)
	}
	if n := e.Int("MISSING", 5); n != 5 {
		t.Fatalf("default %d", n)
	}
	e.Int("BAD_INT", 1)
	err := e.Err()
	if err == nil || !strings.Contains(err.Error(), "QUEUE_URL_BULK") || !strings.Contains(err.Error(), "BAD_INT") {
		t.Fatalf("err %v; want every problem named", err)
	}
}

// Every number reader refuses a value that is not a positive number of its
// kind, names it, and returns the default.
func TestNumbersMustBePositive(t *testing.T) {
	for _, tc := range []struct {
		v    string
		read func(e *Env) any
		def  any
		want string
	}{
		{"0", func(e *Env) any { return e.Int("V", 3) }, 3, "positive integer"},
		{"x", func(e *Env) any { return e.Int("V", 3) }, 3, "positive integer"},
		{"-5", func(e *Env) any { return e.Seconds("V", time.Second) }, time.Second, "positive integer"},
		{"5s", func(e *Env) any { return e.Seconds("V", time.Second) }, time.Second, "positive integer"},
		{"0s", func(e *Env) any { return e.Duration("V", time.Minute) }, time.Minute, "positive Go duration"},
		{"5", func(e *Env) any { return e.Duration("V", time.Minute) }, time.Minute, "positive Go duration"},
	} {
		e := New(func(string) string { return tc.v })
		if got := tc.read(e); got != tc.def {
			t.Errorf("%q: got %v; want the default %v", tc.v, got, tc.def)
		}
		if err := e.Err(); err == nil || !strings.Contains(err.Error(), `V="`+tc.v+`" is not a `+tc.want) {
			t.Errorf("%q: err %v; want %q named", tc.v, err, tc.want)
		}
	}
}

// The queue ARNs (a schedule's targets) are read per queue like the URLs,
// each required.
func TestQueueARNs(t *testing.T) {
	vars := map[string]string{"QUEUE_ARN_CRITICAL": "arn:c", "QUEUE_ARN_BULK": "arn:b"}
	e := New(func(k string) string { return vars[k] })
	arns := e.QueueARNs()
	if arns[contract.QueueCritical] != "arn:c" || arns[contract.QueueBulk] != "arn:b" {
		t.Fatalf("arns %v", arns)
	}
	if err := e.Err(); err == nil || !strings.Contains(err.Error(), "QUEUE_ARN_DEFAULT") {
		t.Fatalf("err %v; want the missing QUEUE_ARN_DEFAULT named", err)
	}
}

// Bool reads "true" and "false" (a template's AllowedValues), the default
// when empty, and names anything else.
func TestBool(t *testing.T) {
	for _, tc := range []struct {
		v         string
		def, want bool
		bad       bool
	}{
		{"true", false, true, false}, {"false", true, false, false}, {"", true, true, false}, {" true ", false, true, false},
		{"yes", false, false, true}, {"TRUE", true, true, true},
	} {
		e := New(func(string) string { return tc.v })
		if got := e.Bool("V", tc.def); got != tc.want || (e.Err() != nil) != tc.bad {
			t.Errorf("%q: %v, %v; want %v, problem %v", tc.v, got, e.Err(), tc.want, tc.bad)
		}
	}
}
