package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/engine/idempotencykey"
)

// Name is the namespace of the charges' keys in the markers table.
const Name = "charge"

// Retention is how long a charge's result is kept and replayed: a client
// retries within it with the same Idempotency-Key and gets the same
// answer; after it, the key is free again.
const Retention = 24 * time.Hour

// MaxBody bounds a request's body.
const MaxBody = 16 << 10

// Request is the body of a charge: {"amount":1299,"currency":"EUR",
// "card":"tok_visa_4242","description":"Order o-1"}, the amount in the
// currency's minor unit.
type Request struct {
	Amount      int64  `json:"amount"`
	Currency    string `json:"currency"`
	Card        string `json:"card"`
	Description string `json:"description,omitempty"`
}

// validate says what is wrong with r, or nil.
func (r Request) validate() error {
	switch {
	case r.Amount <= 0:
		return errors.New("amount must be a positive number of the currency's minor unit")
	case len(r.Currency) != 3 || strings.ToUpper(r.Currency) != r.Currency:
		return errors.New("currency must be an ISO 4217 code, such as EUR")
	case r.Card == "":
		return errors.New("card must name the card's token")
	}
	return nil
}

// The statuses of a charge.
const (
	StatusSucceeded = "succeeded"
	StatusDeclined  = "declined"
)

// Charge is the result of a charge, kept with its key and replayed.
type Charge struct {
	ID          string `json:"id,omitempty"`
	Status      string `json:"status"`
	Amount      int64  `json:"amount"`
	Currency    string `json:"currency"`
	DeclineCode string `json:"declineCode,omitempty"`
}

// API answers POST /charges: it charges a card once per caller and
// Idempotency-Key, however often the client retries.
type API struct {
	Store    engine.Store
	Payments Payments
	Logger   *slog.Logger
	// Now is the clock (time.Now if nil).
	Now func() time.Time
}

// Handle answers one request of the HTTP API (payload format 2.0). It
// never returns an error: every outcome is an HTTP answer.
//   - No Idempotency-Key, or a malformed one: 400. No IAM caller: 401. A
//     body that is not a valid charge: 400 (413 past MaxBody).
//   - The first request of a (caller, key) charges the card: 201 with the
//     charge, or 402 when the card is declined. That answer is kept for
//     Retention.
//   - A repeat with the same body gets the kept answer without a second
//     charge, with Idempotent-Replayed: true.
//   - A repeat while the first is still charging: 409 with Retry-After.
//   - A repeat with another body: 422, nothing charged.
//   - The provider not answering: 502, nothing kept: a retry with the same
//     key asks the provider again, under the same provider key.
//   - The markers table failing before the charge: 503, retry with the
//     same key. After it (the result not written): the charge is answered
//     all the same.
func (a *API) Handle(ctx context.Context, req events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	now := a.Now
	if now == nil {
		now = time.Now
	}
	raw := header(req.Headers, idempotencykey.HeaderKey)
	if raw == "" {
		return problem(http.StatusBadRequest, "idempotency-key-missing", "the Idempotency-Key header is required", 0), nil
	}
	key, err := idempotencykey.ParseKey(raw)
	if err != nil {
		return problem(http.StatusBadRequest, "idempotency-key-invalid", err.Error(), 0), nil
	}
	caller := callerOf(req)
	if caller == "" {
		return problem(http.StatusUnauthorized, "caller-unknown", "the request carries no IAM caller", 0), nil
	}
	body, err := bodyOf(req)
	if err != nil {
		return problem(http.StatusBadRequest, "body-invalid", err.Error(), 0), nil
	}
	if len(body) > MaxBody {
		return problem(http.StatusRequestEntityTooLarge, "payload-too-large", fmt.Sprintf("the body is larger than %d bytes", MaxBody), 0), nil
	}
	r, err := decode(body)
	if err != nil {
		return problem(http.StatusBadRequest, "body-invalid", err.Error(), 0), nil
	}
	// The fingerprint is the charge re-encoded: the order of the body's
	// members and its spacing do not count, its values do.
	fingerprint, err := json.Marshal(r)
	if err != nil {
		return problem(http.StatusBadRequest, "body-invalid", err.Error(), 0), nil
	}
	scoped := Scoped(caller, key)
	var replayed bool
	c, err := engine.Do(ctx, a.Store, Name, scoped, a.Run(scoped, r),
		engine.WithFingerprint(fingerprint), engine.WithRetention(Retention),
		engine.WithClock(now), engine.WithReplayed(&replayed))
	var busy *engine.InProgressError
	switch {
	case errors.As(err, &busy):
		wait := max(busy.Until.Sub(now()), time.Second)
		return problem(http.StatusConflict, "request-in-flight", "a request with this Idempotency-Key is still being processed; retry later", wait), nil
	case errors.Is(err, engine.ErrFingerprint):
		return problem(http.StatusUnprocessableEntity, "idempotency-key-reused", "this Idempotency-Key was used for a different request; use a new key", 0), nil
	case errors.Is(err, errProvider):
		a.log().ErrorContext(ctx, "the payment provider did not answer", "error", err)
		return problem(http.StatusBadGateway, "provider-unavailable", "the payment provider did not answer; retry with the same Idempotency-Key", 0), nil
	case errors.Is(err, engine.ErrNotKept):
		// Charged (or declined), but the result could not be written: the
		// answer still goes to this caller. A retry once the lease is over
		// asks the provider again, under the same provider key: one charge.
		a.log().WarnContext(ctx, "the charge's result was not kept", "error", err)
		return answer(c, false), nil
	case err == nil:
		a.log().InfoContext(ctx, "charge answered", "status", c.Status, "replayed", replayed)
		return answer(c, replayed), nil
	default:
		a.log().ErrorContext(ctx, "the idempotency store failed", "error", err)
		return problem(http.StatusServiceUnavailable, "service-unavailable", "the idempotency store is unavailable; retry with the same Idempotency-Key", 0), nil
	}
}

