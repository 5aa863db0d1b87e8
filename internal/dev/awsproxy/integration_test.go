//go:build integration

package awsproxy

import (
	"context"
	"net/http"
	"slices"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sesv2"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/ssm"

	"github.com/runstwice/runstwice/internal/dev/moto"
	"github.com/runstwice/runstwice/internal/dev/testenv"
)

// TestRealClientsThroughTheProxy: the SDK's own clients work through the
// proxy unchanged, and every call is named by service and operation.
func TestRealClientsThroughTheProxy(t *testing.T) {
	srv := testenv.Moto(t)
	var mu sync.Mutex
	var seen []string
	record := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			c := CallOf(r)
			mu.Lock()
			seen = append(seen, c.Service+"."+c.Operation)
			mu.Unlock()
			next.ServeHTTP(w, r)
		})
	}
	ps, err := Start(srv.Endpoint, record)
	if err != nil {
		t.Fatal(err)
	}
	defer ps.Close()
	cfg := moto.Config(ps.URL, testenv.Region)
	ctx := context.Background()

	q := testenv.NewQueue(t, sqs.NewFromConfig(cfg), "q", nil)
	if _, err := sqs.NewFromConfig(cfg).SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(q.URL), MessageBody: aws.String("hi")}); err != nil {
		t.Fatal(err)
	}
	got := testenv.Receive(t, sqs.NewFromConfig(cfg), q.URL, 0)
	if len(got) != 1 || aws.ToString(got[0].Body) != "hi" {
		t.Fatalf("received %v through the proxy; want the message", got)
	}
	if _, err := dynamodb.NewFromConfig(cfg).ListTables(ctx, &dynamodb.ListTablesInput{}); err != nil {
		t.Fatal(err)
	}
	if _, err := ssm.NewFromConfig(cfg).GetParametersByPath(ctx, &ssm.GetParametersByPathInput{Path: aws.String("/none")}); err != nil {
		t.Fatal(err)
	}
	if _, err := sesv2.NewFromConfig(cfg).CreateEmailIdentity(ctx, &sesv2.CreateEmailIdentityInput{EmailIdentity: aws.String(testenv.Name(t, "from") + "@example.com")}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"sqs.CreateQueue", "sqs.SendMessage", "sqs.ReceiveMessage", "dynamodb.ListTables", "ssm.GetParametersByPath", "ses.CreateEmailIdentity"} {
		if !slices.Contains(seen, want) {
			t.Errorf("the hook never saw %s (saw %v)", want, seen)
		}
	}
}
