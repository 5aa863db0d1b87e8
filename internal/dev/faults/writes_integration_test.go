//go:build integration

package faults_test

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/runstwice/runstwice/aws/dynamostore"
	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/ddb"
	"github.com/runstwice/runstwice/internal/deadletter"
	"github.com/runstwice/runstwice/internal/dev/awsproxy"
	"github.com/runstwice/runstwice/internal/dev/faults"
	"github.com/runstwice/runstwice/internal/dev/moto"
	"github.com/runstwice/runstwice/internal/dev/testenv"
	"github.com/runstwice/runstwice/internal/email"
	"github.com/runstwice/runstwice/internal/email/users"
	"github.com/runstwice/runstwice/internal/idempotency"
	"github.com/runstwice/runstwice/internal/jobs"
	"github.com/runstwice/runstwice/internal/marker"
	"github.com/runstwice/runstwice/message"
)

// lossy is a DynamoDB client whose calls pass a fault-injecting proxy in
// front of moto, with the SDK's standard retryer (as in a function).
type lossy struct {
	t      *testing.T
	in     *faults.Injector
	client *dynamodb.Client
	direct *dynamodb.Client // straight to moto, to look
}

func newLossy(t *testing.T) *lossy {
	t.Helper()
	srv := testenv.Moto(t)
	in := faults.New(nil, 1)
	ps, err := awsproxy.Start(srv.Endpoint, in.Hook)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ps.Close)
	cfg := moto.Config(ps.URL, testenv.Region)
	cfg.Retryer = func() aws.Retryer {
		return retry.NewStandard(func(o *retry.StandardOptions) {
			o.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return 10 * time.Millisecond, nil })
		})
	}
	return &lossy{t: t, in: in, client: dynamodb.NewFromConfig(cfg), direct: dynamodb.NewFromConfig(srv.Config())}
}

// lose makes the next call of operation op be applied and its response
// lost (kind Drop or Drop500), and returns the check that it happened.
func (l *lossy) lose(op string, kind faults.Kind) (check func()) {
	before := len(l.in.Events())
	remove := l.in.Add(faults.Rule{Service: "dynamodb", Operation: op, Kind: kind, P: 1, Limit: 1})
	return func() {
		l.t.Helper()
		remove()
		ev := l.in.Events()[before:]
		if len(ev) != 1 || !ev[0].Applied || ev[0].Status != http.StatusOK {
			l.t.Fatalf("faults %+v; want one %s of %s applied upstream (200)", ev, kind, op)
		}
	}
}

// write is one conditional write of a store, run with its response lost.
type write struct {
	name string
	op   string // the DynamoDB operation whose response is lost
	// setup runs before (without faults); run is the write; verify checks
	// its result and what it left.
	run func(ctx context.Context, t *testing.T)
}

// each runs every write once per way of losing a response.
func (l *lossy) each(writes []write) {
	for _, kind := range []faults.Kind{faults.Drop, faults.Drop500} {
		for _, w := range writes {
			l.t.Run(w.name+"/"+string(kind), func(t *testing.T) {
				check := l.lose(w.op, kind)
				w.run(context.Background(), t)
				check()
			})
		}
	}
}

var seq int

func next(prefix string) string { seq++; return prefix + "-" + strconv.Itoa(seq) }

