//go:build integration

package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sesv2"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"

	"github.com/runstwice/runstwice/aws/dynamostore"
	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/deadletter"
	"github.com/runstwice/runstwice/internal/dev/devstack"
	"github.com/runstwice/runstwice/internal/dev/lambdarie"
	"github.com/runstwice/runstwice/internal/dev/stack"
	"github.com/runstwice/runstwice/internal/dev/testenv"
	"github.com/runstwice/runstwice/internal/jobs"
)

// expectFile is events/expect.json.
type expectFile struct {
	Seed   map[string][]map[string]any `json:"seed"`
	Events map[string]expectation      `json:"events"`
}

type expectation struct {
	Before []string `json:"before"`
	// Toggles are job type → the value its kill switch is set to before
	// the events run ("true" to run a fail-closed type); the switch is put
	// back afterwards.
	Toggles    map[string]string `json:"toggles"`
	StatusCode int               `json:"statusCode"`
	Headers    map[string]string `json:"headers"`
	// BatchItemFailures are the item identifiers that must be reported
	// failed: SQS message ids, or stream records' sequence numbers (nil:
	// this is an API event).
	BatchItemFailures *[]string `json:"batchItemFailures"`
	// Messages are queue logical id → messages it must hold afterwards
	// (visible, in flight or delayed).
	Messages map[string]int `json:"messages"`
	// Jobs are job id → what its record must say afterwards.
	Jobs map[string]jobExpectation `json:"jobs"`
	// DeadLetters are every dead letter the dead letters table must hold
	// afterwards, by id (nil: not checked).
	DeadLetters *map[string]deadLetterExpectation `json:"deadLetters"`
}

// jobExpectation is what a job's record must say; an empty field is not
// checked.
type jobExpectation struct {
	State       string `json:"state"`
	Caller      string `json:"caller"`
	LastOutcome string `json:"lastOutcome"`
}

// deadLetterExpectation is what a dead letter must say: its reason contains
// Reason; SourceQueue, Type, Schedule and ReceiveCount, when set, are its
// source (the local stack's names renamed as in the event files), type,
// schedule and attempts.
type deadLetterExpectation struct {
	Reason       string `json:"reason"`
	SourceQueue  string `json:"sourceQueue"`
	Type         string `json:"type"`
	Schedule     string `json:"schedule"`
	ReceiveCount int    `json:"receiveCount"`
}

// localStack is what the event files name; each test's stack replaces it.
const localStack = stack.DefaultStackName

