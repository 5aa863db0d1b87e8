//go:build integration

package devstack_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/runstwice/runstwice/client"
	"github.com/runstwice/runstwice/internal/dev/awsproxy"
	"github.com/runstwice/runstwice/internal/dev/devstack"
	"github.com/runstwice/runstwice/internal/dev/faults"
	"github.com/runstwice/runstwice/internal/dev/moto"
	"github.com/runstwice/runstwice/internal/testkit"
)

// receives collects, from the functions' application log, every outcome
// line of the runner with its attempt (the receive count) and whether it
// was backed off.
type receives struct {
	mu       sync.Mutex
	attempts map[string][]int    // by job id, one per outcome line
	outcomes map[string][]string // by job id
	backoffs int                 // retry lines that carry retryInSeconds
}

func (r *receives) Write(p []byte) (int, error) {
	out, ok := devstack.ParseOutcome(p)
	if !ok || out.JobID == "" {
		return len(p), nil
	}
	var line struct {
		Attempt int  `json:"attempt"`
		RetryIn *int `json:"retryInSeconds"`
	}
	_ = json.Unmarshal(p, &line)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.attempts[out.JobID] = append(r.attempts[out.JobID], line.Attempt)
	r.outcomes[out.JobID] = append(r.outcomes[out.JobID], out.Outcome)
	if line.RetryIn != nil {
		r.backoffs++
	}
	return len(p), nil
}

func (r *receives) succeeded() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, o := range r.outcomes {
		if slices.Contains(o, "succeeded") {
			n++
		}
	}
	return n
}

