//go:build integration

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/deadletter"
	"github.com/runstwice/runstwice/internal/dev/deadlettertest"
	"github.com/runstwice/runstwice/internal/dev/localapi"
	"github.com/runstwice/runstwice/internal/dev/testenv"
	"github.com/runstwice/runstwice/internal/email/users"
	"github.com/runstwice/runstwice/internal/jobs"
	"github.com/runstwice/runstwice/internal/jobs/joblist"
	"github.com/runstwice/runstwice/message"
)

// stageWorld is a stage's tables and queues on moto (deadlettertest), named
// as the template names them, so jobctl finds them by --stage alone.
type stageWorld struct {
	*deadlettertest.World
	stage string
	cli   func(args ...string) (int, string, string)
}

func newStage(t *testing.T) *stageWorld {
	t.Helper()
	w := &stageWorld{stage: strings.ToLower(testenv.Name(t, "ops"))}
	w.World = deadlettertest.New(t, stageNames(w.stage))
	jobctl := cli(t, nil)
	w.cli = func(args ...string) (int, string, string) {
		return jobctl(append([]string{"--stage", w.stage}, args...)...)
	}
	return w
}

// stageNames are the names the template gives stage's tables and queues.
func stageNames(stage string) deadlettertest.Names {
	names := conventionalNames(stage)
	return deadlettertest.Names{Jobs: names["JobsTable"], Markers: names["MarkersTable"],
		DeadLetters: names["DeadLettersTable"], QueuePrefix: "runstwice-" + stage + "-"}
}

// letter makes a failed job with a dead letter last seen at seen.
func (w *stageWorld) letter(t *testing.T, typ, key, reason string, seen time.Time) string {
	t.Helper()
	return w.Letter(t, typ, "caller-a", key, reason, seen).MessageID
}

func (w *stageWorld) queuedIDs(t *testing.T) []string {
	t.Helper()
	var ids []string
	for _, q := range contract.Queues {
		for {
			msgs := testenv.Receive(t, w.SQS, w.Queues[q].URL, 0)
			if len(msgs) == 0 {
				break
			}
			for _, m := range msgs {
				env, err := message.Decode([]byte(aws.ToString(m.Body)))
				if err != nil {
					t.Fatal(err)
				}
				ids = append(ids, env.MessageID)
			}
		}
	}
	slices.Sort(ids)
	return ids
}

func sorted(ids ...string) []string { slices.Sort(ids); return ids }

type listed struct {
	Count    int                 `json:"count"`
	ByType   map[string]int      `json:"byType"`
	ByReason map[string]int      `json:"byReason"`
	Letters  []deadletter.Record `json:"letters"`
}

type redriveOut struct {
	Counts  map[string]int        `json:"counts"`
	Results []deadletter.Redriven `json:"results"`
}

func resultIDs(rs []deadletter.Redriven, o deadletter.Outcome) []string {
	var ids []string
	for _, r := range rs {
		if r.Outcome == o {
			ids = append(ids, r.ID)
		}
	}
	slices.Sort(ids)
	return ids
}

