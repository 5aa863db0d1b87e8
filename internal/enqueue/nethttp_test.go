package enqueue_test

import (
	"context"
	"encoding/json"
	"flag"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/runstwice/runstwice/internal/apigw"
	"github.com/runstwice/runstwice/internal/enqueue"
)

// updateContract rewrites testdata/contract.json from the handler (only
// when the contract is meant to change).
var updateContract = flag.Bool("update-contract", false, "rewrite testdata/contract.json")

// exchange is one request's response, as the contract pins it.
type exchange struct {
	Name    string            `json:"name"`
	Status  int               `json:"status"`
	Headers map[string]string `json:"headers"`
	Body    string            `json:"body"`
}

// viaLambda is the response of the Lambda function to API Gateway's event
// ev (Handle: the adapter).
func viaLambda(t testing.TB, h *enqueue.Handler, ev events.APIGatewayV2HTTPRequest) exchange {
	t.Helper()
	resp, err := h.Handle(context.Background(), ev)
	if err != nil || resp.IsBase64Encoded || resp.MultiValueHeaders != nil || resp.Cookies != nil {
		t.Fatalf("Handle: %+v, %v", resp, err)
	}
	return exchange{Status: resp.StatusCode, Headers: resp.Headers, Body: resp.Body}
}

// viaHTTP is the response of the handler under net/http to the request a
// client sends for ev: its method, path, query, headers and body, its
// caller (API Gateway's requestContext) in its context.
func viaHTTP(t testing.TB, h *enqueue.Handler, ev events.APIGatewayV2HTTPRequest) exchange {
	t.Helper()
	target := ev.RawPath
	if len(ev.QueryStringParameters) > 0 {
		q := url.Values{}
		for k, v := range ev.QueryStringParameters {
			q.Set(k, v)
		}
		target += "?" + q.Encode()
	}
	r := httptest.NewRequest(ev.RequestContext.HTTP.Method, target, strings.NewReader(plainBody(t, ev)))
	for k, v := range ev.Headers {
		r.Header.Set(k, v)
	}
	r = r.WithContext(apigw.WithRequestContext(r.Context(), ev.RequestContext))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	res := rec.Result()
	hdr := map[string]string{}
	for k, vs := range res.Header {
		hdr[k] = strings.Join(vs, ",")
	}
	return exchange{Status: res.StatusCode, Headers: hdr, Body: rec.Body.String()}
}

// runContract runs the contract table on a fresh world through via, and
// returns each step's exchange, a correlation id the API made masked.
func runContract(t *testing.T, via func(testing.TB, *enqueue.Handler, events.APIGatewayV2HTTPRequest) exchange, all bool) []exchange {
	t.Helper()
	w := newWorld()
	h := newHandler(w)
	var out []exchange
	for _, st := range contractSteps() {
		if st.gatewayOnly && !all {
			continue
		}
		if st.before != nil {
			st.before(t, w)
		}
		x := via(t, h, st.req)
		x.Name = st.name
		if made := x.Headers[enqueue.HeaderCorrelationID]; made != "" && !strings.HasPrefix(made, "corr-") {
			x.Headers[enqueue.HeaderCorrelationID] = "{made}"
			x.Body = strings.ReplaceAll(x.Body, made, "{made}")
		}
		out = append(out, x)
	}
	return out
}

// The API answers every request of the table with the same bytes through
// the Lambda adapter (API Gateway's event) and under net/http (a client's
// request): every route, every problem, replays and refusals alike.
func TestLambdaAndNetHTTPAnswerAlike(t *testing.T) {
	lambda, plain := runContract(t, viaLambda, false), runContract(t, viaHTTP, false)
	if len(lambda) != len(plain) || len(lambda) < 100 {
		t.Fatalf("%d exchanges through Lambda, %d under net/http", len(lambda), len(plain))
	}
	for i := range lambda {
		a, b := lambda[i], plain[i]
		if a.Status != b.Status || a.Body != b.Body || !equalHeaders(a.Headers, b.Headers) {
			t.Errorf("%s:\n Lambda:   %d %v %s\n net/http: %d %v %s", a.Name, a.Status, a.Headers, a.Body, b.Status, b.Headers, b.Body)
		}
	}
}

// The API's answers are the ones it gave before it was a net/http handler
// (testdata/contract.json, written by the event handler it replaced): the
// HTTP contract of docs/api.md did not change by a byte.
func TestContractAsPinned(t *testing.T) {
	got := runContract(t, viaLambda, true)
	path := filepath.Join("testdata", "contract.json")
	if *updateContract {
		b, _ := json.MarshalIndent(got, "", "  ")
		if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var want []exchange
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("%d exchanges; the contract pins %d", len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Name != w.Name || g.Status != w.Status || g.Body != w.Body || !equalHeaders(g.Headers, w.Headers) {
			t.Errorf("%s:\n got  %d %v %s\n want %d %v %s", w.Name, g.Status, g.Headers, g.Body, w.Status, w.Headers, w.Body)
		}
	}
}

func equalHeaders(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if bv, ok := b[k]; !ok || bv != v {
			return false
		}
	}
	return true
}
