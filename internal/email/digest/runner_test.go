package digest_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/runstwice/runstwice/aws/sqsqueue"
	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/email/digest"
	"github.com/runstwice/runstwice/internal/jobs"
	"github.com/runstwice/runstwice/internal/obs"
	"github.com/runstwice/runstwice/internal/obs/obstest"
	"github.com/runstwice/runstwice/internal/runner"
	"github.com/runstwice/runstwice/internal/testkit"
	"github.com/runstwice/runstwice/message"
)

// bulk is the bulk queue as the fan-out sees it: what the handler sends
// and what the runner parks go in, the test takes messages out.
type bulk struct {
	mu      sync.Mutex
	visible []events.SQSMessage // ready to be received
	delayed []string            // parked: visible after wait
	digests map[string]bool     // the digest job ids sent
}

func (b *bulk) Send(_ context.Context, m sqsqueue.Message) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	env, err := message.Decode([]byte(m.Body))
	if err != nil {
		return err
	}
	if env.Type == contract.PartnerDigest.Name {
		b.digests[env.MessageID] = true // the digests themselves are not run here
		return nil
	}
	b.visible = append(b.visible, testkit.RawRecord(m.Body, 1))
	return nil
}

// runWorld is the fan-out on the real runner: the job store's Reserve and
// Promote (testkit.Reserver, which the runner's tick records use too), the
// marker store, the switches, the dead letters and parks of the harness,
// and the bulk queue, drained record by record as SQS would deliver them.
type runWorld struct {
	t   *testing.T
	dir *directory
	res *testkit.Reserver
	h   *testkit.Harness
	q   *bulk
	// parks is how many of the harness's parked messages were moved to
	// the queue's delayed list.
	parks int
	dead  []string // the job ids dead-lettered or failed for good
}

