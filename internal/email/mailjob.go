package email

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/internal/runner"
	"github.com/runstwice/runstwice/message"
)

// Default token lifetimes.
const (
	DefaultVerificationTTL = 48 * time.Hour
	DefaultResetTTL        = time.Hour
)

// Config wires the e-mail handlers. Users, Sender and BaseURL are required.
type Config struct {
	Users  Users
	Sender Sender
	// BaseURL is APP_BASE_URL, the absolute http(s) URL links are built on.
	BaseURL string
	// VerificationTTL and ResetTTL are the token lifetimes (defaults above).
	VerificationTTL time.Duration
	ResetTTL        time.Duration
	// Now is the clock (time.Now if nil); Rand the token source
	// (crypto/rand if nil).
	Now  func() time.Time
	Rand io.Reader
}

// mailJob declares one e-mail job type: its contract declaration and what
// its mail needs. Each type's file declares one in its init function, so a
// type is declared in one place, beside its template.
type mailJob struct {
	// Type is the type's declaration (name, args, queue, switch default,
	// bias, lease, key derivation).
	Type message.JobType
	// template names the files templates/<template>.{txt,html}.
	template string
	// purpose is the token the mail carries ("" for none).
	purpose Purpose
	// skip returns why the mail is unnecessary for u, or "".
	skip func(u User) string
	// link builds the mail's link; token is "" for a type without one.
	link func(base *url.URL, job runner.Job, token string) string
}

// mailJobs are the e-mail job types, each declared in its own file: adding
// a type means adding its declaration here. Nothing registers itself.
var mailJobs = []mailJob{welcomeMail, passwordResetMail, partnerVerificationMail, partnerDigestMail}

// declared holds every e-mail job type, by name.
var declared = byName(mailJobs)

// byName indexes the declarations. A second declaration of a name is a
// programming error.
func byName(jobs []mailJob) map[string]mailJob {
	out := make(map[string]mailJob, len(jobs))
	for _, j := range jobs {
		if _, dup := out[j.Type.Name]; dup {
			panic("email: job type " + j.Type.Name + " declared twice")
		}
		if j.skip == nil {
			j.skip = func(User) string { return "" }
		}
		out[j.Type.Name] = j
	}
	return out
}

// Types returns the declarations this package's handlers serve (those of
// internal/contract that send a mail), sorted by name.
func Types() []message.JobType {
	out := make([]message.JobType, 0, len(declared))
	for _, j := range declared {
		out = append(out, j.Type)
	}
	slices.SortFunc(out, func(a, b message.JobType) int { return strings.Compare(a.Name, b.Name) })
	return out
}

func withQuery(base *url.URL, path string, q url.Values) string {
	u := base.JoinPath(path)
	u.RawQuery = q.Encode()
	return u.String()
}

// handler runs one e-mail job type.
type handler struct {
	cfg  Config
	base *url.URL
	job  mailJob
	tmpl mailTemplate
}

// Handlers returns the runner handler of every e-mail job type, keyed by type
// name, ready for runner.Config.Handlers.
func Handlers(cfg Config) (map[string]runner.Handler, error) {
	switch {
	case cfg.Users == nil:
		return nil, errors.New("email: Users is required")
	case cfg.Sender == nil:
		return nil, errors.New("email: Sender is required")
	}
	base, err := url.Parse(cfg.BaseURL)
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return nil, fmt.Errorf("email: base URL %q is not an absolute http(s) URL", cfg.BaseURL)
	}
	base.RawQuery, base.Fragment = "", ""
	if cfg.VerificationTTL <= 0 {
		cfg.VerificationTTL = DefaultVerificationTTL
	}
	if cfg.ResetTTL <= 0 {
		cfg.ResetTTL = DefaultResetTTL
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	out := make(map[string]runner.Handler, len(declared))
	for name, j := range declared {
		tmpl, err := loadTemplate(j.template)
		if err != nil {
			return nil, err
		}
		out[name] = &handler{cfg: cfg, base: base, job: j, tmpl: tmpl}
	}
	return out, nil
}

