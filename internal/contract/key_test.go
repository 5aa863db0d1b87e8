package contract

import (
	"errors"
	"strings"
	"testing"
)

func TestParseKey(t *testing.T) {
	tests := []struct {
		name, in, want string
		ok             bool
	}{
		{"uuid", "8e03978e-40d5-43e8-bc93-6894a57f9324", "8e03978e-40d5-43e8-bc93-6894a57f9324", true},
		{"trimmed", "  abc ", "abc", true},
		{"one char", "a", "a", true},
		{"max", strings.Repeat("k", 255), strings.Repeat("k", 255), true},
		{"quoted", `"8e03978e"`, "8e03978e", true},
		{"quoted with space", `"a b"`, "a b", true},
		{"quoted escapes", `"a\"b\\c"`, `a"b\c`, true},
		{"empty", "", "", false},
		{"blank", "   ", "", false},
		{"too long", strings.Repeat("k", 256), "", false},
		{"inner space", "a b", "a b", true},
		{"control", "a\x01b", "", false},
		{"non-ascii", "ключ", "", false},
		{"del", "a\x7f", "", false},
		{"quoted blank", `"  "`, "", false},
		{"quoted empty", `""`, "", false},
		{"unterminated", `"abc`, "", false},
		{"trailing after quote", `"abc"x`, "", false},
		{"bad escape", `"a\nb"`, "", false},
		{"quoted too long", `"` + strings.Repeat("k", 256) + `"`, "", false},
		{"inner quote", `ab"c`, `ab"c`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseKey(tt.in)
			if (err == nil) != tt.ok || got != tt.want {
				t.Fatalf("ParseKey(%q) = %q, %v; want %q, ok=%v", tt.in, got, err, tt.want, tt.ok)
			}
			if err != nil && !errors.Is(err, ErrInvalidKey) {
				t.Fatalf("error %v does not match ErrInvalidKey", err)
			}
		})
	}
}

func FuzzParseKey(f *testing.F) {
	for _, s := range []string{"abc", `"abc"`, `"a\"b"`, "", " ", `"`, `"\`, strings.Repeat("x", 300)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		k, err := ParseKey(in)
		if err != nil {
			return
		}
		if k == "" || len(k) > MaxKeyLen || strings.TrimSpace(k) == "" {
			t.Fatalf("ParseKey(%q) accepted %q", in, k)
		}
		for i := 0; i < len(k); i++ {
			if k[i] < 0x20 || k[i] > 0x7e {
				t.Fatalf("ParseKey(%q) accepted non-printable %q", in, k)
			}
		}
	})
}
