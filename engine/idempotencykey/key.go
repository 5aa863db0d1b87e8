package idempotencykey

import (
	"errors"
	"fmt"
	"strings"
)

// MaxKeyLen is the longest accepted Idempotency-Key.
const MaxKeyLen = 255

// ErrInvalidKey is matched by every error ParseKey returns.
var ErrInvalidKey = errors.New("invalid Idempotency-Key")

// ParseKey returns the key of an Idempotency-Key header value: 1–255
// printable ASCII characters (surrounding spaces trimmed), or the quoted
// structured-field string form of the IETF draft ("..." with \" and \\
// escapes), whose content is 1–255 printable ASCII characters and not
// blank.
func ParseKey(header string) (string, error) {
	v := strings.Trim(header, " \t")
	if v == "" {
		return "", fmt.Errorf("%w: missing or blank", ErrInvalidKey)
	}
	if v[0] == '"' {
		return parseSFString(v)
	}
	if len(v) > MaxKeyLen {
		return "", fmt.Errorf("%w: longer than %d characters", ErrInvalidKey, MaxKeyLen)
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < 0x20 || c >= 0x7f {
			return "", fmt.Errorf("%w: only printable ASCII (or a quoted string)", ErrInvalidKey)
		}
	}
	return v, nil
}

// parseSFString parses an RFC 8941 sf-string.
func parseSFString(v string) (string, error) {
	var b strings.Builder
	for i := 1; i < len(v); i++ {
		c := v[i]
		switch {
		case c == '\\':
			i++
			if i >= len(v) || (v[i] != '"' && v[i] != '\\') {
				return "", fmt.Errorf("%w: bad escape in quoted string", ErrInvalidKey)
			}
			b.WriteByte(v[i])
		case c == '"':
			if i != len(v)-1 {
				return "", fmt.Errorf("%w: data after the quoted string", ErrInvalidKey)
			}
			k := b.String()
			switch {
			case strings.TrimSpace(k) == "":
				return "", fmt.Errorf("%w: blank", ErrInvalidKey)
			case len(k) > MaxKeyLen:
				return "", fmt.Errorf("%w: longer than %d characters", ErrInvalidKey, MaxKeyLen)
			}
			return k, nil
		case c < 0x20 || c >= 0x7f:
			return "", fmt.Errorf("%w: only printable ASCII", ErrInvalidKey)
		default:
			b.WriteByte(c)
		}
	}
	return "", fmt.Errorf("%w: unterminated quoted string", ErrInvalidKey)
}
