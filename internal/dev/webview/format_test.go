package webview

import (
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"
)

// Durations read as a person says them, never Go's own "53.866384ms".
func TestReadableDurations(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0:                                     "0 µs",
		850 * time.Microsecond:                "850 µs",
		53866384 * time.Nanosecond:            "54 ms",
		999 * time.Millisecond:                "999 ms",
		999600 * time.Microsecond:             "1.0 s",
		5117287079 * time.Nanosecond:          "5.1 s",
		42*time.Second + 300*time.Millisecond: "42 s",
		3*time.Minute + 5*time.Second:         "3 min 5 s",
		2 * time.Minute:                       "2 min",
		-54 * time.Millisecond:                "-54 ms",
	} {
		if got := readable(d); got != want {
			t.Errorf("readable(%s) = %q; want %q", d, got, want)
		}
	}
}

// A trace id has one form on a page (X-Ray's, as the API shows it) and the
// other (W3C's) on hover; a form is read either way.
func TestTraceIDForms(t *testing.T) {
	const xray, w3c = "1-6b0e0b18-3fdcb17101def90e9ffe5564", "6b0e0b183fdcb17101def90e9ffe5564"
	for _, tc := range []struct{ in, x, w string }{
		{xray, xray, w3c},
		{w3c, xray, w3c},
		{"1-abc", "1-abc", "1-abc"},
		{"", "", ""},
	} {
		if got := xrayForm(tc.in); got != tc.x {
			t.Errorf("xrayForm(%q) = %q; want %q", tc.in, got, tc.x)
		}
		if got := w3cForm(tc.in); got != tc.w {
			t.Errorf("w3cForm(%q) = %q; want %q", tc.in, got, tc.w)
		}
	}
}

// Two jobs traced in the same second have X-Ray trace ids that begin
// alike (the epoch second): the list's trace links still tell them apart.
func TestTraceLinksTellJobsApart(t *testing.T) {
	a, b := jobAt("Succeeded"), jobAt("Succeeded")
	b.ID = "8c1f8d2f-6e3b-5d66-ae54-3f5c9b8dae22"
	a.TraceID, b.TraceID = "1-6b0e0b18-3fdcb17101def90e9ffe5564", "1-6b0e0b18-5e2d8a1f0c3b4d6e7f8a9b0c"
	h := New(Sources{Jobs: &fakeJobs{rows: []Job{a, b}}, Traces: fakeTraces{}}, quietOptions())
	code, body := get(t, h, "/_local/")
	if code != http.StatusOK {
		t.Fatalf("status %d", code)
	}
	links := regexp.MustCompile(`<a class="trace" href="[^"]+" title="[^"]*">(.*?)</a>`).FindAllStringSubmatch(body, -1)
	if len(links) != 2 {
		t.Fatalf("%d trace links; want 2:\n%s", len(links), body)
	}
	if links[0][1] == links[1][1] {
		t.Errorf("both trace links read %s", links[0][1])
	}
	for _, want := range []string{"<code>…9ffe5564</code>", "<code>…7f8a9b0c</code>", "trace 1-6b0e0b18-3fdcb17101def90e9ffe5564"} {
		if !regexp.MustCompile(regexp.QuoteMeta(want)).MatchString(body) {
			t.Errorf("the page lacks %s", want)
		}
	}
}

// runstwice's own jobs (a sweep's tick every five minutes) are left out
// of the list unless asked for, and counted; their switches are marked as
// runstwice's and offer no button to turn them off.
func TestPageSetsRunstwicesOwnApart(t *testing.T) {
	user, sweep := jobAt("Succeeded"), jobAt("Succeeded")
	sweep.ID, sweep.Type = "9d2f9e3f-7f4c-5e77-bf65-4f6dac9ebf33", "runstwice.continuation-sweep.v1"
	h := New(Sources{Jobs: &fakeJobs{rows: []Job{sweep, user}}, Switches: &fakeSwitches{rows: []Switch{
		{Type: "email.welcome.v1", Default: true, Effective: true},
		{Type: "runstwice.batch-finish.v1", Default: true, Effective: true},
	}}}, quietOptions())
	_, body := get(t, h, "/_local/")
	if strings.Contains(body, `data-job="`+sweep.ID+`"`) || !strings.Contains(body, `data-job="`+user.ID+`"`) ||
		!strings.Contains(body, "1 of runstwice's own jobs") || !strings.Contains(body, `href="/_local/?internal=1#jobs"`) {
		t.Errorf("the list shows runstwice's own job, or does not say it left it out:\n%s", body)
	}
	if _, all := get(t, h, "/_local/?internal=1"); !strings.Contains(all, `data-job="`+sweep.ID+`"`) {
		t.Errorf("?internal=1 does not show runstwice's own job:\n%s", all)
	}
	own := regexp.MustCompile(`(?s)<tr data-switch="runstwice.batch-finish.v1" class="internal">.*?</tr>`).FindString(body)
	if own == "" || !strings.Contains(own, "runstwice's own") || strings.Contains(own, "<button") {
		t.Errorf("runstwice's own switch is not marked, or offers a button:\n%s", own)
	}
	if mine := regexp.MustCompile(`(?s)<tr data-switch="email.welcome.v1">.*?</tr>`).FindString(body); !strings.Contains(mine, "turn off") {
		t.Errorf("the user's switch lost its button:\n%s", mine)
	}
}
