package client_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"go.opentelemetry.io/otel/trace"

	"github.com/runstwice/runstwice/client"
	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/internal/contract"
)

// OutboxPutContext writes the producer's span (ctx's) into the item as its
// traceparent, which the relay reads back; without a span, and with
// OutboxPut, the item has none.
func TestOutboxPutContextCarriesTheProducersTrace(t *testing.T) {
	tid, _ := trace.TraceIDFromHex("5759e988bd862e3fe1be46a994272793")
	sid, _ := trace.SpanIDFromHex("53995c3f42cd8ad8")
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled})
	job := client.OutboxJob{Producer: "signup", IdempotencyKey: "signup-u-1", Type: client.TypeWelcome, Args: client.WelcomeArgs{UserID: "u-1"}}
	now := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	put, _, err := client.OutboxPutContext(trace.ContextWithSpanContext(context.Background(), sc), "app-outbox", job, now)
	if err != nil {
		t.Fatal(err)
	}
	it, err := contract.DecodeOutboxItem(values(put.Put.Item))
	if err != nil || it.Traceparent != "00-5759e988bd862e3fe1be46a994272793-53995c3f42cd8ad8-01" || it.Traceparent != engine.FormatTraceparent(sc) {
		t.Fatalf("item traceparent %q (%v); want the producer's span", it.Traceparent, err)
	}
	put, _, err = client.OutboxPutContext(context.Background(), "app-outbox", job, now)
	if _, ok := put.Put.Item[contract.OutboxAttrTraceparent]; err != nil || ok {
		t.Errorf("without a span, the item has a traceparent (%v)", err)
	}
	if put, _, _ := client.OutboxPut("app-outbox", job, now); put.Put.Item[contract.OutboxAttrTraceparent] != nil {
		t.Error("OutboxPut wrote a traceparent")
	}
}

// values converts an SDK item to the relay's values.
func values(item map[string]types.AttributeValue) map[string]contract.OutboxValue {
	out := map[string]contract.OutboxValue{}
	for k, v := range item {
		switch v := v.(type) {
		case *types.AttributeValueMemberS:
			out[k] = contract.OutboxValue{S: &v.Value}
		case *types.AttributeValueMemberN:
			out[k] = contract.OutboxValue{N: &v.Value}
		case *types.AttributeValueMemberM:
			out[k] = contract.OutboxValue{M: values(v.Value)}
		}
	}
	return out
}
