//go:build integration

package webview_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"

	"github.com/runstwice/runstwice/aws/dynamostore"
	"github.com/runstwice/runstwice/aws/ssmswitch"
	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/deadletter"
	"github.com/runstwice/runstwice/internal/dev/stack"
	"github.com/runstwice/runstwice/internal/dev/testenv"
	"github.com/runstwice/runstwice/internal/dev/webview"
	"github.com/runstwice/runstwice/internal/jobs"
)

// local is the template's resources provisioned for stage local on a wiped
// moto (the stage's switch parameters are shared by every stack on it).
type local struct {
	cfg   aws.Config
	st    *stack.Stack
	db    *dynamodb.Client
	ssm   *ssm.Client
	table func(id string) string
}

func provisionLocal(t *testing.T) local {
	t.Helper()
	m := testenv.Moto(t)
	m.Reset(t)
	tmpl := stack.RepoTemplate(t)
	cfg := m.Config()
	st, err := stack.Provision(context.Background(), stack.NewClients(cfg), tmpl, stack.Options{
		StackName: testenv.Name(t, "webview"), Params: map[string]string{"Stage": "local"},
	})
	if err != nil {
		t.Fatalf("provision: %v", err)
	}
	table := func(id string) string {
		p, ok := st.Physical(id)
		if !ok {
			t.Fatalf("the stack has no %s", id)
		}
		return p.Name
	}
	return local{cfg: cfg, st: st, db: dynamodb.NewFromConfig(cfg), ssm: ssm.NewFromConfig(cfg), table: table}
}

// reserve writes an enqueued job record created at created.
func reserve(t *testing.T, store *jobs.Store, id, typ, key string, created time.Time) jobs.Job {
	t.Helper()
	ctx := context.Background()
	j := jobs.Job{ID: id, Caller: "arn:aws:iam::123456789012:user/local-user", Type: typ, Key: key, Queue: "default",
		CorrelationID: "corr-" + id, Message: "{}", CreatedAt: created, RunAt: created}
	d, err := store.Reserve(ctx, j, contract.AllowAfterFailed)
	if err != nil || d.Outcome != jobs.Reserved {
		t.Fatalf("reserve %s: %v %v", id, d.Outcome, err)
	}
	if err := store.Promote(ctx, d.Job); err != nil {
		t.Fatalf("promote %s: %v", id, err)
	}
	return d.Job
}

