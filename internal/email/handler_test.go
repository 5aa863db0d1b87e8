package email_test

import (
	"context"
	"encoding/base64"
	"errors"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/engine/enginetest"
	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/email"
	"github.com/runstwice/runstwice/internal/runner"
)

var allTypes = []string{
	contract.PartnerVerification.Name, contract.PasswordReset.Name, contract.Welcome.Name, contract.PartnerDigest.Name,
}

// sendable is a user every type mails: the digest needs a confirmed address
// and the verification an unconfirmed one, so those two get their own.
func sendable(jobType string) email.User {
	return email.User{ID: "u-123", Email: "ana@example.com", DisplayName: "Ana", EmailConfirmed: jobType != contract.PartnerVerification.Name}
}

// Seed invariant 1: an already processed job sends nothing, claims nothing
// and does not even load its user.
func TestAlreadyProcessedTouchesNothing(t *testing.T) {
	for _, typ := range allTypes {
		t.Run(typ, func(t *testing.T) {
			h := newHarness(t, sendable(typ))
			env := jobFor(typ, "u-123")
			if _, err := h.markers.Store.Claim(context.Background(), engine.Key{Type: typ, JobID: env.MessageID}, engine.Mark{}); err != nil {
				t.Fatal(err)
			}
			if failed := h.run(t, record(t, env, 2)); len(failed) != 0 {
				t.Fatalf("failures %v", failed)
			}
			if got := h.tr.String(); got != "peek" {
				t.Fatalf("trace %q; want only the peek", got)
			}
			if len(h.sender.messages()) != 0 || len(h.users.tokens) != 0 {
				t.Fatal("a processed job sent mail or wrote a token")
			}
		})
	}
}

// Seed invariant 2: the mail is sent, then the marker is claimed.
func TestSendThenClaim(t *testing.T) {
	want := map[string]string{
		contract.PartnerVerification.Name: "peek lease load token send claim",
		contract.PasswordReset.Name:       "peek lease load token send claim",
		contract.Welcome.Name:             "peek lease load send claim",
		contract.PartnerDigest.Name:       "peek lease load send claim",
	}
	for _, typ := range allTypes {
		t.Run(typ, func(t *testing.T) {
			h := newHarness(t, sendable(typ))
			env := jobFor(typ, "u-123")
			if failed := h.run(t, record(t, env, 1)); len(failed) != 0 {
				t.Fatalf("failures %v", failed)
			}
			if got := h.tr.String(); got != want[typ] {
				t.Fatalf("trace %q; want %q", got, want[typ])
			}
			msgs := h.sender.messages()
			if len(msgs) != 1 || msgs[0].To != "ana@example.com" || msgs[0].ID != env.MessageID {
				t.Fatalf("sent %+v; want one mail to ana@example.com with the job id", msgs)
			}
			// A redelivery is a duplicate: nothing more.
			h.tr.Reset()
			h.run(t, record(t, env, 2))
			if h.tr.String() != "peek" || len(h.sender.messages()) != 1 {
				t.Fatalf("redelivery trace %q, %d mails; want a peek and still one mail", h.tr, len(h.sender.messages()))
			}
		})
	}
}

// Seed invariant 3: a failed send claims nothing; the job is retried and the
// lease is released so the retry need not wait.
func TestFailedSendDoesNotClaim(t *testing.T) {
	for _, tc := range []struct {
		name      string
		err       error
		wantRetry bool
	}{
		{"transient", errSMTPDown, true},
		{"permanent", engine.Permanent(errors.New("address rejected")), false},
	} {
		for _, typ := range allTypes {
			t.Run(tc.name+"/"+typ, func(t *testing.T) {
				h := newHarness(t, sendable(typ))
				h.sender.err = tc.err
				msg := record(t, jobFor(typ, "u-123"), 1)
				failed := h.run(t, msg)
				if got := slices.Equal(failed, []string{msg.MessageId}); got != tc.wantRetry {
					t.Fatalf("failures %v; want retry=%v", failed, tc.wantRetry)
				}
				if n := h.tr.Count("claim"); n != 0 {
					t.Fatalf("claimed after a failed send; trace %q", h.tr)
				}
				if h.tr.Count("release") != 1 {
					t.Fatalf("lease not released; trace %q", h.tr)
				}
				if !tc.wantRetry && h.Queues.DeadCount() != 1 {
					t.Fatalf("permanent failure not dead-lettered: %d", h.Queues.DeadCount())
				}
			})
		}
	}
}