// TestMarkerWritesFindTheirOwnItem: every conditional write of the marker
// store, applied with its response lost and retried by the SDK, finds the
// item it wrote itself and reports success.
func TestMarkerWritesFindTheirOwnItem(t *testing.T) {
	l := newLossy(t)
	table := testenv.NewTable(t, l.direct, "markers", dynamostore.AttrHandler, dynamostore.AttrMessageKey)
	m, direct := dynamostore.New(l.client, table), dynamostore.New(l.direct, table)
	until := time.Now().Add(time.Minute)
	state := func(t *testing.T, k engine.Key) engine.State {
		t.Helper()
		rec, ok, err := direct.Peek(context.Background(), k)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			return ""
		}
		return rec.State
	}
	key := func() engine.Key { return engine.Key{Type: "email.welcome.v1", JobID: next("job")} }
	l.each([]write{
		{"Lease", "PutItem", func(ctx context.Context, t *testing.T) {
			k := key()
			if _, err := m.Lease(ctx, k, engine.Mark{Owner: "w1", Until: until}); err != nil || state(t, k) != engine.StateLeased {
				t.Fatalf("Lease = %v, marker %s; want the lease", err, state(t, k))
			}
		}},
		{"Claim with lease", "PutItem", func(ctx context.Context, t *testing.T) {
			k := key()
			if _, err := direct.Lease(ctx, k, engine.Mark{Owner: "w1", Until: until}); err != nil {
				t.Fatal(err)
			}
			if won, err := m.Claim(ctx, k, engine.Mark{Owner: "w1"}); !won || err != nil || state(t, k) != engine.StateDone {
				t.Fatalf("Claim = %v, %v; want won", won, err)
			}
		}},
		{"Claim without owner", "PutItem", func(ctx context.Context, t *testing.T) {
			k := key()
			if won, err := m.Claim(ctx, k, engine.Mark{}); !won || err != nil || state(t, k) != engine.StateDone {
				t.Fatalf("Claim = %v, %v; want won", won, err)
			}
		}},
		{"Fail", "PutItem", func(ctx context.Context, t *testing.T) {
			k := key()
			if _, err := direct.Claim(ctx, k, engine.Mark{Owner: "w1"}); err != nil {
				t.Fatal(err)
			}
			if err := m.Fail(ctx, k, engine.Mark{Owner: "w1"}); err != nil || state(t, k) != engine.StateFailed {
				t.Fatalf("Fail = %v, marker %s; want FAILED", err, state(t, k))
			}
		}},
		{"Tombstone", "PutItem", func(ctx context.Context, t *testing.T) {
			k := key()
			if _, err := m.Tombstone(ctx, k, time.Time{}); err != nil || state(t, k) != engine.StateCancelled {
				t.Fatalf("Tombstone = %v, marker %s; want CANCELLED", err, state(t, k))
			}
		}},
		{"Release", "DeleteItem", func(ctx context.Context, t *testing.T) {
			k := key()
			if _, err := direct.Lease(ctx, k, engine.Mark{Owner: "w1", Until: until}); err != nil {
				t.Fatal(err)
			}
			if err := m.Release(ctx, k, "w1"); err != nil || state(t, k) != "" {
				t.Fatalf("Release = %v, marker %s; want none", err, state(t, k))
			}
		}},
		{"ResetFailed", "DeleteItem", func(ctx context.Context, t *testing.T) {
			k := key()
			if _, err := direct.Claim(ctx, k, engine.Mark{Owner: "w1"}); err != nil {
				t.Fatal(err)
			}
			if err := direct.Fail(ctx, k, engine.Mark{Owner: "w1"}); err != nil {
				t.Fatal(err)
			}
			if err := marker.NewResetter(l.client, table).ResetFailed(ctx, k); err != nil || state(t, k) != "" {
				t.Fatalf("ResetFailed = %v, marker %s; want none", err, state(t, k))
			}
		}},
	})
}

