package sesmodel_test

import (
	"flag"
	"fmt"
	"math"
	"testing"
	"testing/synctest"
	"time"

	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/dev/sesmodel"
	"github.com/runstwice/runstwice/internal/dev/stack"
	"github.com/runstwice/runstwice/internal/email"
)

// full runs the backlog of 10,000 digests (make ses-model); the short run
// of 1,000 is part of make test.
var full = flag.Bool("full", false, "drain the full backlog of 10,000 digests at each rate")

// settings are the template's settings of the e-mail function's event
// source event.
func settings(t *testing.T, event string) sesmodel.Settings {
	t.Helper()
	tmpl := stack.RepoTemplate(t)
	s, err := sesmodel.FromTemplate(tmpl, event)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// run drains cfg in a bubble and returns what it did.
func run(t *testing.T, cfg sesmodel.Config) sesmodel.Result {
	t.Helper()
	var res sesmodel.Result
	var err error
	synctest.Test(t, func(*testing.T) { res, err = sesmodel.Run(cfg) })
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// report is one result as a line of docs/deploy.md's table.
func report(rate int, s sesmodel.Settings, r sesmodel.Result) string {
	ideal := time.Duration(float64(r.Jobs) / float64(rate) * float64(time.Second))
	return fmt.Sprintf("| %d/s | %d | %d × %d | %v | %v (%+.1f %%) | %d | %d | %d | %.2f | %.2f | %.2f | %.2f s |",
		rate, r.Jobs, s.Concurrency, s.BatchSize, ideal.Round(time.Second), r.Drain.Round(time.Second),
		100*(r.Drain.Seconds()-ideal.Seconds())/ideal.Seconds(), r.MostInASecond, r.DeadLettered, r.MostReceives,
		float64(r.Copies)/float64(r.Jobs), float64(r.Bookings)/float64(r.Jobs), float64(r.ScheduleWrites)/float64(r.Jobs),
		r.InvocationTime.Seconds()/float64(r.Jobs))
}

// A backlog of digests on the bulk queue alone, with the template's
// settings, at SES rates of 1, 14 and 100 mails a second: every digest is
// sent exactly once, none is dead-lettered and no delivery is received
// twice (a wait for a send slot spends no receive), SES never gets more
// than its rate in any second (it throttles nothing), and the backlog
// drains within 10 % of backlog ÷ rate, the bulk queue having the whole
// rate to itself.
func TestBacklogDrainsAtTheAccountRate(t *testing.T) {
	jobs := 1000
	if *full {
		jobs = 10000
	}
	bulk := settings(t, "Bulk")
	t.Logf("| rate | digests | invocations × batch | backlog ÷ rate | drained in | most in a second | dead-lettered | most receives | copies per job | bookings per job | schedule UpdateItems per job | Lambda time per job |")
	for _, rate := range []int{1, 14, 100} {
		t.Run(fmt.Sprint(rate, "/s"), func(t *testing.T) {
			r := run(t, sesmodel.Config{Rate: rate, Sources: []sesmodel.Source{{Settings: bulk, Type: contract.PartnerDigest, Jobs: jobs}},
				Limit: 3*time.Duration(jobs/rate)*time.Second + time.Hour})
			t.Log(report(rate, bulk, r))
			ideal := float64(jobs) / float64(rate)
			switch {
			case r.DeadLettered != 0:
				t.Errorf("%d dead-lettered; want none", r.DeadLettered)
			case r.Unique != jobs || r.Duplicates != 0:
				t.Errorf("%d of %d digests sent, %d twice; want each once", r.Unique, jobs, r.Duplicates)
			case r.MostInASecond > rate || r.Throttled != 0:
				t.Errorf("%d mails in one second, %d throttled; want at most %d and none", r.MostInASecond, r.Throttled, rate)
			case r.MostReceives > 1 || r.TimedOut != 0:
				t.Errorf("a delivery was received %d times, %d invocations timed out; want each once and none", r.MostReceives, r.TimedOut)
			case math.Abs(r.Drain.Seconds()-ideal) > 0.1*ideal:
				t.Errorf("drained in %v; want within 10 %% of %v", r.Drain, time.Duration(ideal*float64(time.Second)))
			}
		})
	}
}

// The account's rate bounds every queue together: backlogs on all three
// queues at once, each with its event source's concurrency, never give
// SES more than its rate in a second, and nothing is dead-lettered.
func TestQueuesTogetherStayWithinTheAccountRate(t *testing.T) {
	rate := 14
	r := run(t, sesmodel.Config{Rate: rate, Limit: 2 * time.Hour, Sources: []sesmodel.Source{
		{Settings: settings(t, "Critical"), Type: contract.PasswordReset, Jobs: 300},
		{Settings: settings(t, "Default"), Type: contract.Welcome, Jobs: 300},
		{Settings: settings(t, "Bulk"), Type: contract.PartnerDigest, Jobs: 400},
	}})
	t.Logf("%+v", r)
	if r.DeadLettered != 0 || r.Unique != 1000 || r.Duplicates != 0 || r.MostInASecond > rate || r.Throttled != 0 || r.MostReceives > 1 {
		t.Errorf("%+v; want every mail once, none dead-lettered, at most %d a second", r, rate)
	}
	if ideal := 1000.0 / float64(rate); r.Drain.Seconds() > 1.1*ideal {
		t.Errorf("drained in %v; want within 10 %% of %.0fs", r.Drain, ideal)
	}
}

// SES's daily quota parks the digests it refuses, with the reason, and
// dead-letters none: once the quota resets they are all sent.
func TestDailyQuotaParksUntilItResets(t *testing.T) {
	r := run(t, sesmodel.Config{Rate: 14, QuotaAfter: 50, QuotaReset: 2 * time.Hour, Limit: 6 * time.Hour,
		Sources: []sesmodel.Source{{Settings: settings(t, "Bulk"), Type: contract.PartnerDigest, Jobs: 200}}})
	t.Logf("%+v", r)
	if r.DeadLettered != 0 || r.Unique != 200 || r.Duplicates != 0 {
		t.Errorf("%+v; want every digest sent once and none dead-lettered", r)
	}
	if r.Refused == 0 || r.Parked != 150 || r.ParkedReason != email.ReasonDailyQuota {
		t.Errorf("refused %d, parked %d (%q); want the 150 past the quota parked, saying why", r.Refused, r.Parked, r.ParkedReason)
	}
	// A parked digest is looked at again every 15 minutes, and a container
	// that met the quota asks SES again after a minute.
	if r.Drain < 2*time.Hour || r.Drain > 2*time.Hour+engine.MaxDelay+2*time.Minute {
		t.Errorf("drained in %v; want within a park (15m) and a minute of the quota's reset at 2h", r.Drain)
	}
}