// Work already unnecessary is a quiet successful no-op: no mail, no token,
// the marker claimed, JobsSkipped counted.
func TestUnnecessaryMailIsQuietNoop(t *testing.T) {
	for _, tc := range []struct {
		name string
		typ  string
		user *email.User
	}{
		{"verification, user missing", contract.PartnerVerification.Name, nil},
		{"verification, already confirmed", contract.PartnerVerification.Name, &email.User{ID: "u-123", Email: "a@example.com", EmailConfirmed: true}},
		{"reset, user missing", contract.PasswordReset.Name, nil},
		{"welcome, user missing", contract.Welcome.Name, nil},
		{"welcome, no address", contract.Welcome.Name, &email.User{ID: "u-123"}},
		{"digest, address unconfirmed", contract.PartnerDigest.Name, &email.User{ID: "u-123", Email: "a@example.com"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var users []email.User
			if tc.user != nil {
				users = append(users, *tc.user)
			}
			h := newHarness(t, users...)
			env := jobFor(tc.typ, "u-123")
			if failed := h.run(t, record(t, env, 1)); len(failed) != 0 {
				t.Fatalf("failures %v; a no-op succeeds", failed)
			}
			if len(h.sender.messages()) != 0 || h.tr.Count("token") != 0 {
				t.Fatalf("sent or wrote a token; trace %q", h.tr)
			}
			if h.tr.Count("claim") != 1 {
				t.Fatalf("marker not claimed; trace %q", h.tr)
			}
			if !strings.Contains(h.metrics.String(), `"JobsSkipped":1`) {
				t.Fatalf("no-op not counted: %s", h.metrics)
			}
			// Counted by its own kind of reason, never "other": a user the
			// directory does not know is the kind the users-directory
			// alarm watches.
			if !strings.Contains(h.metrics.String(), `"JobsNoop":1`) || strings.Contains(h.metrics.String(), `"reason":"other"`) {
				t.Fatalf("no-op not counted by a reason of its own: %s", h.metrics)
			}
			if tc.user == nil && !strings.Contains(h.metrics.String(), `"reason":"`+email.NoopUserNotFound+`"`) {
				t.Fatalf("no-op not counted by reason %s: %s", email.NoopUserNotFound, h.metrics)
			}
			if !strings.Contains(h.logs.String(), "no mail needed") {
				t.Fatalf("no-op not logged: %s", h.logs)
			}
		})
	}
}

// A user confirmed between the load and the token write is a no-op too: the
// token write is conditional.
func TestConfirmedMeanwhileIsNoop(t *testing.T) {
	h := newHarness(t, sendable(contract.PartnerVerification.Name))
	h.users.users["u-123"] = email.User{ID: "u-123", Email: "ana@example.com"}
	confirming := &confirmOnToken{fakeUsers: h.users}
	handlers, err := email.Handlers(email.Config{Users: confirming, Sender: h.sender, BaseURL: baseURL})
	if err != nil {
		t.Fatal(err)
	}
	job := runner.Job{Envelope: jobFor(contract.PartnerVerification.Name, "u-123")}
	job.Type, _ = contract.Registry().Lookup(contract.PartnerVerification.Name)
	err = handlers[contract.PartnerVerification.Name].Handle(context.Background(), job)
	var noop *engine.NoOpError
	if !errors.As(err, &noop) || !strings.Contains(noop.Reason, "confirmed meanwhile") {
		t.Fatalf("Handle = %v; want a no-op with its reason", err)
	}
	if len(h.sender.messages()) != 0 {
		t.Fatal("mailed an address confirmed meanwhile")
	}
}

type confirmOnToken struct{ *fakeUsers }

func (c *confirmOnToken) SetToken(ctx context.Context, id string, tok email.Token, only bool) error {
	c.mu.Lock()
	u := c.users[id]
	u.EmailConfirmed = true
	c.users[id] = u
	c.mu.Unlock()
	return c.fakeUsers.SetToken(ctx, id, tok, only)
}

// The token is 32 random bytes; the user gets only its SHA-256 and expiry;
// the raw token is in the link of the mail and nowhere else: not in a log
// line, not in the job message.
func TestTokenOnlyInTheLink(t *testing.T) {
	for _, tc := range []struct {
		typ     string
		path    string
		purpose email.Purpose
		ttl     time.Duration
	}{
		{contract.PartnerVerification.Name, "/base/verify-email", email.PurposeVerification, email.DefaultVerificationTTL},
		{contract.PasswordReset.Name, "/base/reset-password", email.PurposePasswordReset, email.DefaultResetTTL},
	} {
		t.Run(tc.typ, func(t *testing.T) {
			h := newHarness(t, sendable(tc.typ))
			msg := record(t, jobFor(tc.typ, "u-123"), 1)
			before := time.Now()
			if failed := h.run(t, msg); len(failed) != 0 {
				t.Fatalf("failures %v", failed)
			}
			mails := h.sender.messages()
			if len(mails) != 1 {
				t.Fatalf("sent %d mails", len(mails))
			}
			link := linkPattern.FindString(mails[0].Text)
			u, err := url.Parse(link)
			if err != nil || u.Path != tc.path || u.Query().Get("userId") != "u-123" {
				t.Fatalf("link %q; want %s with userId", link, tc.path)
			}
			token := u.Query().Get("token")
			if raw, err := base64.RawURLEncoding.DecodeString(token); err != nil || len(raw) != email.TokenBytes {
				t.Fatalf("token %q is not %d random bytes", token, email.TokenBytes)
			}
			if !strings.Contains(mails[0].HTML, token) {
				t.Fatal("HTML body has no link")
			}
			stored := h.users.tokens["u-123"]
			if stored.Hash != email.HashToken(token) || stored.Hash == token || stored.Purpose != tc.purpose {
				t.Fatalf("stored %+v; want the SHA-256 of the link's token and purpose %s", stored, tc.purpose)
			}
			if exp := stored.ExpiresAt.Sub(before); exp < tc.ttl-time.Minute || exp > tc.ttl+time.Minute {
				t.Fatalf("token expires in %v; want %v", exp, tc.ttl)
			}
			for where, text := range map[string]string{"logs": h.logs.String(), "metrics": h.metrics.String(), "job message": msg.Body} {
				if strings.Contains(text, token) {
					t.Fatalf("raw token found in %s", where)
				}
			}
			if strings.Contains(h.logs.String(), "ana@example.com") {
				t.Fatal("the address appears in a log line")
			}
		})
	}
}

