// Package webview is the local web view of the running stack:
// server-rendered pages (html/template, embedded CSS, no JavaScript). The
// main page shows the jobs and their derived states, the mails sent, the
// dead letters with their reasons, the kill switches, each with a button
// that flips it (a POST, answered with a redirect back to the page), and the
// schedules. A page per job ({prefix}jobs/{jobId}) shows its view, its
// history, its chain and its trace, with the actions an operator takes
// there (cancel, run now, redrive), each confirmed on a page of its own
// before its POST.
//
// It is a loopback tool: it answers only requests addressed to a loopback
// host (so a DNS-rebinding page cannot read it), and refuses cross-origin
// POSTs (http.CrossOriginProtection), so no other site can flip a switch.
//
// Wiring: mount the handler under its prefix ("/_local/" by default):
//
//	src, err := webview.FromStack(cfg, st, mailLog) // AWS-backed sources
//	mux.Handle("/_local/", webview.New(src, webview.Options{Stage: "local"}))
//
// Each source may be nil; its section then says it is not wired.
package webview

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/jobs"
)

// Job is one job as the page shows it. Fields the record lacks are zero.
type Job struct {
	ID     string
	Type   string
	Key    string
	Caller string
	// State is the derived state (marker included), e.g. "Succeeded".
	State          string
	Attempts       int
	LastErrorClass string
	// LastOutcome and LastReason are the worker's last recorded outcome and
	// its reason, when the record has them.
	LastOutcome string
	LastReason  string
	TraceID     string
	CreatedAt   time.Time
	UpdatedAt   time.Time
	RunAt       time.Time
	// Queue, CorrelationID, FailedAt and History are what a job's own page
	// adds (the list leaves them out).
	Queue         string
	CorrelationID string
	FailedAt      time.Time
	History       []Outcome
	// Chain is the job's place in a chain of continuations: the job it
	// waits for, and the jobs that wait for it (a job's own page only).
	Chain Chain
}

// Chain is what a job's page draws of its continuations.
type Chain struct {
	// Parent is the job this one waits (or waited) for, and AfterPolicy
	// which of its ends run this one; nil for a job that waits for none.
	Parent      *Link
	AfterPolicy string
	// Children are the jobs that wait (or waited) for this one.
	Children []Link
}

// Link is a job a chain names, with its state now.
type Link struct {
	ID    string
	Type  string
	State string
}

// Short is the linked job id's first eight characters.
func (l Link) Short() string { return shortID(l.ID) }

// Alone reports that the job is in no chain.
func (c Chain) Alone() bool { return c.Parent == nil && len(c.Children) == 0 }

// Outcome is one earlier outcome of a job (jobs.View's history).
type Outcome struct {
	At      time.Time
	Outcome string
	Reason  string
}

// ReasonClass is the class of the row's reason and error class: "reason"
// (red) when the job ended badly (Failed, Expired), else "note": the
// history of a job that went on (parked, then succeeded; dead-lettered,
// then redriven) is no alarm.
func (j Job) ReasonClass() string {
	switch j.State {
	case string(jobs.StateFailed), string(jobs.StateExpired):
		return "reason"
	}
	return "note"
}

// Mail is one e-mail the stack sent.
type Mail struct {
	To      string
	Subject string
	Link    string
	JobID   string
	Time    time.Time
}

// DeadLetter is one stored dead letter.
type DeadLetter struct {
	ID           string
	JobID        string
	Type         string
	Reason       string
	Status       string
	SourceQueue  string
	ReceiveCount int
	Occurrences  int
	FirstSeen    time.Time
	LastSeen     time.Time
}

// Switch is one kill switch.
type Switch struct {
	// Type is the job type it switches (or, when Unknown, the parameter's
	// last path element).
	Type string
	// Stored is the raw stored value; HasStored is false when there is none.
	Stored    string
	HasStored bool
	// Readable reports that Stored parses as a switch value.
	Readable bool
	// Default is the registered default; Effective is what workers apply.
	Default   bool
	Effective bool
	// Until is when a time-boxed value reverts to the default (zero:
	// never); Expired, that it has; Reason, why it was set.
	Until   time.Time
	Expired bool
	Reason  string
	// Unknown marks a stored parameter that names no registered type (a
	// typo); it has no button.
	Unknown bool
}

