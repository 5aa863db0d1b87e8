// Command webhook is an example of a Lambda function built on the engine
// outside the bundle: it delivers a webhook for each job of the type
// webhook.deliver.v1 that reaches its SQS queue, with the job id as the
// receiver's Idempotency-Key, so a delivery the engine repeats (a crash
// between the POST and its claim) is one event at the receiver.
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
	"bytes"
	"context"
	"encoding/json"
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
	"github.com/runstwice/runstwice/internal/runner"
	"github.com/runstwice/runstwice/message"
)

// queue is the name this function gives its one work queue (QUEUE_URL).
const queue message.Queue = "webhooks"

// Deliver is the job type: one event to deliver, by its id. A failed
// receiver is retried (with back-off, then the DLQ); the receiver dedups by
// the Idempotency-Key, so effect-then-claim (the default bias) is right.
var Deliver = message.JobType{
	Name:  "webhook.deliver.v1",
	Args:  []message.ArgSpec{{Name: "eventId", Format: message.FormatID, Required: true}},
	Queue: queue, EnabledByDefault: true, Lease: true,
	KeyPrefix: "webhook", KeyArgs: []string{"eventId"},
}

// deliverArgs is Deliver's args.
type deliverArgs struct {
	EventID string `arg:"eventId"`
}

// Webhook posts the event of a job to URL.
type Webhook struct {
	URL    string
	Client *http.Client
}

// Deliver POSTs {"eventId": ...} with the job id as Idempotency-Key. A 2xx
// is done; a 4xx other than 408 and 429 is the receiver refusing the event
// for good (Permanent: the DLQ, not five retries); anything else retries.
func (w Webhook) Deliver(ctx context.Context, job runner.Job, a deliverArgs) error {
	body, err := json.Marshal(map[string]string{"eventId": a.EventID})
	if err != nil {
		return engine.Permanent(err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.URL, bytes.NewReader(body))
	if err != nil {
		return engine.Permanent(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", job.Envelope.MessageID)
	resp, err := w.Client.Do(req)
	if err != nil {
		return fmt.Errorf("webhook: %w", err)
	}
	resp.Body.Close()
	switch {
	case resp.StatusCode < 300:
		return nil
	case resp.StatusCode < 500 && resp.StatusCode != http.StatusRequestTimeout && resp.StatusCode != http.StatusTooManyRequests:
		return engine.Permanent(fmt.Errorf("webhook: the receiver refused the event: HTTP %d", resp.StatusCode))
	}
	return fmt.Errorf("webhook: HTTP %d", resp.StatusCode)
}

func main() {
	ctx := context.Background()
	tp, err := tracerProvider(ctx)
	if err != nil {
		log.Fatal(err)
	}
	r, err := build(ctx, tp)
	if err != nil {
		log.Fatal(err)
	}
	lambda.Start(handler(r, tp))
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

// handler is the runner's Handle, and with tp, Handle followed by a flush
// of every span the invocation made: Lambda freezes the process as soon as
// the invocation returns, so spans still in the batcher would wait for the
// next invocation, or be lost with the instance.
func handler(r *runner.Runner, tp *sdktrace.TracerProvider) func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
	if tp == nil {
		return r.Handle
	}
	return func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		resp, err := r.Handle(ctx, ev)
		flushCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), flushTimeout)
		defer cancel()
		if ferr := tp.ForceFlush(flushCtx); ferr != nil {
			log.Printf("webhook: flush spans: %v", ferr)
		}
		return resp, err
	}
}

// build wires the runner from the environment; with tp, the runner makes a
// CONSUMER span per record, continuing the trace its sender put in the
// message's AWSTraceHeader.
func build(ctx context.Context, tp *sdktrace.TracerProvider) (*runner.Runner, error) {
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("webhook: aws config: %w", err)
	}
	reg, err := message.NewRegistry(Deliver)
	if err != nil {
		return nil, err
	}
	queues := sqsqueue.New(sqs.NewFromConfig(cfg), map[string]string{string(queue): os.Getenv("QUEUE_URL")}, os.Getenv("DLQ_URL"))
	known := func(name string) bool { _, err := reg.Lookup(name); return err == nil }
	hook := Webhook{URL: os.Getenv("WEBHOOK_URL"), Client: &http.Client{Timeout: 10 * time.Second}}
	var tracer trace.TracerProvider // nil: no spans (never a nil *TracerProvider in it)
	if tp != nil {
		tracer = tp
	}
	return runner.New(runner.Config{
		TracerProvider: tracer,
		Registry:       reg,
		Handlers:       map[string]runner.Handler{Deliver.Name: runner.Typed(hook.Deliver)},
		Switch:         ssmswitch.New(ssm.NewFromConfig(cfg), os.Getenv("TOGGLES_PATH"), known),
		Markers:        dynamostore.New(dynamodb.NewFromConfig(cfg), os.Getenv("MARKERS_TABLE")),
		Parker:         queues, DeadLetterer: queues,
		Logger: engine.NewLogger(os.Stdout, "info"), Metrics: engine.DefaultMetrics("webhook-example"),
	})
}
