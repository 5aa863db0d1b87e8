package tracing

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"

	"github.com/aws/aws-lambda-go/lambda"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
)

// receiver is an OTLP/HTTP trace receiver (protobuf) keeping the names of
// the spans it got, with their service.
type receiver struct {
	mu    sync.Mutex
	spans map[string]string // span name → service.name
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var req coltrace.ExportTraceServiceRequest
	if r.URL.Path != "/v1/traces" || proto.Unmarshal(body, &req) != nil {
		http.Error(w, "not an OTLP trace export", http.StatusBadRequest)
		return
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	for _, rs := range req.ResourceSpans {
		service := ""
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.Key == "service.name" {
				service = kv.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				rc.spans[s.Name] = service
			}
		}
	}
	w.Header().Set("Content-Type", "application/x-protobuf")
	out, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
	_, _ = w.Write(out)
}

func (rc *receiver) got(name string) (string, bool) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	s, ok := rc.spans[name]
	return s, ok
}

// The spans of an invocation are at the receiver when Invoke returns:
// batched as they end, flushed before the invocation answers.
func TestFlushingExportsEveryInvocationsSpansBeforeItReturns(t *testing.T) {
	rc := &receiver{spans: map[string]string{}}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", srv.URL)
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	ctx := context.Background()
	tp, err := NewProvider(ctx, "email", os.Getenv)
	if err != nil || tp == nil {
		t.Fatalf("NewProvider = %v, %v", tp, err)
	}
	defer func() { _ = tp.Shutdown(ctx) }()
	for _, name := range []string{"first invocation", "second invocation"} {
		h := lambda.NewHandler(func(ctx context.Context) (string, error) {
			_, span := tp.Tracer("test").Start(ctx, name)
			span.End()
			return "done", nil
		})
		out, err := Flushing(h, tp).Invoke(ctx, []byte(`{}`))
		if err != nil || string(out) != `"done"` {
			t.Fatalf("Invoke = %s, %v", out, err)
		}
		if service, ok := rc.got(name); !ok || service != "email" {
			t.Fatalf("after %s returned, the receiver has %v (service %q); want its span, of service email", name, ok, service)
		}
	}
}

// Without an endpoint there is no provider: nothing is made or exported.
func TestNoEndpointNoProvider(t *testing.T) {
	tp, err := NewProvider(context.Background(), "email", func(string) string { return "" })
	if tp != nil || err != nil {
		t.Fatalf("NewProvider without an endpoint = %v, %v; want nil", tp, err)
	}
}

func TestResourceReadsTheLambdaEnvironment(t *testing.T) {
	env := map[string]string{"AWS_LAMBDA_FUNCTION_NAME": "runstwice-dev-email", "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
		"AWS_REGION": "eu-west-1", "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "256"}
	got := map[string]string{}
	for _, kv := range Resource("email", func(k string) string { return env[k] }).Attributes() {
		got[string(kv.Key)] = kv.Value.Emit()
	}
	for k, want := range map[string]string{"service.name": "email", "faas.name": "runstwice-dev-email", "faas.version": "$LATEST",
		"cloud.region": "eu-west-1", "cloud.provider": "aws", "cloud.platform": "aws_lambda", "faas.max_memory": "268435456"} {
		if got[k] != want {
			t.Errorf("%s = %q; want %q", k, got[k], want)
		}
	}
}