// Internal reports a switch of runstwice's own types (contract.Own: its
// sweeps' ticks, a batch's finisher), which the page marks as such and
// offers no button for.
func (s Switch) Internal() bool { return contract.Own(s.Type) }

// Schedule is one EventBridge Scheduler schedule of the stage: a recurring
// one of the template, or a one-time schedule of a job run at a time.
type Schedule struct {
	Group, Name string
	Expression  string
	Timezone    string
	State       string
	// Next is when it fires next (zero: never again).
	Next time.Time
	// Type is the job type it makes; Tick, that it sends a tick.
	Type string
	Tick bool
}

// ScheduleLister lists the stage's schedules.
type ScheduleLister interface {
	List(ctx context.Context) ([]Schedule, error)
}

// JobLister lists the most recent jobs, newest first.
type JobLister interface {
	Recent(ctx context.Context, n int) ([]Job, error)
}

// MailLog is the record of the mails sent, newest first.
type MailLog interface {
	Recent(n int) []Mail
}

// DeadLetterLister lists the most recently seen dead letters, newest first.
type DeadLetterLister interface {
	Recent(ctx context.Context, n int) ([]DeadLetter, error)
}

// Switchboard reads and sets the kill switches.
type Switchboard interface {
	// List returns every registered switch (and any unknown parameter).
	List(ctx context.Context) ([]Switch, error)
	// Set stores jobType's switch as on or off.
	Set(ctx context.Context, jobType string, enabled bool) error
}

// Sources is what the page shows. A nil source leaves its section empty,
// with a note that it is not wired.
type Sources struct {
	Jobs        JobLister
	Job         JobReader
	Operator    Operator
	Traces      TraceReader
	Mail        MailLog
	DeadLetters DeadLetterLister
	Switches    Switchboard
	Schedules   ScheduleLister
}

// Defaults of Options.
const (
	DefaultPrefix  = "/_local/"
	DefaultLimit   = 50
	DefaultRefresh = 5 * time.Second
)

// Options tune the view; the zero value is usable.
type Options struct {
	// Prefix is the path the handler is mounted under, with a trailing
	// slash (DefaultPrefix if empty).
	Prefix string
	// Stage is shown in the title, e.g. "local".
	Stage string
	// Limit is the number of rows per section (DefaultLimit if 0).
	Limit int
	// Refresh is the page's automatic reload interval (DefaultRefresh if 0,
	// none if negative); ?refresh=0 turns it off for one page.
	Refresh time.Duration
	// Logger receives the errors of the sources (slog.Default if nil).
	Logger *slog.Logger
	// Now is the clock (time.Now if nil).
	Now func() time.Time
}

// handler serves the view.
type handler struct {
	src     Sources
	opts    Options
	mux     *http.ServeMux
	flashes flashes
}

