//go:build integration

package client_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/runstwice/runstwice/client"
	"github.com/runstwice/runstwice/internal/dev/devstack"
	"github.com/runstwice/runstwice/internal/dev/localapi/localapitest"
	"github.com/runstwice/runstwice/internal/dev/moto"
)

// TestAgainstTheLocalStack runs the client against the whole bundle on this
// machine: the gateway verifying signatures, the enqueue function under the
// runtime emulator, DynamoDB and SQS in moto, the e-mail worker.
func TestAgainstTheLocalStack(t *testing.T) {
	l := localapitest.Start(t)
	t.Run("a signed request is accepted and maps to its caller", func(t *testing.T) { signedMapsToCaller(t, l) })
	t.Run("a request signed with a wrong secret is refused with 403", func(t *testing.T) { wrongSecretRefused(t, l) })
	t.Run("a retry after an injected 5xx yields one job", func(t *testing.T) { retryAfterInjected5xx(t, l) })
	t.Run("two sessions of one role are one caller", func(t *testing.T) { sessionsOfOneRole(t, l) })
	t.Run("cancel", func(t *testing.T) { cancel(t, l) })
	t.Run("a signed caller lists its own jobs, a page at a time", func(t *testing.T) { listOwnJobs(t, l) })
	t.Run("a batch with a continuation, retried, runs each job once in order", func(t *testing.T) { batchWithContinuation(t, l) })
}

// batchWithContinuation: EnqueueBatch through the gateway, signed: a
// welcome and a password reset that waits for it (#0). The same
// Idempotency-Key again replays the answer with the same job ids; the
// continuation runs after its parent succeeded; GetBatch says so, and
// another caller cannot read the batch.
func batchWithContinuation(t *testing.T, l *devstack.Local) {
	ctx := context.Background()
	me := signedAs(t, l, devstack.LocalIdentities[1])
	batch := []client.BatchJob{
		{Type: client.TypeWelcome, Args: client.WelcomeArgs{UserID: "u-demo-2"}, Key: unique(t) + ":welcome"},
		{Type: client.TypePasswordReset, Args: client.PasswordResetArgs{UserID: "u-demo-2", CountryCode: "DE"}, Key: unique(t) + ":reset", After: client.BatchRef(0)},
	}
	opts := client.BatchOptions{IdempotencyKey: unique(t)}
	first, err := me.EnqueueBatch(ctx, batch, opts)
	if err != nil || first.StatusCode != http.StatusAccepted || first.Jobs[1].State != client.StateAwaitingContinuation {
		t.Fatalf("batch: %+v, %v; want 202 with job 1 AwaitingContinuation", first, err)
	}
	again, err := me.EnqueueBatch(ctx, batch, opts)
	if err != nil || !again.Replayed || again.BatchID != first.BatchID || again.Jobs[0].JobID != first.Jobs[0].JobID || again.Jobs[1].JobID != first.Jobs[1].JobID {
		t.Fatalf("the batch again: %+v, %v; want the first answer replayed", again, err)
	}
	done, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	child, err := me.Wait(done, first.Jobs[1].JobID, 250*time.Millisecond)
	if err != nil || child.State != client.StateSucceeded || child.After != first.Jobs[0].JobID {
		t.Fatalf("the continuation: %+v, %v; want Succeeded after %s", child, err, first.Jobs[0].JobID)
	}
	parent, err := me.Get(ctx, first.Jobs[0].JobID)
	if err != nil || parent.State != client.StateSucceeded || parent.UpdatedAt.After(child.UpdatedAt) {
		t.Fatalf("the parent: %+v, %v; want Succeeded before its continuation (%s)", parent, err, child.UpdatedAt)
	}
	b, err := me.GetBatch(ctx, first.BatchID)
	if err != nil || b.State != client.BatchAccepted || b.Counts[client.StateSucceeded] != 2 {
		t.Fatalf("GetBatch: %+v, %v; want Accepted with 2 Succeeded", b, err)
	}
	if _, err := signedAs(t, l, devstack.LocalIdentities[3]).GetBatch(ctx, first.BatchID); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("GetBatch by another caller: %v; want ErrNotFound", err)
	}
}

