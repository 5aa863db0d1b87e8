package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/runstwice/runstwice/aws/sqsqueue"
	"github.com/runstwice/runstwice/internal/deadletter"
)

// runOffline runs jobctl with an environment that has no AWS settings at
// all: no credentials, no profile, no endpoint, an empty home.
func runOffline(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	home := t.TempDir()
	for _, k := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_DEFAULT_PROFILE",
		"AWS_ENDPOINT_URL", "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_EC2_METADATA_DISABLED", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
		"AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_WEB_IDENTITY_TOKEN_FILE", "STAGE", "RUNSTWICE_STAGE"} {
		t.Setenv(k, "")
	}
	t.Setenv("HOME", home)
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(home, "config"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(home, "credentials"))
	t.Chdir(home) // no .devstack here or above
	// A hang (the EC2 metadata service) would end at this deadline with a
	// different message, and fail the test.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var out, errOut bytes.Buffer
	code = run(ctx, args, &out, &errOut, os.Getenv)
	return code, out.String(), errOut.String()
}

func TestHelpOnStdout(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"-h"}, {"help"}, {"help", "dlq"}, {"dlq", "--help"},
		{"dlq", "redrive", "--help"}, {"toggles", "set", "-h"}, {"jobs", "list", "--help", "--json"}} {
		code, stdout, stderr := runOffline(t, args...)
		if code != exitOK || stderr != "" || !strings.Contains(stdout, "usage: jobctl") {
			t.Errorf("jobctl %q: exit %d, stdout %q, stderr %q; want help on stdout, exit 0", args, code, stdout, stderr)
		}
	}
	_, stdout, _ := runOffline(t, "dlq", "redrive", "--help")
	if !strings.Contains(stdout, "--rate") || strings.Contains(stdout, "toggles set") {
		t.Errorf("dlq redrive --help is not about dlq redrive:\n%s", stdout)
	}
	_, stdout, _ = runOffline(t, "--help")
	for _, want := range []string{"exit codes", "4 refused", "toggles set", "dlq drop", "jobs list"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("--help lacks %q", want)
		}
	}
}

// TestUsageErrorIsOneLine: a usage error is one line on stderr with the
// synopsis of the command, exit 2, and never waits for AWS.
func TestUsageErrorIsOneLine(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "no command given"},
		{[]string{"frobnicate"}, "unknown command"},
		{[]string{"dlq"}, "unknown command"},
		{[]string{"dlq", "redrive"}, "jobctl dlq redrive ID|--all"},
		{[]string{"dlq", "redrive", "id-1", "--type", "email.welcome.v1"}, "with an ID they have no use"},
		{[]string{"dlq", "redrive", "--all", "--rate", "fast"}, "--rate"},
		{[]string{"dlq", "list", "--type", "email.welcom.v1"}, "did you mean email.welcome.v1"},
		{[]string{"dlq", "list", "--since", "yesterday"}, "--since"},
		{[]string{"dlq", "drop", "--all", "--bogus"}, "unknown flag --bogus"},
		{[]string{"toggles", "set", "email.welcome.v1"}, "toggles set TYPE on|off"},
		{[]string{"toggles", "set", "email.welcome.v1", "maybe"}, "not on or off"},
		{[]string{"toggles", "set", "email.welcome.v1", "off", "--for", "-5m"}, "positive duration"},
		{[]string{"jobs", "list", "--state", "Done"}, "not a job state"},
		{[]string{"jobs", "get"}, "jobs get ID"},
		{[]string{"--stage", "bad stage!", "toggles", "list"}, "invalid stage"},
		{[]string{"users", "set-email", "u-bad"}, "users set-email USER_ID ADDRESS"},
		{[]string{"users", "set-email", "u-bad", "Bad Address <bad@example.com>"}, "not a plain address"},
		{[]string{"users", "set-email", "u-bad", "a@example.com, b@example.com"}, "not a plain address"},
		{[]string{"toggles", "list", "extra"}, `toggles list takes no arguments, got "extra"`},
		{[]string{"schedules", "list", "a", "b"}, `schedules list takes no arguments, got "a b"`},
		{[]string{"dlq", "list", "x"}, "dlq list takes no arguments"},
		{[]string{"jobs", "list", "x"}, "jobs list takes no arguments"},
		{[]string{"jobs", "get", "a", "b"}, `jobs get takes one job ID, got "a b"`},
		{[]string{"jobs", "trace"}, "jobs trace takes one job ID"},
		{[]string{"schedules", "trigger"}, "schedules trigger takes one schedule name"},
		{[]string{"demo", "signup", "u-1"}, "demo signup takes a user id and an address"},
		{[]string{"demo", "signup", "u-1", "Ada <ada@example.com>"}, "demo signup: \"Ada <ada@example.com>\" is not a plain address"},
	} {
		code, stdout, stderr := runOffline(t, tc.args...)
		if code != exitUsage || stdout != "" || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, tc.want) {
			t.Errorf("jobctl %q: exit %d, stderr %q; want exit 2 and one line with %q", tc.args, code, stderr, tc.want)
		}
	}
}