// TestEvents invokes every file in events/ (except env.json and
// expect.json) with the function its name starts with, running the built
// bootstrap under aws-lambda-rie against moto with the resources provisioned
// from template.yaml, and checks the response (an API answer, or the batch
// item failures of an SQS or stream batch) and what the stack holds
// afterwards (queued messages, job records, dead letters) against
// events/expect.json.
func TestEvents(t *testing.T) {
	srv := testenv.Moto(t)
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "events")
	var exp expectFile
	raw, err := os.ReadFile(filepath.Join(dir, "expect.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &exp); err != nil {
		t.Fatalf("events/expect.json: %v", err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	var names []string
	for _, f := range files {
		if n := filepath.Base(f); n != "env.json" && n != "expect.json" {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		t.Fatal("no event files in events/")
	}
	for name := range exp.Events {
		if !slices.Contains(names, name) {
			t.Errorf("events/expect.json names %s, which is not in events/", name)
		}
	}
	tmpl := stack.RepoTemplate(t)
	rie, err := lambdarie.Binary(root)
	if err != nil {
		t.Fatal(err)
	}
	builds := &bootstraps{root: root, dir: t.TempDir(), bins: map[string]string{}}
	cfg := srv.Config()
	// The webhook function's receiver (WebhookUrl), as the local stack's.
	receiver, err := devstack.StartReceiver("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer receiver.Close()
	for _, name := range names {
		t.Run(strings.TrimSuffix(name, ".json"), func(t *testing.T) {
			want, ok := exp.Events[name]
			if !ok {
				t.Fatalf("no expectation for %s: add it to events/expect.json", name)
			}
			ctx := context.Background()
			// The local stack's parameters: moto's SES has no send rate.
			st, err := stack.Provision(ctx, stack.NewClients(cfg), tmpl, stack.Options{StackName: testenv.Name(t, "ev"),
				Params: map[string]string{"SesMaxSendRate": strconv.Itoa(devstack.LocalSesMaxSendRate), "WebhookUrl": receiver.URL}})
			if err != nil {
				t.Fatalf("provision: %v", err)
			}
			seed(t, ctx, cfg, st, exp.Seed)
			setToggles(t, ctx, cfg, st, want.Toggles)
			emulators := map[string]*lambdarie.Emulator{}
			defer func() {
				for _, em := range emulators {
					em.Stop()
				}
			}()
			invoke := func(file string) []byte {
				fn, _, _ := strings.Cut(file, "-")
				em, ok := emulators[fn]
				if !ok {
					em = startFunction(t, ctx, builds, rie, srv.Endpoint, st, fn)
					emulators[fn] = em
				}
				body, err := os.ReadFile(filepath.Join(dir, file))
				if err != nil {
					t.Fatal(err)
				}
				body = []byte(strings.ReplaceAll(string(body), localStack+"-", st.StackName()+"-"))
				resp, err := em.Invoke(ctx, body)
				if err != nil {
					t.Fatalf("invoke %s: %v", file, err)
				}
				return resp
			}
			for _, b := range want.Before {
				invoke(b)
			}
			resp := invoke(name)
			if want.BatchItemFailures != nil {
				checkBatch(t, resp, *want.BatchItemFailures)
			} else {
				checkHTTP(t, resp, want)
			}
			for q, n := range want.Messages {
				if got := queueDepth(t, ctx, cfg, st, q); got != n {
					t.Errorf("%s holds %d messages, want %d", q, got, n)
				}
			}
			checkJobs(t, ctx, cfg, st, want.Jobs)
			if want.DeadLetters != nil {
				letters := map[string]deadLetterExpectation{}
				for id, w := range *want.DeadLetters {
					w.SourceQueue = strings.ReplaceAll(w.SourceQueue, localStack+"-", st.StackName()+"-")
					letters[id] = w
				}
				checkDeadLetters(t, ctx, cfg, st, letters)
			}
		})
	}
}

func checkHTTP(t *testing.T, resp []byte, want expectation) {
	t.Helper()
	var r events.APIGatewayV2HTTPResponse
	if err := json.Unmarshal(resp, &r); err != nil || r.StatusCode == 0 {
		t.Fatalf("not an HTTP API response: %s (%v)", resp, err)
	}
	if r.StatusCode != want.StatusCode {
		t.Errorf("statusCode %d, want %d; body %s", r.StatusCode, want.StatusCode, r.Body)
	}
	for k, v := range want.Headers {
		got := ""
		for hk, hv := range r.Headers {
			if strings.EqualFold(hk, k) {
				got = hv
			}
		}
		if got != v {
			t.Errorf("header %s = %q, want %q (headers %v)", k, got, v, r.Headers)
		}
	}
}

// checkBatch checks a batch response: an SQS event's (events.SQSEventResponse)
// or a stream's (events.DynamoDBEventResponse), which have one form.
func checkBatch(t *testing.T, resp []byte, want []string) {
	t.Helper()
	var r events.SQSEventResponse
	if err := json.Unmarshal(resp, &r); err != nil {
		t.Fatalf("not a batch response: %s (%v)", resp, err)
	}
	var got []string
	for _, f := range r.BatchItemFailures {
		got = append(got, f.ItemIdentifier)
	}
	sort.Strings(got)
	want = slices.Clone(want)
	sort.Strings(want)
	if !slices.Equal(got, want) {
		t.Errorf("batchItemFailures %v, want %v (response %s)", got, want, resp)
	}
}

// bootstraps builds each function once per test binary.
type bootstraps struct {
	mu   sync.Mutex
	root string
	dir  string
	bins map[string]string
}

func (b *bootstraps) get(t *testing.T, ctx context.Context, fn string) string {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	if bin, ok := b.bins[fn]; ok {
		return bin
	}
	bin, err := lambdarie.Build(ctx, b.root, "functions/"+fn, filepath.Join(b.dir, fn, "bootstrap"))
	if err != nil {
		t.Fatalf("build %s: %v", fn, err)
	}
	b.bins[fn] = bin
	return bin
}

func startFunction(t *testing.T, ctx context.Context, builds *bootstraps, rie, endpoint string, st *stack.Stack, fn string) *lambdarie.Emulator {
	t.Helper()
	id, ok := st.Template().FunctionByCodeURI("functions/" + fn)
	if !ok {
		t.Fatalf("no function with CodeUri functions/%s in template.yaml", fn)
	}
	env, err := st.FunctionEnv(id)
	if err != nil {
		t.Fatal(err)
	}
	env["AWS_ENDPOINT_URL"] = endpoint
	env["AWS_REGION"] = testenv.Region
	env["AWS_ACCESS_KEY_ID"], env["AWS_SECRET_ACCESS_KEY"] = "test", "test"
	timeout, err := st.FunctionTimeout(id)
	if err != nil {
		t.Fatal(err)
	}
	em, err := lambdarie.Start(ctx, lambdarie.Config{
		RIE: rie, Bootstrap: builds.get(t, ctx, fn), FunctionName: fn, Env: env,
		Timeout: time.Duration(timeout) * time.Second, Output: logWriter{t, fn},
	})
	if err != nil {
		t.Fatal(err)
	}
	return em
}

// seed writes the seed items and verifies the SES sender of the stack.
func seed(t *testing.T, ctx context.Context, cfg aws.Config, st *stack.Stack, items map[string][]map[string]any) {
	t.Helper()
	db := dynamodb.NewFromConfig(cfg)
	for id, list := range items {
		p, ok := st.Physical(id)
		if !ok {
			t.Fatalf("seed: no table %s in the stack", id)
		}
		for _, it := range list {
			av, err := attributevalue.MarshalMap(it)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(p.Name), Item: av}); err != nil {
				t.Fatalf("seed %s: %v", id, err)
			}
		}
	}
	if from := st.Param("MailFrom"); from != "" {
		if _, err := sesv2.NewFromConfig(cfg).CreateEmailIdentity(ctx, &sesv2.CreateEmailIdentityInput{EmailIdentity: aws.String(from)}); err != nil &&
			!strings.Contains(err.Error(), "AlreadyExists") {
			t.Fatalf("verify sender %s: %v", from, err)
		}
	}
}

// setToggles sets the stack's kill switches, and puts each back as it was
// when the test ends (the switches of a stage are shared by every stack of
// it on the endpoint).
func setToggles(t *testing.T, ctx context.Context, cfg aws.Config, st *stack.Stack, toggles map[string]string) {
	t.Helper()
	client := ssm.NewFromConfig(cfg)
	for typ, v := range toggles {
		name := contract.SwitchParameter(st.Param("Stage"), typ)
		old, err := client.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String(name)})
		var missing *ssmtypes.ParameterNotFound
		if err != nil && !errors.As(err, &missing) {
			t.Fatalf("read switch %s: %v", name, err)
		}
		if _, err := client.PutParameter(ctx, &ssm.PutParameterInput{Name: aws.String(name), Value: aws.String(v),
			Type: ssmtypes.ParameterTypeString, Overwrite: aws.Bool(true)}); err != nil {
			t.Fatalf("set switch %s: %v", name, err)
		}
		t.Cleanup(func() {
			var err error
			if old != nil {
				_, err = client.PutParameter(ctx, &ssm.PutParameterInput{Name: aws.String(name), Value: old.Parameter.Value,
					Type: ssmtypes.ParameterTypeString, Overwrite: aws.Bool(true)})
			} else {
				_, err = client.DeleteParameter(ctx, &ssm.DeleteParameterInput{Name: aws.String(name)})
			}
			if err != nil {
				t.Errorf("put switch %s back: %v", name, err)
			}
		})
	}
}

