package runner_test

import (
	"testing"

	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/internal/jobs"
	"github.com/runstwice/runstwice/internal/runner"
	"github.com/runstwice/runstwice/internal/testkit"
	"github.com/runstwice/runstwice/message"
)

func tickBody(t *testing.T, scheduled string) string {
	t.Helper()
	b, err := message.Tick{V: 1, Type: weekly.Name, Schedule: "weekly-test", ScheduledTime: scheduled, CorrelationID: "exec-1"}.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func tickHarness(t *testing.T) (*testkit.Harness, *effects, *testkit.Reserver) {
	t.Helper()
	res := &testkit.Reserver{}
	h, e := newHarness(t, func(c *runner.Config) { c.Ticks = jobs.TicksForEngine(res) })
	return h, e, res
}

// A tick whose switch is off succeeds as a no-op: its marker is claimed
// (the job reads Succeeded), its record says skipped "switched off", it is
// counted, and it is never parked; a redelivery is a duplicate. The same
// type switched on runs.
func TestSkipNeverParks(t *testing.T) {
	h, e, _ := tickHarness(t)
	body := tickBody(t, "2026-12-07T09:00:00Z")
	env := mustDecodeJob(t, body)
	for delivery := 1; delivery <= 2; delivery++ {
		if failed := h.Run(t, testkit.RawRecord(body, delivery)); len(failed) != 0 {
			t.Fatalf("failures %v; a skipped job succeeds", failed)
		}
	}
	if parked := h.Queues.ParkedMessages(); len(parked) != 0 {
		t.Fatalf("parked %v; a tick is never parked", parked)
	}
	if e.sends(env.MessageID) != 0 {
		t.Fatal("a switched-off job ran its effect")
	}
	if rec, ok := h.MarkerOf(env); !ok || !rec.Processed() {
		t.Fatal("a skipped job's marker is not claimed; it would not read Succeeded")
	}
	if o, r := h.Jobs.Outcome(env.MessageID); o != jobs.OutcomeSkipped || r != engine.SkippedReason {
		t.Fatalf("recorded %q %q; want skipped, %q", o, r, engine.SkippedReason)
	}
	if h.Jobs.Parks(env.MessageID) != 0 {
		t.Fatal("the record was marked parked")
	}
	if n := h.Count(weekly.Name, engine.JobsSkipped); n != 1 {
		t.Fatalf("JobsSkipped %v, want 1 (the redelivery is a duplicate); metrics %s", n, h.Metrics)
	}
	if n := h.Count(weekly.Name, engine.JobsParked); n != 0 {
		t.Fatalf("JobsParked %v, want 0", n)
	}

	h.Switches.Set(weekly.Name, true)
	body = tickBody(t, "2026-12-14T09:00:00Z")
	if failed := h.Run(t, testkit.RawRecord(body, 1)); len(failed) != 0 {
		t.Fatalf("failures %v", failed)
	}
	if e.sends(mustDecodeJob(t, body).MessageID) != 1 {
		t.Fatal("a tick whose switch is on did not run")
	}
}

// Only a tick skips. A job of a tick type that is not a tick (the next page
// of a fan-out, waiting in its queue when the switch goes off) carries work
// a tick started: it parks like any job, its marker stays free, and it runs
// once the switch is on again. A Skip type that no schedule ticks skips
// every job, as before.
func TestOnlyATickSkips(t *testing.T) {
	h, e, _ := tickHarness(t)
	page := testkit.EnvelopeFor(weekly)
	body := mustEncode(t, page)
	if failed := h.Run(t, testkit.RawRecord(body, 1)); len(failed) != 0 {
		t.Fatalf("failures %v; a parked job is reported done", failed)
	}
	parked := h.Queues.ParkedMessages()
	if len(parked) != 1 || parked[0].Body != body {
		t.Fatalf("parked %v; want the page parked, unchanged", parked)
	}
	if rec, ok := h.MarkerOf(page); ok && rec.Processed() {
		t.Fatal("a page found switched off was claimed: it reads Succeeded and never runs")
	}
	if o, _ := h.Jobs.Outcome(page.MessageID); o == jobs.OutcomeSkipped || h.Jobs.Parks(page.MessageID) != 1 {
		t.Fatalf("recorded outcome %q, parks %d; want the record marked parked once, never skipped", o, h.Jobs.Parks(page.MessageID))
	}
	if n := h.Count(weekly.Name, engine.JobsParked); n != 1 {
		t.Fatalf("JobsParked %v, want 1; metrics %s", n, h.Metrics)
	}

	h.Switches.Set(weekly.Name, true)
	if failed := h.Run(t, testkit.RawRecord(parked[0].Body, 1)); len(failed) != 0 {
		t.Fatalf("failures %v", failed)
	}
	if e.sends(page.MessageID) != 1 {
		t.Fatalf("the parked page ran %d times once switched on, want 1", e.sends(page.MessageID))
	}

	// A Skip type without TickArgs: every job of it skips.
	sweep := message.JobType{Name: "test.sweep.v1", Args: []message.ArgSpec{{Name: "digestId", Format: formatWeek, Required: true}},
		Queue: "bulk", Lease: true, KeyPrefix: "sweep", KeyArgs: []string{"digestId"}, WhileOff: engine.Skip}
	reg, err := message.NewRegistry(sweep)
	if err != nil {
		t.Fatal(err)
	}
	hs := testkit.NewHarness(t, reg, map[string]runner.Handler{sweep.Name: e}, nil)
	job := testkit.EnvelopeFor(sweep)
	if failed := hs.Run(t, testkit.Record(t, job, 1)); len(failed) != 0 {
		t.Fatalf("failures %v", failed)
	}
	if o, _ := hs.Jobs.Outcome(job.MessageID); o != jobs.OutcomeSkipped || len(hs.Queues.ParkedMessages()) != 0 || e.sends(job.MessageID) != 0 {
		t.Fatalf("a job of a Skip type no schedule ticks: outcome %q, parked %v; want skipped", o, hs.Queues.ParkedMessages())
	}
}

// A tick delivered twice (in one batch, and again later) or fired twice for
// the same scheduled time is one job: one record, one run. A tick of
// another time in the same week finds the week's key held by the first job
// and does nothing.
func TestSameTickTwiceIsOneJob(t *testing.T) {
	h, e, res := tickHarness(t)
	h.Switches.Set(weekly.Name, true)
	first := tickBody(t, "2026-12-07T09:00:00Z")
	env := mustDecodeJob(t, first)
	if failed := h.Run(t, testkit.RawRecord(first, 1), testkit.RawRecord(first, 1)); len(failed) != 0 {
		t.Fatalf("failures %v", failed)
	}
	if failed := h.Run(t, testkit.RawRecord(first, 2)); len(failed) != 0 {
		t.Fatalf("failures %v", failed)
	}
	if got := res.Jobs(); len(got) != 1 || got[env.MessageID].Caller != "schedule:weekly-test" ||
		got[env.MessageID].Key != "weekly:2026-W50" || got[env.MessageID].State != jobs.StateEnqueued {
		t.Fatalf("job records %+v; want one, of caller schedule:weekly-test, key weekly:2026-W50, Enqueued", got)
	}
	if e.sends(env.MessageID) != 1 {
		t.Fatalf("the tick's job ran %d times, want 1", e.sends(env.MessageID))
	}

	res.Finish(env.MessageID, jobs.StateSucceeded)
	later := tickBody(t, "2026-12-08T09:00:00Z") // same ISO week, another tick
	h.Run(t, testkit.RawRecord(later, 1))
	if id := mustDecodeJob(t, later).MessageID; e.sends(id) != 1 || res.Reserves() != 2 {
		t.Fatalf("a tick of another time after the week's job ended: runs %d, reserves %d; want a job of its own (AllowAfterFailed)", e.sends(id), res.Reserves())
	}
}

// A tick whose record cannot be written is retried, never run blind.
func TestTickRecordFailureRetries(t *testing.T) {
	h, e, res := tickHarness(t)
	h.Switches.Set(weekly.Name, true)
	res.Err = testkit.ErrCrash
	msg := testkit.RawRecord(tickBody(t, "2026-12-07T09:00:00Z"), 1)
	if failed := h.Run(t, msg); len(failed) != 1 {
		t.Fatalf("failures %v; want the tick retried", failed)
	}
	if e.sends(mustDecodeJob(t, msg.Body).MessageID) != 0 {
		t.Fatal("a tick ran without its record")
	}
}

func mustEncode(t *testing.T, env message.Envelope) string {
	t.Helper()
	b, err := env.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// mustDecodeJob is the envelope a body is run as: the envelope itself, or
// the one a tick derives.
func mustDecodeJob(t *testing.T, body string) message.Envelope {
	t.Helper()
	reg := registry(t, true)
	if !message.IsTick([]byte(body)) {
		env, err := message.Decode([]byte(body))
		if err != nil {
			t.Fatal(err)
		}
		return env
	}
	tick, err := message.DecodeTick([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	env, err := reg.TickEnvelope(tick)
	if err != nil {
		t.Fatal(err)
	}
	return env
}
