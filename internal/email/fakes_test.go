package email_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/runstwice/runstwice/internal/catalog"
	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/email"
	"github.com/runstwice/runstwice/internal/marker"
	"github.com/runstwice/runstwice/internal/marker/markertest"
	"github.com/runstwice/runstwice/internal/obs"
	"github.com/runstwice/runstwice/internal/runner"
)

// fakeUsers is the Users port in memory.
type fakeUsers struct {
	tr     *markertest.Trace
	mu     sync.Mutex
	users  map[string]email.User
	tokens map[string]email.Token
	getErr error
}

func newFakeUsers(tr *markertest.Trace, users ...email.User) *fakeUsers {
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
	tr   *markertest.Trace
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

type toggles map[string]bool

func (t toggles) IsJobEnabled(_ context.Context, jobType string, def bool) bool {
	if v, ok := t[jobType]; ok {
		return v
	}
	return def
}

// nullQueues parks and dead-letters into slices.
type nullQueues struct {
	mu     sync.Mutex
	parked []string
	dead   []string
}

func (q *nullQueues) Park(_ context.Context, _ contract.Queue, _ contract.Envelope, body string, _ time.Duration) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.parked = append(q.parked, body)
	return nil
}

func (q *nullQueues) DeadLetter(_ context.Context, msg events.SQSMessage, reason string) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.dead = append(q.dead, reason)
	return nil
}

// harness is the real runner with the real e-mail handlers on fakes.
type harness struct {
	tr      *markertest.Trace
	users   *fakeUsers
	sender  *fakeSender
	markers markertest.Traced
	queues  *nullQueues
	logs    *lockedBuffer
	metrics *lockedBuffer
	r       *runner.Runner
}

const baseURL = "https://app.example.test/base"

func newHarness(t testing.TB, users ...email.User) *harness {
	t.Helper()
	h := &harness{tr: &markertest.Trace{}, queues: &nullQueues{}, logs: &lockedBuffer{}, metrics: &lockedBuffer{}}
	h.users = newFakeUsers(h.tr, users...)
	h.sender = &fakeSender{tr: h.tr}
	h.markers = markertest.Traced{Memory: marker.NewMemory(), Trace: h.tr}
	metrics := obs.NewMetrics(h.metrics)
	handlers, err := email.Handlers(email.Config{Users: h.users, Sender: h.sender, BaseURL: baseURL})
	if err != nil {
		t.Fatal(err)
	}
	r, err := runner.New(runner.Config{
		Registry: catalog.Registry(), Handlers: handlers,
		Toggles: toggles{email.PartnerDigest.Name: true}, Markers: h.markers,
		Parker: h.queues, DeadLetterer: h.queues, ParkDelay: time.Second,
		Logger: obs.NewLogger(h.logs, "debug"), Metrics: metrics,
	})
	if err != nil {
		t.Fatal(err)
	}
	h.r = r
	return h
}

// lockedBuffer is a log sink safe for concurrent writers.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

var _ io.Writer = (*lockedBuffer)(nil)

// run handles one batch and returns the ids SQS must retry.
func (h *harness) run(t testing.TB, msgs ...events.SQSMessage) []string {
	t.Helper()
	resp, err := h.r.Handle(context.Background(), events.SQSEvent{Records: msgs})
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]string, 0, len(resp.BatchItemFailures))
	for _, f := range resp.BatchItemFailures {
		ids = append(ids, f.ItemIdentifier)
	}
	return ids
}

var seq int

func envelope(jobType string, args map[string]string) contract.Envelope {
	seq++
	return contract.Envelope{
		V: 1, MessageID: contract.DeriveMessageID("email-test", fmt.Sprint(seq, time.Now().UnixNano())), Type: jobType,
		Key: fmt.Sprintf("k-%d", seq), CorrelationID: fmt.Sprintf("c-%d", seq), Args: args,
		EnqueuedAt: time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC),
	}
}

// jobFor returns a valid envelope of jobType for user id.
func jobFor(jobType, id string) contract.Envelope {
	args := map[string]string{"userId": id}
	switch jobType {
	case email.PartnerVerification.Name:
		args["roleCode"], args["countryCode"] = "city-partner", "BD"
	case email.PasswordReset.Name:
		args["countryCode"] = "BD"
	case email.PartnerDigest.Name:
		args["digestId"] = "2026-W48"
	}
	return envelope(jobType, args)
}

func record(t testing.TB, env contract.Envelope, receiveCount int) events.SQSMessage {
	t.Helper()
	body, err := env.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return events.SQSMessage{
		MessageId: "sqs-" + env.MessageID, Body: string(body),
		Attributes: map[string]string{"ApproximateReceiveCount": fmt.Sprint(receiveCount)},
	}
}

var linkPattern = regexp.MustCompile(`https://app\.example\.test/base/[^\s"<]*`)

var errSMTPDown = errors.New("relay unreachable")
