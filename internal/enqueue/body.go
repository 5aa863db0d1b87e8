package enqueue

import (
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"net/http"
	"strings"

	"github.com/aws/aws-lambda-go/events"

	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/obs"
	"github.com/runstwice/runstwice/message"
)

// MaxBodyBytes is the largest accepted request body (docs/api.md).
const MaxBodyBytes = 16 << 10

func invalid(field, reason string) *message.ValidationError {
	return &message.ValidationError{Fields: []message.FieldError{{Field: field, Reason: reason}}}
}

// header returns the value of the named header, matched case-insensitively
// (API Gateway lowercases names; other sources may not).
func header(h map[string]string, name string) (string, bool) {
	if v, ok := h[strings.ToLower(name)]; ok {
		return v, true
	}
	for k, v := range h {
		if strings.EqualFold(k, name) {
			return v, true
		}
	}
	return "", false
}

// errTooLarge and errContentType classify body problems.
var (
	errTooLarge    = errors.New("request body too large")
	errContentType = errors.New("unsupported content type")
)

// MaxBatchBytes is the largest accepted body of POST /v1/batches: a
// batch's item, which keeps every job's message, stays well inside
// DynamoDB's 400 KB.
const MaxBatchBytes = 192 << 10

// keyedBody reads what every POST that makes jobs carries: its body (at
// most limit bytes; what names it in the 413's detail, "the body" or "the
// batch"), in application/json, and its Idempotency-Key, whose error ends
// with keyHint. Any of them wrong is the problem to answer.
func keyedBody(req events.APIGatewayV2HTTPRequest, limit int, what, keyHint string) ([]byte, string, *Problem) {
	body, err := requestBodyUpTo(req, limit)
	switch {
	case errors.Is(err, errTooLarge):
		return nil, "", newProblem(http.StatusRequestEntityTooLarge, ProblemTooLarge, fmt.Sprintf("%s is larger than %d bytes", what, limit))
	case err != nil:
		return nil, "", validation("body", "is marked base64 but is not valid base64")
	}
	if err := checkContentType(req.Headers); err != nil {
		return nil, "", newProblem(http.StatusUnsupportedMediaType, ProblemMediaType, err.Error())
	}
	rawKey, _ := header(req.Headers, HeaderIdempotencyKey)
	key, err := contract.ParseKey(rawKey)
	if err != nil {
		return nil, "", validation("header "+HeaderIdempotencyKey,
			strings.TrimPrefix(err.Error(), contract.ErrInvalidKey.Error()+": ")+"; send 1-255 printable ASCII characters that "+keyHint)
	}
	return body, key, nil
}

// invalidProblem is the answer to err from decoding or encoding what (a
// body, a request, a job's message): a 400 naming the fields for a
// validation error, else a logged 500.
func invalidProblem(log *slog.Logger, op, what string, err error) *Problem {
	var ve *message.ValidationError
	if errors.As(err, &ve) {
		p := newProblem(http.StatusBadRequest, ProblemValidation, what+" is invalid: "+ve.Detail())
		p.Errors = ve.Fields
		return p
	}
	log.Error("enqueue: "+op, obs.KeyError, obs.Redact(err))
	return newProblem(http.StatusInternalServerError, ProblemInternal, "internal error")
}

// requestBodyUpTo returns the raw body, base64-decoded when API Gateway
// encoded it, refusing one over limit bytes (errTooLarge).
func requestBodyUpTo(req events.APIGatewayV2HTTPRequest, limit int) ([]byte, error) {
	if !req.IsBase64Encoded {
		if len(req.Body) > limit {
			return nil, errTooLarge
		}
		return []byte(req.Body), nil
	}
	if base64.StdEncoding.DecodedLen(len(req.Body)) > limit+3 {
		return nil, errTooLarge
	}
	b, err := base64.StdEncoding.DecodeString(req.Body)
	if err != nil {
		return nil, fmt.Errorf("enqueue: base64 body: %w", err)
	}
	if len(b) > limit {
		return nil, errTooLarge
	}
	return b, nil
}

// checkContentType accepts application/json, with at most a charset of
// utf-8.
func checkContentType(h map[string]string) error {
	v, ok := header(h, "Content-Type")
	if !ok {
		return fmt.Errorf("%w: missing (want application/json)", errContentType)
	}
	mt, params, err := mime.ParseMediaType(v)
	if err != nil || mt != "application/json" {
		return fmt.Errorf("%w: %q (want application/json)", errContentType, contract.Printable(v))
	}
	for k, p := range params {
		if k != "charset" || !strings.EqualFold(p, "utf-8") {
			return fmt.Errorf("%w: parameter %q (only charset=utf-8)", errContentType, contract.Printable(k))
		}
	}
	return nil
}
