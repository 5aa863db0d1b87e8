package chaos

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/runstwice/runstwice/client"
	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/deadletter"
	"github.com/runstwice/runstwice/internal/dev/awsproxy"
	"github.com/runstwice/runstwice/internal/dev/faults"
	"github.com/runstwice/runstwice/internal/email/digest"
	"github.com/runstwice/runstwice/message"
)

// faultOn makes the injector apply one fault of kind to a call of
// service's operation with body, the way the proxy does, and returns it.
func faultOn(t *testing.T, service, target, path string, kind faults.Kind, body string) faults.Event {
	t.Helper()
	in := faults.New([]faults.Rule{{Service: "*", Operation: "*", Kind: kind, P: 1, Limit: 1}}, 1)
	p, err := awsproxy.New("http://127.0.0.1:1", in.Hook)
	if err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
	r.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=test/20260101/us-east-1/"+service+"/aws4_request, SignedHeaders=host, Signature=x")
	if target != "" {
		r.Header.Set("X-Amz-Target", target)
	}
	p.ServeHTTP(httptest.NewRecorder(), r)
	ev := in.Events()
	if len(ev) != 1 {
		t.Fatalf("faults %+v; want one", ev)
	}
	return ev[0]
}

// world builds a ledger's input job by job.
type world struct {
	t       *testing.T
	at      time.Time
	results []result
	truth   *truth
	n       int
}

func newWorld(t *testing.T) *world {
	return &world{t: t, at: time.Unix(1_000_000, 0), truth: &truth{Letters: map[string]deadletter.Record{},
		States: map[string]client.Job{}, Seen: seen{Outcomes: map[string][]outcome{}, Records: map[string]int{}}}}
}

// job adds an accepted job of type typ that GET reports in state.
func (w *world) job(typ string, state client.State) *result {
	w.n++
	k := kinds[slices.IndexFunc(kinds, func(k kind) bool { return k.Type == typ })]
	id := "00000000-0000-0000-0000-00000000000" + string(rune('0'+w.n))
	j := plannedJob{Index: w.n, Kind: k, IdemKey: "chaos-1-" + string(rune('0'+w.n)), JobID: id}
	w.results = append(w.results, result{Job: j, Accepted: true, JobID: id})
	w.truth.States[id] = client.Job{JobID: id, State: state}
	return &w.results[len(w.results)-1]
}

// mail records a mail SES holds for job id, sent at offset.
func (w *world) mail(id string, offset time.Duration) { w.mailAt(id, w.at.Add(offset)) }

// mailAt records a mail SES holds for job id, sent at at.
func (w *world) mailAt(id string, at time.Time) {
	mid := "ses-" + id + "-" + at.Format(time.RFC3339Nano)
	w.truth.Mails = append(w.truth.Mails, mid)
	w.truth.Sends = append(w.truth.Sends, send{JobID: id, MessageID: mid, Status: 200, Time: at})
}

func (w *world) ledger(mutate func(*ledgerInput)) *Ledger {
	in := ledgerInput{cfg: Config{N: len(w.results)}, results: w.results, truth: w.truth, digestOn: w.at.Add(time.Minute),
		fanoutOn: w.at.Add(2 * time.Minute), quiet: true}
	if mutate != nil {
		mutate(&in)
	}
	return account(in)
}

// broken returns the invariants the ledger breaks, with their ids.
func broken(l *Ledger) map[string][]string {
	out := map[string][]string{}
	for _, i := range l.Invariants {
		if !i.OK() {
			out[i.Name] = i.IDs
		}
	}
	return out
}

