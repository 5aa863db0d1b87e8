package schedule

import (
	"errors"
	"testing"
	"time"
)

func mustLoc(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

// Each case: the expression in its zone, the time after which to look, and
// the next firings in order (RFC 3339).
func TestNext(t *testing.T) {
	for _, tc := range []struct {
		name, expr, tz, after string
		want                  []string
	}{
		{"every Monday 09:00 UTC", "cron(0 9 ? * MON *)", "", "2026-12-02T10:00:00Z",
			[]string{"2026-12-07T09:00:00Z", "2026-12-14T09:00:00Z"}},
		{"exactly at a firing is after it", "cron(0 9 ? * MON *)", "", "2026-12-07T09:00:00Z",
			[]string{"2026-12-14T09:00:00Z"}},
		{"Monday 09:00 in Berlin across spring forward", "cron(0 9 ? * MON *)", "Europe/Berlin", "2026-03-20T00:00:00Z",
			[]string{"2026-03-23T08:00:00Z", "2026-03-30T07:00:00Z"}},
		{"Berlin: 02:30 does not exist on 29 March, so it is skipped", "cron(30 2 * * ? *)", "Europe/Berlin", "2026-03-28T02:00:00Z",
			[]string{"2026-03-30T00:30:00Z", "2026-03-31T00:30:00Z"}},
		{"Berlin: 02:30 exists twice on 25 October and fires once, at the first", "cron(30 2 * * ? *)", "Europe/Berlin", "2026-10-24T12:00:00Z",
			[]string{"2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z"}},
		{"New York spring forward", "cron(30 2 ? * SUN *)", "America/New_York", "2026-03-01T12:00:00Z",
			[]string{"2026-03-15T06:30:00Z"}},
		{"increments and ranges", "cron(0/20 8-9 * * ? *)", "", "2026-12-07T08:30:00Z",
			[]string{"2026-12-07T08:40:00Z", "2026-12-07T09:00:00Z", "2026-12-07T09:20:00Z", "2026-12-07T09:40:00Z", "2026-12-08T08:00:00Z"}},
		{"lists, month and day names, numbers for days (1 = SUN)", "cron(15 10 ? JAN,MAR 2,6 2027)", "", "2027-01-01T00:00:00Z",
			[]string{"2027-01-01T10:15:00Z", "2027-01-04T10:15:00Z", "2027-01-08T10:15:00Z"}},
		{"the year field ends it", "cron(0 0 1 1 ? 2027-2028)", "", "2026-06-01T00:00:00Z",
			[]string{"2027-01-01T00:00:00Z", "2028-01-01T00:00:00Z"}},
		{"L: the last day of the month", "cron(0 12 L * ? *)", "", "2028-02-01T00:00:00Z",
			[]string{"2028-02-29T12:00:00Z", "2028-03-31T12:00:00Z"}},
		{"W: the weekday nearest the 15th (Sat 15 May 2027 → Fri 14th)", "cron(0 12 15W * ? *)", "", "2027-05-01T00:00:00Z",
			[]string{"2027-05-14T12:00:00Z", "2027-06-15T12:00:00Z"}},
		{"LW: the last weekday (31 Jul 2027 is a Saturday)", "cron(0 12 LW * ? *)", "", "2027-07-01T00:00:00Z",
			[]string{"2027-07-30T12:00:00Z"}},
		{"#: the first Monday", "cron(0 9 ? * 2#1 *)", "", "2026-12-02T00:00:00Z",
			[]string{"2026-12-07T09:00:00Z", "2027-01-04T09:00:00Z", "2027-02-01T09:00:00Z"}},
		{"nL: the last Friday", "cron(0 9 ? * 6L *)", "", "2026-12-01T00:00:00Z",
			[]string{"2026-12-25T09:00:00Z", "2027-01-29T09:00:00Z"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, err := Parse(tc.expr, tc.tz)
			if err != nil {
				t.Fatal(err)
			}
			at, _ := time.Parse(time.RFC3339, tc.after)
			for _, w := range tc.want {
				next, ok := e.Next(at, time.Time{})
				if !ok || !next.Equal(mustTime(t, w)) {
					t.Fatalf("after %s: next %s (%v), want %s", at.UTC().Format(time.RFC3339), next.UTC().Format(time.RFC3339), ok, w)
				}
				at = next
			}
		})
	}
}

func mustTime(t *testing.T, s string) time.Time {
	t.Helper()
	at, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatal(err)
	}
	return at
}

func TestRateAndAt(t *testing.T) {
	anchor := mustTime(t, "2026-12-07T09:00:00Z")
	rate, err := Parse("rate(5 minutes)", "Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	for after, want := range map[string]string{
		"2026-12-07T08:00:00Z": "2026-12-07T09:00:00Z", // before the start: the start
		"2026-12-07T09:00:00Z": "2026-12-07T09:05:00Z",
		"2026-12-07T09:07:30Z": "2026-12-07T09:10:00Z",
	} {
		if next, ok := rate.Next(mustTime(t, after), anchor); !ok || !next.Equal(mustTime(t, want)) {
			t.Errorf("rate after %s: %s, want %s", after, next, want)
		}
	}
	// A rate of a day is 24 hours, whatever the clocks do (spring forward).
	day, _ := Parse("rate(1 day)", "Europe/Berlin")
	start := mustTime(t, "2026-03-28T09:00:00Z")
	if next, _ := day.Next(start, start); !next.Equal(start.Add(24 * time.Hour)) {
		t.Errorf("rate(1 day) across spring forward: %s", next)
	}
	at, err := Parse("at(2026-12-07T10:00:00)", "Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	if next, ok := at.Next(mustTime(t, "2026-12-07T08:00:00Z"), time.Time{}); !ok || !next.Equal(mustTime(t, "2026-12-07T09:00:00Z")) {
		t.Errorf("at: %s %v", next, ok)
	}
	if _, ok := at.Next(mustTime(t, "2026-12-07T09:00:00Z"), time.Time{}); ok {
		t.Error("an at() schedule fires again after its time")
	}
}

func TestParseRejects(t *testing.T) {
	for _, expr := range []string{
		"cron(0 9 * * MON *)",     // both day fields set
		"cron(0 9 ? * ? *)",       // neither
		"cron(0 9 ? * MON)",       // five fields
		"cron(60 9 ? * MON *)",    // minute out of range
		"cron(0 9 ? * MON-SUN *)", // backwards range (MON=2, SUN=1)
		"cron(0 9 ? * 2#6 *)",     // no sixth Monday
		"cron(0 9 32W * ? *)",
		"cron(0 9 ? * MON 1960)",
		"rate(0 minutes)", "rate(5 weeks)", "rate(5)",
		"at(2026-12-07 10:00)", "every monday",
	} {
		if _, err := Parse(expr, "UTC"); !errors.Is(err, ErrSyntax) {
			t.Errorf("Parse(%q) = %v, want ErrSyntax", expr, err)
		}
	}
	if _, err := Parse("rate(1 minute)", "Mars/Olympus"); !errors.Is(err, ErrSyntax) {
		t.Errorf("unknown zone: %v", err)
	}
}

func TestWallTimeIsInTheZone(t *testing.T) {
	e, _ := Parse("cron(0 9 ? * MON *)", "Europe/Berlin")
	next, _ := e.Next(mustTime(t, "2026-12-01T00:00:00Z"), time.Time{})
	if got := next.In(mustLoc(t, "Europe/Berlin")).Format("Mon 15:04"); got != "Mon 09:00" {
		t.Fatalf("fires at %s Berlin time, want Mon 09:00", got)
	}
}