func newRunWorld(t *testing.T, ids []string) *runWorld {
	t.Helper()
	s := &runWorld{t: t, dir: &directory{ids: slices.Sorted(slices.Values(ids))}, res: &testkit.Reserver{}, q: &bulk{digests: map[string]bool{}}}
	reg, err := message.NewRegistry(contract.Fanout, contract.PartnerDigest)
	if err != nil {
		t.Fatal(err)
	}
	// One Metrics for the runner and the handler, as functions/email
	// wires them: the runner flushes it after each batch.
	metrics := &testkit.Buffer{}
	m := engine.NewMetrics(metrics, obs.Namespace)
	hs, err := digest.Handlers(digest.Config{Directory: s.dir, Jobs: s.res, Queue: s.q, Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	s.h = testkit.NewHarness(t, reg, hs, func(c *runner.Config) {
		c.Ticks = jobs.TicksForEngine(s.res)
		c.Metrics = m
	})
	s.h.Metrics = metrics
	s.h.Switches.Set(contract.Fanout.Name, true)
	return s
}

// tick sends the weekly tick of scheduled and returns its job id.
func (s *runWorld) tick(scheduled string) string {
	s.t.Helper()
	body, err := message.Tick{V: 1, Type: contract.Fanout.Name, Schedule: digest.ScheduleName, ScheduledTime: scheduled, CorrelationID: "exec-" + scheduled}.Encode()
	if err != nil {
		s.t.Fatal(err)
	}
	s.q.mu.Lock()
	s.q.visible = append(s.q.visible, testkit.RawRecord(string(body), 1))
	s.q.mu.Unlock()
	env := mustTickEnvelope(s.t, scheduled)
	return env.MessageID
}

func mustTickEnvelope(t *testing.T, scheduled string) message.Envelope {
	t.Helper()
	reg, err := message.NewRegistry(contract.Fanout, contract.PartnerDigest)
	if err != nil {
		t.Fatal(err)
	}
	env, err := reg.TickEnvelope(message.Tick{V: 1, Type: contract.Fanout.Name, Schedule: digest.ScheduleName, ScheduledTime: scheduled, CorrelationID: "exec-1"})
	if err != nil {
		t.Fatal(err)
	}
	return env
}

// step delivers the first visible record to the runner, as one batch, and
// plays what SQS and the job record do with its fate: a retry is received
// again (until the queue's 5 receives, then the job reads Failed), a park
// comes back after wait, an ended job reads its terminal state. It reports
// whether there was a record.
func (s *runWorld) step() bool {
	s.t.Helper()
	s.q.mu.Lock()
	if len(s.q.visible) == 0 {
		s.q.mu.Unlock()
		return false
	}
	msg := s.q.visible[0]
	s.q.visible = s.q.visible[1:]
	s.q.mu.Unlock()

	id := jobID(s.t, msg.Body)
	failed := s.h.Run(s.t, msg)
	for _, p := range s.h.Queues.ParkedMessages()[s.parks:] {
		s.q.mu.Lock()
		s.q.delayed = append(s.q.delayed, p.Body)
		s.q.mu.Unlock()
		s.parks++
	}
	outcome := s.h.Outcomes()[id]
	switch {
	case len(failed) > 0 && outcome == "failed":
		s.dead = append(s.dead, id) // the queue moves it to the DLQ
		s.res.Finish(id, jobs.StateFailed)
	case len(failed) > 0:
		n := engine.ReceiveCount(msg) + 1
		retry := testkit.RawRecord(msg.Body, n)
		s.q.mu.Lock()
		s.q.visible = append(s.q.visible, retry)
		s.q.mu.Unlock()
	case outcome == "dead-lettered":
		s.dead = append(s.dead, id)
		s.res.Finish(id, jobs.StateFailed)
	case outcome == "succeeded" || outcome == "skipped" || outcome == "noop":
		s.res.Finish(id, jobs.StateSucceeded)
	}
	return true
}

// drain steps until no record is visible.
func (s *runWorld) drain() {
	s.t.Helper()
	for n := 0; s.step(); n++ {
		if n > 1000 {
			s.t.Fatal("the bulk queue does not drain")
		}
	}
}

// wait lets the park delay pass: the parked messages are visible again.
func (s *runWorld) wait() {
	s.q.mu.Lock()
	defer s.q.mu.Unlock()
	for _, b := range s.q.delayed {
		s.q.visible = append(s.q.visible, testkit.RawRecord(b, 1))
	}
	s.q.delayed = nil
}

// jobID is the id of the job a record runs: the envelope's, or the one a
// tick derives.
func jobID(t *testing.T, body string) string {
	t.Helper()
	if message.IsTick([]byte(body)) {
		tk, err := message.DecodeTick([]byte(body))
		if err != nil {
			t.Fatal(err)
		}
		return message.TickMessageID(tk.Schedule, tk.Time())
	}
	env, err := message.Decode([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	return env.MessageID
}

// reached returns the users whose digest of week was enqueued and sent,
// and fails on a user with two digest jobs.
func (s *runWorld) reached(week string) map[string]bool {
	s.t.Helper()
	out := map[string]bool{}
	for id, j := range s.res.Jobs() {
		if j.Type != contract.PartnerDigest.Name {
			continue
		}
		user := strings.TrimSuffix(strings.TrimPrefix(j.Key, contract.PartnerDigest.KeyPrefix+":"), ":"+week)
		if out[user] {
			s.t.Fatalf("user %s has two digest jobs of %s", user, week)
		}
		if s.q.digests[id] {
			out[user] = true
		}
	}
	return out
}

// missed returns the users of want with no digest of week.
func (s *runWorld) missed(want []string, week string) []string {
	s.t.Helper()
	got := s.reached(week)
	var out []string
	for _, u := range want {
		if !got[u] {
			out = append(out, u)
		}
	}
	return out
}

// partners returns n user ids u-0000… in order.
func partners(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("u-%04d", i)
	}
	return out
}

// The scenario: 150 partners, the tick's page 1 has run, page 2
// waits in the queue when an operator switches the fan-out off, then on
// again. Page 2 parks (it is not a tick) and runs once the switch is on:
// all 150 get the week's digest. A re-trigger of the week (another time,
// as docs/kill-switches.md advises) then makes nothing new.
func TestSwitchedOffMidWeekLosesNoPartner(t *testing.T) {
	users := partners(150)
	s := newRunWorld(t, users)
	s.tick("2026-12-07T09:00:00Z")
	s.step() // the tick's job: page 1, 100 digests, page 2 enqueued
	if n := len(s.reached("2026-W50")); n != digest.PageSize {
		t.Fatalf("after page 1: %d digests, want %d", n, digest.PageSize)
	}
	s.h.Switches.Set(contract.Fanout.Name, false)
	s.drain()
	parked := len(s.q.delayed)
	s.h.Switches.Set(contract.Fanout.Name, true)
	s.wait()
	s.drain()
	if m := s.missed(users, "2026-W50"); len(m) != 0 {
		t.Fatalf("switched off and on mid-week: %d of %d partners got no digest (first %s); %d parked while off",
			len(m), len(users), m[0], parked)
	}

	before := s.res.Reserves()
	s.tick("2026-12-07T09:01:00Z")
	s.drain()
	if got := s.res.Reserves() - before; got != 2 {
		t.Fatalf("the re-trigger reserved %d new jobs; want its own tick's job and its page 2 only", got)
	}
	if m := s.missed(users, "2026-W50"); len(m) != 0 || len(s.q.digests) != len(users) {
		t.Fatalf("after the re-trigger: missed %v, %d digests sent, want %d", m, len(s.q.digests), len(users))
	}
}

// A run whose page 2 ended without reaching its users (here: failed on
// every receive, then dead-lettered by the queue) is completed by a
// re-trigger of the week with another scheduled time: the new run's pages
// have keys of their own, so page 2 of the new run runs, and the digests
// already sent dedup onto the same jobs.
func TestRetriggerReachesThePartnersNotYetReached(t *testing.T) {
	users := partners(250)
	s := newRunWorld(t, users)
	s.dir.fail = func(after string) error {
		if after == "u-0099" {
			return errors.New("directory unreachable")
		}
		return nil
	}
	s.tick("2026-12-07T09:00:00Z")
	s.drain()
	if len(s.dead) != 1 || len(s.reached("2026-W50")) != digest.PageSize {
		t.Fatalf("dead %v, %d reached; want page 2 failed for good after page 1's 100", s.dead, len(s.reached("2026-W50")))
	}
	s.dir.fail = nil
	sent := len(s.q.digests)
	s.tick("2026-12-07T09:01:00Z") // jobctl schedules trigger --at, another minute of the week
	s.drain()
	if m := s.missed(users, "2026-W50"); len(m) != 0 {
		t.Fatalf("after the re-trigger %d of %d partners got no digest (first %s)", len(m), len(users), m[0])
	}
	if got := len(s.q.digests) - sent; got != len(users)-digest.PageSize {
		t.Fatalf("the re-trigger sent %d digests, want the %d not yet reached (no twins)", got, len(users)-digest.PageSize)
	}
}

// A user id with '@' in the middle of a page is refused by the digest's
// args: it is counted and logged with its reason (not its id), and every
// other user of the page and of the later pages gets the digest.
func TestOddUserIDMidPageNeverEndsThePage(t *testing.T) {
	users := partners(150)
	odd := "u-0001@example.com" // sorts right after u-0001, early in page 1
	s := newRunWorld(t, append(slices.Clone(users), odd))
	s.tick("2026-12-07T09:00:00Z")
	s.drain()
	if m := s.missed(users, "2026-W50"); len(m) != 0 {
		t.Fatalf("%d of %d partners got no digest beside the odd id (first %s); dead letters %v", len(m), len(users), m[0], s.dead)
	}
	if s.reached("2026-W50")[odd] || len(s.dead) != 0 {
		t.Fatalf("the odd id got a digest, or something was dead-lettered: %v", s.dead)
	}
	if n := obstest.Count(s.h.Metrics.String(), contract.Fanout.Name, digest.MetricUsersRefused); n != 1 {
		t.Fatalf("%s = %d, want 1; metrics %s", digest.MetricUsersRefused, n, s.h.Metrics)
	}
	lines := 0
	for _, l := range obstest.Lines(s.h.Logs.String()) {
		if strings.Contains(fmt.Sprint(l["msg"]), "args refuse") {
			lines++
			if r, _ := l["reason"].(string); !strings.Contains(r, "args.userId: looks like an e-mail address") {
				t.Errorf("reason %q", r)
			}
		}
	}
	if lines != 1 || strings.Contains(s.h.Logs.String(), odd) {
		t.Fatalf("%d refusal lines, want 1, and the id itself never in the logs", lines)
	}
}

// An odd id at a page boundary (the last user a page reads) is never the
// next page's cursor: the next page starts after the last id its args
// accept, and reads the odd one (refused, counted) and everyone after it.
func TestOddUserIDAtAPageBoundaryIsNeverTheCursor(t *testing.T) {
	for _, odd := range []string{"u-0098:x", "u-0098|x", "u-0098 x", "u-0098" + strings.Repeat("x", 60)} {
		t.Run(odd[:8], func(t *testing.T) {
			users := partners(150)
			all := slices.Sorted(slices.Values(append(slices.Clone(users), odd)))
			if all[digest.PageSize-1] != odd {
				t.Fatalf("the odd id is not the last of page 1: %v", all[digest.PageSize-2:digest.PageSize+1])
			}
			s := newRunWorld(t, all)
			s.tick("2026-12-07T09:00:00Z")
			s.drain()
			if m := s.missed(users, "2026-W50"); len(m) != 0 {
				t.Fatalf("%d of %d partners got no digest (first %s); dead letters %v", len(m), len(users), m[0], s.dead)
			}
			if len(s.dead) != 0 {
				t.Fatalf("dead letters %v", s.dead)
			}
			if n := obstest.Count(s.h.Metrics.String(), contract.Fanout.Name, digest.MetricUsersRefused); n != 1 {
				t.Fatalf("%s = %d, want 1", digest.MetricUsersRefused, n)
			}
		})
	}
}

// A page of nothing but ids no cursor can be (more than a page of them in
// a row) is read on by the same job until one can: the users after them
// still get their digest.
func TestAPageOfOddIDsIsReadOn(t *testing.T) {
	users := partners(30)
	all := slices.Clone(users)
	for i := range digest.PageSize + 20 {
		all = append(all, fmt.Sprintf("u-0010:%03d", i)) // right after u-0010
	}
	s := newRunWorld(t, all)
	s.tick("2026-12-07T09:00:00Z")
	s.drain()
	if m := s.missed(users, "2026-W50"); len(m) != 0 || len(s.dead) != 0 {
		t.Fatalf("missed %v, dead %v", m, s.dead)
	}
	if n := obstest.Count(s.h.Metrics.String(), contract.Fanout.Name, digest.MetricUsersRefused); n != digest.PageSize+20 {
		t.Fatalf("%s = %d, want %d (each odd id once)", digest.MetricUsersRefused, n, digest.PageSize+20)
	}
}