func TestLedgerAcceptsWhatThePromiseAllows(t *testing.T) {
	w := newWorld(t)
	once := w.job(client.TypeWelcome, client.StateSucceeded)
	w.mail(once.JobID, time.Second)

	// Two mails, the first one's SES response dropped by a fault.
	dropped := w.job(client.TypePasswordReset, client.StateSucceeded)
	w.mail(dropped.JobID, time.Second)
	w.mail(dropped.JobID, 2*time.Second)
	w.truth.Faults = append(w.truth.Faults, faultOn(t, "ses", "", "/v2/email/outbound-emails", faults.Drop,
		`{"EmailTags":[{"Name":"jobId","Value":"`+dropped.JobID+`"}]}`))

	// Two mails, the first sent by an invocation that never came back.
	killed := w.job(client.TypePartnerVerification, client.StateSucceeded)
	w.mail(killed.JobID, 3*time.Second)
	w.mail(killed.JobID, 20*time.Second)
	w.truth.Seen.Calls = append(w.truth.Seen.Calls, invocation{Function: "email", Start: w.at.Add(2 * time.Second),
		End: w.at.Add(4 * time.Second), JobIDs: []string{killed.JobID}, Lost: true})

	// Two mails, and the invocation that died had claimed the job before:
	// that death explains nothing.
	claimed := w.job(client.TypeWelcome, client.StateSucceeded)
	w.mail(claimed.JobID, 3*time.Second)
	w.mail(claimed.JobID, 20*time.Second)
	w.truth.Claims = append(w.truth.Claims, claim{JobID: claimed.JobID, Time: w.at.Add(3500 * time.Millisecond)})
	w.truth.Seen.Calls[0].JobIDs = append(w.truth.Seen.Calls[0].JobIDs, claimed.JobID)

	// Cancelled before it ran; dead-lettered for good and reading Failed.
	cancelled := w.job(client.TypeWelcome, client.StateCancelled)
	cancelled.Cancel = string(client.StateCancelled)
	failed := w.job(client.TypePasswordReset, client.StateFailed)
	w.truth.Letters[failed.JobID] = deadletter.Record{ID: failed.JobID, Reason: "permanent", Status: deadletter.StatusDead}

	// A digest after its switch went on.
	digest := w.job(client.TypePartnerDigest, client.StateSucceeded)
	w.mail(digest.JobID, 2*time.Minute)

	// A 5xx whose request an AWS fault touched; a 409 in flight to a twin.
	w.truth.Faults = append(w.truth.Faults, faultOn(t, "dynamodb", "DynamoDB_20120810.PutItem", "/", faults.Throttle,
		`{"Item":{"pk":{"S":"chaos#`+once.Job.IdemKey+`"}}}`))
	w.results[1].Job.Twins = 1
	w.truth.Attempts = []attempt{{IdemKey: once.Job.IdemKey, Status: 503}, {IdemKey: dropped.Job.IdemKey, Status: 409, InFlight: true},
		{IdemKey: killed.Job.IdemKey, Status: 502, Injected: true}, {IdemKey: killed.Job.IdemKey, Status: 202}}

	l := w.ledger(nil)
	if b := broken(l); len(b) != 1 || !slices.Equal(b[InvExtra], []string{claimed.JobID}) {
		t.Fatalf("broken %v; want only %s's extra mail", b, claimed.JobID)
	}
	f := l.Figures
	if f.JobsAccepted != 7 || f.Effects != 8 || f.ExactlyOne != 2 || f.Two != 3 || f.NoEffect != 2 || f.Cancelled != 1 || f.FailedAtEnd != 1 ||
		f.Explained["lost SES response"] != 1 || f.Explained["killed between effect and claim"] != 1 || f.Enqueue5xx != 1 || f.Enqueue5xxFaults != 1 {
		t.Fatalf("figures %+v", f)
	}
}

