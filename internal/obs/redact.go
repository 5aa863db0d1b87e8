package obs

import "github.com/runstwice/runstwice/engine"

// Redact returns err's text for logs, dead-letter reasons and job records,
// with every provider's own message replaced by the provider and its error
// code (engine.Redact: providers quote addresses and other personal data in
// their messages, and none of that may leave the process). Our own
// wrapping text (which carries IDs only) is kept.
func Redact(err error) string { return engine.Redact(err) }

// Redacted is implemented by an error whose own text carries no provider
// message (built from the provider's code and our advice): Redact keeps
// it, and what it wraps, as it is.
type Redacted = engine.Redacted

// ErrorCode returns the provider's error code in err ("MessageRejected",
// "ThrottlingException", "smtp 550"), or "".
func ErrorCode(err error) string { return engine.ErrorCode(err) }