// TestDLQFiltersSelectExactly: --type, --since and --reason select exactly
// the letters they say, in list, dry run and redrive alike; a redriven job
// reads Enqueued, the others stay Failed.
func TestDLQFiltersSelectExactly(t *testing.T) {
	w := newStage(t)
	now := time.Now()
	welcome, reset := contract.Welcome.Name, contract.PasswordReset.Name
	wBounceNew := w.letter(t, welcome, "welcome:u-1", "permanent: SES MessageRejected (bounce)", now.Add(-10*time.Minute))
	wBounceOld := w.letter(t, welcome, "welcome:u-2", "permanent: SES MessageRejected (bounce)", now.Add(-5*time.Hour))
	wMax := w.letter(t, welcome, "welcome:u-3", "exceeded maxReceiveCount (5 receives)", now.Add(-time.Minute))
	rBounce := w.letter(t, reset, "password-reset:u-4", "permanent: SES BOUNCE", now.Add(-20*time.Minute))
	rMax := w.letter(t, reset, "password-reset:u-5", "exceeded maxReceiveCount (5 receives)", now.Add(-3*time.Hour))

	for _, tc := range []struct {
		args []string
		want []string
	}{
		{nil, sorted(wBounceNew, wBounceOld, wMax, rBounce, rMax)},
		{[]string{"--type", welcome}, sorted(wBounceNew, wBounceOld, wMax)},
		{[]string{"--reason", "bounce"}, sorted(wBounceNew, wBounceOld, rBounce)},
		{[]string{"--since", "2h"}, sorted(wBounceNew, wMax, rBounce)},
		{[]string{"--type", welcome, "--reason", "BOUNCE", "--since", "2h"}, sorted(wBounceNew)},
		{[]string{"--type", deadletter.UnknownType}, nil},
	} {
		code, out, stderr := w.cli(append([]string{"dlq", "list", "--json"}, tc.args...)...)
		if code != exitOK {
			t.Fatalf("dlq list %q: exit %d %s", tc.args, code, stderr)
		}
		var got listed
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatalf("dlq list %q: %v\n%s", tc.args, err, out)
		}
		var ids []string
		for _, r := range got.Letters {
			ids = append(ids, r.ID)
		}
		slices.Sort(ids)
		if !slices.Equal(ids, tc.want) || got.Count != len(tc.want) {
			t.Errorf("dlq list %q = %v; want %v", tc.args, ids, tc.want)
		}
	}
	// Counts at the top of the table output.
	_, text, _ := w.cli("dlq", "list")
	for _, want := range []string{"5 dead letters", "BY TYPE", "3  " + welcome, "2  " + reset, "BY REASON", "2  exceeded maxReceiveCount (5 receives)"} {
		if !strings.Contains(text, want) {
			t.Errorf("dlq list output lacks %q:\n%s", want, text)
		}
	}

	filter := []string{"--all", "--reason", "bounce", "--since", "2h"}
	code, out, stderr := w.cli(append([]string{"dlq", "redrive", "--json", "--dry-run"}, filter...)...)
	var dry redriveOut
	if code != exitOK || json.Unmarshal([]byte(out), &dry) != nil {
		t.Fatalf("dry run: exit %d %s %s", code, out, stderr)
	}
	if got := resultIDs(dry.Results, deadletter.WouldRedrive); !slices.Equal(got, sorted(wBounceNew, rBounce)) {
		t.Fatalf("dry run would redrive %v; want %v", got, sorted(wBounceNew, rBounce))
	}
	if got := w.queuedIDs(t); len(got) != 0 {
		t.Fatalf("the dry run sent %v", got)
	}
	code, out, stderr = w.cli(append([]string{"dlq", "redrive", "--json", "--rate", "0"}, filter...)...)
	var real redriveOut
	if code != exitOK || json.Unmarshal([]byte(out), &real) != nil {
		t.Fatalf("redrive: exit %d %s %s", code, out, stderr)
	}
	if got := resultIDs(real.Results, deadletter.Redrove); !slices.Equal(got, sorted(wBounceNew, rBounce)) {
		t.Fatalf("redriven %v; want %v", got, sorted(wBounceNew, rBounce))
	}
	if got := w.queuedIDs(t); !slices.Equal(got, sorted(wBounceNew, rBounce)) {
		t.Fatalf("queues hold %v; want exactly %v", got, sorted(wBounceNew, rBounce))
	}
	for id, want := range map[string]jobs.State{wBounceNew: jobs.StateEnqueued, rBounce: jobs.StateEnqueued,
		wBounceOld: jobs.StateFailed, wMax: jobs.StateFailed, rMax: jobs.StateFailed} {
		if got := w.State(t, id); got != want {
			t.Errorf("job %s reads %s; want %s", id, got, want)
		}
	}
	// What is left is what the filter did not select.
	_, out, _ = w.cli("dlq", "list", "--json")
	var left listed
	_ = json.Unmarshal([]byte(out), &left)
	if left.Count != 3 {
		t.Fatalf("%d dead letters left; want 3", left.Count)
	}
}