// TestBacklogDrainsWithinSESRate: an SES that sends 2 mails a second
// (faults' throttle(2/s)) and a stack told so (SesMaxSendRate 2: every send
// of the local stack's three e-mail pollers takes a slot of the stack's one
// send schedule), a backlog of
// 100 mails (50 × the rate: welcome mails on the default queue, password
// resets on the critical one), and SES throttling every send for the first
// 10 s. The throttled sends back off (a short local schedule: 5 s ×
// 3^(n-1), at most 60 s) instead of coming back after the queues' 3 minute
// visibility timeout, so every mail goes out exactly once, no job is
// dead-lettered, and none needs its fifth, final receive. A send with no
// slot before its invocation's deadline snoozes (a new copy, no receive
// spent).
func TestBacklogDrainsWithinSESRate(t *testing.T) {
	const jobs = 100
	root, err := moto.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	rules, err := faults.Parse("ses:SendEmail:throttle(2/s)")
	if err != nil {
		t.Fatal(err)
	}
	injector := faults.New(rules, 1)
	// SES throttles every send for a while (another sender of the account,
	// a quota being raised): added when the backlog is sent.
	burst := faults.Rule{Service: "ses", Operation: "SendEmail", Kind: faults.Throttle, P: 1}
	var visibilityCalls atomic.Int64
	countVisibility := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if c := awsproxy.CallOf(r); c != nil && c.Service == "sqs" && c.Operation == "ChangeMessageVisibilityBatch" {
				visibilityCalls.Add(1)
			}
			next.ServeHTTP(w, r)
		})
	}
	seen := &receives{attempts: map[string][]int{}, outcomes: map[string][]string{}}
	out := &testkit.Buffer{}
	ctx := context.Background()
	l, err := devstack.StartOnFreePorts(ctx, devstack.Options{
		Root: root, StateDir: filepath.Join(t.TempDir(), ".devstack"),
		APIAddr: "127.0.0.1:0", Out: out,
		Chaos: devstack.Chaos{
			ProxyHooks: []awsproxy.Hook{injector.Hook, countVisibility},
			Env: map[string]string{"SES_MAX_SEND_RATE": "2",
				"BACKOFF_BASE": "5s", "BACKOFF_FACTOR": "3", "BACKOFF_CAP": "60s"},
			AppLog: seen,
		},
	})
	if err != nil {
		t.Fatalf("the local stack did not start: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		l.Stop()
		if t.Failed() {
			t.Logf("the stack printed:\n%s", out)
		}
	})

	// The test's own users, one per job.
	cfg := moto.Config(l.Endpoint, moto.Region)
	usersTable, _ := l.Stack.Physical("UsersTable")
	var users []devstack.DemoUser
	for i := range jobs {
		id := fmt.Sprintf("u-rate-%03d", i)
		users = append(users, devstack.DemoUser{UserID: id, Email: id + "@example.com", DisplayName: "Rate " + id})
	}
	if err := devstack.SeedUsers(ctx, dynamodb.NewFromConfig(cfg), usersTable.Name, users); err != nil {
		t.Fatal(err)
	}

	api, err := client.New(l.APIURL, client.WithCaller("ses-rate-test"), client.WithRetry(5, 100*time.Millisecond, time.Second))
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]string, jobs)
	var wg sync.WaitGroup
	errs := make(chan error, jobs)
	stopBurst := injector.Add(burst)
	time.AfterFunc(10*time.Second, stopBurst)
	for i, u := range users {
		wg.Go(func() {
			opts := client.EnqueueOptions{IdempotencyKey: "rate-" + u.UserID}
			var res *client.Result
			var err error
			if i%2 == 0 {
				res, err = api.Welcome(ctx, client.WelcomeArgs{UserID: u.UserID}, opts)
			} else {
				res, err = api.PasswordReset(ctx, client.PasswordResetArgs{UserID: u.UserID, CountryCode: "DE"}, opts)
			}
			if err != nil {
				errs <- err
				return
			}
			ids[i] = res.JobID
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("enqueue: %v", err)
	}
	began := time.Now()

	deadline := began.Add(3 * time.Minute)
	for seen.succeeded() < jobs && time.Now().Before(deadline) {
		time.Sleep(time.Second)
	}
	drained := time.Since(began)

	// Every job: sent once, Succeeded, never dead-lettered, under five
	// receives.
	mails := map[string]int{}
	for _, m := range l.Mails().Recent(10 * jobs) {
		mails[m.JobID]++
	}
	histogram := map[int]int{}
	most := 0
	seen.mu.Lock()
	for _, id := range ids {
		outcomes, attempts := seen.outcomes[id], seen.attempts[id]
		receives := slices.Max(append([]int{0}, attempts...))
		histogram[receives]++
		most = max(most, receives)
		if n := mails[id]; n != 1 {
			t.Errorf("job %s: %d mails, want exactly 1 (outcomes %v)", id, n, outcomes)
		}
		for _, o := range outcomes {
			if o != "succeeded" && o != "retry" && o != "snoozed" {
				t.Errorf("job %s: outcome %s (outcomes %v)", id, o, outcomes)
			}
		}
	}
	backoffs := seen.backoffs
	seen.mu.Unlock()
	for _, id := range ids {
		job, err := api.Get(ctx, id)
		if err != nil || job.State != client.StateSucceeded {
			t.Errorf("job %s: %+v %v; want Succeeded", id, job, err)
		}
	}

	var lines bytes.Buffer
	for _, k := range slices.Sorted(maps.Keys(histogram)) {
		fmt.Fprintf(&lines, "  %d receive(s): %3d jobs %s\n", k, histogram[k], strings.Repeat("#", histogram[k]))
	}
	t.Logf("%d jobs drained in %v; SES throttled %d sends; %d retries backed off in %d ChangeMessageVisibilityBatch calls\nreceives per job:\n%s",
		jobs, drained.Round(time.Second), injector.Counts()[faults.Throttle], backoffs, visibilityCalls.Load(), lines.String())
	if most >= 5 {
		t.Errorf("a job needed %d receives; want fewer than 5 (its fifth is its last)", most)
	}
	// The premise: SES did throttle, and the retries were backed off
	// rather than left to the visibility timeout (which alone would take
	// longer than the test's deadline).
	if injector.Counts()[faults.Throttle] == 0 || visibilityCalls.Load() == 0 || backoffs == 0 {
		t.Errorf("throttled %d, backed off %d in %d calls: the test did not exercise the back-off",
			injector.Counts()[faults.Throttle], backoffs, visibilityCalls.Load())
	}
}