// listOwnJobs: GET /v1/jobs through the gateway, signed, from the jobs
// table's index: the caller's jobs newest first, paged, another caller's
// never; a bad filter is a 400.
func listOwnJobs(t *testing.T, l *devstack.Local) {
	ctx := context.Background()
	me, other := signedAs(t, l, devstack.LocalIdentities[1]), signedAs(t, l, devstack.LocalIdentities[3])
	var mine []string
	for i := range 3 {
		res, err := me.Welcome(ctx, client.WelcomeArgs{UserID: fmt.Sprintf("u-list-%d", i)}, client.EnqueueOptions{Key: unique(t)})
		if err != nil {
			t.Fatal(err)
		}
		mine = append([]string{res.JobID}, mine...)
		if _, err := other.Welcome(ctx, client.WelcomeArgs{UserID: "u-demo-2"}, client.EnqueueOptions{Key: unique(t)}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond) // distinct creation times
	}
	first, err := me.ListJobs(ctx, client.ListOptions{Limit: 2})
	if err != nil || len(first.Jobs) != 2 || first.Next == "" {
		t.Fatalf("first page: %+v, %v; want 2 jobs and a next", first, err)
	}
	var got []string
	for j, err := range me.Jobs(ctx, client.ListOptions{Limit: 2, Type: client.TypeWelcome}) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, j.JobID)
	}
	// The caller may have other welcomes from earlier subtests: its three
	// new ones come first, newest first, and none of the other's.
	if len(got) < 3 || got[0] != mine[0] || got[1] != mine[1] || got[2] != mine[2] {
		t.Fatalf("listed %v; want %v first", got, mine)
	}
	for j, err := range other.Jobs(ctx, client.ListOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		if slices.Contains(mine, j.JobID) {
			t.Fatalf("another caller lists %s", j.JobID)
		}
	}
	var p *client.Problem
	if _, err := me.ListJobs(ctx, client.ListOptions{State: "Bogus"}); !errors.As(err, &p) || p.Status != http.StatusBadRequest {
		t.Fatalf("a bad state filter: %v; want 400", err)
	}
}

