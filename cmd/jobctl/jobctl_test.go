//go:build integration

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"

	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/deadletter"
	"github.com/runstwice/runstwice/internal/dev/deadlettertest"
	"github.com/runstwice/runstwice/internal/dev/testenv"
	"github.com/runstwice/runstwice/message"
)

// cli points jobctl at moto the way a user would: AWS_ENDPOINT_URL and the
// standard credential variables.
func cli(t *testing.T, env map[string]string) func(args ...string) (int, string, string) {
	t.Helper()
	moto := testenv.Moto(t)
	t.Setenv("AWS_ENDPOINT_URL", moto.Endpoint)
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	t.Setenv("AWS_REGION", testenv.Region)
	return func(args ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		code := run(context.Background(), args, &out, &errOut, func(k string) string {
			if v, ok := env[k]; ok {
				return v
			}
			return os.Getenv(k)
		})
		return code, out.String(), errOut.String()
	}
}

func TestTogglesSetRefusesUnknownTypeWithSuggestion(t *testing.T) {
	jobctl := cli(t, nil)
	code, _, stderr := jobctl("--stage", testenv.Name(t, "s"), "toggles", "set", "email.partner-digets.v1", "on")
	if code != exitRefused || !strings.Contains(stderr, "did you mean "+contract.PartnerDigest.Name) {
		t.Fatalf("exit %d, stderr %q; want 4 (refused) and a did-you-mean", code, stderr)
	}
	code, _, stderr = jobctl("toggles", "set", contract.Welcome.Name, "maybe")
	if code != exitUsage || !strings.Contains(stderr, "not on or off") {
		t.Fatalf("exit %d, stderr %q; want 2 for a bad value", code, stderr)
	}
}