// TestDLQSupersededAndDrop: a superseded letter is refused (exit 4) and
// left alone until --force; drop needs --yes and leaves the job Failed.
func TestDLQSupersededAndDrop(t *testing.T) {
	w := newStage(t)
	old := w.letter(t, contract.Welcome.Name, "welcome:u-7", "permanent: bounce", time.Now())
	newer := w.Enqueue(t, contract.Welcome.Name, "caller-a", "welcome:u-7")
	code, out, stderr := w.cli("dlq", "redrive", old)
	if code != exitRefused || !strings.Contains(out, "superseded "+old) || !strings.Contains(out, newer.MessageID) || !strings.Contains(stderr, "--force") {
		t.Fatalf("superseded redrive: exit %d\n%s%s", code, out, stderr)
	}
	if got := w.queuedIDs(t); len(got) != 0 || w.State(t, old) != jobs.StateFailed {
		t.Fatalf("a superseded letter was touched: queued %v, job %s", got, w.State(t, old))
	}
	if code, out, stderr := w.cli("dlq", "redrive", old, "--force"); code != exitOK || !strings.Contains(out, "redriven "+old) {
		t.Fatalf("forced: exit %d\n%s%s", code, out, stderr)
	}

	drop := w.letter(t, contract.Welcome.Name, "welcome:u-8", "permanent: mailbox unknown", time.Now())
	code, out, stderr = w.cli("dlq", "drop", drop)
	if code != exitRefused || !strings.Contains(out, "would drop "+drop) || !strings.Contains(stderr, "--yes") {
		t.Fatalf("drop without --yes: exit %d\n%s%s", code, out, stderr)
	}
	if rec, _ := w.Letters.Get(context.Background(), drop); rec.Status != deadletter.StatusDead {
		t.Fatalf("drop without --yes changed the letter to %s", rec.Status)
	}
	if code, out, stderr := w.cli("dlq", "drop", drop, "--yes"); code != exitOK || !strings.Contains(out, "dropped "+drop) {
		t.Fatalf("drop --yes: exit %d\n%s%s", code, out, stderr)
	}
	rec, _ := w.Letters.Get(context.Background(), drop)
	if rec.Status != deadletter.StatusDropped || rec.Reason != "permanent: mailbox unknown" || w.State(t, drop) != jobs.StateFailed {
		t.Fatalf("after drop: letter %+v, job %s", rec, w.State(t, drop))
	}
	if code, _, _ := w.cli("dlq", "drop", "no-such-letter", "--yes"); code != exitNotFound {
		t.Fatalf("drop of a missing letter: exit %d; want %d", code, exitNotFound)
	}
}

// TestDLQRateMeasured redrives letters at --rate 20/s through moto and
// reports the rate measured on the wall clock. Pacing makes it never faster
// than the rate; the bound checked is only that (a run can be slower on a
// loaded machine): the ±20% proof is TestRateHolds, on a fake clock.
func TestDLQRateMeasured(t *testing.T) {
	w := newStage(t)
	const n, rate = 21, 20.0
	for i := range n {
		w.letter(t, contract.Welcome.Name, fmt.Sprintf("welcome:r-%d", i), "permanent: bounce", time.Now())
	}
	start := time.Now()
	code, out, stderr := w.cli("dlq", "redrive", "--all", "--rate", "20/s")
	elapsed := time.Since(start)
	if code != exitOK || !strings.Contains(out, fmt.Sprintf("redriven %d", n)) {
		t.Fatalf("exit %d\n%s%s", code, out, stderr)
	}
	measured := float64(n-1) / elapsed.Seconds()
	t.Logf("%d letters at --rate 20/s: %s, %.1f/s measured (sends paced %.0f ms apart)", n, elapsed.Round(time.Millisecond), measured, 1000/rate)
	if measured > rate*1.2 {
		t.Fatalf("measured %.1f/s; the pacing lets at most %.0f/s", measured, rate)
	}
}