// signedAs is a client of the local stack signing as a local identity.
func signedAs(t *testing.T, l *devstack.Local, id devstack.LocalIdentity, opts ...client.Option) *client.Client {
	t.Helper()
	creds := credentials.NewStaticCredentialsProvider(id.AccessKeyID, id.SecretAccessKey, id.SessionToken)
	c, err := client.New(l.APIURL, append([]client.Option{client.WithCredentials(creds, moto.Region)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func unsignedAs(t *testing.T, l *devstack.Local, caller string) *client.Client {
	t.Helper()
	c, err := client.New(l.APIURL, client.WithCaller(caller))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// unique returns a job key no other test uses.
func unique(t *testing.T) string {
	return fmt.Sprintf("client-test:%s:%d", t.Name(), time.Now().UnixNano())
}

func signedMapsToCaller(t *testing.T, l *devstack.Local) {
	ctx := context.Background()
	user := devstack.LocalIdentities[0] // test/test: the IAM user local-user
	res, err := signedAs(t, l, user).Welcome(ctx, client.WelcomeArgs{UserID: "u-demo-2"}, client.EnqueueOptions{Key: unique(t)})
	if err != nil || res.StatusCode != http.StatusAccepted || res.Replayed || res.Location != "/v1/jobs/"+res.JobID {
		t.Fatalf("signed enqueue: %+v, %v; want 202 with a Location", res, err)
	}
	// The job belongs to the signing identity: the same principal named
	// without a signature sees it, another caller does not.
	for _, who := range []string{user.ARN, devstack.DefaultCaller} {
		if j, err := unsignedAs(t, l, who).Get(ctx, res.JobID); err != nil || j.JobID != res.JobID {
			t.Fatalf("GET as %s: %+v, %v; want the job", who, j, err)
		}
	}
	if _, err := unsignedAs(t, l, "someone-else").Get(ctx, res.JobID); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("GET as another caller: %v; want 404", err)
	}
	if _, err := signedAs(t, l, devstack.LocalIdentities[3]).Get(ctx, res.JobID); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("GET signed by another role: %v; want 404", err)
	}
	done, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	if j, err := signedAs(t, l, user).Wait(done, res.JobID, 250*time.Millisecond); err != nil || j.State != client.StateSucceeded {
		t.Fatalf("the welcome job: %+v, %v; want Succeeded", j, err)
	}
}

func wrongSecretRefused(t *testing.T, l *devstack.Local) {
	ctx := context.Background()
	wrong := devstack.LocalIdentities[0]
	wrong.SecretAccessKey = "not-the-secret"
	opts := client.EnqueueOptions{Key: unique(t), IdempotencyKey: unique(t)}
	_, err := signedAs(t, l, wrong).Welcome(ctx, client.WelcomeArgs{UserID: "u-demo-2"}, opts)
	var p *client.Problem
	if !errors.As(err, &p) || p.Status != http.StatusForbidden || p.Detail != "The request signature we calculated does not match the signature you provided. "+
		"Check your AWS Secret Access Key and signing method. Consult the service documentation for details." {
		t.Fatalf("wrong secret: %v; want 403 with API Gateway's message", err)
	}
	// Nothing was stored under the key: the right secret now creates the job.
	res, err := signedAs(t, l, devstack.LocalIdentities[0]).Welcome(ctx, client.WelcomeArgs{UserID: "u-demo-2"}, opts)
	if err != nil || res.StatusCode != http.StatusAccepted || res.Replayed {
		t.Fatalf("after the refusal: %+v, %v; want a new job", res, err)
	}
}

// failFirst is a transport that breaks the first POST: before sending it
// (the API never sees it) or after (the API handled it, the answer is
// lost), answering 502 as a gateway would.
type failFirst struct {
	afterSend bool
	posts     atomic.Int32
	firstBody []byte // the lost answer, when afterSend
}

func (f *failFirst) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method != http.MethodPost || f.posts.Add(1) > 1 {
		return http.DefaultTransport.RoundTrip(r)
	}
	if f.afterSend {
		resp, err := http.DefaultTransport.RoundTrip(r)
		if err != nil {
			return nil, err
		}
		f.firstBody, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	return &http.Response{StatusCode: http.StatusBadGateway, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(bytes.NewReader([]byte(`{"message":"Bad Gateway"}`))), Request: r}, nil
}

func retryAfterInjected5xx(t *testing.T, l *devstack.Local) {
	for _, tc := range []struct {
		name      string
		afterSend bool
		replayed  bool
	}{
		{"5xx before the API saw the request", false, false},
		{"5xx after the API created the job (answer lost)", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ft := &failFirst{afterSend: tc.afterSend}
			c := signedAs(t, l, devstack.LocalIdentities[1], client.WithHTTPClient(&http.Client{Transport: ft}),
				client.WithRetry(3, 50*time.Millisecond, 100*time.Millisecond))
			key := unique(t)
			res, err := c.Welcome(context.Background(), client.WelcomeArgs{UserID: "u-demo-2"}, client.EnqueueOptions{Key: key})
			if err != nil || res.Attempts != 2 || res.Replayed != tc.replayed || res.StatusCode != http.StatusAccepted {
				t.Fatalf("enqueue through a failing gateway: %+v, %v; want 202 on attempt 2, replayed %v", res, err, tc.replayed)
			}
			if tc.afterSend && !bytes.Contains(ft.firstBody, []byte(res.JobID)) {
				t.Fatalf("the lost answer %s names another job than the retry's %s", ft.firstBody, res.JobID)
			}
			if n := jobsWithKey(t, l, key); n != 1 {
				t.Fatalf("%d jobs with key %s; want 1", n, key)
			}
		})
	}
}

// jobsWithKey counts the job records with the given key in the jobs table.
func jobsWithKey(t *testing.T, l *devstack.Local, key string) int {
	t.Helper()
	table, ok := l.Stack.Physical("JobsTable")
	if !ok {
		t.Fatal("the stack has no JobsTable")
	}
	filter := expression.And(expression.BeginsWith(expression.Name("pk"), "job#"), expression.Name("key").Equal(expression.Value(key)))
	expr, err := expression.NewBuilder().WithFilter(filter).Build()
	if err != nil {
		t.Fatal(err)
	}
	p := dynamodb.NewScanPaginator(dynamodb.NewFromConfig(moto.Config(l.Endpoint, moto.Region)), &dynamodb.ScanInput{
		TableName: aws.String(table.Name), FilterExpression: expr.Filter(),
		ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
	})
	n := 0
	for p.HasMorePages() {
		page, err := p.NextPage(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		n += len(page.Items)
	}
	return n
}

// sessionsOfOneRole: an assumed role gets a new session name on every
// credential refresh; the caller is the role, so a retry from a new session
// replays, and the role's sessions see its jobs.
func sessionsOfOneRole(t *testing.T, l *devstack.Local) {
	ctx := context.Background()
	session1, session2, other := devstack.LocalIdentities[1], devstack.LocalIdentities[2], devstack.LocalIdentities[3]
	opts := client.EnqueueOptions{Key: unique(t), IdempotencyKey: unique(t)}
	args := client.WelcomeArgs{UserID: "u-demo-2"}
	first, err := signedAs(t, l, session1).Welcome(ctx, args, opts)
	if err != nil || first.StatusCode != http.StatusAccepted || first.Replayed {
		t.Fatalf("session 1: %+v, %v; want a new job", first, err)
	}
	again, err := signedAs(t, l, session2).Welcome(ctx, args, opts)
	if err != nil || !again.Replayed || again.JobID != first.JobID {
		t.Fatalf("session 2 with the same Idempotency-Key: %+v, %v; want a replay of job %s", again, err, first.JobID)
	}
	if n := jobsWithKey(t, l, opts.Key); n != 1 {
		t.Fatalf("%d jobs; want 1", n)
	}
	if _, err := signedAs(t, l, session2).Get(ctx, first.JobID); err != nil {
		t.Fatalf("GET from the role's other session: %v; want 200", err)
	}
	if _, err := signedAs(t, l, other).Get(ctx, first.JobID); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("GET from another role: %v; want 404", err)
	}
}

func cancel(t *testing.T, l *devstack.Local) {
	ctx := context.Background()
	c := signedAs(t, l, devstack.LocalIdentities[0])
	later, err := c.Welcome(ctx, client.WelcomeArgs{UserID: "u-demo-2"}, client.EnqueueOptions{Key: unique(t), DelaySeconds: 600})
	if err != nil || later.State != client.StateScheduled {
		t.Fatalf("delayed enqueue: %+v, %v; want Scheduled", later, err)
	}
	for range 2 { // cancelling again is 202 again
		if j, err := c.Cancel(ctx, later.JobID); err != nil || j.State != client.StateCancelled {
			t.Fatalf("cancel a scheduled job: %+v, %v; want Cancelled", j, err)
		}
	}
	if _, err := unsignedAs(t, l, "someone-else").Cancel(ctx, later.JobID); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("cancel another caller's job: %v; want 404", err)
	}
	now, err := c.Welcome(ctx, client.WelcomeArgs{UserID: "u-demo-2"}, client.EnqueueOptions{Key: unique(t)})
	if err != nil {
		t.Fatal(err)
	}
	done, stop := context.WithTimeout(ctx, 90*time.Second)
	defer stop()
	if j, err := c.Wait(done, now.JobID, 250*time.Millisecond); err != nil || j.State != client.StateSucceeded {
		t.Fatalf("wait: %+v, %v", j, err)
	}
	var p *client.Problem
	if _, err := c.Cancel(ctx, now.JobID); !errors.Is(err, client.ErrConflict) || !errors.As(err, &p) || p.State != client.StateSucceeded {
		t.Fatalf("cancel a succeeded job: %v; want 409 with state Succeeded", err)
	}
}
