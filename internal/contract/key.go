package contract

import "github.com/runstwice/runstwice/engine/idempotencykey"

// MaxKeyLen is the longest accepted Idempotency-Key.
const MaxKeyLen = idempotencykey.MaxKeyLen

// ErrInvalidKey is matched by every error ParseKey returns.
var ErrInvalidKey = idempotencykey.ErrInvalidKey

// ParseKey returns the key of an Idempotency-Key header value
// (idempotencykey.ParseKey: 1–255 printable ASCII characters, or the IETF
// draft's quoted structured-field string).
func ParseKey(header string) (string, error) { return idempotencykey.ParseKey(header) }
