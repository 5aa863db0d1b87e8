package email_test

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/runstwice/runstwice/engine/enginetest"
	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/email"
	"github.com/runstwice/runstwice/internal/runner"
	"github.com/runstwice/runstwice/internal/testkit"
	"github.com/runstwice/runstwice/message"
)

// fakeUsers is the Users port in memory.
type fakeUsers struct {
	tr     *enginetest.Trace
	mu     sync.Mutex
	users  map[string]email.User
	tokens map[string]email.Token
	getErr error
}

func newFakeUsers(tr *enginetest.Trace, users ...email.User) *fakeUsers {
	f := &fakeUsers{tr: tr, users: map[string]email.User{}, tokens: map[string]email.Token{}}
	for _, u := range users {
		f.users[u.ID] = u
	}
	return f
}

func (f *fakeUsers) Get(_ context.Context, id string) (email.User, bool, error) {
	f.tr.Add("load")
	if f.getErr != nil {
		return email.User{}, false, f.getErr
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	u, ok := f.users[id]
	return u, ok, nil
}

func (f *fakeUsers) SetToken(_ context.Context, id string, tok email.Token, onlyUnconfirmed bool) error {
	f.tr.Add("token")
	f.mu.Lock()
	defer f.mu.Unlock()
	u, ok := f.users[id]
	if !ok || (onlyUnconfirmed && u.EmailConfirmed) {
		return fmt.Errorf("%w: %s", email.ErrUserGone, id)
	}
	f.tokens[id] = tok
	return nil
}

// fakeSender is the Sender port in memory.
type fakeSender struct {
	tr   *enginetest.Trace
	mu   sync.Mutex
	sent []email.Message
	err  error
}

func (f *fakeSender) Send(_ context.Context, m email.Message) error {
	if f.err != nil {
		f.tr.Add("send-failed")
		return f.err
	}
	f.tr.Add("send")
	f.mu.Lock()
	f.sent = append(f.sent, m)
	f.mu.Unlock()
	return nil
}

func (f *fakeSender) messages() []email.Message {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.sent)
}

// harness is the real runner (testkit's, on its fakes) with the real
// e-mail handlers on the fake users and sender.
type harness struct {
	*testkit.Harness
	tr      *enginetest.Trace
	users   *fakeUsers
	sender  *fakeSender
	markers enginetest.Traced
	logs    *testkit.Buffer
	metrics *testkit.Buffer
}

const baseURL = "https://app.example.test/base"

func newHarness(t testing.TB, users ...email.User) *harness {
	t.Helper()
	h := &harness{tr: &enginetest.Trace{}}
	h.users = newFakeUsers(h.tr, users...)
	h.sender = &fakeSender{tr: h.tr}
	handlers, err := email.Handlers(email.Config{Users: h.users, Sender: h.sender, BaseURL: baseURL})
	if err != nil {
		t.Fatal(err)
	}
	h.Harness = testkit.NewHarness(t, contract.Registry(), handlers, func(c *runner.Config) { c.ParkDelay = time.Second })
	// One trace for the runner's fakes and the users and sender.
	h.tr = h.Harness.Trace
	h.users.tr, h.sender.tr = h.tr, h.tr
	h.Harness.Switches.Set(contract.PartnerDigest.Name, true)
	h.markers, h.logs, h.metrics = h.Harness.Markers, h.Harness.Logs, h.Harness.Metrics
	return h
}

// run handles one batch and returns the ids SQS must retry.
func (h *harness) run(t testing.TB, msgs ...events.SQSMessage) []string {
	t.Helper()
	return h.Run(t, msgs...)
}

func envelope(jobType string, args map[string]string) message.Envelope {
	return testkit.Envelope(jobType, args)
}

// jobFor returns a valid envelope of jobType for user id.
func jobFor(jobType, id string) message.Envelope {
	args := map[string]string{"userId": id}
	switch jobType {
	case contract.PartnerVerification.Name:
		args["roleCode"], args["countryCode"] = "city-partner", "BD"
	case contract.PasswordReset.Name:
		args["countryCode"] = "BD"
	case contract.PartnerDigest.Name:
		args["digestId"] = "2026-W48"
	}
	return envelope(jobType, args)
}

func record(t testing.TB, env message.Envelope, receiveCount int) events.SQSMessage {
	return testkit.Record(t, env, receiveCount)
}

var linkPattern = regexp.MustCompile(`https://app\.example\.test/base/[^\s"<]*`)

var errSMTPDown = errors.New("relay unreachable")

// sentFor counts the mails sent for a job (a mail's ID is its job id).
func (f *fakeSender) sentFor(jobID string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, m := range f.sent {
		if m.ID == jobID {
			n++
		}
	}
	return n
}