func TestIntegrationJobsTableListsDerivedStatesNewestFirst(t *testing.T) {
	l := provisionLocal(t)
	ctx := context.Background()
	markers := dynamostore.New(l.db, l.table("MarkersTable"))
	store := jobs.NewStore(l.db, l.table("JobsTable"), markers)
	now := time.Now().UTC()
	done := reserve(t, store, "job-done", "email.welcome.v1", "welcome:u-1", now.Add(-4*time.Minute))
	busy := reserve(t, store, "job-busy", "email.welcome.v1", "welcome:u-2", now.Add(-3*time.Minute))
	reserve(t, store, "job-failed", "email.welcome.v1", "welcome:u-3", now.Add(-2*time.Minute))
	reserve(t, store, "job-queued", "email.welcome.v1", "welcome:u-4", now.Add(-1*time.Minute))
	if _, err := markers.Claim(ctx, done.MarkerKey(), engine.Mark{}); err != nil {
		t.Fatal(err)
	}
	if _, err := markers.Lease(ctx, busy.MarkerKey(), engine.Mark{Owner: "worker-1", Until: now.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if err := jobs.NewRecorder(l.db, l.table("JobsTable")).MarkFailed(ctx, "job-failed", jobs.Failure{Class: "permanent", Attempts: 5}); err != nil {
		t.Fatal(err)
	}
	// A record written by a newer version, with fields this one's store does
	// not know and without several of the ones it does: listed, not hidden.
	// And a broken one (no type, so no marker to peek): listed with its
	// stored state and why it has no derived one.
	for _, rec := range []map[string]any{{
		"pk": jobs.JobPK("job-sparse"), "jobId": "job-sparse", "type": "email.welcome.v1", "key": "welcome:u-5",
		"state": "Enqueued", "lastOutcome": "retrying", "lastReason": "SES throttled",
		"traceId": "Root=1-5759e988-bd862e3fe1be46a994272793", "createdAt": now.UnixMilli(), "runAt": now.UnixMilli(),
	}, {
		"pk": jobs.JobPK("job-broken"), "state": "Pending", "createdAt": now.Add(-time.Hour).UnixMilli(),
	}} {
		item, err := attributevalue.MarshalMap(rec)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(l.table("JobsTable")), Item: item}); err != nil {
			t.Fatal(err)
		}
	}

	src := webview.NewJobsTable(l.db, l.table("JobsTable"), l.table("MarkersTable"))
	got, err := src.Recent(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct{ id, state string }{
		{"job-sparse", "Enqueued"}, {"job-queued", "Enqueued"}, {"job-failed", "Failed"},
		{"job-busy", "Processing"}, {"job-done", "Succeeded"}, {"job-broken", "Pending"},
	}
	if len(got) != len(want) {
		t.Fatalf("%d jobs (%+v); want %d (dedup pointers are not jobs)", len(got), got, len(want))
	}
	for i, w := range want {
		if got[i].ID != w.id || got[i].State != w.state {
			t.Errorf("job %d: %s %s; want %s %s", i, got[i].ID, got[i].State, w.id, w.state)
		}
	}
	if s := got[0]; s.LastOutcome != "retrying" || s.LastReason != "SES throttled" || s.TraceID == "" || s.Attempts != 0 {
		t.Errorf("sparse record: %+v", s)
	}
	if b := got[5]; !strings.Contains(b.LastReason, "state not derived") {
		t.Errorf("broken record: %+v", b)
	}
	if f := got[2]; f.LastErrorClass != "permanent" || f.Attempts != 5 || f.Type != "email.welcome.v1" || f.Key != "welcome:u-3" {
		t.Errorf("failed job: %+v", f)
	}

	if got, err := src.Recent(ctx, 2); err != nil || len(got) != 2 || got[1].ID != "job-queued" {
		t.Fatalf("Recent(2) = %+v, %v", got, err)
	}
}

func TestIntegrationDeadLettersTableNewestFirst(t *testing.T) {
	l := provisionLocal(t)
	ctx := context.Background()
	store := deadletter.NewStore(l.db, l.table("DeadLettersTable"))
	base := time.Now().UTC().Truncate(time.Second)
	for i, id := range []string{"dl-old", "dl-new", "dl-mid"} {
		at := base.Add(time.Duration([]int{-3, -1, -2}[i]) * time.Minute)
		store.Now = func() time.Time { return at }
		if _, err := store.Save(ctx, deadletter.Record{
			ID: id, JobID: id, Type: "email.welcome.v1", Body: "{}", Reason: "reason of " + id, ReceiveCount: 5,
			Status: deadletter.StatusDead, SourceQueue: "arn:aws:sqs:us-east-1:123456789012:runstwice-local-default",
		}, "sqs-"+id); err != nil {
			t.Fatal(err)
		}
	}
	// Two letters redriven; the job of one has run since (its marker is
	// claimed): that one reads succeeded, the other still redriven.
	markers := dynamostore.New(l.db, l.table("MarkersTable"))
	for _, id := range []string{"dl-mid", "dl-old"} {
		if err := store.MarkRedriven(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := markers.Claim(ctx, engine.Key{Type: "email.welcome.v1", JobID: "dl-mid"}, engine.Mark{}); err != nil {
		t.Fatal(err)
	}
	got, err := webview.NewDeadLettersTable(l.db, l.table("DeadLettersTable"), markers).Recent(ctx, 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[0].ID != "dl-new" || got[1].ID != "dl-mid" || got[1].Status != "succeeded" || got[2].Status != "redriven" {
		t.Fatalf("Recent(3) = %+v; want dl-new, dl-mid (redriven, then succeeded), dl-old (redriven)", got)
	}
	g := got[0]
	if g.Reason != "reason of dl-new" || g.ReceiveCount != 5 || g.Status != "dead" || g.Occurrences != 1 ||
		g.SourceQueue != "runstwice-local-default" || !g.LastSeen.Equal(base.Add(-time.Minute)) {
		t.Fatalf("dead letter: %+v", g)
	}
}

func TestIntegrationSSMSwitches(t *testing.T) {
	l := provisionLocal(t)
	ctx := context.Background()
	src, err := webview.FromStack(l.cfg, l.st, nil)
	if err != nil {
		t.Fatal(err)
	}
	sw := src.Switches
	byType := func() map[string]webview.Switch {
		t.Helper()
		list, err := sw.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]webview.Switch{}
		for _, s := range list {
			m[s.Type] = s
		}
		return m
	}
	got := byType()
	if d := got["email.partner-digest.v1"]; d.Default || d.Effective || !d.HasStored || d.Stored != "false" {
		t.Fatalf("fail-closed digest as provisioned: %+v", d)
	}
	if w := got["email.welcome.v1"]; !w.Default || !w.Effective || w.HasStored {
		t.Fatalf("welcome without a parameter: %+v", w)
	}
	if n := len(contract.Registry().Names()); len(got) != n {
		t.Fatalf("%d switches; want the %d registered types: %+v", len(got), n, got)
	}

	if err := sw.Set(ctx, "email.welcome.v1", false); err != nil {
		t.Fatal(err)
	}
	if err := sw.Set(ctx, "email.partner-digest.v1", true); err != nil {
		t.Fatal(err)
	}
	got = byType()
	if w := got["email.welcome.v1"]; w.Effective || w.Stored != "off" {
		t.Fatalf("welcome after Set off: %+v", w)
	}
	if d := got["email.partner-digest.v1"]; !d.Effective || d.Stored != "on" {
		t.Fatalf("digest after Set on: %+v", d)
	}
	// What a worker reads agrees.
	workers := ssmswitch.New(l.ssm, contract.SwitchPath("local"), nil)
	if workers.IsJobEnabled(ctx, "email.welcome.v1", true) || !workers.IsJobEnabled(ctx, "email.partner-digest.v1", false) {
		t.Fatal("workers do not see the switches as set")
	}

	if err := sw.Set(ctx, "email.welcom.v1", false); !errors.Is(err, webview.ErrUnknownType) {
		t.Fatalf("Set of an unregistered type: %v; want ErrUnknownType", err)
	}
	if _, err := l.ssm.PutParameter(ctx, &ssm.PutParameterInput{
		Name: aws.String(contract.SwitchParameter("local", "email.welcom.v1")), Value: aws.String("on"), Type: ssmtypes.ParameterTypeString,
	}); err != nil {
		t.Fatal(err)
	}
	if typo := byType()["email.welcom.v1"]; !typo.Unknown || typo.Stored != "on" {
		t.Fatalf("a parameter naming no registered type: %+v", typo)
	}
}

// A job's page reads its chain from the stack's tables: the job it waits
// for and the jobs that wait for it, each with its state now (the parent
// Succeeded by its marker, the child still waiting); a job alone has none.
func TestIntegrationJobPageReadsTheChain(t *testing.T) {
	l := provisionLocal(t)
	ctx := context.Background()
	markers := dynamostore.New(l.db, l.table("MarkersTable"))
	store := jobs.NewStore(l.db, l.table("JobsTable"), markers)
	now := time.Now().UTC()
	parent := reserve(t, store, "job-parent", "email.welcome.v1", "welcome:u-chain", now.Add(-time.Minute))
	child := jobs.Job{ID: "job-child", Caller: parent.Caller, Type: "email.password-reset.v1", Key: "reset:u-chain", Queue: "critical",
		Message: "{}", CreatedAt: now, RunAt: now, After: parent.ID, AfterPolicy: contract.OnAnyEnd}
	if d, err := store.Reserve(ctx, child, contract.AllowAfterFailed); err != nil || d.Outcome != jobs.Reserved {
		t.Fatalf("reserve the continuation: %v %v", d.Outcome, err)
	}
	alone := reserve(t, store, "job-alone", "email.welcome.v1", "welcome:u-alone", now)
	if _, err := markers.Claim(ctx, parent.MarkerKey(), engine.Mark{}); err != nil {
		t.Fatal(err)
	}

	src := webview.NewJobsTable(l.db, l.table("JobsTable"), l.table("MarkersTable"))
	p, ok, err := src.Job(ctx, parent.ID)
	if err != nil || !ok || p.Chain.Parent != nil || len(p.Chain.Children) != 1 {
		t.Fatalf("the parent's page: %+v, %t, %v; want one child, no parent", p.Chain, ok, err)
	}
	if c := p.Chain.Children[0]; c.ID != "job-child" || c.State != string(jobs.StateAwaitingContinuation) || c.Type != "email.password-reset.v1" {
		t.Fatalf("the child as its parent's page shows it: %+v", c)
	}
	c, ok, err := src.Job(ctx, "job-child")
	if err != nil || !ok || c.Chain.Parent == nil || c.Chain.Parent.ID != parent.ID || c.Chain.Parent.State != string(jobs.StateSucceeded) ||
		c.Chain.AfterPolicy != string(contract.OnAnyEnd) || len(c.Chain.Children) != 0 {
		t.Fatalf("the child's page: %+v, %t, %v; want after the Succeeded parent, OnAnyEnd", c.Chain, ok, err)
	}
	if a, ok, err := src.Job(ctx, alone.ID); err != nil || !ok || !a.Chain.Alone() {
		t.Fatalf("a job alone: %+v, %t, %v", a.Chain, ok, err)
	}
}