// Two sends of one job produce two different tokens; the later one wins.
func TestEverySendHasAFreshToken(t *testing.T) {
	h := newHarness(t, sendable(contract.PasswordReset.Name))
	env := jobFor(contract.PasswordReset.Name, "u-123")
	handlers, err := email.Handlers(email.Config{Users: h.users, Sender: h.sender, BaseURL: baseURL})
	if err != nil {
		t.Fatal(err)
	}
	job := runner.Job{Envelope: env}
	job.Type, _ = contract.Registry().Lookup(env.Type)
	for range 2 {
		if err := handlers[env.Type].Handle(context.Background(), job); err != nil {
			t.Fatal(err)
		}
	}
	m := h.sender.messages()
	if len(m) != 2 || linkPattern.FindString(m[0].Text) == linkPattern.FindString(m[1].Text) {
		t.Fatal("two sends reused a token")
	}
}

func TestTemplatesRender(t *testing.T) {
	for _, typ := range allTypes {
		t.Run(typ, func(t *testing.T) {
			h := newHarness(t, email.User{ID: "u-123", Email: "x@example.com", DisplayName: "<b>Evil</b>\r\nBcc: y@example.com",
				EmailConfirmed: typ != contract.PartnerVerification.Name})
			if failed := h.run(t, record(t, jobFor(typ, "u-123"), 1)); len(failed) != 0 {
				t.Fatalf("failures %v", failed)
			}
			m := h.sender.messages()[0]
			switch {
			case m.Subject == "" || strings.ContainsAny(m.Subject, "\r\n"):
				t.Fatalf("subject %q", m.Subject)
			case !strings.Contains(m.Text, "Evil") || linkPattern.FindString(m.Text) == "":
				t.Fatalf("text body lacks name or link:\n%s", m.Text)
			case strings.Contains(m.HTML, "<b>Evil"):
				t.Fatalf("HTML body does not escape the display name:\n%s", m.HTML)
			case !strings.Contains(m.HTML, `href="https://app.example.test/base/`):
				t.Fatalf("HTML body lacks the link:\n%s", m.HTML)
			}
		})
	}
}

func TestUserLoadFailureRetries(t *testing.T) {
	h := newHarness(t)
	h.users.getErr = errors.New("throttled")
	msg := record(t, jobFor(contract.Welcome.Name, "u-1"), 1)
	if failed := h.run(t, msg); !slices.Equal(failed, []string{msg.MessageId}) {
		t.Fatalf("failures %v; want a retry", failed)
	}
	if h.tr.Count("claim") != 0 {
		t.Fatal("claimed without sending")
	}
}

func TestMalformedStoredAddressIsPermanent(t *testing.T) {
	h := newHarness(t, email.User{ID: "u-1", Email: "not an address"})
	msg := record(t, jobFor(contract.Welcome.Name, "u-1"), 1)
	if failed := h.run(t, msg); len(failed) != 0 {
		t.Fatalf("failures %v", failed)
	}
	if r, ok := h.Queues.DeadReason(msg.MessageId); !ok || !strings.Contains(r, "not a plain address") || strings.Contains(r, "not an address") {
		t.Fatalf("dead letter %q; want the bad address reported without the address", r)
	}
}

func TestHandlersRejectBadConfig(t *testing.T) {
	users, sender := newFakeUsers(&enginetest.Trace{}), &fakeSender{tr: &enginetest.Trace{}}
	for name, cfg := range map[string]email.Config{
		"no users":        {Sender: sender, BaseURL: baseURL},
		"no sender":       {Users: users, BaseURL: baseURL},
		"no base URL":     {Users: users, Sender: sender},
		"relative URL":    {Users: users, Sender: sender, BaseURL: "/app"},
		"not http":        {Users: users, Sender: sender, BaseURL: "ftp://x.example"},
		"no host in http": {Users: users, Sender: sender, BaseURL: "https://"},
	} {
		if _, err := email.Handlers(cfg); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	hs, err := email.Handlers(email.Config{Users: users, Sender: sender, BaseURL: baseURL})
	if err != nil {
		t.Fatal(err)
	}
	for _, typ := range allTypes {
		if hs[typ] == nil {
			t.Errorf("no handler for %s", typ)
		}
	}
}
