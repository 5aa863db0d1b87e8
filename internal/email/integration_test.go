//go:build integration

package email_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
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

	"github.com/runstwice/runstwice/aws/ssmswitch"
	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/ddb"
	"github.com/runstwice/runstwice/internal/dev/emailtest"
	"github.com/runstwice/runstwice/internal/dev/moto"
	"github.com/runstwice/runstwice/internal/dev/testenv"
	"github.com/runstwice/runstwice/internal/email"
	"github.com/runstwice/runstwice/internal/email/ses"
	"github.com/runstwice/runstwice/internal/email/users"
	"github.com/runstwice/runstwice/internal/obs"
	"github.com/runstwice/runstwice/internal/runner"
	"github.com/runstwice/runstwice/internal/testkit"
)

const mailFrom = "noreply@runstwice.test"

// stack is the e-mail function's world on moto (emailtest) with SSM for the
// kill switches and SES with a verified sender.
type stack struct {
	*emailtest.World
	moto *testenv.Server
	ssm  *ssm.Client
	ses  *sesv2.Client
}

func newStack(t *testing.T) *stack {
	t.Helper()
	s := &stack{World: emailtest.New(t), moto: testenv.Moto(t)}
	cfg := s.moto.Config(s.Counter.Option)
	s.ssm, s.ses = ssm.NewFromConfig(cfg), sesv2.NewFromConfig(cfg)
	if _, err := s.ses.CreateEmailIdentity(context.Background(), &sesv2.CreateEmailIdentityInput{EmailIdentity: aws.String(mailFrom)}); err != nil {
		t.Fatalf("verify sender: %v", err)
	}
	return s
}

type runnerOpts struct {
	toggles engine.Switch
	sender  email.Sender
}

// runner returns the e-mail function as main.go wires it, on the stack, with
// SES as its sender unless o names another.
func (s *stack) runner(t *testing.T, o runnerOpts) *runner.Runner {
	t.Helper()
	if o.sender == nil {
		o.sender = ses.New(s.ses, mailFrom)
	}
	return s.Worker(t, o.sender, func(c *runner.Config) {
		if o.toggles != nil {
			c.Switch = o.toggles
		}
	})
}

func handle(t *testing.T, r *runner.Runner, msgs ...events.SQSMessage) []string {
	t.Helper()
	return testkit.Run(t, context.Background(), r, msgs...)
}

// sesMail is a mail as moto stored it (the HTML body when there is one).
type sesMail struct {
	ID           string              `json:"id"`
	Source       string              `json:"source"`
	Subject      string              `json:"subject"`
	Body         string              `json:"body"`
	Destinations map[string][]string `json:"destinations"`
}

