package enqueue

import (
	"encoding/base64"
	"errors"
	"fmt"
	"mime"
	"strings"

	"github.com/aws/aws-lambda-go/events"

	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/internal/contract"
)

// MaxBodyBytes is the largest accepted request body (docs/api.md).
const MaxBodyBytes = 16 << 10

func invalid(field, reason string) *engine.ValidationError {
	return &engine.ValidationError{Fields: []engine.FieldError{{Field: field, Reason: reason}}}
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

// requestBody returns the raw body, base64-decoded when API Gateway encoded
// it, refusing one over MaxBodyBytes (errTooLarge).
func requestBody(req events.APIGatewayV2HTTPRequest) ([]byte, error) {
	return requestBodyUpTo(req, MaxBodyBytes)
}

// requestBodyUpTo is requestBody with limit bytes at most.
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
