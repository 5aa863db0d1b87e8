package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/engine/enginetest"
	"github.com/runstwice/runstwice/engine/memstore"
	"github.com/runstwice/runstwice/examples/internal/exampletest"
)

// provider is a fake payment provider. It charges once per Idempotency-Key
// (a repeat of a key gets the charge it made, as a real provider's
// answer), declines the card tok_declined (402), answers 503 while down,
// and holds each POST while hold is set, until it is closed.
type provider struct {
	*httptest.Server
	mu      sync.Mutex
	posts   []string          // the Idempotency-Key of each POST
	charges map[string]string // Idempotency-Key -> charge id
	down    bool
	hold    chan struct{}
	arrived chan struct{} // gets a value when a POST arrives
}

func newProvider(t *testing.T) *provider {
	p := &provider{charges: map[string]string{}, arrived: make(chan struct{}, 16)}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req providerRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Amount <= 0 {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		key := r.Header.Get("Idempotency-Key")
		p.mu.Lock()
		p.posts = append(p.posts, key)
		hold, down := p.hold, p.down
		p.mu.Unlock()
		select {
		case p.arrived <- struct{}{}:
		default:
		}
		if hold != nil {
			<-hold
		}
		w.Header().Set("Content-Type", "application/json")
		switch {
		case down:
			w.WriteHeader(http.StatusServiceUnavailable)
		case req.Card == "tok_declined":
			w.WriteHeader(http.StatusPaymentRequired)
			fmt.Fprint(w, `{"code":"card_declined"}`)
		default:
			p.mu.Lock()
			id, ok := p.charges[key]
			if !ok || key == "" {
				id = "ch_" + strconv.Itoa(len(p.charges)+1)
				p.charges[key] = id
			}
			p.mu.Unlock()
			w.WriteHeader(http.StatusCreated)
			fmt.Fprintf(w, `{"id":%q}`, id)
		}
	}))
	t.Cleanup(p.Close)
	return p
}

// charged is how many charges the provider made under key.
func (p *provider) charged(key string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.charges[key]; ok {
		return 1
	}
	return 0
}

// made is how many charges the provider made in all, and how many POSTs it
// got.
func (p *provider) made() (charges, posts int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.charges), len(p.posts)
}

func (p *provider) setDown(down bool) { p.mu.Lock(); p.down = down; p.mu.Unlock() }

func (p *provider) payments() Payments { return Payments{URL: p.URL, Client: p.Client()} }

// newAPI is the example's API on the in-memory store, charging at p.
func newAPI(p *provider) *API {
	return &API{Store: memstore.New(), Payments: p.payments(), Logger: slog.New(slog.DiscardHandler)}
}

// TestTheEventsChargeOnce plays the example's events: charge.json twice
// charges the card once, answering 201 with the charge both times, the
// second marked Idempotent-Replayed; charge-other-body.json (the same key,
// another amount) is 422, and nothing more is charged.
func TestTheEventsChargeOnce(t *testing.T) {
	p := newProvider(t)
	api := newAPI(p)
	first := handle(t, api, readEvent(t, "charge.json"))
	if first.StatusCode != http.StatusCreated || first.Headers["Idempotent-Replayed"] != "" {
		t.Fatalf("the first answer is %d %v %s; want 201, not replayed", first.StatusCode, first.Headers, first.Body)
	}
	var c Charge
	if err := json.Unmarshal([]byte(first.Body), &c); err != nil || c != (Charge{ID: "ch_1", Status: StatusSucceeded, Amount: 1299, Currency: "EUR"}) {
		t.Fatalf("the first answer's body is %s (%v); want the charge ch_1 of 1299 EUR", first.Body, err)
	}
	again := handle(t, api, readEvent(t, "charge.json"))
	if again.StatusCode != http.StatusCreated || again.Body != first.Body || again.Headers["Idempotent-Replayed"] != "true" {
		t.Fatalf("the repeat is %d %v %s; want the first answer, replayed", again.StatusCode, again.Headers, again.Body)
	}
	other := handle(t, api, readEvent(t, "charge-other-body.json"))
	if other.StatusCode != http.StatusUnprocessableEntity || other.Headers["Content-Type"] != "application/problem+json" {
		t.Fatalf("another body under the key is %d %v %s; want 422 problem+json", other.StatusCode, other.Headers, other.Body)
	}
	if charges, posts := p.made(); charges != 1 || posts != 1 {
		t.Fatalf("the provider made %d charges from %d POSTs; want one of one", charges, posts)
	}
}