func TestTogglesSetAndList(t *testing.T) {
	stage := testenv.Name(t, "s")
	jobctl := cli(t, nil)
	code, out, stderr := jobctl("--stage", stage, "toggles", "set", contract.Welcome.Name, "off")
	// A deployed stage's ToggleTtl is not known here: the default, said so.
	if code != exitOK || !strings.Contains(out, "takes effect within 30s (the stack's ToggleTtl by default") {
		t.Fatalf("set: exit %d out %q err %q", code, out, stderr)
	}
	// A function's environment names it.
	code, out, _ = cli(t, map[string]string{"TOGGLE_TTL": "7s"})("--stage", stage, "toggles", "set", contract.Welcome.Name, "off")
	if code != exitOK || !strings.Contains(out, "takes effect within 7s (TOGGLE_TTL") {
		t.Fatalf("set with TOGGLE_TTL: exit %d out %q", code, out)
	}
	// A typo an operator made by hand with the AWS CLI.
	client := testenv.SSM(t)
	if _, err := client.PutParameter(context.Background(), &ssm.PutParameterInput{
		Name: aws.String(contract.SwitchParameter(stage, "email.partner-digets.v1")), Value: aws.String("true"), Type: ssmtypes.ParameterTypeString,
	}); err != nil {
		t.Fatal(err)
	}
	code, out, stderr = jobctl("toggles", "list", "--stage", stage, "--json")
	if code != exitOK {
		t.Fatalf("list: exit %d err %q", code, stderr)
	}
	var got struct {
		Toggles []toggleRow  `json:"toggles"`
		Unknown []unknownRow `json:"unknown"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("--json output is not JSON: %v\n%s", err, out)
	}
	// Every registered type, at its default but the one set off.
	want := map[string]string{}
	for _, name := range contract.Registry().Names() {
		jt, _ := contract.Registry().Lookup(name)
		want[name] = map[bool]string{true: "on", false: "off"}[jt.EnabledByDefault]
	}
	want[contract.Welcome.Name] = "off"
	if len(got.Toggles) != len(want) {
		t.Fatalf("toggles %+v; want every registered type", got.Toggles)
	}
	for _, r := range got.Toggles {
		if r.Effective != want[r.Type] {
			t.Errorf("%s effective %s; want %s", r.Type, r.Effective, want[r.Type])
		}
	}
	if len(got.Unknown) != 1 || got.Unknown[0].DidYouMean != contract.PartnerDigest.Name {
		t.Fatalf("unknown %+v; want the typo flagged with a suggestion", got.Unknown)
	}
	_, text, _ := jobctl("toggles", "list", "--stage", stage)
	if !strings.Contains(text, "WARNING") || !strings.Contains(text, "did you mean") {
		t.Fatalf("table output does not flag the typo:\n%s", text)
	}
}

func TestUsageAndNotFound(t *testing.T) {
	jobctl := cli(t, map[string]string{"JOBS_TABLE": "no-such-table-anywhere"})
	for _, args := range [][]string{{}, {"frobnicate"}, {"toggles"}, {"jobs", "get"}, {"--stage", "bad stage!", "toggles", "list"}} {
		if code, _, _ := jobctl(args...); code != exitUsage {
			t.Errorf("jobctl %q: exit %d; want %d", args, code, exitUsage)
		}
	}
	if code, _, stderr := jobctl("jobs", "get", "0b6f1c2e-0000-4000-8000-000000000000"); code == exitOK {
		t.Fatalf("jobs get on a missing table succeeded: %s", stderr)
	}
}

func TestDLQListAndRedrive(t *testing.T) {
	// No QUEUE_URL_* in the environment: jobctl finds the stage's queues by
	// the template's names, as it does against dev or prod; the dead-letters
	// table is the one DEAD_LETTERS_TABLE names.
	stage := strings.ToLower(testenv.Name(t, "st"))
	names := stageNames(stage)
	names.DeadLetters = testenv.Name(t, "dead-letters")
	w := deadlettertest.New(t, names)

	env := message.Envelope{
		V: 1, MessageID: message.DeriveMessageID("alice", "k-dlq"), Type: contract.Welcome.Name, Key: "welcome:u-1",
		CorrelationID: "c-1", Args: map[string]string{"userId": "u-1"}, EnqueuedAt: time.Now().UTC(),
	}
	body, _ := env.Encode()
	now := time.Now()
	if _, err := w.Letters.Save(context.Background(), deadletter.Record{
		ID: env.MessageID, JobID: env.MessageID, Type: env.Type, Body: string(body), Reason: "exceeded maxReceiveCount (5 receives)",
		ReceiveCount: 5, Status: deadletter.StatusDead, FirstSeen: now, LastSeen: now,
	}, "sqs-1"); err != nil {
		t.Fatal(err)
	}
	jobctl := cli(t, map[string]string{"DEAD_LETTERS_TABLE": names.DeadLetters, "STAGE": stage})

	code, out, stderr := jobctl("dlq", "list")
	if code != exitOK || !strings.Contains(out, env.MessageID) || !strings.Contains(out, "exceeded maxReceiveCount") {
		t.Fatalf("dlq list: exit %d\n%s%s", code, out, stderr)
	}
	code, out, stderr = jobctl("dlq", "redrive", env.MessageID)
	if code != exitOK || !strings.Contains(out, "redriven "+env.MessageID) {
		t.Fatalf("dlq redrive: exit %d\n%s%s", code, out, stderr)
	}
	got := testenv.Receive(t, w.SQS, w.Queues[contract.QueueDefault].URL, time.Second)
	if len(got) != 1 {
		t.Fatalf("queue holds %d messages after redrive; want 1", len(got))
	}
	back, err := message.Decode([]byte(aws.ToString(got[0].Body)))
	if err != nil || back.MessageID != env.MessageID {
		t.Fatalf("redriven body %+v, %v; want the same messageId", back, err)
	}
	if code, _, _ := jobctl("dlq", "redrive", "no-such-id"); code != exitNotFound {
		t.Fatalf("redrive of a missing id: exit %d; want %d", code, exitNotFound)
	}
}
