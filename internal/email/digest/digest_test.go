package digest_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/runstwice/runstwice/aws/sqsqueue"
	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/email/digest"
	"github.com/runstwice/runstwice/internal/runner"
	"github.com/runstwice/runstwice/internal/testkit"
	"github.com/runstwice/runstwice/message"
)

// directory is a users directory of weekly digest users, paged by id;
// fail, when set, fails the read of a page after a given id.
type directory struct {
	ids  []string
	fail func(after string) error
}

func newDirectory(n int) *directory {
	d := &directory{}
	for i := range n {
		d.ids = append(d.ids, fmt.Sprintf("u-%04d", i))
	}
	sort.Strings(d.ids)
	return d
}

func (d *directory) WeeklyDigestPage(_ context.Context, after string, limit int) ([]string, string, error) {
	if d.fail != nil {
		if err := d.fail(after); err != nil {
			return nil, "", err
		}
	}
	i := sort.SearchStrings(d.ids, after)
	if i < len(d.ids) && d.ids[i] == after {
		i++
	}
	end := min(i+limit, len(d.ids))
	page := d.ids[i:end]
	if end < len(d.ids) {
		return page, page[len(page)-1], nil
	}
	return page, "", nil
}

// sender is the work queues: it keeps every message sent, and can crash on
// its n-th send.
type sender struct {
	mu    sync.Mutex
	sent  []sqsqueue.Message
	crash int
	calls int
}

func (s *sender) Send(_ context.Context, m sqsqueue.Message) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	if s.crash > 0 && s.calls == s.crash {
		return testkit.ErrCrash
	}
	s.sent = append(s.sent, m)
	return nil
}

// world is the fan-out on its fakes, with the bulk queue played as a list
// of fan-out messages still to run.
type world struct {
	jobs    *testkit.Reserver
	queue   *sender
	handler runner.Handler
}

func newWorld(t *testing.T, users int) *world {
	t.Helper()
	w := &world{jobs: &testkit.Reserver{}, queue: &sender{}}
	hs, err := digest.Handlers(digest.Config{Directory: newDirectory(users), Jobs: w.jobs, Queue: w.queue})
	if err != nil {
		t.Fatal(err)
	}
	w.handler = hs[contract.Fanout.Name]
	return w
}

// tickJob is the fan-out job of the weekly tick.
func tickJob(t *testing.T) runner.Job {
	t.Helper()
	reg, err := message.NewRegistry(contract.Fanout, contract.PartnerDigest)
	if err != nil {
		t.Fatal(err)
	}
	env, err := reg.TickEnvelope(message.Tick{V: 1, Type: contract.Fanout.Name, Schedule: digest.ScheduleName,
		ScheduledTime: "2026-12-07T09:00:00Z", CorrelationID: "exec-1"})
	if err != nil {
		t.Fatal(err)
	}
	return runner.Job{Envelope: env, Type: contract.Fanout}
}

// drain runs the fan-out from job to the end as SQS would: a page that
// fails is delivered again, with redeliver every page that succeeded is
// delivered once more too (a crash after the page, before its marker), and
// each page it enqueued runs next. It returns how many page runs there
// were.
func (w *world) drain(t *testing.T, job runner.Job, redeliver bool) int {
	t.Helper()
	pending := []runner.Job{job}
	seen := map[string]bool{job.Envelope.MessageID: true}
	again := map[string]bool{}
	runs := 0
	for len(pending) > 0 {
		if runs++; runs > 100 {
			t.Fatal("the fan-out does not end")
		}
		j := pending[0]
		err := w.handler.Handle(context.Background(), j)
		if err != nil && !errors.Is(err, testkit.ErrCrash) {
			t.Fatalf("page %v: %v", j.Envelope.Args, err)
		}
		if err != nil || (redeliver && !again[j.Envelope.MessageID]) {
			again[j.Envelope.MessageID] = err == nil
			continue // the same page again
		}
		pending = pending[1:]
		for _, m := range w.queue.snapshot() {
			env, derr := message.Decode([]byte(m.Body))
			if derr != nil {
				t.Fatal(derr)
			}
			if env.Type == contract.Fanout.Name && !seen[env.MessageID] {
				seen[env.MessageID] = true
				pending = append(pending, runner.Job{Envelope: env, Type: contract.Fanout})
			}
		}
	}
	return runs
}

func (s *sender) snapshot() []sqsqueue.Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.sent)
}

// check: each user has exactly one digest job of the week (no twin), and
// that job's message was sent (no partner missed); every message sent for
// a digest is that job's.
func (w *world) check(t *testing.T, users int, label string) {
	t.Helper()
	byUser := map[string][]string{}
	for id, j := range w.jobs.Jobs() {
		if j.Type != contract.PartnerDigest.Name {
			continue
		}
		user := strings.Split(j.Key, ":")[1]
		byUser[user] = append(byUser[user], id)
		if j.Caller != digest.Caller || j.Key != digest.DigestKey(user, "2026-W50") {
			t.Fatalf("%s: digest job %+v", label, j)
		}
	}
	sent := map[string]bool{}
	for _, m := range w.queue.snapshot() {
		env, _ := message.Decode([]byte(m.Body))
		if env.Type == contract.PartnerDigest.Name {
			sent[env.MessageID] = true
			if m.Queue != string(contract.QueueBulk) {
				t.Fatalf("%s: digest sent to %s", label, m.Queue)
			}
		}
	}
	if len(byUser) != users {
		t.Fatalf("%s: %d users have a digest job, want %d", label, len(byUser), users)
	}
	for user, ids := range byUser {
		if len(ids) != 1 {
			t.Fatalf("%s: user %s has %d digest jobs (twins)", label, user, len(ids))
		}
		if !sent[ids[0]] {
			t.Fatalf("%s: user %s's digest job was never sent", label, user)
		}
	}
	if len(sent) != users {
		t.Fatalf("%s: %d digest job ids sent, want %d", label, len(sent), users)
	}
}