func TestLedgerNamesEveryBreach(t *testing.T) {
	w := newWorld(t)
	twice := w.job(client.TypeWelcome, client.StateSucceeded)
	w.mail(twice.JobID, time.Second)
	w.mail(twice.JobID, 2*time.Second)

	lost := w.job(client.TypeWelcome, client.StateEnqueued)
	liar := w.job(client.TypePasswordReset, client.StateSucceeded) // no mail at all

	ranCancelled := w.job(client.TypeWelcome, client.StateCancelled)
	ranCancelled.Cancel, ranCancelled.CancelAt = string(client.StateCancelled), w.at
	w.mail(ranCancelled.JobID, time.Second)

	early := w.job(client.TypePartnerDigest, client.StateSucceeded)
	w.mail(early.JobID, time.Second) // the switch goes on after a minute

	unclaimed := w.job(client.TypePartnerVerification, client.StateProcessing)
	w.mail(unclaimed.JobID, time.Second)

	never := result{Job: plannedJob{IdemKey: "chaos-1-never"}}
	w.results = append(w.results, never)
	w.truth.Mails = append(w.truth.Mails, "ses-from-nowhere")
	w.truth.Attempts = []attempt{{IdemKey: twice.Job.IdemKey, Status: 500}, {IdemKey: lost.Job.IdemKey, Status: 409, InFlight: true}}

	l := w.ledger(func(in *ledgerInput) { in.quiet = false })
	got := broken(l)
	want := map[string][]string{
		InvExtra:        {twice.JobID},
		InvLost:         {lost.JobID, liar.JobID},
		InvCancelledRan: {ranCancelled.JobID},
		InvFailClosed:   {early.JobID},
		InvEnqueue5xx:   {twice.Job.IdemKey + " (500 )"},
		InvInFlight:     {lost.Job.IdemKey},
		InvNotAccepted:  {"chaos-1-never"},
		InvForeignMail:  {"ses-from-nowhere"},
		InvNotQuiet:     {"timeout"},
	}
	for name, ids := range want {
		slices.Sort(ids)
		if !slices.Equal(got[name], ids) {
			t.Errorf("%s: %v; want %v", name, got[name], ids)
		}
	}
	wrong := strings.Join(got[InvWrongState], "|")
	for _, id := range []string{liar.JobID + " reads Succeeded", ranCancelled.JobID + " reads Cancelled", unclaimed.JobID + " reads Processing"} {
		if !strings.Contains(wrong, id) {
			t.Errorf("wrong states %q miss %q", wrong, id)
		}
	}
	if strings.Contains(wrong, lost.JobID) {
		t.Errorf("wrong states %q list %s, which reads a non-terminal state and is lost instead", wrong, lost.JobID)
	}
	if !l.Failed() {
		t.Fatal("Failed() = false")
	}
}

// fanoutWorld is a world with the weekly fan-out's ticks sent: one while
// off (week off), then week on twice at once, week on an hour later, and
// week other; the ground truth is what the promise allows, each tick and
// digest as it should be, until a test breaks it.
type fanoutWorld struct {
	*world
	fan                fanoutPlan
	weeks              weeks
	partners           []string
	offTick, onTick    string
	otherTick, onAgain string
}

func newFanoutWorld(t *testing.T) *fanoutWorld {
	w := &fanoutWorld{world: newWorld(t), partners: []string{"u-p1", "u-p2"}}
	w.weeks = weeksBefore(time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC))
	on := w.at.Add(3 * time.Minute)
	ticks := []tickSent{{At: w.weeks.off, SentAt: w.at}, {At: w.weeks.on, SentAt: on, On: true}, {At: w.weeks.on, SentAt: on, On: true},
		{At: w.weeks.onAgain, SentAt: on, On: true}, {At: w.weeks.other, SentAt: on, On: true}}
	w.fan = fanoutJobs(w.partners, ticks)
	w.truth.Fanout, w.truth.RefusedJobs = map[string]client.Job{}, map[string]bool{}
	w.offTick = message.TickMessageID(digest.ScheduleName, w.weeks.off)
	w.onTick = message.TickMessageID(digest.ScheduleName, w.weeks.on)
	w.onAgain = message.TickMessageID(digest.ScheduleName, w.weeks.onAgain)
	w.otherTick = message.TickMessageID(digest.ScheduleName, w.weeks.other)
	w.truth.Fanout[w.offTick] = client.Job{JobID: w.offTick, State: client.StateSucceeded, LastOutcome: "skipped"}
	w.truth.Fanout[w.onTick] = client.Job{JobID: w.onTick, State: client.StateSucceeded}
	w.truth.Fanout[w.otherTick] = client.Job{JobID: w.otherTick, State: client.StateSucceeded}
	for i, d := range w.fan.Digests {
		w.truth.States[d.JobID] = client.Job{JobID: d.JobID, State: client.StateSucceeded}
		w.mail(d.JobID, 4*time.Minute+time.Duration(i)*time.Second)
	}
	return w
}

// digestOf is the digest job id of partner u for the week of at.
func digestOf(u string, at time.Time) string {
	return message.DeriveMessageID(digest.Caller, digest.DigestKey(u, contract.ISOWeek(at)))
}