// TestRequestsRefusedBeforeAnyCharge: a request without a key, with a
// malformed key, without an IAM caller, or whose body is not a valid
// charge is refused with a problem and never reaches the provider; a
// base64 body (as API Gateway sends a binary one) is read.
func TestRequestsRefusedBeforeAnyCharge(t *testing.T) {
	cases := []struct {
		name   string
		change func(*events.APIGatewayV2HTTPRequest)
		status int
		kind   string
	}{
		{"no key", func(r *events.APIGatewayV2HTTPRequest) { delete(r.Headers, "idempotency-key") }, 400, "idempotency-key-missing"},
		{"blank key", func(r *events.APIGatewayV2HTTPRequest) { r.Headers["idempotency-key"] = "  " }, 400, "idempotency-key-invalid"},
		{"key not ASCII", func(r *events.APIGatewayV2HTTPRequest) { r.Headers["idempotency-key"] = "clé" }, 400, "idempotency-key-invalid"},
		{"key too long", func(r *events.APIGatewayV2HTTPRequest) { r.Headers["idempotency-key"] = strings.Repeat("k", 256) }, 400, "idempotency-key-invalid"},
		{"no authorizer", func(r *events.APIGatewayV2HTTPRequest) { r.RequestContext.Authorizer = nil }, 401, "caller-unknown"},
		{"no IAM caller", func(r *events.APIGatewayV2HTTPRequest) { r.RequestContext.Authorizer.IAM.UserARN = "" }, 401, "caller-unknown"},
		{"not JSON", func(r *events.APIGatewayV2HTTPRequest) { r.Body = "amount=1299" }, 400, "body-invalid"},
		{"unknown member", body(`{"amount":1299,"currency":"EUR","card":"tok_visa","tip":5}`), 400, "body-invalid"},
		{"data after the object", body(`{"amount":1299,"currency":"EUR","card":"tok_visa"} {}`), 400, "body-invalid"},
		{"zero amount", body(`{"amount":0,"currency":"EUR","card":"tok_visa"}`), 400, "body-invalid"},
		{"fractional amount", body(`{"amount":12.99,"currency":"EUR","card":"tok_visa"}`), 400, "body-invalid"},
		{"lower-case currency", body(`{"amount":1299,"currency":"eur","card":"tok_visa"}`), 400, "body-invalid"},
		{"no card", body(`{"amount":1299,"currency":"EUR"}`), 400, "body-invalid"},
		{"bad base64", func(r *events.APIGatewayV2HTTPRequest) { r.IsBase64Encoded = true; r.Body = "not base64!" }, 400, "body-invalid"},
		{"too large", body(`{"amount":1299,"currency":"EUR","card":"tok_visa","description":"` + strings.Repeat("x", MaxBody) + `"}`), 413, "payload-too-large"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := newProvider(t)
			req := readEvent(t, "charge.json")
			c.change(&req)
			resp := handle(t, newAPI(p), req)
			var prob struct{ Type string }
			_ = json.Unmarshal([]byte(resp.Body), &prob)
			if resp.StatusCode != c.status || prob.Type != "urn:charge:"+c.kind || resp.Headers["Content-Type"] != "application/problem+json" {
				t.Fatalf("answer %d %v %s; want %d problem+json of %s", resp.StatusCode, resp.Headers, resp.Body, c.status, c.kind)
			}
			if _, posts := p.made(); posts != 0 {
				t.Fatalf("the provider got %d POSTs; want none", posts)
			}
		})
	}

	t.Run("base64 body", func(t *testing.T) {
		p := newProvider(t)
		req := readEvent(t, "charge.json")
		req.Body, req.IsBase64Encoded = base64.StdEncoding.EncodeToString([]byte(req.Body)), true
		if resp := handle(t, newAPI(p), req); resp.StatusCode != http.StatusCreated {
			t.Fatalf("answer %d %s; want 201", resp.StatusCode, resp.Body)
		}
	})
}

// body replaces a request's body.
func body(b string) func(*events.APIGatewayV2HTTPRequest) {
	return func(r *events.APIGatewayV2HTTPRequest) { r.Body = b }
}