// flagsIn returns the --flags a text names, in order, each once.
func flagsIn(text string) []string {
	var out []string
	for _, f := range regexp.MustCompile(`--[a-z][a-z-]*`).FindAllString(text, -1) {
		if !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	return out
}

// Every flag of `jobctl enqueue` is explained by its help, on a line of
// its own.
func TestEnqueueHelpExplainsEveryFlag(t *testing.T) {
	code, stdout, _ := runOffline(t, "enqueue", "--help")
	flags := flagsIn(enqueueUsage)
	if code != exitOK || len(flags) < 6 {
		t.Fatalf("enqueue --help: exit %d, flags of its usage %v", code, flags)
	}
	for _, f := range flags {
		line := regexp.MustCompile(`(?m)^\s+` + f + ` \S+\s{2,}\S.*$`).FindString(stdout)
		if line == "" {
			t.Errorf("enqueue --help does not explain %s:\n%s", f, stdout)
		}
	}
	if strings.Contains(stdout, "enqueue.go") {
		t.Errorf("enqueue --help sends the reader to the source:\n%s", stdout)
	}
}

// The synopsis of the command line names every global flag the help lists,
// in --help and in a usage error alike.
func TestUsageLineNamesEveryGlobalFlag(t *testing.T) {
	var global []string // the flags the help's "global flags" lines start with
	for _, m := range regexp.MustCompile(`(?m)^  (?:-h, )?(--[a-z-]+)`).FindAllStringSubmatch(globalHelp, -1) {
		global = append(global, m[1])
	}
	if !slices.Contains(global, "--endpoint") {
		t.Fatalf("global flags %v lack --endpoint", global)
	}
	_, help, _ := runOffline(t, "--help")
	_, _, usageErr := runOffline(t, "frobnicate")
	for _, f := range global {
		if f == "--help" {
			continue
		}
		for name, text := range map[string]string{"--help": help, "a usage error": usageErr} {
			line := regexp.MustCompile(`usage: jobctl [^\n]*`).FindString(text)
			if !strings.Contains(line, "["+f+" ") && !strings.Contains(line, "["+f+"]") {
				t.Errorf("the usage line of %s leaves out %s: %q", name, f, line)
			}
		}
	}
}

func TestLettersCounted(t *testing.T) {
	for _, tc := range []struct {
		n    int
		want string
	}{{0, "0 dead letters"}, {1, "1 dead letter"}, {2, "2 dead letters"}, {11, "11 dead letters"}} {
		if got := letters(tc.n, "dead letter"); got != tc.want {
			t.Errorf("letters(%d) = %q; want %q", tc.n, got, tc.want)
		}
	}
}

func TestRefusedUnknownType(t *testing.T) {
	code, _, stderr := runOffline(t, "toggles", "set", "email.partner-digets.v1", "on")
	if code != exitRefused || !strings.Contains(stderr, "did you mean email.partner-digest.v1") {
		t.Fatalf("exit %d, stderr %q; want refused (4) with a suggestion", code, stderr)
	}
}

// TestNoCredentials: without credentials jobctl says so, at once: the EC2
// metadata service is never waited for.
func TestNoCredentials(t *testing.T) {
	code, _, stderr := runOffline(t, "--stage", "prod", "toggles", "list")
	if code != exitError || !strings.Contains(stderr, "no AWS credentials") || !strings.Contains(stderr, "AWS_PROFILE") {
		t.Fatalf("exit %d, stderr %q; want exit 1 and a no-credentials message", code, stderr)
	}
	if strings.Contains(stderr, "deadline exceeded") {
		t.Fatalf("jobctl waited for something until the test's deadline: %s", stderr)
	}
}

// TestNoEndpoint: stage local with no endpoint and no running local stack
// says what to do; a stack.json whose process is gone is not used.
func TestNoEndpoint(t *testing.T) {
	code, _, stderr := runOffline(t, "dlq", "list")
	if code != exitError || !strings.Contains(stderr, "no endpoint") || !strings.Contains(stderr, "make run") {
		t.Fatalf("exit %d, stderr %q; want exit 1 and a no-endpoint message", code, stderr)
	}
	dir, _ := os.Getwd()
	if err := os.MkdirAll(filepath.Join(dir, ".devstack"), 0o755); err != nil {
		t.Fatal(err)
	}
	stale := `{"endpoint":"http://127.0.0.1:1","apiUrl":"http://127.0.0.1:2","stage":"local","region":"us-east-1","pid":2147483000}`
	if err := os.WriteFile(filepath.Join(dir, ".devstack", "stack.json"), []byte(stale), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	code = run(context.Background(), []string{"dlq", "list"}, &out, &errOut, os.Getenv)
	if code != exitError || !strings.Contains(errOut.String(), "no endpoint") {
		t.Fatalf("with a stale stack.json: exit %d, stderr %q; want the no-endpoint message", code, errOut.String())
	}
}

// fakeClock advances only when slept on, or when a test says so.
type fakeClock struct{ t time.Time }

func (c *fakeClock) Now() time.Time { return c.t }
func (c *fakeClock) Sleep(_ context.Context, d time.Duration) error {
	c.t = c.t.Add(d)
	return nil
}

// countingSender records when each send happened, on the fake clock, and
// takes cost of (fake) time per send.
type countingSender struct {
	clk   *fakeClock
	cost  time.Duration
	times []time.Time
}

func (s *countingSender) Send(context.Context, sqsqueue.Message) error {
	s.times = append(s.times, s.clk.Now())
	s.clk.t = s.clk.t.Add(s.cost)
	return nil
}

// TestRateHolds: the sends of a paced redrive keep to --rate within 20%, over
// the whole run and over every window of a second, whatever each send costs
// below the interval, and an idle pause saves up no burst.
func TestRateHolds(t *testing.T) {
	for _, tc := range []struct {
		rate string
		cost time.Duration
		n    int
	}{
		{"10/s", 0, 50},
		{"10/s", 30 * time.Millisecond, 50},
		{"50/s", 5 * time.Millisecond, 200},
		{"120/m", 100 * time.Millisecond, 20},
		{"3.5", 0, 30},
	} {
		t.Run(fmt.Sprintf("%s_cost_%s", tc.rate, tc.cost), func(t *testing.T) {
			perSecond, err := parseRate(tc.rate)
			if err != nil {
				t.Fatal(err)
			}
			clk := &fakeClock{t: time.Unix(1_800_000_000, 0)}
			sink := &countingSender{clk: clk, cost: tc.cost}
			paced := pacedSender{next: sink, limiter: newLimiter(perSecond, clk)}
			for i := range tc.n {
				if i == tc.n/2 {
					clk.t = clk.t.Add(10 * time.Second) // an idle pause mid-run
				}
				if err := paced.Send(context.Background(), sqsqueue.Message{}); err != nil {
					t.Fatal(err)
				}
			}
			first, last := sink.times[0], sink.times[len(sink.times)-1]
			elapsed := last.Sub(first) - 10*time.Second
			measured := float64(tc.n-2) / elapsed.Seconds() // n sends, two runs of intervals
			if measured > perSecond*1.2 || measured < perSecond*0.8 {
				t.Fatalf("measured %.2f sends/s; want %.2f ± 20%%", measured, perSecond)
			}
			// No window of one second (after the pause as well) holds more than
			// the rate allows, rounded up.
			limit := int(perSecond*1.2) + 1
			for i := range sink.times {
				j := i
				for j < len(sink.times) && sink.times[j].Sub(sink.times[i]) < time.Second {
					j++
				}
				if j-i > limit {
					t.Fatalf("%d sends within one second from send %d; want at most %d", j-i, i, limit)
				}
			}
			t.Logf("%d sends at %s: %.2f/s measured on the fake clock", tc.n, tc.rate, measured)
		})
	}
	if l := newLimiter(0, &fakeClock{}); l != nil {
		t.Fatal("rate 0 must mean no limit")
	}
	for _, bad := range []string{"", "fast", "-1/s", "10/h", "1e9"} {
		if _, err := parseRate(bad); err == nil {
			t.Errorf("parseRate(%q) accepted", bad)
		}
	}
}

// TestProgress: on a terminal the line is redrawn; off a terminal a short
// run prints nothing and a long one a line now and then.
func TestProgress(t *testing.T) {
	// run reports n steps, step apart on a fake clock, and returns the output.
	run := func(terminal bool, n int, step time.Duration) string {
		var out bytes.Buffer
		clk := &fakeClock{t: time.Unix(0, 0)}
		p := newProgress(&out, terminal, clk, "redriving", n)
		for i := 1; i <= n; i++ {
			clk.t = clk.t.Add(step)
			p.Update(i, map[deadletter.Outcome]int{deadletter.Redrove: 1})
		}
		return out.String()
	}
	if tty := run(true, 3, time.Second); !strings.Contains(tty, "\r") || !strings.Contains(tty, "redriving 3/3") || !strings.HasSuffix(tty, "\n") {
		t.Fatalf("terminal progress %q", tty)
	}
	if quiet := run(false, 100, 10*time.Millisecond); quiet != "" {
		t.Fatalf("a one-second run off a terminal printed %q", quiet)
	}
	long := run(false, 100, 500*time.Millisecond)
	lines := strings.Count(long, "\n")
	if lines < 3 || lines > 6 || !strings.Contains(long, "redriving 100/100") || strings.Contains(long, "\r") {
		t.Fatalf("a 50-second run off a terminal printed %d lines:\n%s", lines, long)
	}
}

func TestParseSince(t *testing.T) {
	now := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	a := &app{now: func() time.Time { return now }}
	for in, want := range map[string]time.Time{
		"2h":                   now.Add(-2 * time.Hour),
		"3d":                   now.Add(-72 * time.Hour),
		"90s":                  now.Add(-90 * time.Second),
		"2026-10-31T00:00:00Z": time.Date(2026, 10, 31, 0, 0, 0, 0, time.UTC),
	} {
		got, err := a.parseSince(in)
		if err != nil || !got.Equal(want) {
			t.Errorf("parseSince(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "yesterday", "-2h", "0s"} {
		if _, err := a.parseSince(bad); err == nil {
			t.Errorf("parseSince(%q) accepted", bad)
		}
	}
}