func TestJobsListAndGet(t *testing.T) {
	w := newStage(t)
	failed := w.letter(t, contract.Welcome.Name, "welcome:u-9", "permanent: bounce", time.Now())
	// A tick of runstwice's own continuation sweep: no job of the user's.
	sweep := w.EnqueueWith(t, contract.ContinuationSweep.Name, "runstwice", "continuation-sweep:20261201T1000Z",
		map[string]string{"at": "20261201T1000Z"}, contract.QueueChain)
	active := w.Enqueue(t, contract.PasswordReset.Name, "caller-b", "password-reset:u-9")
	code, out, stderr := w.cli("jobs", "list", "--json")
	var all []joblist.Summary
	if code != exitOK || json.Unmarshal([]byte(out), &all) != nil || len(all) != 2 || all[0].ID != active.MessageID {
		t.Fatalf("jobs list: exit %d %s %s; want both of the user's, newest first, and not runstwice's own", code, out, stderr)
	}
	for _, args := range [][]string{{"--internal"}, {"--type", contract.ContinuationSweep.Name}} {
		code, out, stderr := w.cli(append([]string{"jobs", "list", "--json"}, args...)...)
		var got []joblist.Summary
		if code != exitOK || json.Unmarshal([]byte(out), &got) != nil || !slices.ContainsFunc(got, func(s joblist.Summary) bool { return s.ID == sweep.MessageID }) {
			t.Errorf("jobs list %q: exit %d %s %s; want runstwice's own sweep tick %s, asked for", args, code, out, stderr, sweep.MessageID)
		}
	}
	if code, out, _ := w.cli("jobs", "list"); code != exitOK || !strings.Contains(out, "and 1 of runstwice's own") || strings.Contains(out, sweep.MessageID) {
		t.Errorf("jobs list: exit %d; want the sweep's tick counted, not listed:\n%s", code, out)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--state", "failed"}, failed},
		{[]string{"--type", contract.PasswordReset.Name}, active.MessageID},
		{[]string{"--state", "Enqueued", "--since", "1h"}, active.MessageID},
	} {
		code, out, stderr := w.cli(append([]string{"jobs", "list", "--json"}, tc.args...)...)
		var got []joblist.Summary
		if code != exitOK || json.Unmarshal([]byte(out), &got) != nil || len(got) != 1 || got[0].ID != tc.want {
			t.Errorf("jobs list %q: exit %d %s %s; want only %s", tc.args, code, out, stderr, tc.want)
		}
	}
	// The table names each job's outcome and reason, so a no-op or a
	// skipped job is not read as a real success.
	code, out, _ = w.cli("jobs", "list")
	if header := strings.SplitN(out, "\n", 3); code != exitOK || len(header) < 2 ||
		!strings.Contains(header[1], "OUTCOME") || !strings.Contains(header[1], "REASON") {
		t.Errorf("jobs list has no OUTCOME and REASON columns (exit %d):\n%s", code, out)
	}
	code, out, _ = w.cli("jobs", "get", failed)
	if !regexp.MustCompile(`(?m)^state +Failed$`).MatchString(out) {
		t.Errorf("jobs get shows the state as %q; want the state alone, as GET shows it:\n%s", regexp.MustCompile(`(?m)^state.*$`).FindString(out), out)
	}
	for _, want := range []string{"state", "caller", "caller-a", "key", "welcome:u-9", "lastErrorClass", "failedAt", "expiresAt", "correlationId"} {
		if code != exitOK || !strings.Contains(out, want) {
			t.Errorf("jobs get lacks %q (exit %d):\n%s", want, code, out)
		}
	}
	code, out, _ = w.cli("jobs", "get", failed, "--json")
	var got map[string]any
	if code != exitOK || json.Unmarshal([]byte(out), &got) != nil || got["derivedState"] != "Failed" || got["key"] != "welcome:u-9" {
		t.Fatalf("jobs get --json: %s", out)
	}
	if code, _, _ := w.cli("jobs", "get", message.NewMessageID()); code != exitNotFound {
		t.Fatalf("jobs get of a missing job: exit %d", code)
	}
}