// TestTheSameBodySpeltOtherwiseIsARepeat: the fingerprint is the charge,
// not its spelling: the same members in another order and spacing replay
// the first answer.
func TestTheSameBodySpeltOtherwiseIsARepeat(t *testing.T) {
	p := newProvider(t)
	api := newAPI(p)
	handle(t, api, readEvent(t, "charge.json"))
	req := readEvent(t, "charge.json")
	req.Body = `{ "description": "Order o-1", "card": "tok_visa_4242", "currency": "EUR", "amount": 1299 }`
	if resp := handle(t, api, req); resp.StatusCode != http.StatusCreated || resp.Headers["Idempotent-Replayed"] != "true" {
		t.Fatalf("answer %d %v; want the first answer, replayed", resp.StatusCode, resp.Headers)
	}
	if charges, _ := p.made(); charges != 1 {
		t.Fatalf("the provider made %d charges; want one", charges)
	}
}

// TestADeclineIsKeptAndReplayed: a declined card is 402 with the
// provider's code, and the repeat gets the same decline, replayed, without
// asking the provider again.
func TestADeclineIsKeptAndReplayed(t *testing.T) {
	p := newProvider(t)
	api := newAPI(p)
	req := readEvent(t, "charge.json")
	req.Body = `{"amount":1299,"currency":"EUR","card":"tok_declined"}`
	first := handle(t, api, req)
	if first.StatusCode != http.StatusPaymentRequired || !strings.Contains(first.Body, `"declineCode":"card_declined"`) {
		t.Fatalf("answer %d %s; want 402 with the decline code", first.StatusCode, first.Body)
	}
	again := handle(t, api, req)
	if again.StatusCode != http.StatusPaymentRequired || again.Body != first.Body || again.Headers["Idempotent-Replayed"] != "true" {
		t.Fatalf("the repeat is %d %v %s; want the decline, replayed", again.StatusCode, again.Headers, again.Body)
	}
	if _, posts := p.made(); posts != 1 {
		t.Fatalf("the provider got %d POSTs; want one", posts)
	}
}

// TestAProviderFailureIsNotKept: while the provider answers 503 the
// charge is 502 and nothing is kept; the client's retry with the same key
// charges (201, not a replay), sending the provider the same key of its
// own both times.
func TestAProviderFailureIsNotKept(t *testing.T) {
	p := newProvider(t)
	api := newAPI(p)
	p.setDown(true)
	if resp := handle(t, api, readEvent(t, "charge.json")); resp.StatusCode != http.StatusBadGateway {
		t.Fatalf("answer %d %s; want 502", resp.StatusCode, resp.Body)
	}
	p.setDown(false)
	if resp := handle(t, api, readEvent(t, "charge.json")); resp.StatusCode != http.StatusCreated || resp.Headers["Idempotent-Replayed"] != "" {
		t.Fatalf("the retry is %d %v; want 201, charged now", resp.StatusCode, resp.Headers)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.posts) != 2 || p.posts[0] != p.posts[1] || p.posts[0] == "" {
		t.Fatalf("the provider got the keys %q; want the same key twice", p.posts)
	}
}

// TestARepeatWhileChargingIs409: a repeat that comes while the first
// request is still at the provider is 409 with Retry-After, and does not
// reach the provider; once the first is answered, a repeat gets its
// answer, replayed.
func TestARepeatWhileChargingIs409(t *testing.T) {
	p := newProvider(t)
	api := newAPI(p)
	p.hold = make(chan struct{})
	done := make(chan events.APIGatewayV2HTTPResponse, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		resp, _ := api.Handle(ctx, readEvent(t, "charge.json"))
		done <- resp
	}()
	<-p.arrived
	busy := handle(t, api, readEvent(t, "charge.json"))
	wait, err := strconv.Atoi(busy.Headers["Retry-After"])
	if busy.StatusCode != http.StatusConflict || err != nil || wait < 1 || wait > 10 {
		t.Fatalf("the repeat in flight is %d %v %s; want 409 with Retry-After within the first's lease", busy.StatusCode, busy.Headers, busy.Body)
	}
	close(p.hold)
	if first := <-done; first.StatusCode != http.StatusCreated {
		t.Fatalf("the first answer is %d %s; want 201", first.StatusCode, first.Body)
	}
	if again := handle(t, api, readEvent(t, "charge.json")); again.StatusCode != http.StatusCreated || again.Headers["Idempotent-Replayed"] != "true" {
		t.Fatalf("the repeat after it is %d %v; want 201, replayed", again.StatusCode, again.Headers)
	}
	if _, posts := p.made(); posts != 1 {
		t.Fatalf("the provider got %d POSTs; want one", posts)
	}
}

