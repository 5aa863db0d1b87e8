package enqueue

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strings"

	"github.com/runstwice/runstwice/internal/apigw"
	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/obs"
	"github.com/runstwice/runstwice/message"
)

// MaxBodyBytes is the largest accepted request body (docs/api.md).
const MaxBodyBytes = 16 << 10

func invalid(field, reason string) *message.ValidationError {
	return &message.ValidationError{Fields: []message.FieldError{{Field: field, Reason: reason}}}
}

// headerValue is the value of the header name as API Gateway passes it on:
// a header sent more than once is one value, joined with commas.
func headerValue(h http.Header, name string) string {
	return strings.Join(h.Values(name), ",")
}

// errContentType classifies a body in another media type.
var errContentType = errors.New("unsupported content type")

// MaxBatchBytes is the largest accepted body of POST /v1/batches: a
// batch's item, which keeps every job's message, stays well inside
// DynamoDB's 400 KB.
const MaxBatchBytes = 192 << 10

// keyedBody reads what every POST that makes jobs carries: its body (at
// most limit bytes; what names it in the 413's detail, "the body" or "the
// batch"), in application/json, and its Idempotency-Key, whose error ends
// with keyHint. Any of them wrong is the problem to answer.
func keyedBody(r *http.Request, limit int, what, keyHint string) ([]byte, string, *Problem) {
	body, err := io.ReadAll(io.LimitReader(r.Body, int64(limit)+1))
	switch {
	case errors.Is(err, apigw.ErrBase64):
		return nil, "", validation("body", "is marked base64 but is not valid base64")
	case err != nil:
		return nil, "", validation("body", "could not be read")
	case len(body) > limit:
		return nil, "", newProblem(http.StatusRequestEntityTooLarge, ProblemTooLarge, fmt.Sprintf("%s is larger than %d bytes", what, limit))
	}
	if err := checkContentType(r.Header); err != nil {
		return nil, "", newProblem(http.StatusUnsupportedMediaType, ProblemMediaType, err.Error())
	}
	key, err := contract.ParseKey(headerValue(r.Header, HeaderIdempotencyKey))
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

// checkContentType accepts application/json, with at most a charset of
// utf-8.
func checkContentType(h http.Header) error {
	if _, ok := h[HeaderContentType]; !ok {
		return fmt.Errorf("%w: missing (want application/json)", errContentType)
	}
	v := headerValue(h, HeaderContentType)
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