// TestTimeBoxedSet: toggles set --for --reason writes the JSON value, and
// list shows until, time left, reason and who.
func TestTimeBoxedSet(t *testing.T) {
	w := newStage(t)
	code, out, stderr := w.cli("toggles", "set", contract.Welcome.Name, "off", "--for", "30m", "--reason", "SES incident 4711")
	if code != exitOK || !strings.Contains(out, "reverts to its default, on") || !strings.Contains(out, "how long workers cache a switch") {
		t.Fatalf("set: exit %d\n%s%s", code, out, stderr)
	}
	code, out, _ = w.cli("toggles", "list", "--json")
	var got struct {
		Toggles []toggleRow `json:"toggles"`
	}
	if code != exitOK || json.Unmarshal([]byte(out), &got) != nil {
		t.Fatalf("list: %d %s", code, out)
	}
	i := slices.IndexFunc(got.Toggles, func(r toggleRow) bool { return r.Type == contract.Welcome.Name })
	r := got.Toggles[i]
	// moto records no user ("N/A"): none, as for a switch never set.
	if r.Effective != "off" || r.Reason != "SES incident 4711" || r.Until == nil || r.TimeLeft == "" || r.LastModifiedUser != "" {
		t.Fatalf("row %+v; want off for 30m with its reason, and no user (moto records none)", r)
	}
	if left := time.Until(*r.Until); left < 29*time.Minute || left > 31*time.Minute {
		t.Fatalf("until %s is not 30 minutes away", r.Until)
	}
	_, text, _ := w.cli("toggles", "list")
	if !strings.Contains(text, "SES incident 4711") || !strings.Contains(text, "left)") || strings.Contains(text, noUser) {
		t.Fatalf("table lacks the reason or the time left, or says %s:\n%s", noUser, text)
	}
	// Neither flag: the plain value.
	if code, out, _ := w.cli("toggles", "set", contract.Welcome.Name, "on", "--json"); code != exitOK || !strings.Contains(out, `"value": "on"`) {
		t.Fatalf("plain set: %d %s", code, out)
	}
}

// TestStageWithoutParametersWarns: a stage with no parameters at all (here
// --stage prod against the emulator) is flagged on stderr.
func TestStageWithoutParametersWarns(t *testing.T) {
	jobctl := cli(t, nil)
	stage := strings.ToLower(testenv.Name(t, "empty"))
	code, out, stderr := jobctl("--stage", stage, "toggles", "list")
	if code != exitOK || !strings.Contains(stderr, "no parameters under /runstwice/"+stage+"/toggles") || !strings.Contains(out, "TYPE") {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", code, out, stderr)
	}
}

// TestFindsLocalStack: with no endpoint and no credentials in the
// environment, jobctl uses the local stack that .devstack/stack.json names
// while its process runs, and says so in one line.
func TestFindsLocalStack(t *testing.T) {
	moto := testenv.Moto(t)
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, ".devstack", "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	info, _ := json.Marshal(localapi.StackInfo{Endpoint: moto.Endpoint, APIURL: "http://127.0.0.1:1", Stage: "local", Region: testenv.Region, PID: os.Getpid()})
	if err := os.WriteFile(filepath.Join(dir, ".devstack", "stack.json"), info, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE", "AWS_REGION", "STAGE", "RUNSTWICE_STAGE"} {
		t.Setenv(k, "")
	}
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "none"))
	t.Chdir(filepath.Join(dir, ".devstack", "sub")) // found from below, too
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"toggles", "list"}, &out, &errOut, os.Getenv)
	if code != exitOK || !strings.Contains(errOut.String(), "using the local stack at "+moto.Endpoint) || !strings.Contains(out.String(), contract.Welcome.Name) {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", code, out.String(), errOut.String())
	}
	if lines := strings.Count(errOut.String(), "using the local stack"); lines != 1 {
		t.Fatalf("said it %d times", lines)
	}
}