// The fan-out over 250 users: three pages, one digest each, enqueued by
// caller schedule:partner-digest-weekly with RejectAlways.
func TestFanoutEnqueuesOneDigestPerPartner(t *testing.T) {
	const users = 250
	w := newWorld(t, users)
	if runs := w.drain(t, tickJob(t), false); runs != 3 {
		t.Fatalf("%d page runs, want 3 (100, 100, 50)", runs)
	}
	w.check(t, users, "one run")
	pages := 0
	for _, j := range w.jobs.Jobs() {
		if j.Type == contract.Fanout.Name {
			pages++
			if want := "partner-digest-fanout:2026-W50:" + tickJob(t).Envelope.MessageID + ":u-"; !strings.HasPrefix(j.Key, want) {
				t.Errorf("page key %s", j.Key)
			}
		}
	}
	if pages != 2 {
		t.Fatalf("%d next-page jobs, want 2", pages)
	}

	// Run twice: the whole week again (a second tick of the same time, or
	// a redelivery of every page) makes nothing new.
	before := w.jobs.Reserves()
	w.drain(t, tickJob(t), true)
	if w.jobs.Reserves() != before {
		t.Fatalf("running the week again reserved %d new jobs", w.jobs.Reserves()-before)
	}
	w.check(t, users, "run twice")
}

// A crash at every step of the fan-out — after each reserve, each send and
// each promote, so after each enqueue and after each page — then the
// redeliveries: still one digest per partner, no twins.
func TestFanoutSurvivesACrashAnywhere(t *testing.T) {
	const users = 120 // two pages
	clean := newWorld(t, users)
	clean.drain(t, tickJob(t), false)
	steps := clean.queue.calls * 3 // reserve + send + promote per job
	for crash := 1; crash <= steps; crash++ {
		for _, where := range []string{"store", "queue"} {
			w := newWorld(t, users)
			if where == "store" {
				w.jobs.CrashAt(crash)
			} else if crash <= clean.queue.calls {
				w.queue.crash = crash
			} else {
				continue
			}
			w.drain(t, tickJob(t), crash%2 == 0)
			w.check(t, users, fmt.Sprintf("crash at %s step %d", where, crash))
		}
	}
}

// The run of a fan-out job: a next page's key names it; the tick's job,
// and a page whose key names none (the keys before runs were named, still
// queued during a deploy, or a key that is not a page's), start a run of
// their own id.
func TestRunOf(t *testing.T) {
	tick := tickJob(t).Envelope
	run := tick.MessageID
	page := func(key, after string) message.Envelope {
		return message.Envelope{MessageID: message.DeriveMessageID(digest.Caller, key), Key: key, Args: map[string]string{"digestId": "2026-W50", "after": after}}
	}
	for _, tc := range []struct {
		name string
		env  message.Envelope
		want string
	}{
		{"the tick's job", tick, run},
		{"a next page", page(digest.PageKey("2026-W50", run, "u-0099"), "u-0099"), run},
		{"a page of the keys before runs", page("partner-digest-fanout:2026-W50:u-0099", "u-0099"), ""},
		{"a run that is no job id", page("partner-digest-fanout:2026-W50:r1:u-0099", "u-0099"), ""},
		{"a key of another week", page(digest.PageKey("2026-W49", run, "u-0099"), "u-0099"), ""},
		{"a key of another after", page(digest.PageKey("2026-W50", run, "u-0042"), "u-0099"), ""},
	} {
		want := tc.want
		if want == "" {
			want = tc.env.MessageID
		}
		if got := digest.RunOf(tc.env); got != want {
			t.Errorf("%s: RunOf = %s, want %s", tc.name, got, want)
		}
	}
}

// A page the code before runs were named enqueued (key
// partner-digest-fanout:<digestId>:<after>, after a plain user id) and
// that is still in the queue during a deploy runs on the new code: its
// after is read as it is, and the pages after it are a run of its own id.
func TestPageOfTheKeysBeforeRunsGoesOn(t *testing.T) {
	const users = 250
	w := newWorld(t, users)
	key := "partner-digest-fanout:2026-W50:u-0099"
	env := message.Envelope{V: message.Version, MessageID: message.DeriveMessageID(digest.Caller, key), Type: contract.Fanout.Name, Key: key,
		CorrelationID: "exec-1", Args: map[string]string{"digestId": "2026-W50", "after": "u-0099"}}
	w.drain(t, runner.Job{Envelope: env, Type: contract.Fanout}, false)
	for id, j := range w.jobs.Jobs() {
		if j.Type == contract.Fanout.Name && j.Key != digest.PageKey("2026-W50", env.MessageID, "u-0199") {
			t.Errorf("page %s key %s; want the run of the old page's id", id, j.Key)
		}
	}
	reached := 0
	for _, j := range w.jobs.Jobs() {
		if j.Type == contract.PartnerDigest.Name {
			reached++
		}
	}
	if reached != users-digest.PageSize {
		t.Fatalf("%d digests from the old page on, want %d (u-0100 to the end)", reached, users-digest.PageSize)
	}
}