// Run is the charge engine.Do runs for the scoped key: it asks the
// provider, with ProviderKey(scoped) as the provider's Idempotency-Key.
func (a *API) Run(scoped string, r Request) func(context.Context) (Charge, error) {
	return func(ctx context.Context) (Charge, error) {
		return a.Payments.Charge(ctx, ProviderKey(scoped), r)
	}
}

// Scoped is the key a charge is kept under: the caller (hashed: an IAM
// ARN may be long, and the marker need not hold it) and the client's
// Idempotency-Key, so one caller never gets another's charge.
func Scoped(caller, key string) string {
	sum := sha256.Sum256([]byte(caller))
	return hex.EncodeToString(sum[:16]) + ":" + key
}

// ProviderKey is the Idempotency-Key the provider is sent for a scoped
// key: the same for every retry of the charge, and fit for a provider's
// length limit.
func ProviderKey(scoped string) string {
	sum := sha256.Sum256([]byte(scoped))
	return hex.EncodeToString(sum[:])
}

func (a *API) log() *slog.Logger {
	if a.Logger == nil {
		return slog.Default()
	}
	return a.Logger
}

// header is the value of the header name in h, whatever its case (HTTP
// APIs hand headers over in lower case).
func header(h map[string]string, name string) string {
	for k, v := range h {
		if strings.EqualFold(k, name) {
			return v
		}
	}
	return ""
}

// callerOf is the request's IAM caller, as API Gateway's IAM authorizer
// names it, or "".
func callerOf(req events.APIGatewayV2HTTPRequest) string {
	if a := req.RequestContext.Authorizer; a != nil && a.IAM != nil {
		return a.IAM.UserARN
	}
	return ""
}

// bodyOf is the request's body, decoded when API Gateway sent it base64.
func bodyOf(req events.APIGatewayV2HTTPRequest) ([]byte, error) {
	if !req.IsBase64Encoded {
		return []byte(req.Body), nil
	}
	b, err := base64.StdEncoding.DecodeString(req.Body)
	if err != nil {
		return nil, fmt.Errorf("the body is not valid base64: %w", err)
	}
	return b, nil
}

// decode reads a charge's body: one JSON object of Request's members
// only, valid.
func decode(body []byte) (Request, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	var r Request
	if err := dec.Decode(&r); err != nil {
		return Request{}, fmt.Errorf("the body is not a charge: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return Request{}, errors.New("the body is not a charge: data after its object")
	}
	if err := r.validate(); err != nil {
		return Request{}, err
	}
	return r, nil
}

// answer is the HTTP answer of a charge: 201 with the charge, or 402 for
// a decline, with Idempotent-Replayed: true when it is a kept one.
func answer(c Charge, replayed bool) events.APIGatewayV2HTTPResponse {
	status, contentType := http.StatusCreated, "application/json"
	if c.Status == StatusDeclined {
		status = http.StatusPaymentRequired
	}
	b, _ := json.Marshal(c) // a Charge always encodes
	resp := events.APIGatewayV2HTTPResponse{
		StatusCode: status, Headers: map[string]string{"Content-Type": contentType}, Body: string(b),
	}
	if replayed {
		resp.Headers[idempotencykey.HeaderReplayed] = "true"
	}
	return resp
}

// problem is an application/problem+json answer (RFC 9457), with
// Retry-After when retryAfter is set.
func problem(status int, kind, detail string, retryAfter time.Duration) events.APIGatewayV2HTTPResponse {
	b, _ := json.Marshal(map[string]any{
		"type": "urn:charge:" + kind, "title": http.StatusText(status), "status": status, "detail": detail,
	})
	resp := events.APIGatewayV2HTTPResponse{
		StatusCode: status, Headers: map[string]string{"Content-Type": "application/problem+json"}, Body: string(b),
	}
	if retryAfter > 0 {
		resp.Headers[idempotencykey.HeaderRetryAfter] = strconv.Itoa(int((retryAfter + time.Second - 1) / time.Second))
	}
	return resp
}
