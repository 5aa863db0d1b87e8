// Command webhook is an example of a Lambda function built on the engine
// outside the bundle: it consumes its team's own SQS messages
// ({"eventId":"e-1"}, no envelope) and delivers each event once to a
// webhook receiver, with the event id as the receiver's Idempotency-Key,
// so a delivery the engine repeats (a crash between the POST and its
// claim) is one event at the receiver.
//
// Around the delivery the engine keeps the kill switch (an SSM parameter
// named after the kind, under TOGGLES_PATH: off parks the events on their
// queue), the markers (DynamoDB), the lease, the dead letters (a refused
// event goes to the DLQ with its reason) and the back-off of retries.
//
// It imports only the module's public packages: the engine, its AWS
// adapters, the AWS SDK and OpenTelemetry's SDK. Its own template
// (template.yaml) deploys it with its queue, dead-letter queue, markers
// table and switch parameter.
//
// Environment: WEBHOOK_URL (where to POST), MARKERS_TABLE, TOGGLES_PATH
// (the SSM path of its kill switches), QUEUE_URL and DLQ_URL; for traces,
// OTEL_EXPORTER_OTLP_ENDPOINT (unset: no spans): each record's span, the
// engine's, is exported over OTLP/HTTP and flushed before the invocation
// returns.
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/http"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/runstwice/runstwice/aws/dynamostore"
	"github.com/runstwice/runstwice/aws/sqsqueue"
	"github.com/runstwice/runstwice/aws/ssmswitch"
	"github.com/runstwice/runstwice/engine"
)

func main() {
	ctx := context.Background()
	tp, err := tracerProvider(ctx)
	if err != nil {
		log.Fatal(err)
	}
	h, err := build(ctx, tp)
	if err != nil {
		log.Fatal(err)
	}
	lambda.Start(flushed(h.HandleSQS, tp))
}

// environment names the variables the function reads; each is required
// (OpenTelemetry's are optional and read by tracerProvider).
var environment = []string{"WEBHOOK_URL", "MARKERS_TABLE", "TOGGLES_PATH", "QUEUE_URL", "DLQ_URL"}

// build wires the handler from the environment; with tp, the engine makes
// a CONSUMER span per record, continuing the trace its sender put in the
// message's AWSTraceHeader.
func build(ctx context.Context, tp *sdktrace.TracerProvider) (*engine.Handler[Event], error) {
	env, err := lookup(environment...)
	if err != nil {
		return nil, err
	}
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("webhook: aws config: %w", err)
	}
	client := sqs.NewFromConfig(cfg)
	urls := map[string]string{"webhooks": env["QUEUE_URL"]}
	queues := sqsqueue.New(client, urls, env["DLQ_URL"])
	known := func(name string) bool { return name == Deliver.Name }
	hook := Webhook{URL: env["WEBHOOK_URL"], Client: &http.Client{Timeout: 10 * time.Second}}
	var tracer trace.TracerProvider // nil: no spans (never a nil *TracerProvider in it)
	if tp != nil {
		tracer = tp
	}
	return engine.NewHandler(Deliver, hook.Deliver, engine.Options{
		Store:          dynamostore.New(dynamodb.NewFromConfig(cfg), env["MARKERS_TABLE"]),
		Switch:         ssmswitch.New(ssm.NewFromConfig(cfg), env["TOGGLES_PATH"], known),
		Parker:         queues,
		DeadLetterer:   queues,
		Backoff:        sqsqueue.NewVisibility(client, urls),
		TracerProvider: tracer,
		Logger:         engine.NewLogger(os.Stdout, "info"),
		Metrics:        engine.DefaultMetrics("webhook-example"),
	})
}

// lookup returns the environment variables names, or an error naming
// those that are unset.
func lookup(names ...string) (map[string]string, error) {
	env := make(map[string]string, len(names))
	var missing []error
	for _, n := range names {
		if env[n] = os.Getenv(n); env[n] == "" {
			missing = append(missing, fmt.Errorf("webhook: %s is not set", n))
		}
	}
	return env, errors.Join(missing...)
}

// tracerProvider is the function's OpenTelemetry set-up: a provider whose
// spans are batched to the OTLP/HTTP exporter when the environment names
// an endpoint (OTEL_EXPORTER_OTLP_ENDPOINT, or the traces one; the
// exporter reads its other OTEL_EXPORTER_OTLP_* variables itself), and nil
// otherwise: no endpoint, no spans, no cost.
func tracerProvider(ctx context.Context) (*sdktrace.TracerProvider, error) {
	if os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" {
		return nil, nil
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("webhook: the OTLP exporter: %w", err)
	}
	res := resource.NewSchemaless(attribute.String("service.name", "webhook-example"),
		attribute.String("cloud.provider", "aws"), attribute.String("cloud.platform", "aws_lambda"),
		attribute.String("faas.name", os.Getenv("AWS_LAMBDA_FUNCTION_NAME")), attribute.String("cloud.region", os.Getenv("AWS_REGION")))
	return sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res)), nil
}

// flushTimeout bounds the flush after each invocation.
const flushTimeout = 2 * time.Second

// flushed is handle, and with tp, handle followed by a flush of every span
// the invocation made: Lambda freezes the process as soon as the
// invocation returns, so spans still in the batcher would wait for the
// next invocation, or be lost with the instance.
func flushed(handle func(context.Context, events.SQSEvent) (events.SQSEventResponse, error), tp *sdktrace.TracerProvider) func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
	if tp == nil {
		return handle
	}
	return func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		resp, err := handle(ctx, ev)
		flushCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), flushTimeout)
		defer cancel()
		if ferr := tp.ForceFlush(flushCtx); ferr != nil {
			log.Printf("webhook: flush spans: %v", ferr)
		}
		return resp, err
	}
}
