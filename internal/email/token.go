package email

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
)

// TokenBytes is the size of a raw token.
const TokenBytes = 32

// newToken returns a raw token (URL-safe base64 of TokenBytes random bytes)
// and the hex SHA-256 of that raw string, the only form that is stored.
func newToken(r io.Reader) (raw, hash string, err error) {
	if r == nil {
		r = rand.Reader
	}
	b := make([]byte, TokenBytes)
	if _, err := io.ReadFull(r, b); err != nil {
		return "", "", fmt.Errorf("email: token: %w", err)
	}
	raw = base64.RawURLEncoding.EncodeToString(b)
	return raw, HashToken(raw), nil
}

// HashToken returns the hex SHA-256 of a raw token as it appears in a link:
// what the application compares with the stored tokenHash.
func HashToken(raw string) string {
	sum := sha256.Sum256([]byte(raw))
	return hex.EncodeToString(sum[:])
}
