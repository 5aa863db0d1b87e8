package chaos

import (
	"fmt"
	"io"
	"slices"
	"time"
)

// story is one job's history as the campaign saw it, oldest first: every
// mail SES took for it, every claim of its marker, every invocation whose
// batch held it, every outcome line of it, and every AWS fault whose call
// named it. The ledger prints it for a job that breaks the promise, so that
// a failed run says why without being run again.
func story(id string, t *truth) []string {
	type line struct {
		at   time.Time
		text string
	}
	var lines []line
	add := func(at time.Time, format string, args ...any) {
		lines = append(lines, line{at, fmt.Sprintf(format, args...)})
	}
	for _, s := range t.Sends {
		if s.JobID == id {
			add(s.Time, "mail: SES answered %d, message %q, caller gone %t", s.Status, s.MessageID, s.CallerGone)
		}
	}
	for _, c := range t.Claims {
		if c.JobID == id {
			add(c.Time, "claim applied")
		}
	}
	for _, c := range t.Seen.Calls {
		if slices.Contains(c.JobIDs, id) {
			add(c.Start, "invocation of %s (%d records) starts; ends %s later, lost %t", c.Function, c.Records,
				c.End.Sub(c.Start).Round(time.Millisecond), c.Lost)
		}
	}
	for _, o := range t.Seen.Outcomes[id] {
		add(o.At, "outcome of %s: %s (%s)", o.Line.Function, o.Line.Outcome, o.Line.Reason)
	}
	for _, e := range t.Faults {
		if e.Mentions(id) {
			add(e.Time, "fault: %s %s %s (applied %t)", e.Kind, e.Service, e.Operation, e.Applied)
		}
	}
	slices.SortStableFunc(lines, func(a, b line) int { return a.at.Compare(b.at) })
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = l.at.UTC().Format("15:04:05.000") + "  " + l.text
	}
	return out
}

// maxStories is how many broken jobs' stories a ledger keeps.
const maxStories = 3

// keepStory records the story of a job that broke an invariant (the first
// maxStories of them).
func (a *accountant) keepStory(id string) {
	if a.stories == nil {
		a.stories = map[string][]string{}
	}
	if _, ok := a.stories[id]; ok || len(a.stories) >= maxStories {
		return
	}
	a.stories[id] = story(id, a.t)
}

// printStories writes each story under its job id.
func printStories(w io.Writer, stories map[string][]string) {
	ids := make([]string, 0, len(stories))
	for id := range stories {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		fmt.Fprintf(w, "  the story of %s:\n", id)
		for _, l := range stories[id] {
			fmt.Fprintf(w, "    %s\n", l)
		}
	}
}
