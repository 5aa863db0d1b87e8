package webview

import (
	"embed"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/runstwice/runstwice/internal/contract"
)

//go:embed templates/*.html assets/style.css
var files embed.FS

// assetFS is what {prefix}assets/ serves.
var assetFS = func() fs.FS {
	sub, err := fs.Sub(files, "assets")
	if err != nil {
		panic(err) // the directory is embedded above
	}
	return sub
}()

var pageTmpl = template.Must(template.New("page.html").Funcs(template.FuncMap{
	"when":  when,
	"lower": strings.ToLower,
	"short": shortID,
	"link":  func(prefix, id string) jobLink { return jobLink{Prefix: prefix, ID: id} },
	// Durations as a person reads them, a trace id in X-Ray's form (the
	// API's) and in W3C's (for the hover), and a trace link's text.
	"dur":        readable,
	"xray":       xrayForm,
	"w3c":        w3cForm,
	"tracelabel": traceLabel,
}).ParseFS(files, "templates/*.html"))

// section is one part of the page: its rows, or why there are none.
type section[T any] struct {
	Rows []T
	// Wired is false when the source is nil.
	Wired bool
	// Err is the source's error, shown in place of the rows.
	Err string
}

// stateCount is how many listed jobs are in one state.
type stateCount struct {
	State string
	N     int
}

// jobLink is what the "jobid" template renders: a short id linking to its
// job's page.
type jobLink struct{ Prefix, ID string }

// pageData is what the template renders.
type pageData struct {
	Prefix string
	Stage  string
	// Title follows the stage in the title ("" on the main page); NavBase
	// is what the navigation's anchors follow ("" on the main page, the
	// prefix on the others).
	Title   string
	NavBase string
	// Traced: the stack keeps its functions' spans (each job links to its
	// waterfall).
	Traced  bool
	Now     time.Time
	Refresh int // seconds; 0: no automatic reload
	// RefreshOff is true when ?refresh=0 turned the reload off.
	RefreshOff bool
	// ShowOwn is true when ?internal=1 asked for runstwice's own jobs
	// too; OwnLeftOut counts those the list left out without it.
	ShowOwn     bool
	OwnLeftOut  int
	Limit       int
	Jobs        section[Job]
	JobStates   []stateCount
	Mail        section[Mail]
	DeadLetters section[DeadLetter]
	Switches    section[Switch]
	Schedules   section[Schedule]
}

// Ago says how long before the page's time t was, e.g. "12s ago".
func (p pageData) Ago(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	d := p.Now.Sub(t)
	switch {
	case d < 0:
		// A time ahead is rounded, not cut: a job due in 3 days less the
		// second it took to show reads "in 3d", not "in 2d".
		return "in " + roughly((-d).Round(unitOf(-d)))
	case d < time.Second:
		return "just now"
	}
	return roughly(d) + " ago"
}

// unitOf is the unit roughly shows d in.
func unitOf(d time.Duration) time.Duration {
	switch {
	case d < time.Minute:
		return time.Second
	case d < time.Hour:
		return time.Minute
	case d < 48*time.Hour:
		return time.Hour
	}
	return 24 * time.Hour
}

func roughly(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d/time.Minute))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d/time.Hour))
	}
	return fmt.Sprintf("%dd", int(d/(24*time.Hour)))
}

// when formats a time for the page, in UTC to the millisecond (as every
// view of a job shows its times); the zero time is "".
func when(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02 15:04:05.000Z")
}

// page serves GET {prefix}: every section, read concurrently.
func (h *handler) page(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	d := pageData{Prefix: h.opts.Prefix, Stage: h.opts.Stage, Now: h.opts.Now(), Limit: h.opts.Limit, Traced: h.src.Traces != nil}
	if h.opts.Refresh > 0 {
		d.Refresh = max(int(h.opts.Refresh/time.Second), 1)
	}
	if r.URL.Query().Get("refresh") == "0" {
		d.Refresh, d.RefreshOff = 0, true
	}
	d.ShowOwn = r.URL.Query().Get("internal") == "1"
	n := h.opts.Limit
	var wg sync.WaitGroup
	if s := h.src.Jobs; s != nil {
		wg.Go(func() {
			d.Jobs = read(h, "jobs", func() ([]Job, error) {
				if d.ShowOwn {
					return s.Recent(ctx, n)
				}
				// runstwice's own jobs (a sweep's tick every five minutes)
				// are left out unless asked for, and counted.
				rows, err := s.Recent(ctx, 2*n)
				mine := make([]Job, 0, len(rows))
				for _, j := range rows {
					if contract.Own(j.Type) {
						d.OwnLeftOut++
						continue
					}
					mine = append(mine, j)
				}
				return mine, err
			})
		})
	}
	if s := h.src.Mail; s != nil {
		wg.Go(func() { d.Mail = read(h, "mail", func() ([]Mail, error) { return s.Recent(n), nil }) })
	}
	if s := h.src.DeadLetters; s != nil {
		wg.Go(func() {
			d.DeadLetters = read(h, "dead letters", func() ([]DeadLetter, error) { return s.Recent(ctx, n) })
		})
	}
	if s := h.src.Switches; s != nil {
		wg.Go(func() {
			d.Switches = read(h, "switches", func() ([]Switch, error) {
				rows, err := s.List(ctx)
				// The user's switches first, then runstwice's own.
				slices.SortStableFunc(rows, func(a, b Switch) int {
					switch {
					case a.Internal() == b.Internal():
						return 0
					case a.Internal():
						return 1
					}
					return -1
				})
				return rows, err
			})
		})
	}
	if s := h.src.Schedules; s != nil {
		wg.Go(func() { d.Schedules = read(h, "schedules", func() ([]Schedule, error) { return s.List(ctx) }) })
	}
	wg.Wait()
	d.JobStates = countStates(d.Jobs.Rows)
	h.render(w, "page.html", http.StatusOK, d)
}

// read runs one source; its error is logged and shown in its section.
func read[T any](h *handler, what string, f func() ([]T, error)) section[T] {
	rows, err := f()
	if err != nil {
		h.opts.Logger.Warn("webview: read "+what, "error", err)
		return section[T]{Wired: true, Err: err.Error()}
	}
	if len(rows) > h.opts.Limit {
		rows = rows[:h.opts.Limit]
	}
	return section[T]{Rows: rows, Wired: true}
}

// countStates counts the listed jobs per state, most frequent first.
func countStates(jobs []Job) []stateCount {
	counts := map[string]int{}
	for _, j := range jobs {
		counts[j.State]++
	}
	out := make([]stateCount, 0, len(counts))
	for s, n := range counts {
		out = append(out, stateCount{State: s, N: n})
	}
	slices.SortFunc(out, func(a, b stateCount) int {
		if a.N != b.N {
			return b.N - a.N
		}
		return strings.Compare(a.State, b.State)
	})
	return out
}