// checkJobs reads each job's record (its state derived as GET shows it).
func checkJobs(t *testing.T, ctx context.Context, cfg aws.Config, st *stack.Stack, want map[string]jobExpectation) {
	t.Helper()
	if len(want) == 0 {
		return
	}
	db := dynamodb.NewFromConfig(cfg)
	jobsTable, _ := st.Physical("JobsTable")
	markers, _ := st.Physical("MarkersTable")
	store := jobs.NewStore(db, jobsTable.Name, dynamostore.New(db, markers.Name))
	for id, w := range want {
		j, err := store.Get(ctx, id)
		if err != nil {
			t.Errorf("job %s: %v", id, err)
			continue
		}
		if (w.State != "" && string(j.State) != w.State) || (w.Caller != "" && j.Caller != w.Caller) ||
			(w.LastOutcome != "" && j.LastOutcome != w.LastOutcome) {
			t.Errorf("job %s: state %s, caller %s, last outcome %q (%s); want %+v", id, j.State, j.Caller, j.LastOutcome, j.LastReason, w)
		}
	}
}

// checkDeadLetters checks that the dead letters table holds exactly the
// letters wanted, each with its reason.
func checkDeadLetters(t *testing.T, ctx context.Context, cfg aws.Config, st *stack.Stack, want map[string]deadLetterExpectation) {
	t.Helper()
	table, ok := st.Physical("DeadLettersTable")
	if !ok {
		t.Fatal("no table DeadLettersTable in the stack")
	}
	got, err := deadletter.NewStore(dynamodb.NewFromConfig(cfg), table.Name).Select(ctx, deadletter.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, dl := range got {
		seen[dl.ID] = true
		w, ok := want[dl.ID]
		switch {
		case !ok:
			t.Errorf("unexpected dead letter %s: %s (source %s)", dl.ID, dl.Reason, dl.SourceQueue)
		case !strings.Contains(dl.Reason, w.Reason) || (w.SourceQueue != "" && dl.SourceQueue != w.SourceQueue):
			t.Errorf("dead letter %s: reason %q, source %q; want a reason with %q, source %q", dl.ID, dl.Reason, dl.SourceQueue, w.Reason, w.SourceQueue)
		case (w.Type != "" && dl.Type != w.Type) || (w.Schedule != "" && dl.Schedule != w.Schedule) || (w.ReceiveCount != 0 && dl.ReceiveCount != w.ReceiveCount):
			t.Errorf("dead letter %s: type %q, schedule %q, attempts %d; want %+v", dl.ID, dl.Type, dl.Schedule, dl.ReceiveCount, w)
		}
	}
	for id := range want {
		if !seen[id] {
			t.Errorf("no dead letter %s (the table holds %d)", id, len(got))
		}
	}
}

func queueDepth(t *testing.T, ctx context.Context, cfg aws.Config, st *stack.Stack, id string) int {
	t.Helper()
	p, ok := st.Physical(id)
	if !ok {
		t.Fatalf("no queue %s in the stack", id)
	}
	out, err := sqs.NewFromConfig(cfg).GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl: aws.String(p.URL), AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameAll},
	})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, a := range []string{"ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible", "ApproximateNumberOfMessagesDelayed"} {
		v, _ := strconv.Atoi(out.Attributes[a])
		n += v
	}
	return n
}

type logWriter struct {
	t  *testing.T
	fn string
}

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Logf("[%s] %s", w.fn, strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