// sesMails reads every mail moto's SES sent to recipient, from
// GET /moto-api/data.json.
func sesMails(t *testing.T, moto *testenv.Server, recipient string) []sesMail {
	t.Helper()
	resp, err := http.Get(moto.Endpoint + "/moto-api/data.json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var data struct {
		SES map[string][]sesMail `json:"ses"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&data); err != nil {
		t.Fatal(err)
	}
	var out []sesMail
	for _, m := range data.SES["Message"] {
		if slices.Contains(m.Destinations["ToAddresses"], recipient) {
			out = append(out, m)
		}
	}
	return out
}

// TestConcurrentDuplicateDeliverySendsOneMail delivers one message to two
// runners at the same moment (two Lambda containers), then redelivers the
// retried copy: exactly one mail leaves SES.
func TestConcurrentDuplicateDeliverySendsOneMail(t *testing.T) {
	s := newStack(t)
	for _, typ := range allTypes {
		t.Run(typ, func(t *testing.T) {
			addr := strings.ToLower(testenv.Name(t, "twin")) + "@example.com"
			id := "u-" + strings.TrimPrefix(strings.ToLower(testenv.Name(t, "twin")), "twin-")
			s.PutUser(t, email.User{ID: id, Email: addr, DisplayName: "Twin", EmailConfirmed: typ != contract.PartnerVerification.Name})
			a, b := s.runner(t, runnerOpts{toggles: digestOn()}), s.runner(t, runnerOpts{toggles: digestOn()})
			msg := record(t, jobFor(typ, id), 1)
			var wg sync.WaitGroup
			start := make(chan struct{})
			failed := make([][]string, 2)
			for i, r := range []*runner.Runner{a, b} {
				wg.Go(func() {
					<-start
					failed[i] = handle(t, r, msg)
				})
			}
			close(start)
			wg.Wait()
			retried := len(failed[0]) + len(failed[1])
			t.Logf("twin outcomes: runner A retry=%v, runner B retry=%v", failed[0], failed[1])
			if retried > 1 {
				t.Fatalf("both twins asked for a retry: %v", failed)
			}
			// SQS redelivers the twin that found the lease held.
			msg.Attributes["ApproximateReceiveCount"] = "2"
			if f := handle(t, a, msg); len(f) != 0 {
				t.Fatalf("redelivery failed: %v", f)
			}
			if n := len(sesMails(t, s.moto, addr)); n != 1 {
				t.Fatalf("SES sent %d mails for one job delivered twice at once; want 1", n)
			}
		})
	}
}

// TestDigestNeverSendsWhileFailClosed runs the fail-closed digest through the
// real toggle source on moto's SSM: with the toggle missing, false,
// misspelled (name or value) or SSM unreachable it never sends and is parked
// on the bulk queue, not dropped. Switched on, it sends.
func TestDigestNeverSendsWhileFailClosed(t *testing.T) {
	s := newStack(t)
	reg := contract.Registry()
	known := func(n string) bool { _, err := reg.Lookup(n); return err == nil }
	deadPort, err := testenv.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		params map[string]string // type name -> value
		down   bool
		sends  bool
	}{
		{name: "missing"},
		{name: "false", params: map[string]string{contract.PartnerDigest.Name: "false"}},
		{name: "misspelled type", params: map[string]string{"email.partner-digets.v1": "true"}},
		{name: "misspelled value", params: map[string]string{contract.PartnerDigest.Name: "ture"}},
		{name: "SSM down", down: true},
		{name: "switched on", params: map[string]string{contract.PartnerDigest.Name: "on"}, sends: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stage := testenv.Name(t, "stage")
			for name, v := range tc.params {
				if _, err := s.ssm.PutParameter(context.Background(), &ssm.PutParameterInput{
					Name: aws.String(contract.SwitchParameter(stage, name)), Value: aws.String(v), Type: ssmtypes.ParameterTypeString,
				}); err != nil {
					t.Fatal(err)
				}
			}
			client := s.ssm
			if tc.down {
				client = ssm.NewFromConfig(moto.Config(fmt.Sprintf("http://127.0.0.1:%d", deadPort), testenv.Region))
			}
			src := ssmswitch.New(client, contract.SwitchPath(stage), known)
			src.Logger = obs.NewLogger(io.Discard, "error")
			addr := strings.ToLower(testenv.Name(t, "digest")) + "@example.com"
			id := "u-" + strings.ToLower(testenv.Name(t, "d"))
			s.PutUser(t, email.User{ID: id, Email: addr, DisplayName: "Partner", EmailConfirmed: true})
			r := s.runner(t, runnerOpts{toggles: src})
			msg := record(t, jobFor(contract.PartnerDigest.Name, id), 1)
			msg.EventSourceARN = s.Queues[contract.PartnerDigest.Queue].ARN // a park goes back where it came from
			if f := handle(t, r, msg); len(f) != 0 {
				t.Fatalf("failures %v", f)
			}
			mails := sesMails(t, s.moto, addr)
			if tc.sends {
				if len(mails) != 1 {
					t.Fatalf("switched on: %d mails; want 1", len(mails))
				}
				return
			}
			if len(mails) != 0 {
				t.Fatalf("fail-closed digest sent %d mails", len(mails))
			}
			parked := testenv.Receive(t, s.SQS, s.Queues[contract.QueueBulk].URL, 3*time.Second)
			if !slices.ContainsFunc(parked, func(m sqstypes.Message) bool { return aws.ToString(m.Body) == msg.Body }) {
				t.Fatalf("digest not parked on the bulk queue (got %d messages)", len(parked))
			}
			deleteAll(t, s, s.Queues[contract.QueueBulk].URL, parked)
		})
	}
}

// TestTokenNeverInLogsOrMessages sends a verification and a reset through
// SES on moto and reads the mail back: the link's token hashes to the stored
// tokenHash, and the raw token is in no log line, no metric line, no job
// message and no table item.
func TestTokenNeverInLogsOrMessages(t *testing.T) {
	s := newStack(t)
	tokenRe := regexp.MustCompile(`token=([A-Za-z0-9_-]{43})`)
	for _, typ := range []string{contract.PartnerVerification.Name, contract.PasswordReset.Name} {
		t.Run(typ, func(t *testing.T) {
			addr := strings.ToLower(testenv.Name(t, "tok")) + "@example.com"
			id := "u-" + strings.ToLower(testenv.Name(t, "t"))
			s.PutUser(t, email.User{ID: id, Email: addr, DisplayName: "Token Holder"})
			r := s.runner(t, runnerOpts{})
			msg := record(t, jobFor(typ, id), 1)
			if f := handle(t, r, msg); len(f) != 0 {
				t.Fatalf("failures %v", f)
			}
			mails := sesMails(t, s.moto, addr)
			if len(mails) != 1 {
				t.Fatalf("%d mails", len(mails))
			}
			m := tokenRe.FindStringSubmatch(mails[0].Body)
			if m == nil {
				t.Fatalf("no token link in the mail:\n%s", mails[0].Body)
			}
			token := m[1]
			out, err := s.DB.GetItem(context.Background(), &dynamodb.GetItemInput{
				TableName: aws.String(s.UsersTable), Key: ddb.KeyS(users.AttrUserID, id),
			})
			if err != nil {
				t.Fatal(err)
			}
			var stored map[string]any
			if err := attributevalue.UnmarshalMap(out.Item, &stored); err != nil {
				t.Fatal(err)
			}
			if stored[users.AttrTokenHash] != email.HashToken(token) {
				t.Fatalf("stored tokenHash %v is not the SHA-256 of the link's token", stored[users.AttrTokenHash])
			}
			if _, ok := stored[users.AttrTokenExpiresAt]; !ok {
				t.Fatal("no tokenExpiresAt stored")
			}
			itemJSON, _ := json.Marshal(stored)
			for where, text := range map[string]string{
				"log lines": s.Logs.String(), "metric lines": s.Metrics.String(), "job message body": msg.Body, "users item": string(itemJSON),
			} {
				if strings.Contains(text, token) {
					t.Fatalf("raw token found in %s", where)
				}
			}
			if strings.Contains(s.Logs.String(), addr) {
				t.Fatal("the address appears in a log line")
			}
		})
	}
}

// TestSESRejectionIsPermanent sends from an address SES has not verified:
// SES rejects the message, which no retry fixes, so it is a permanent error.
func TestSESRejectionIsPermanent(t *testing.T) {
	s := newStack(t)
	err := ses.New(s.ses, "unverified@nowhere.test").Send(context.Background(), email.Message{
		ID: "m-1", To: "x@example.com", Subject: "s", Text: "t", HTML: "<p>t</p>",
	})
	if err == nil || !engine.IsPermanent(err) {
		t.Fatalf("err %v; want a permanent rejection", err)
	}
}

// TestCallsPerJobLeaseMode runs a 10-message batch of welcome mails and
// prints the AWS calls per job: one BatchGetItem peek for the batch, one
// lease and one claim write per job (≤ 2 marker writes), one user read and
// one SES send per job.
func TestCallsPerJobLeaseMode(t *testing.T) {
	s := newStack(t)
	var msgs []events.SQSMessage
	for i := range 10 {
		id := fmt.Sprintf("u-calls-%d-%d", time.Now().UnixNano()%1e6, i)
		s.PutUser(t, email.User{ID: id, Email: id + "@example.com", DisplayName: "Calls"})
		msgs = append(msgs, record(t, jobFor(contract.Welcome.Name, id), 1))
	}
	r := s.runner(t, runnerOpts{})
	s.Counter.Reset()
	if f := handle(t, r, msgs...); len(f) != 0 {
		t.Fatalf("failures %v", f)
	}
	const jobs = 10
	t.Logf("AWS calls for a 10-message batch (lease mode): %s", s.Counter)
	for _, op := range []string{"DynamoDB.BatchGetItem", "DynamoDB.PutItem", "DynamoDB.DeleteItem", "DynamoDB.GetItem", "DynamoDB.UpdateItem", "SESv2.SendEmail", "SQS.SendMessage"} {
		t.Logf("  %-22s %5.1f per job", op, float64(s.Counter.Get(op))/jobs)
	}
	markerWrites := s.Counter.Sum("DynamoDB.PutItem", "DynamoDB.DeleteItem", "DynamoDB.UpdateItem")
	if markerWrites > 2*jobs {
		t.Fatalf("%d marker writes for %d jobs; want ≤ 2 per job", markerWrites, jobs)
	}
	if n := s.Counter.Get("DynamoDB.BatchGetItem"); n != 1 {
		t.Fatalf("%d peeks; want one BatchGetItem for the batch", n)
	}
	if n := s.Counter.Get("SESv2.SendEmail"); n != jobs {
		t.Fatalf("%d sends; want %d", n, jobs)
	}
	// The redelivered batch costs one read and nothing else.
	s.Counter.Reset()
	handle(t, r, msgs...)
	t.Logf("AWS calls for the same batch redelivered: %s", s.Counter)
	if s.Counter.String() != "DynamoDB.BatchGetItem=1" {
		t.Fatalf("redelivered batch cost %s; want one BatchGetItem", s.Counter)
	}
}

func deleteAll(t *testing.T, s *stack, url string, msgs []sqstypes.Message) {
	t.Helper()
	for _, m := range msgs {
		if _, err := s.SQS.DeleteMessage(context.Background(), &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: m.ReceiptHandle}); err != nil {
			t.Fatal(err)
		}
	}
}

// digestOn is a kill switch with the fail-closed digest switched on.
func digestOn() *testkit.Switches {
	s := &testkit.Switches{}
	s.Set(contract.PartnerDigest.Name, true)
	return s
}