func (w *fanoutWorld) ledger(mutate func(*ledgerInput)) *Ledger {
	return w.world.ledger(func(in *ledgerInput) {
		in.fanout = w.fan
		if mutate != nil {
			mutate(in)
		}
	})
}

func TestLedgerJudgesTheOutboxAndTheFanout(t *testing.T) {
	w := newFanoutWorld(t)
	if len(w.fan.Digests) != 4 || w.fan.Digests[0].JobID != digestOf("u-p1", w.weeks.on) || !w.fan.Off[digestOf("u-p2", w.weeks.off)] {
		t.Fatalf("fan-out plan %+v: want the two partners' digests of the two weeks ticked while on, and the off week's apart", w.fan)
	}
	relayed := w.job(client.TypeWelcome, client.StateSucceeded)
	relayed.Job.Source, relayed.Rewritten = viaOutbox, true
	w.mail(relayed.JobID, time.Second)
	refused := w.job(client.TypeWelcome, client.StateEnqueued)
	refused.Job.Source, refused.Job.Refuse, refused.Refused, refused.Accepted = viaOutbox, true, true, false
	delete(w.truth.States, refused.JobID)

	l := w.ledger(func(in *ledgerInput) { in.outboxTx = 4 })
	if b := broken(l); len(b) != 0 {
		t.Fatalf("broken %v; want none", b)
	}
	f := l.Figures
	want := Figures{JobsAccepted: 1, OutboxJobs: 1, OutboxExactlyOne: 1, OutboxRewritten: 1, OutboxTransactions: 4, OutboxRefused: 1,
		Ticks: 5, TickTimes: 4, WeeksOn: 2, WeeklyPartners: 2, Digests: 4, DigestsOne: 4, Effects: 5, ExactlyOne: 5}
	got := Figures{JobsAccepted: f.JobsAccepted, OutboxJobs: f.OutboxJobs, OutboxExactlyOne: f.OutboxExactlyOne, OutboxRewritten: f.OutboxRewritten,
		OutboxTransactions: f.OutboxTransactions, OutboxRefused: f.OutboxRefused, Ticks: f.Ticks, TickTimes: f.TickTimes, WeeksOn: f.WeeksOn,
		WeeklyPartners: f.WeeklyPartners, Digests: f.Digests, DigestsOne: f.DigestsOne, Effects: f.Effects, ExactlyOne: f.ExactlyOne}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("figures %+v; want %+v", got, want)
	}
	// The tick an hour later in the same week defers to the week's first:
	// it has no job of its own.
	if s := f.FanoutStates; s["Succeeded"] != 2 || s["Succeeded (skipped)"] != 1 || s["none"] != 1 {
		t.Fatalf("fan-out states %v", s)
	}
}