// Handle loads the user, decides whether the mail is still needed, produces
// the token (if the type has one) and sends. It never logs the address, the
// link or the token.
func (h *handler) Handle(ctx context.Context, job runner.Job) error {
	log := job.Logger
	if log == nil {
		log = slog.Default()
	}
	userID := job.Envelope.Args["userId"]
	log = log.With("userId", userID)

	u, ok, err := h.cfg.Users.Get(ctx, userID)
	if err != nil {
		return fmt.Errorf("email: load user %s: %w", userID, err)
	}
	if !ok {
		return h.noop(reasonUserNotFound)
	}
	if reason := h.job.skip(u); reason != "" {
		return h.noop(reason)
	}
	if strings.TrimSpace(u.Email) == "" {
		return h.noop("user has no e-mail address")
	}
	to, ok := PlainAddress(u.Email)
	if !ok {
		return engine.Permanent(fmt.Errorf("email: user %s: stored e-mail address is not a plain address", userID))
	}

	data := templateData{
		Name:        displayName(u),
		RoleCode:    job.Envelope.Args["roleCode"],
		CountryCode: job.Envelope.Args["countryCode"],
		DigestID:    job.Envelope.Args["digestId"],
	}
	token := ""
	if h.job.purpose != "" {
		raw, hash, err := newToken(h.cfg.Rand)
		if err != nil {
			return err
		}
		ttl := h.cfg.ResetTTL
		if h.job.purpose == PurposeVerification {
			ttl = h.cfg.VerificationTTL
		}
		tok := Token{Hash: hash, Purpose: h.job.purpose, ExpiresAt: h.cfg.Now().Add(ttl)}
		if err := h.cfg.Users.SetToken(ctx, userID, tok, h.job.purpose == PurposeVerification); err != nil {
			if errors.Is(err, ErrUserGone) {
				return h.noop("user deleted or confirmed meanwhile")
			}
			return fmt.Errorf("email: store token for %s: %w", userID, err)
		}
		token, data.ExpiresIn = raw, humanDuration(ttl)
	}
	data.Link = h.job.link(h.base, job, token)

	subject, text, html, err := h.tmpl.render(data)
	if err != nil {
		return engine.Permanent(err)
	}
	msg := Message{ID: job.Envelope.MessageID, To: to, Subject: subject, Text: text, HTML: html}
	if err := h.cfg.Sender.Send(ctx, msg); err != nil {
		return fmt.Errorf("email: send %s to user %s: %w", job.Envelope.Type, userID, err)
	}
	log.Info("mail sent")
	return nil
}

// noop is a successful job that needed no mail: the runner claims its
// marker, counts it as skipped and by its kind of reason (noopKind), and
// records the reason on the job.
func (h *handler) noop(reason string) error {
	return engine.NoOpKind(noopKind(reason), "no mail needed: "+reason)
}

// noopKind is the JobsNoop metric's reason dimension for a no-op reason:
// its words before any ';', lower case, joined by '-' ("user not found" is
// user-not-found, "address not confirmed; no digest to …" is
// address-not-confirmed). The reasons are this package's own fixed texts,
// so the kinds are few.
func noopKind(reason string) string {
	head, _, _ := strings.Cut(reason, ";")
	words := strings.FieldsFunc(strings.ToLower(head), func(r rune) bool {
		return !('a' <= r && r <= 'z' || '0' <= r && r <= '9')
	})
	if len(words) == 0 {
		return "other"
	}
	return strings.Join(words, "-")
}

// reasonUserNotFound is the no-op of a job whose user the directory does not
// know; NoopUserNotFound is its kind in the JobsNoop metric, which an alarm
// watches: most of a type's jobs ending so means the users directory is the
// wrong table (or empty).
const (
	reasonUserNotFound = "user not found"
	NoopUserNotFound   = "user-not-found"
)

func displayName(u User) string {
	if n := strings.Join(strings.Fields(u.DisplayName), " "); n != "" {
		return n
	}
	return "there"
}

func humanDuration(d time.Duration) string {
	switch {
	case d%(24*time.Hour) == 0 && d >= 48*time.Hour:
		return fmt.Sprintf("%d days", d/(24*time.Hour))
	case d%time.Hour == 0 && d > time.Hour:
		return fmt.Sprintf("%d hours", d/time.Hour)
	case d == time.Hour:
		return "1 hour"
	}
	return d.Round(time.Minute).String()
}