// New returns the handler of the view, to be mounted under opts.Prefix
// ("/_local/"): GET {prefix} is the page, POST {prefix}switches flips a
// switch, GET {prefix}jobs/{id} is a job's page, GET {prefix}jobs/{id}/{action}
// asks to confirm an action and POST {prefix}jobs/{id}/{action} takes it,
// GET {prefix}assets/ serves the stylesheet.
func New(src Sources, opts Options) http.Handler {
	if opts.Prefix == "" {
		opts.Prefix = DefaultPrefix
	}
	if !strings.HasSuffix(opts.Prefix, "/") {
		opts.Prefix += "/"
	}
	if opts.Limit <= 0 {
		opts.Limit = DefaultLimit
	}
	if opts.Refresh == 0 {
		opts.Refresh = DefaultRefresh
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	h := &handler{src: src, opts: opts, mux: http.NewServeMux()}
	p := opts.Prefix
	h.mux.HandleFunc("GET "+p+"{$}", h.page)
	h.mux.HandleFunc("POST "+p+"switches", h.flip)
	h.mux.HandleFunc("GET "+p+"jobs/{id}", h.jobPage)
	h.mux.HandleFunc("GET "+p+"jobs/{id}/{action}", h.jobPage)
	h.mux.HandleFunc("GET "+p+"jobs/{id}/trace", h.tracePage)
	h.mux.HandleFunc("POST "+p+"jobs/{id}/{action}", h.act)
	h.mux.Handle("GET "+p+"assets/", http.StripPrefix(p+"assets/", http.FileServerFS(assetFS)))
	csrf := http.NewCrossOriginProtection()
	csrf.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "cross-origin request refused", http.StatusForbidden)
	}))
	return loopbackOnly(csrf.Handler(securityHeaders(h.mux)))
}

// loopbackOnly refuses requests addressed to any host but a loopback one:
// a page that made its own name resolve to 127.0.0.1 (DNS rebinding) is
// same-origin with itself, not with the view, and must not read it.
func loopbackOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !isLoopbackHost(r.Host) {
			http.Error(w, "the local view answers loopback hosts only (127.0.0.1, localhost, [::1])", http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func isLoopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("Content-Security-Policy", "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("Referrer-Policy", "same-origin")
		next.ServeHTTP(w, r)
	})
}

// maxForm bounds a flip's body.
const maxForm = 4 << 10

// flip serves POST {prefix}switches: type=<job type>&state=on|off, then a
// redirect back to the page (post/redirect/get).
func (h *handler) flip(w http.ResponseWriter, r *http.Request) {
	if h.src.Switches == nil {
		http.Error(w, "no switchboard is wired", http.StatusNotFound)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxForm)
	if err := r.ParseForm(); err != nil {
		http.Error(w, "unreadable form: "+err.Error(), http.StatusBadRequest)
		return
	}
	jobType, state := r.PostForm.Get("type"), r.PostForm.Get("state")
	var enabled bool
	switch state {
	case "on":
		enabled = true
	case "off":
	default:
		http.Error(w, "state must be on or off", http.StatusBadRequest)
		return
	}
	switches, err := h.src.Switches.List(r.Context())
	if err != nil {
		h.opts.Logger.Error("webview: read switches", "error", err)
		http.Error(w, "cannot read the switches: "+err.Error(), http.StatusBadGateway)
		return
	}
	if !registered(switches, jobType) {
		http.Error(w, "unknown job type: "+printable(jobType), http.StatusBadRequest)
		return
	}
	if err := h.src.Switches.Set(r.Context(), jobType, enabled); err != nil {
		h.opts.Logger.Error("webview: set switch", "type", jobType, "enabled", enabled, "error", err)
		status := http.StatusBadGateway
		if errors.Is(err, ErrUnknownType) {
			status = http.StatusBadRequest
		}
		http.Error(w, "cannot set the switch: "+err.Error(), status)
		return
	}
	h.opts.Logger.Info("webview: switch set", "type", jobType, "enabled", enabled)
	back := h.opts.Prefix
	if r.PostForm.Get("refresh") == "0" {
		back += "?refresh=0"
	}
	http.Redirect(w, r, back+"#switches", http.StatusSeeOther)
}

// ErrUnknownType is returned (wrapped) by a Switchboard asked to set a type
// that is not registered.
var ErrUnknownType = errors.New("webview: unknown job type")

func registered(switches []Switch, jobType string) bool {
	for _, s := range switches {
		if s.Type == jobType && !s.Unknown {
			return true
		}
	}
	return false
}

// printable keeps an echoed value short and free of control characters.
func printable(s string) string {
	const limit = 80
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return '?'
		}
		return r
	}, s)
	if r := []rune(s); len(r) > limit {
		s = string(r[:limit]) + "…"
	}
	return s
}
