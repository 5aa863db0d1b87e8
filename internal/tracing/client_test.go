package tracing

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// Every AWS call is a CLIENT span "<Service>.<Operation>" under the
// caller's span, with the rpc attributes and the job's, and an Error
// status when it failed (after the SDK's retries); a call outside every
// span (a batch's peek, back-off or switch read) makes none.
func TestClientSpansPerAWSCall(t *testing.T) {
	fail := false
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		if fail {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"__type":"com.amazonaws.dynamodb.v20120810#ResourceNotFoundException","message":"no table"}`))
			return
		}
		_, _ = w.Write([]byte(`{}`))
	}))
	defer srv.Close()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	job := func(context.Context) []attribute.KeyValue {
		return []attribute.KeyValue{attribute.String("runstwice.job.id", "job-1")}
	}
	cfg := aws.Config{Region: "eu-west-1", Credentials: aws.AnonymousCredentials{}, BaseEndpoint: aws.String(srv.URL),
		APIOptions: []func(*middleware.Stack) error{ClientSpans(tp, job)}}
	db := dynamodb.NewFromConfig(cfg)
	ctx, parent := tp.Tracer("test").Start(context.Background(), "record")
	in := &dynamodb.GetItemInput{TableName: aws.String("t"), Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "x"}}}
	if _, err := db.GetItem(ctx, in); err != nil {
		t.Fatal(err)
	}
	fail = true
	if _, err := db.GetItem(ctx, in); err == nil {
		t.Fatal("want the error")
	}
	fail = false
	if _, err := db.GetItem(context.Background(), in); err != nil { // outside every span: none of its own
		t.Fatal(err)
	}
	parent.End()
	var calls []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.SpanKind() == trace.SpanKindClient {
			calls = append(calls, s)
		}
	}
	if len(calls) != 2 {
		t.Fatalf("%d client spans; want 2 (a call outside every span makes none)", len(calls))
	}
	for i, s := range calls {
		got := map[string]string{}
		for _, kv := range s.Attributes() {
			got[string(kv.Key)] = kv.Value.Emit()
		}
		if s.Name() != "DynamoDB.GetItem" || s.Parent().SpanID() != parent.SpanContext().SpanID() || got["rpc.system"] != "aws-api" ||
			got["rpc.service"] != "DynamoDB" || got["rpc.method"] != "GetItem" || got["cloud.region"] != "eu-west-1" || got["runstwice.job.id"] != "job-1" {
			t.Errorf("call %d: %s %v", i, s.Name(), got)
		}
		if want := map[int]codes.Code{0: codes.Unset, 1: codes.Error}[i]; s.Status().Code != want {
			t.Errorf("call %d: status %v; want %v", i, s.Status(), want)
		}
	}
}
