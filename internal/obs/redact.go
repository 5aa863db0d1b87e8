package obs

import (
	"errors"
	"fmt"
	"net/textproto"
	"strings"

	"github.com/aws/smithy-go"
)

// Redact returns err's text for logs, dead-letter reasons and job records,
// with every provider's own message replaced by the provider and its error
// code. Providers quote addresses and other personal data in their messages
// (SES: "Email address is not verified. The following identities failed the
// check: bob@example.com"; SMTP: "550 <bob@example.com>: Recipient address
// rejected"), and none of that may leave the process. Our own wrapping text
// (which carries IDs only) is kept.
func Redact(err error) string {
	if err == nil {
		return ""
	}
	full := err.Error()
	p, desc := provider(err)
	if p == nil {
		return full
	}
	inner := p.Error()
	if i := strings.LastIndex(full, inner); i >= 0 && i+len(inner) == len(full) {
		return full[:i] + desc
	}
	return desc
}

// Redacted is implemented by an error whose own text carries no provider
// message (built from the provider's code and our advice): Redact keeps
// it, and what it wraps, as it is.
type Redacted interface {
	Redacted() bool
}

// ErrorCode returns the provider's error code in err ("MessageRejected",
// "ThrottlingException", "smtp 550"), or "".
func ErrorCode(err error) string {
	var api smithy.APIError
	if errors.As(err, &api) {
		return api.ErrorCode()
	}
	var tp *textproto.Error
	if errors.As(err, &tp) {
		return fmt.Sprintf("smtp %d", tp.Code)
	}
	return ""
}

// provider finds the outermost error in err's chain that carries a
// provider's message (an AWS service error, an SMTP reply), and names it
// without that message.
func provider(err error) (error, string) {
	for e := err; e != nil; e = errors.Unwrap(e) {
		if r, ok := e.(Redacted); ok && r.Redacted() {
			return nil, "" // its text is ours, built from codes
		}
		if api, ok := e.(smithy.APIError); ok {
			return e, api.ErrorCode()
		}
		if tp, ok := e.(*textproto.Error); ok {
			return e, fmt.Sprintf("smtp reply %d", tp.Code)
		}
		if j, ok := e.(interface{ Unwrap() []error }); ok {
			for _, x := range j.Unwrap() {
				if p, d := provider(x); p != nil {
					return p, d
				}
			}
			return nil, ""
		}
	}
	return nil, ""
}
