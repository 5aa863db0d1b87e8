package chaos

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/runstwice/runstwice/internal/email/digest"
	"github.com/runstwice/runstwice/message"
)

// clockWorld is a clock campaign's run and what was seen after it: one job
// of each fate, a week of two partners and an odd id, one relay case.
func clockWorld(t *testing.T) (*world, *clockRun, *truth) {
	w := newWorld(t)
	run := &clockRun{MailsBefore: map[string]bool{}, Jumps: []time.Duration{31 * day, 400 * day}, Offset: 431 * day,
		Jobs:  []clockJob{{ID: "plain-1", Fate: FatePlain}, {ID: "cancelled-1", Fate: FateCancelled}, {ID: "ran-now-1", Fate: FateRanNow, Swept: true}},
		Week:  fanoutWeek{Week: "2027-W02", Partners: []string{"u-1", "u-2"}, Odd: []string{"u-1@odd"}, Recorded: map[string]string{"u-1@odd": "userId: not an id"}},
		Relay: []relayCase{{Key: "k", First: "relay-first", Second: "relay-second"}}}
	after := &truth{Seen: seen{Outcomes: map[string][]outcome{}, Records: map[string]int{}}}
	mail := func(id string) {
		mid := "ses-" + id + "-" + time.Duration(len(after.Mails)).String()
		after.Mails = append(after.Mails, mid)
		after.Sends = append(after.Sends, send{JobID: id, MessageID: mid, Status: 200, Time: w.at})
	}
	for _, id := range []string{"plain-1", "ran-now-1", "relay-first"} {
		mail(id)
	}
	for _, u := range run.Week.Partners {
		mail(message.DeriveMessageID(digest.Caller, digest.DigestKey(u, run.Week.Week)))
	}
	return w, run, after
}

func clockLedger(w *world, run *clockRun, after *truth) *Ledger {
	return w.ledger(func(in *ledgerInput) { in.clock, in.clockTruth = run, after })
}

func TestClockLedgerAcceptsWhatThePromiseAllows(t *testing.T) {
	w, run, after := clockWorld(t)
	l := clockLedger(w, run, after)
	if b := broken(l); len(b) > 0 {
		t.Fatalf("broken: %v", b)
	}
	if f := l.Figures.Clock; f == nil || f.Mails != 5 || f.PartnersOne != 2 || f.OddRecorded != 1 || f.Jobs != 3 {
		t.Fatalf("clock figures %+v", l.Figures.Clock)
	}
	for _, name := range clockInvariantNames {
		if !slices.ContainsFunc(l.Invariants, func(i Invariant) bool { return i.Name == name }) {
			t.Errorf("the ledger has no line %q", name)
		}
	}
}

// Each breach of the promise across time breaks its own line.
func TestClockLedgerNamesEachBreach(t *testing.T) {
	for _, tc := range []struct {
		name   string
		breach func(run *clockRun, mail func(id string))
		inv    string
		want   string
	}{
		{"a cancelled job ran after the jump", func(_ *clockRun, mail func(string)) { mail("cancelled-1") }, InvCancelledJump, "cancelled-1"},
		{"a job run now ran again at its old time", func(_ *clockRun, mail func(string)) { mail("ran-now-1") }, InvTwiceJump, "ran-now-1"},
		{"a plain job never ran", func(run *clockRun, _ func(string)) {
			run.Jobs = append(run.Jobs, clockJob{ID: "plain-2", Fate: FatePlain})
		}, InvLost, "plain-2"},
		{"a partner missed the week", func(run *clockRun, _ func(string)) { run.Week.Partners = append(run.Week.Partners, "u-3") }, InvDigestWeek, "u-3"},
		{"an odd id was not recorded", func(run *clockRun, _ func(string)) { run.Week.Recorded = map[string]string{} }, InvDigestWeek, "u-1@odd"},
		{"an item relayed again made a second job", func(_ *clockRun, mail func(string)) { mail("relay-second") }, InvTwiceJump, "relay case"},
		{"a schedule outlived its job", func(run *clockRun, _ func(string)) { run.Orphans = []string{"ran-now-1"} }, InvOrphans, "after the sweep"},
		{"a mail no clock job sent", func(_ *clockRun, mail func(string)) { mail("stranger") }, InvForeignMail, "after the clock moved"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, run, after := clockWorld(t)
			tc.breach(run, func(id string) {
				mid := "ses-extra-" + id
				after.Mails = append(after.Mails, mid)
				after.Sends = append(after.Sends, send{JobID: id, MessageID: mid, Status: 200, Time: w.at.Add(time.Hour)})
			})
			ids := broken(clockLedger(w, run, after))
			if len(ids) != 1 || !strings.Contains(strings.Join(ids[tc.inv], " "), tc.want) {
				t.Fatalf("broken %v; want only %q naming %q", ids, tc.inv, tc.want)
			}
		})
	}
}

func TestJumpString(t *testing.T) {
	for days, want := range map[float64]string{31: "31d", 400: "400d", 61.0 / 1440: "1h1m", 20.0 / 24: "20h"} {
		if got := jumpString(days); got != want {
			t.Errorf("jumpString(%v) = %q; want %q", days, got, want)
		}
	}
}