// TestIdempotencyWritesFindTheirOwnItem: the request layer's writes.
func TestIdempotencyWritesFindTheirOwnItem(t *testing.T) {
	l := newLossy(t)
	table := testenv.NewTable(t, l.direct, "idem", idempotency.AttrPK, "")
	jobsTable := testenv.NewTable(t, l.direct, "jobs", jobs.AttrPK, "")
	s, direct := idempotency.NewStore(l.client, table), idempotency.NewStore(l.direct, table)
	js := jobs.NewStore(l.direct, jobsTable, nil)
	begin := func(t *testing.T, s *idempotency.Store, key string) idempotency.Result {
		t.Helper()
		r, err := s.Begin(context.Background(), "caller-a", key, "fp")
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	l.each([]write{
		{"Begin", "PutItem", func(ctx context.Context, t *testing.T) {
			if r := begin(t, s, next("k")); r.Outcome != idempotency.Acquired {
				t.Fatalf("Begin = %v; want Acquired (its own lock), not in flight behind itself", r.Outcome)
			}
		}},
		{"Complete", "PutItem", func(ctx context.Context, t *testing.T) {
			k := next("k")
			r := begin(t, direct, k)
			if err := s.Complete(ctx, r.Lock, idempotency.Response{Status: 202, Body: "{}"}); err != nil {
				t.Fatalf("Complete = %v; want nil", err)
			}
			if r := begin(t, direct, k); r.Outcome != idempotency.Replay {
				t.Fatalf("after Complete: %v; want Replay", r.Outcome)
			}
		}},
		{"Complete with the job's promotion", "TransactWriteItems", func(ctx context.Context, t *testing.T) {
			k := next("k")
			r := begin(t, direct, k)
			job := newJob("caller-a", k)
			if d, err := js.Reserve(ctx, job, contract.AllowAfterFailed); err != nil || d.Outcome != jobs.Reserved {
				t.Fatalf("Reserve = %+v, %v", d, err)
			}
			if err := s.Complete(ctx, r.Lock, idempotency.Response{Status: 202, Body: "{}"}, js.Promotion(job)); err != nil {
				t.Fatalf("Complete = %v; want nil", err)
			}
			if got, _ := js.Get(ctx, job.ID); got.State != jobs.StateEnqueued {
				t.Fatalf("job %s; want Enqueued", got.State)
			}
		}},
		{"Release", "DeleteItem", func(ctx context.Context, t *testing.T) {
			k := next("k")
			r := begin(t, direct, k)
			if err := s.Release(ctx, r.Lock); err != nil {
				t.Fatalf("Release = %v; want nil", err)
			}
			if r2 := begin(t, direct, k); r2.Outcome != idempotency.Acquired || r2.Lock.Owner == r.Lock.Owner {
				t.Fatalf("after Release: %v; want a new lock", r2.Outcome)
			}
		}},
	})
}

func newJob(caller, idemKey string) jobs.Job {
	now := time.Now()
	return jobs.Job{ID: message.DeriveMessageID(caller, idemKey), Caller: caller, Type: "email.welcome.v1",
		Key: "welcome:" + idemKey, Queue: "default", Message: `{"v":1}`, CreatedAt: now, RunAt: now}
}

// TestJobWritesFindTheirOwnItem: the job record's writes (enqueue, workers,
// cancel, redrive).
func TestJobWritesFindTheirOwnItem(t *testing.T) {
	l := newLossy(t)
	table := testenv.NewTable(t, l.direct, "jobs", jobs.AttrPK, "")
	markers := testenv.NewTable(t, l.direct, "markers", dynamostore.AttrHandler, dynamostore.AttrMessageKey)
	js := jobs.NewStore(l.client, table, dynamostore.New(l.client, markers))
	direct := jobs.NewStore(l.direct, table, dynamostore.New(l.direct, markers))
	rec, lc := jobs.NewRecorder(l.client, table), jobs.NewLifecycle(l.client, table)
	directRec := jobs.NewRecorder(l.direct, table)
	reserved := func(t *testing.T) jobs.Job {
		t.Helper()
		job := newJob("caller-a", next("k"))
		if d, err := direct.Reserve(context.Background(), job, contract.AllowAfterFailed); err != nil || d.Outcome != jobs.Reserved {
			t.Fatalf("Reserve = %+v, %v", d, err)
		}
		if err := direct.Promote(context.Background(), job); err != nil {
			t.Fatal(err)
		}
		return job
	}
	state := func(t *testing.T, id string) jobs.State {
		t.Helper()
		j, err := direct.Get(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		return j.State
	}
	failed := func(t *testing.T) jobs.Job {
		t.Helper()
		job := reserved(t)
		if err := directRec.MarkFailed(context.Background(), job.ID, jobs.Failure{Class: "x", Reason: "y", Attempts: 5}); err != nil {
			t.Fatal(err)
		}
		return job
	}
	l.each([]write{
		{"Reserve", "TransactWriteItems", func(ctx context.Context, t *testing.T) {
			job := newJob("caller-a", next("k"))
			if d, err := js.Reserve(ctx, job, contract.AllowAfterFailed); err != nil || d.Outcome != jobs.Reserved {
				t.Fatalf("Reserve = %+v, %v; want Reserved (its own write)", d.Outcome, err)
			}
		}},
		{"Promote", "UpdateItem", func(ctx context.Context, t *testing.T) {
			job := newJob("caller-a", next("k"))
			if _, err := direct.Reserve(ctx, job, contract.AllowAfterFailed); err != nil {
				t.Fatal(err)
			}
			if err := js.Promote(ctx, job); err != nil || state(t, job.ID) != jobs.StateEnqueued {
				t.Fatalf("Promote = %v, state %s; want Enqueued", err, state(t, job.ID))
			}
		}},
		{"MarkParked", "UpdateItem", func(ctx context.Context, t *testing.T) {
			job := reserved(t)
			// Parked ten days after the enqueue: the record and its dedup
			// pointer must both live on from the park.
			rec := jobs.NewRecorder(l.client, table)
			rec.Now = func() time.Time { return time.Now().Add(10 * 24 * time.Hour) }
			// (A retry that finds its own write cannot know the state
			// before it: Enqueued or Parked are both true enough.)
			prev, err := rec.MarkParked(ctx, job.ID)
			if err != nil || (prev != jobs.StateEnqueued && prev != jobs.StateParked) {
				t.Fatalf("MarkParked = %s, %v; want it parked", prev, err)
			}
			recExp, ptrExp := expiresAt(t, l.direct, table, jobs.JobPK(job.ID)), expiresAt(t, l.direct, table, jobs.DedupPK(job.Caller, job.Type, job.Key))
			if recExp != ptrExp {
				t.Fatalf("record expires at %s, its dedup pointer at %s; want the pointer to live as long as the parked record", recExp, ptrExp)
			}
		}},
		{"RecordOutcome", "UpdateItem", func(ctx context.Context, t *testing.T) {
			job := reserved(t)
			if err := rec.RecordOutcome(ctx, job.ID, jobs.OutcomeNoop, "no mail needed"); err != nil {
				t.Fatalf("RecordOutcome = %v", err)
			}
		}},
		{"MarkFailed", "UpdateItem", func(ctx context.Context, t *testing.T) {
			job := reserved(t)
			if err := rec.MarkFailed(ctx, job.ID, jobs.Failure{Class: "x", Reason: "y", Attempts: 5}); err != nil || state(t, job.ID) != jobs.StateFailed {
				t.Fatalf("MarkFailed = %v, state %s; want Failed", err, state(t, job.ID))
			}
		}},
		{"MarkUnclaimed", "UpdateItem", func(ctx context.Context, t *testing.T) {
			job := reserved(t)
			if err := rec.MarkUnclaimed(ctx, job.ID, "claim failed"); err != nil || state(t, job.ID) != jobs.StateSucceeded {
				t.Fatalf("MarkUnclaimed = %v, state %s; want Succeeded", err, state(t, job.ID))
			}
		}},
		{"Cancel: tombstone", "PutItem", func(ctx context.Context, t *testing.T) {
			job := reserved(t)
			if j, err := js.Cancel(ctx, job.ID, "caller-a"); err != nil || j.State != jobs.StateCancelled || state(t, job.ID) != jobs.StateCancelled {
				t.Fatalf("Cancel = %s, %v; want Cancelled", j.State, err)
			}
		}},
		{"Cancel: record", "UpdateItem", func(ctx context.Context, t *testing.T) {
			job := reserved(t)
			if j, err := js.Cancel(ctx, job.ID, "caller-a"); err != nil || j.State != jobs.StateCancelled || state(t, job.ID) != jobs.StateCancelled {
				t.Fatalf("Cancel = %s, %v; want Cancelled", j.State, err)
			}
		}},
		{"Reactivate", "TransactWriteItems", func(ctx context.Context, t *testing.T) {
			job := failed(t)
			rv, err := lc.Inspect(ctx, job.ID)
			if err != nil {
				t.Fatal(err)
			}
			if err := lc.Reactivate(ctx, rv, false); err != nil {
				t.Fatalf("Reactivate = %v; want nil (its own write)", err)
			}
			if s := state(t, job.ID); s != jobs.StatePending {
				t.Fatalf("state %s; want Pending", s)
			}
		}},
		{"Settle", "UpdateItem", func(ctx context.Context, t *testing.T) {
			job := failed(t)
			rv, err := lc.Inspect(ctx, job.ID)
			if err != nil {
				t.Fatal(err)
			}
			if err := jobs.NewLifecycle(l.direct, table).Reactivate(ctx, rv, false); err != nil {
				t.Fatal(err)
			}
			if err := lc.Settle(ctx, job.ID, true); err != nil || state(t, job.ID) != jobs.StateEnqueued {
				t.Fatalf("Settle = %v, state %s; want Enqueued", err, state(t, job.ID))
			}
		}},
	})
}

func expiresAt(t *testing.T, c *dynamodb.Client, table, pk string) string {
	t.Helper()
	out, err := c.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(table), Key: ddb.KeyS("pk", pk), ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	n, _ := out.Item[ddb.AttrExpiresAt].(*types.AttributeValueMemberN)
	if n == nil {
		t.Fatalf("%s has no expiresAt", pk)
	}
	return n.Value
}

// TestDeadLetterWritesFindTheirOwnItem: the dead-letters table's writes.
func TestDeadLetterWritesFindTheirOwnItem(t *testing.T) {
	l := newLossy(t)
	table := testenv.NewTable(t, l.direct, "dead", deadletter.AttrPK, "")
	s, direct := deadletter.NewStore(l.client, table), deadletter.NewStore(l.direct, table)
	letter := func() deadletter.Record {
		return deadletter.Record{ID: next("job"), Type: "email.welcome.v1", Body: "{}", Reason: "r", Status: deadletter.StatusDead}
	}
	l.each([]write{
		{"Save", "UpdateItem", func(ctx context.Context, t *testing.T) {
			if isNew, err := s.Save(ctx, letter(), next("sqs")); err != nil || !isNew {
				t.Fatalf("Save = %v, %v; want a new letter (its own write: counted and alerted once)", isNew, err)
			}
		}},
		{"MarkRedriven", "UpdateItem", func(ctx context.Context, t *testing.T) {
			rec := letter()
			if _, err := direct.Save(ctx, rec, next("sqs")); err != nil {
				t.Fatal(err)
			}
			if err := s.MarkRedriven(ctx, rec.ID); err != nil {
				t.Fatalf("MarkRedriven = %v", err)
			}
		}},
		{"MarkDropped", "UpdateItem", func(ctx context.Context, t *testing.T) {
			rec := letter()
			if _, err := direct.Save(ctx, rec, next("sqs")); err != nil {
				t.Fatal(err)
			}
			if err := s.MarkDropped(ctx, rec.ID); err != nil {
				t.Fatalf("MarkDropped = %v; want nil (its own write)", err)
			}
		}},
	})
}

// TestUserWritesFindTheirOwnItem: the token a verification mail stores.
func TestUserWritesFindTheirOwnItem(t *testing.T) {
	l := newLossy(t)
	table := testenv.NewTable(t, l.direct, "users", users.AttrUserID, "")
	u := users.New(l.client, table)
	l.each([]write{
		{"SetToken", "UpdateItem", func(ctx context.Context, t *testing.T) {
			id := next("u")
			if _, err := l.direct.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: map[string]types.AttributeValue{
				users.AttrUserID: &types.AttributeValueMemberS{Value: id}, users.AttrEmail: &types.AttributeValueMemberS{Value: id + "@example.com"},
				users.AttrEmailConfirmed: &types.AttributeValueMemberBOOL{Value: false},
			}}); err != nil {
				t.Fatal(err)
			}
			tok := email.Token{Hash: "h", Purpose: email.PurposeVerification, ExpiresAt: time.Now().Add(time.Hour)}
			if err := u.SetToken(ctx, id, tok, true); err != nil {
				if errors.Is(err, email.ErrUserGone) {
					t.Fatalf("SetToken = %v; its own write is no reason to give up on the user", err)
				}
				t.Fatal(err)
			}
		}},
	})
}