func TestLedgerNamesOutboxAndFanoutBreaches(t *testing.T) {
	w := newFanoutWorld(t)
	refused := w.job(client.TypeWelcome, client.StateSucceeded)
	refused.Job.Source, refused.Refused, refused.Accepted = viaOutbox, true, false
	w.truth.RefusedJobs[refused.JobID] = true // the job exists all the same
	wrong := w.job(client.TypeWelcome, client.StateSucceeded)
	wrong.Job.Source = viaOutbox // reads Succeeded with no mail

	// The tick while off ran, and mailed a partner of its week.
	w.truth.Fanout[w.offTick] = client.Job{JobID: w.offTick, State: client.StateSucceeded}
	offDigest := digestOf("u-p1", w.weeks.off)
	w.mail(offDigest, 90*time.Second)
	// A partner missed in one week, a digest mailed before the fan-out's
	// switch went on, another week's tick not done.
	missed := digestOf("u-p2", w.weeks.other)
	w.truth.Mails = slices.DeleteFunc(w.truth.Mails, func(id string) bool { return strings.HasPrefix(id, "ses-"+missed) })
	w.truth.States[missed] = client.Job{JobID: missed, State: client.StateParked}
	early := digestOf("u-p1", w.weeks.on)
	for i := range w.truth.Sends {
		if w.truth.Sends[i].JobID == early {
			w.truth.Sends[i].Time = w.at.Add(90 * time.Second)
		}
	}
	w.truth.Fanout[w.otherTick] = client.Job{JobID: w.otherTick, State: client.StateProcessing}

	got := broken(w.ledger(nil))
	for name, want := range map[string][]string{
		InvRefusedJob: {refused.JobID},
		InvLost:       {missed, wrong.JobID},
		InvFailClosed: {early + " (before the fan-out's switch)"},
	} {
		slices.Sort(want)
		if !slices.Equal(got[name], want) {
			t.Errorf("%s: %v; want %v", name, got[name], want)
		}
	}
	off := strings.Join(got[InvTickOff], "|")
	if len(got[InvTickOff]) != 2 || !strings.Contains(off, "tick "+w.offTick) || !strings.Contains(off, "digest "+offDigest+" mailed before the fan-out's switch went on") {
		t.Errorf("%s: %v; want the tick that ran and the digest it mailed", InvTickOff, got[InvTickOff])
	}
	states := strings.Join(got[InvWrongState], "|")
	for _, want := range []string{wrong.JobID + " reads Succeeded", "fan-out job " + w.otherTick + " of " + contract.ISOWeek(w.weeks.other) + " reads Processing"} {
		if !strings.Contains(states, want) {
			t.Errorf("wrong states %q miss %q", states, want)
		}
	}
	if got[InvForeignMail] != nil {
		t.Errorf("foreign mails %v: the off week's digest is the tick's breach", got[InvForeignMail])
	}

	// A fan-out whose week has no tick's job at all, and a page of a run
	// whose tick's job exists missing. A page of the run of a tick that
	// deferred to the week's job (no job of its own) is owed by nobody.
	w2 := newFanoutWorld(t)
	delete(w2.truth.Fanout, w2.otherTick)
	week := contract.ISOWeek(w2.weeks.on)
	page := message.DeriveMessageID(digest.Caller, digest.PageKey(week, w2.onTick, "u-p1"))
	w2.fan.Jobs[page] = fanoutJob{Week: week, On: true, Run: w2.onTick}
	deferred := message.DeriveMessageID(digest.Caller, digest.PageKey(week, w2.onAgain, "u-p1"))
	w2.fan.Jobs[deferred] = fanoutJob{Week: week, On: true, Run: w2.onAgain}
	lost := broken(w2.ledger(nil))[InvLost]
	if !slices.Contains(lost, "the fan-out of "+contract.ISOWeek(w2.weeks.other)+": no tick's job") ||
		!slices.Contains(lost, "fan-out page "+page+" of "+week+" (run "+w2.onTick+"): no job") {
		t.Errorf("lost %v; want the week without a tick's job and the missing page", lost)
	}
	if strings.Contains(strings.Join(lost, "|"), deferred) {
		t.Errorf("lost %v names the page of a tick that deferred (no job, so no run)", lost)
	}
}

// The plan owes the later pages of each run: a run per tick time of a week
// sent while on, its pages keyed by that tick's job id, so a re-trigger's
// pages are apart from the first run's.
func TestFanoutPlanNamesEachRunsPages(t *testing.T) {
	partners := make([]string, digest.PageSize+5)
	for i := range partners {
		partners[i] = fmt.Sprintf("u-%04d", i)
	}
	w := weeksBefore(time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC))
	plan := fanoutJobs(partners, []tickSent{{At: w.off}, {At: w.on, On: true}, {At: w.on, On: true}, {At: w.onAgain, On: true}})
	week := contract.ISOWeek(w.on)
	last := partners[digest.PageSize-1]
	for _, at := range []time.Time{w.on, w.onAgain} {
		run := message.TickMessageID(digest.ScheduleName, at)
		page := message.DeriveMessageID(digest.Caller, digest.PageKey(week, run, last))
		if got, ok := plan.Jobs[page]; !ok || got.Run != run || got.Week != week || got.Tick {
			t.Errorf("the plan's page 2 of the run of %s: %+v, %v", at, got, ok)
		}
	}
	pages := 0
	for _, j := range plan.Jobs {
		if !j.Tick {
			pages++
		}
	}
	if pages != 2 {
		t.Fatalf("%d pages planned, want page 2 of each of the 2 runs (the off week owes none)", pages)
	}
}
