package message

import (
	"errors"
	"testing"
)

// FuzzDecode: no input makes the decoder panic, and everything it accepts
// re-encodes and decodes to the same envelope. The seed corpus runs in every
// `go test`; `go test -fuzz FuzzDecode ./internal/contract` explores further.
func FuzzDecode(f *testing.F) {
	good, _ := validEnvelope().Encode()
	for _, seed := range []string{
		string(good), "", "{}", "null", "[]", `{"v":1}`, `{"v":1e400}`, `{"args":{"a":{"b":[]}}}`,
		`{"v":1,"messageId":"6f0c1c8e-3a4b-5d2e-9f10-2b7a1e5c4d33","type":"email.welcome.v1","key":"k","correlationId":"c","args":{"userId":"u-1"},"enqueuedAt":"2026-11-30T08:00:00Z"}`,
		"\xff\xfe", `{"v":1,"v":2}`, `{"enqueuedAt":"not a time"}`,
	} {
		f.Add([]byte(seed))
	}
	reg := testRegistry()
	f.Fuzz(func(t *testing.T, data []byte) {
		env, err := Decode(data)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("Decode error %v does not match ErrMalformed", err)
			}
			return
		}
		_, _ = reg.Validate(env)
		b, err := env.Encode()
		if err != nil {
			t.Fatalf("accepted envelope does not re-encode: %v", err)
		}
		again, err := Decode(b)
		if err != nil || again.MessageID != env.MessageID || len(again.Args) != len(env.Args) {
			t.Fatalf("re-decode = %+v, %v", again, err)
		}
	})
}