// TestJobsCancel: an operator cancels any caller's job that has not run
// (tombstone and record, again is still 0), is refused a job that ended
// (exit 4), and told a job that does not exist (exit 3).
func TestJobsCancel(t *testing.T) {
	w := newStage(t)
	active := w.Enqueue(t, contract.Welcome.Name, "caller-b", "welcome:u-cancel")
	for range 2 {
		code, out, stderr := w.cli("jobs", "cancel", active.MessageID, "--json")
		var got map[string]any
		if code != exitOK || json.Unmarshal([]byte(out), &got) != nil || got["state"] != string(jobs.StateCancelled) {
			t.Fatalf("jobs cancel: exit %d %s %s; want Cancelled", code, out, stderr)
		}
	}
	if s := w.State(t, active.MessageID); s != jobs.StateCancelled {
		t.Fatalf("job reads %s after the cancel", s)
	}
	if m, ok, err := w.Markers.Peek(context.Background(), engine.Key{Type: active.Type, JobID: active.MessageID}); err != nil || !ok || m.State != engine.StateCancelled {
		t.Fatalf("marker %+v %v %v; want the tombstone a worker's peek sees", m, ok, err)
	}
	failed := w.letter(t, contract.Welcome.Name, "welcome:u-cancel-failed", "permanent: bounce", time.Now())
	if code, _, stderr := w.cli("jobs", "cancel", failed); code != exitRefused || !strings.Contains(stderr, "Failed") {
		t.Fatalf("cancel of a failed job: exit %d %s; want refused, naming its state", code, stderr)
	}
	if code, _, _ := w.cli("jobs", "cancel", message.NewMessageID()); code != exitNotFound {
		t.Fatalf("cancel of a missing job: exit %d; want %d", code, exitNotFound)
	}
}

// TestUsersSetEmail: the address is stored as given (the user's other
// fields untouched) and the old one is said; an unknown user is not found.
func TestUsersSetEmail(t *testing.T) {
	w := newStage(t)
	table := conventionalNames(w.stage)["UsersTable"]
	testenv.CreateTable(t, w.DB, table, "userId", "")
	testenv.PutItem(t, w.DB, table, map[string]any{"userId": "u-bad", "email": "Bad Address <bad@example.com>",
		"displayName": "Bad Address", "emailConfirmed": true})

	code, out, stderr := w.cli("users", "set-email", "u-bad", "bad@example.com")
	if code != exitOK || !strings.Contains(out, "bad@example.com") || !strings.Contains(out, `"Bad Address <bad@example.com>"`) {
		t.Fatalf("set-email: exit %d\n%s%s", code, out, stderr)
	}
	u, ok, err := users.New(w.DB, table).Get(context.Background(), "u-bad")
	if err != nil || !ok || u.Email != "bad@example.com" || u.DisplayName != "Bad Address" || !u.EmailConfirmed {
		t.Fatalf("stored user %+v (%v, %v); want the new address, the rest as it was", u, ok, err)
	}
	if code, _, stderr := w.cli("users", "set-email", "u-nobody", "x@example.com"); code != exitNotFound || !strings.Contains(stderr, "u-nobody") {
		t.Fatalf("set-email of an unknown user: exit %d %s; want %d", code, stderr, exitNotFound)
	}
	if _, ok, _ := users.New(w.DB, table).Get(context.Background(), "u-nobody"); ok {
		t.Fatal("set-email of an unknown user made one")
	}
}

// A letter with no job record is listed as one letter, and dropping it
// says that there is no job record instead of naming a job's state.
func TestDLQDropWithoutJobRecord(t *testing.T) {
	w := newStage(t)
	now := time.Now()
	if _, err := w.Letters.Save(context.Background(), deadletter.Record{
		ID: "m-poison", Type: deadletter.UnknownType, Body: "this is not a job", Reason: "invalid: body: invalid JSON",
		ReceiveCount: 1, Status: deadletter.StatusDead, FirstSeen: now, LastSeen: now,
	}, "sqs-1"); err != nil {
		t.Fatal(err)
	}
	code, out, stderr := w.cli("dlq", "list")
	if code != exitOK || !strings.HasPrefix(out, "1 dead letter in ") {
		t.Fatalf("dlq list: exit %d\n%s%s", code, out, stderr)
	}
	code, out, stderr = w.cli("dlq", "drop", "m-poison", "--yes")
	if code != exitOK || !strings.Contains(out, "dropped m-poison") || !strings.Contains(out, "it has no job record") ||
		strings.Contains(out, "reads Failed") || !strings.Contains(out, "drop: 1 letter: dropped 1") {
		t.Fatalf("drop: exit %d\n%s%s", code, out, stderr)
	}
}
