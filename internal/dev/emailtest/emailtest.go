// Package emailtest is the e-mail function's world on the test binary's moto
// server, shared by the tests that run the real function against it (the
// e-mail and dead-letter integration tests): the markers and users tables,
// the work queues redriving to a DLQ, and the runner wired as
// functions/email wires it.
package emailtest

import (
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/runstwice/runstwice/aws/dynamostore"
	"github.com/runstwice/runstwice/aws/sqsqueue"
	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/dev/testenv"
	"github.com/runstwice/runstwice/internal/email"
	"github.com/runstwice/runstwice/internal/email/users"
	"github.com/runstwice/runstwice/internal/marker"
	"github.com/runstwice/runstwice/internal/obs"
	"github.com/runstwice/runstwice/internal/runner"
	"github.com/runstwice/runstwice/internal/testkit"
)

// MaxReceives is the work queues' maxReceiveCount, as in template.yaml.
const MaxReceives = 5

// World is the e-mail function's resources on moto. Its clients count their
// calls on Counter; the worker logs and counts into Logs and Metrics.
type World struct {
	Counter *testenv.CallCounter
	DB      *dynamodb.Client
	SQS     *sqs.Client
	// MarkersTable and UsersTable are the tables' names.
	MarkersTable, UsersTable string
	Markers                  *dynamostore.Store
	testenv.WorkQueues
	Logs, Metrics *testkit.Buffer
}

// New creates the tables and the queues under names no other test uses.
func New(t *testing.T) *World {
	t.Helper()
	w := &World{Counter: testenv.NewCallCounter(), Logs: &testkit.Buffer{}, Metrics: &testkit.Buffer{}}
	cfg := testenv.Moto(t).Config(w.Counter.Option)
	w.DB, w.SQS = dynamodb.NewFromConfig(cfg), sqs.NewFromConfig(cfg)
	w.MarkersTable = testenv.NewTable(t, w.DB, "markers", dynamostore.AttrHandler, dynamostore.AttrMessageKey)
	w.UsersTable = testenv.NewTable(t, w.DB, "users", users.AttrUserID, "")
	w.Markers = marker.NewStore(w.DB, w.MarkersTable)
	w.WorkQueues = testenv.CreateWorkQueues(t, w.SQS, testenv.Name(t, "q")+"-", MaxReceives)
	return w
}

// PutUser writes u to the users table, as the application that owns it does.
func (w *World) PutUser(t *testing.T, u email.User) {
	t.Helper()
	testenv.PutItem(t, w.DB, w.UsersTable, map[string]any{
		users.AttrUserID: u.ID, users.AttrEmail: u.Email, users.AttrDisplayName: u.DisplayName, users.AttrEmailConfirmed: u.EmailConfirmed,
	})
}

// Worker returns the e-mail function as functions/email wires it, on the
// world: the real handlers on the users table and sender, the real runner on
// the markers table and the queues, every kill switch at its default and no
// job recorder. mutate (optional) adjusts the runner's config.
func (w *World) Worker(t *testing.T, sender email.Sender, mutate func(*runner.Config)) *runner.Runner {
	t.Helper()
	handlers, err := email.Handlers(email.Config{
		Users: users.New(w.DB, w.UsersTable), Sender: sender, BaseURL: "http://127.0.0.1:3000",
	})
	if err != nil {
		t.Fatal(err)
	}
	q := sqsqueue.New(w.SQS, w.URLs(), w.DLQ.URL)
	return testkit.Build(t, runner.Config{
		Registry: contract.Registry(), Handlers: handlers, Switch: &testkit.Switches{}, Markers: w.Markers,
		Parker: q, DeadLetterer: q, ParkDelay: time.Second, MaxReceiveCount: MaxReceives,
		Logger: obs.NewLogger(w.Logs, "debug"), Metrics: engine.NewMetrics(w.Metrics, obs.Namespace),
	}, mutate, runner.New)
}
