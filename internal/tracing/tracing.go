// Package tracing is the functions' OpenTelemetry set-up: a tracer
// provider that exports over OTLP/HTTP when the environment names an
// endpoint (OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT,
// the exporter's own variables), and none otherwise, so a function without
// an endpoint makes no span and pays nothing. Lambda freezes the process
// once an invocation returns: Flushing exports every span of an
// invocation before it does.
package tracing

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Endpoint reports whether getenv names an OTLP endpoint for traces.
func Endpoint(getenv func(string) string) bool {
	return getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != ""
}

// NewProvider returns the tracer provider of the function name: nil when
// getenv names no endpoint; else an SDK provider whose spans are batched
// to the OTLP/HTTP exporter (configured by the OTEL_EXPORTER_OTLP_*
// variables), with the resource service.name = name and the faas.* and
// cloud.* attributes of the Lambda environment.
func NewProvider(ctx context.Context, name string, getenv func(string) string) (*sdktrace.TracerProvider, error) {
	if !Endpoint(getenv) {
		return nil, nil
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("tracing: the OTLP exporter: %w", err)
	}
	return sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		sdktrace.WithResource(Resource(name, getenv)),
		sdktrace.WithIDGenerator(IDs{}),
	), nil
}

// Resource is a function's resource: service.name, and what the Lambda
// environment says of it (faas.name, faas.version, faas.max_memory,
// cloud.provider, cloud.platform, cloud.region) where it says it.
func Resource(name string, getenv func(string) string) *resource.Resource {
	attrs := []attribute.KeyValue{
		attribute.String("service.name", name),
		attribute.String("cloud.provider", "aws"),
		attribute.String("cloud.platform", "aws_lambda"),
	}
	for key, env := range map[string]string{
		"faas.name": "AWS_LAMBDA_FUNCTION_NAME", "faas.version": "AWS_LAMBDA_FUNCTION_VERSION", "cloud.region": "AWS_REGION",
	} {
		if v := getenv(env); v != "" {
			attrs = append(attrs, attribute.String(key, v))
		}
	}
	if v := getenv("AWS_LAMBDA_FUNCTION_MEMORY_SIZE"); v != "" {
		var mb int64
		if _, err := fmt.Sscan(v, &mb); err == nil {
			attrs = append(attrs, attribute.Int64("faas.max_memory", mb*1024*1024))
		}
	}
	return resource.NewSchemaless(attrs...)
}

// flushTimeout bounds the flush after an invocation (it runs past the
// invocation's own deadline margin, never past the function's timeout by
// design of the runner's margin).
const flushTimeout = 2 * time.Second

// Flushing wraps a Lambda handler so that every span of an invocation is
// exported before the invocation returns (tp.ForceFlush): the spans are
// at the collector when Invoke returns, as Lambda may freeze the process
// right after. A flush that fails is not the invocation's failure.
func Flushing(h lambda.Handler, tp *sdktrace.TracerProvider) lambda.Handler {
	return flushing{next: h, tp: tp}
}

type flushing struct {
	next lambda.Handler
	tp   *sdktrace.TracerProvider
}

func (f flushing) Invoke(ctx context.Context, payload []byte) ([]byte, error) {
	out, err := f.next.Invoke(ctx, payload)
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), flushTimeout)
	defer cancel()
	_ = f.tp.ForceFlush(fctx)
	return out, err
}

// providerKey carries a function's tracer provider in its build context.
type providerKey struct{}

// WithProvider returns ctx carrying tp for the function's wiring to use
// (function.Main sets it; nil leaves ctx as it is).
func WithProvider(ctx context.Context, tp *sdktrace.TracerProvider) context.Context {
	if tp == nil {
		return ctx
	}
	return context.WithValue(ctx, providerKey{}, tp)
}

// FromContext returns the provider WithProvider put in ctx, or nil (an
// untyped nil, for runner.Config.TracerProvider: no spans at all).
func FromContext(ctx context.Context) trace.TracerProvider {
	if tp, ok := ctx.Value(providerKey{}).(*sdktrace.TracerProvider); ok {
		return tp
	}
	return nil
}
