package message

import "strings"

// The shapes every envelope field and argument is checked against. They are
// spelled as byte loops rather than regular expressions: the runner checks
// every record of every batch with them. shapes_test.go holds each one's
// regular expression and fuzzes the two against each other.

// CanonicalUUID reports whether s is a UUID in its canonical lower-case
// form (8-4-4-4-12 hex digits), the form every job id takes.
func CanonicalUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !isDigit(c) && (c < 'a' || c > 'f') {
				return false
			}
		}
	}
	return true
}

// ValidKey reports whether k is an acceptable natural idempotency key:
// 1–255 printable ASCII characters without spaces or '@'. Keys travel in
// plaintext like args, so they cannot carry an e-mail address.
func ValidKey(k string) bool {
	if len(k) == 0 || len(k) > 255 {
		return false
	}
	for i := 0; i < len(k); i++ {
		if c := k[i]; c < 0x21 || c > 0x7e || c == '@' {
			return false
		}
	}
	return true
}

// ValidCorrelationID reports whether id is an acceptable correlation id:
// 1–128 letters, digits, '.', '_', ':' or '-'.
func ValidCorrelationID(id string) bool {
	if len(id) == 0 || len(id) > 128 {
		return false
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; !isAlnum(c) && c != '.' && c != '_' && c != ':' && c != '-' {
			return false
		}
	}
	return true
}

// ValidTypeName reports whether name has the shape of a versioned type
// name: at most 128 bytes of dot-separated lower-case segments, each a
// letter then letters, digits or '-', the last one v1, v2, ….
func ValidTypeName(name string) bool {
	if len(name) > 128 {
		return false
	}
	last := strings.LastIndexByte(name, '.')
	if last < 0 || !validVersion(name[last+1:]) {
		return false
	}
	start := 0
	for i := 0; i <= last; i++ {
		if name[i] == '.' {
			if !validSegment(name[start:i]) {
				return false
			}
			start = i + 1
		}
	}
	return true
}

// validSegment: a lower-case letter, then lower-case letters, digits or '-'.
func validSegment(s string) bool {
	if len(s) == 0 || !isLower(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if c := s[i]; !isLower(c) && !isDigit(c) && c != '-' {
			return false
		}
	}
	return true
}

// validVersion: 'v', then a number without a leading zero.
func validVersion(s string) bool {
	if len(s) < 2 || s[0] != 'v' || s[1] < '1' || s[1] > '9' {
		return false
	}
	for i := 2; i < len(s); i++ {
		if !isDigit(s[i]) {
			return false
		}
	}
	return true
}

// validID: a letter or digit, then letters, digits, '.', '_' or '-'.
func validID(s string) bool {
	if len(s) == 0 || !isAlnum(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if c := s[i]; !isAlnum(c) && c != '.' && c != '_' && c != '-' {
			return false
		}
	}
	return true
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }
func isLower(c byte) bool { return c >= 'a' && c <= 'z' }
func isUpper(c byte) bool { return c >= 'A' && c <= 'Z' }
func isAlnum(c byte) bool { return isDigit(c) || isLower(c) || isUpper(c) }
