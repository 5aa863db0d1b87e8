package digest_test

import (
	"testing"
	"time"

	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/email/digest"
	"github.com/runstwice/runstwice/internal/runner"
	"github.com/runstwice/runstwice/message"
)

// A tick's digestId is the ISO week of its scheduled time in the
// schedule's own time zone. Monday 7 December 2026, 09:00 in a zone ahead
// of UTC by more than 9 hours is still Sunday 6 December in UTC (week 49):
// it is labelled week 50, the Monday's own, as in every other zone.
func TestTickWeekIsLabelledInTheSchedulesZone(t *testing.T) {
	for _, tc := range []struct {
		zone   string
		offset string // of Monday 7 December 2026, 09:00 there
	}{
		{"UTC", "+00:00"},
		{"Europe/Berlin", "+01:00"},
		{"America/Los_Angeles", "-08:00"},
		{"Pacific/Pago_Pago", "-11:00"},
		{"Asia/Tokyo", "+09:00"},
		{"Australia/Adelaide", "+10:30"}, // summer time
		{"Australia/Brisbane", "+10:00"},
		{"Australia/Sydney", "+11:00"}, // summer time: UTC+11
		{"Pacific/Noumea", "+11:00"},
		{"Pacific/Auckland", "+13:00"},
		{"Pacific/Kiritimati", "+14:00"},
	} {
		t.Run(tc.zone, func(t *testing.T) {
			loc, err := digest.Timezone(tc.zone)
			if err != nil {
				t.Fatal(err)
			}
			local := time.Date(2026, 12, 7, 9, 0, 0, 0, loc)
			if got := local.Format("-07:00"); got != tc.offset {
				t.Fatalf("%s is at %s on that Monday, the table says %s", tc.zone, got, tc.offset)
			}
			// The scheduler writes <aws.scheduler.scheduled-time> in UTC.
			scheduled := local.UTC().Format(message.TickTimeLayout)
			env, err := contract.RegistryIn(loc).TickEnvelope(message.Tick{V: 1, Type: contract.Fanout.Name, Schedule: digest.ScheduleName,
				ScheduledTime: scheduled, CorrelationID: "exec-1"})
			if err != nil {
				t.Fatal(err)
			}
			if env.Args["digestId"] != "2026-W50" || env.Key != "partner-digest-fanout:2026-W50" {
				t.Fatalf("the tick of %s (%s in UTC) has digestId %q, key %q; want 2026-W50, the Monday's week in %s",
					local.Format(time.RFC3339), scheduled, env.Args["digestId"], env.Key, tc.zone)
			}
			// The same tick on the registry of UTC (what the API, jobctl
			// and the other functions build) has the same job id: only
			// the label is the zone's.
			utc, err := contract.Registry().TickEnvelope(message.Tick{V: 1, Type: contract.Fanout.Name, Schedule: digest.ScheduleName,
				ScheduledTime: scheduled, CorrelationID: "exec-1"})
			if err != nil || utc.MessageID != env.MessageID {
				t.Fatalf("job ids %s and %s (%v); the zone must not change a tick's job id", utc.MessageID, env.MessageID, err)
			}
		})
	}
}

// In a UTC+11 zone the week's fan-out enqueues every partner's digest of
// the Monday's own week.
func TestFanoutInUTCPlus11SendsTheMondaysWeek(t *testing.T) {
	loc, err := digest.Timezone("Australia/Sydney")
	if err != nil {
		t.Fatal(err)
	}
	reg, err := message.NewRegistry(contract.FanoutIn(loc), contract.PartnerDigest)
	if err != nil {
		t.Fatal(err)
	}
	env, err := reg.TickEnvelope(message.Tick{V: 1, Type: contract.Fanout.Name, Schedule: digest.ScheduleName,
		ScheduledTime: "2026-12-06T22:00:00Z", CorrelationID: "exec-1"}) // Monday 7 December, 09:00 AEDT
	if err != nil {
		t.Fatal(err)
	}
	w := newWorld(t, 120)
	w.drain(t, runner.Job{Envelope: env, Type: contract.FanoutIn(loc)}, false)
	w.check(t, 120, "Sydney") // check wants every digest keyed 2026-W50
}

func TestTimezone(t *testing.T) {
	if loc, err := digest.Timezone(""); err != nil || loc != time.UTC {
		t.Fatalf("Timezone(\"\") = %v, %v; want UTC", loc, err)
	}
	if _, err := digest.Timezone("Mars/Olympus_Mons"); err == nil {
		t.Fatal("an unknown zone was accepted")
	}
	if got := contract.WeekOf(time.Date(2026, 12, 6, 22, 0, 0, 0, time.UTC), nil); got != "2026-W49" {
		t.Fatalf("WeekOf(Sunday 22:00 UTC, nil) = %s, want 2026-W49 (UTC)", got)
	}
}