// TestEachCallersKeysAreItsOwn: another caller with the same key and body
// is charged on its own, never given the first caller's charge, and the
// provider sees two keys.
func TestEachCallersKeysAreItsOwn(t *testing.T) {
	p := newProvider(t)
	api := newAPI(p)
	handle(t, api, readEvent(t, "charge.json"))
	req := readEvent(t, "charge.json")
	req.RequestContext.Authorizer.IAM.UserARN = "arn:aws:sts::123456789012:assumed-role/refunds-service/refunds-1"
	resp := handle(t, api, req)
	if resp.StatusCode != http.StatusCreated || resp.Headers["Idempotent-Replayed"] != "" || !strings.Contains(resp.Body, `"id":"ch_2"`) {
		t.Fatalf("the other caller's answer is %d %v %s; want its own charge ch_2", resp.StatusCode, resp.Headers, resp.Body)
	}
	if charges, _ := p.made(); charges != 2 {
		t.Fatalf("the provider made %d charges; want one per caller", charges)
	}
}

// failingStore is the in-memory store whose reads fail.
type failingStore struct{ *memstore.Store }

func (failingStore) PeekBatch(context.Context, []engine.Key) (map[engine.Key]engine.Record, error) {
	return nil, errors.New("dynamodb: throttled")
}

// TestAStoreFailureIs503: when the markers cannot be read the answer is
// 503 (retry with the same key), and the provider is never asked: a charge
// never runs without its guard.
func TestAStoreFailureIs503(t *testing.T) {
	p := newProvider(t)
	api := newAPI(p)
	api.Store = failingStore{memstore.New()}
	if resp := handle(t, api, readEvent(t, "charge.json")); resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("answer %d %s; want 503", resp.StatusCode, resp.Body)
	}
	if _, posts := p.made(); posts != 0 {
		t.Fatalf("the provider got %d POSTs; want none", posts)
	}
}

// unkeptStore is the in-memory store whose claims fail: a result is never
// written.
type unkeptStore struct{ *memstore.Store }

func (unkeptStore) Claim(context.Context, engine.Key, engine.Mark) (bool, error) {
	return false, errors.New("dynamodb: throttled")
}

// TestAChargeWhoseResultIsNotKeptIsStillAnswered: the card was charged but
// its result could not be written: the caller still gets the charge (201,
// not a replay), never a 5xx for a charge that happened.
func TestAChargeWhoseResultIsNotKeptIsStillAnswered(t *testing.T) {
	p := newProvider(t)
	api := newAPI(p)
	api.Store = unkeptStore{memstore.New()}
	resp := handle(t, api, readEvent(t, "charge.json"))
	if resp.StatusCode != http.StatusCreated || resp.Headers["Idempotent-Replayed"] != "" || !strings.Contains(resp.Body, `"id":"ch_1"`) {
		t.Fatalf("answer %d %v %s; want the charge ch_1", resp.StatusCode, resp.Headers, resp.Body)
	}
}

// TestTheChargeConverges: under engine.Do twice, concurrently, and across
// a crash at each step, a charge is one charge at the provider
// (ExactlyOnce: the crash between the provider's answer and the kept
// result asks the provider again, under the same key of its own).
func TestTheChargeConverges(t *testing.T) {
	p := newProvider(t)
	api := newAPI(p)
	r := Request{Amount: 1299, Currency: "EUR", Card: "tok_visa_4242"}
	enginetest.DoTwice(t, enginetest.DoCase[Charge]{
		Name:        Name,
		Fn:          func(ctx context.Context, key string) (Charge, error) { return api.Run(key, r)(ctx) },
		Effects:     func(key string) int { return p.charged(ProviderKey(key)) },
		ExactlyOnce: true,
	})
}

// handle runs req through api with a deadline, as Lambda does.
func handle(t *testing.T, api *API, req events.APIGatewayV2HTTPRequest) events.APIGatewayV2HTTPResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := api.Handle(ctx, req)
	if err != nil {
		t.Fatalf("Handle returned %v", err)
	}
	return resp
}

// readEvent reads the request in events/file.
func readEvent(t *testing.T, file string) events.APIGatewayV2HTTPRequest {
	t.Helper()
	return exampletest.DecodeEvent[events.APIGatewayV2HTTPRequest](t, file)
}
