package message

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

func validEnvelope() Envelope {
	return Envelope{
		V: 1, MessageID: DeriveMessageID("arn:aws:iam::123456789012:user/alice", "key-1"),
		Type: typeVerify, Key: "verify:u-123", CorrelationID: "c-1",
		Args:       map[string]string{"userId": "u-123", "roleCode": "city-partner", "countryCode": "BD"},
		EnqueuedAt: time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC),
	}
}

// Encode, then Decode, each error fatal: the plain form of a round trip.
func TestEnvelopeRoundTrip(t *testing.T) {
	env := validEnvelope()
	b, err := env.Encode()
	if err != nil {
		t.Fatal(err)
	}
	got, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if got.MessageID != env.MessageID || got.Args["countryCode"] != "BD" || !got.EnqueuedAt.Equal(env.EnqueuedAt) {
		t.Fatalf("round trip = %+v", got)
	}
	if _, err := testRegistry().Validate(got); err != nil {
		t.Fatal(err)
	}
}

func TestDecodeRejects(t *testing.T) {
	good, _ := validEnvelope().Encode()
	g := string(good)
	for _, tc := range []struct{ name, body, field string }{
		{"empty", "", "body"},
		{"not JSON", "hello", "body"},
		{"array", `[{"v":1}]`, "body"},
		{"null", `null`, "v"},
		{"unknown field", strings.Replace(g, `"v":1`, `"v":1,"email":"a@b.c"`, 1), "body"},
		{"wrong version", strings.Replace(g, `"v":1`, `"v":2`, 1), "v"},
		{"version as string", strings.Replace(g, `"v":1`, `"v":"1"`, 1), "v"},
		{"bad message id", strings.Replace(g, `"messageId":"`, `"messageId":"x`, 1), "messageId"},
		{"upper-case message id", strings.Replace(g, validEnvelope().MessageID, strings.ToUpper(validEnvelope().MessageID), 1), "messageId"},
		{"unversioned type", strings.Replace(g, typeVerify, "test.verify", 1), "type"},
		{"key with space", strings.Replace(g, `"key":"verify:u-123"`, `"key":"a b"`, 1), "key"},
		{"e-mail address in key", strings.Replace(g, `"key":"verify:u-123"`, `"key":"bob@example.com"`, 1), "key"},
		{"missing key", strings.Replace(g, `"key":"verify:u-123",`, ``, 1), "key"},
		{"bad correlation id", strings.Replace(g, `"correlationId":"c-1"`, `"correlationId":"c 1"`, 1), "correlationId"},
		{"nested args", strings.Replace(g, `"userId":"u-123"`, `"userId":{"id":1}`, 1), "args"},
		{"array arg", strings.Replace(g, `"userId":"u-123"`, `"userId":["u-1"]`, 1), "args"},
		{"number arg", strings.Replace(g, `"userId":"u-123"`, `"userId":123`, 1), "args"},
		{"args missing", strings.Replace(g, `"args":{"countryCode":"BD","roleCode":"city-partner","userId":"u-123"},`, ``, 1), "args"},
		{"no enqueuedAt", strings.Replace(g, `,"enqueuedAt":"2026-11-30T08:00:00Z"`, ``, 1), "enqueuedAt"},
		{"trailing data", g + `{}`, "body"},
		{"member named twice", strings.Replace(g, `"v":1`, `"v":1,"v":1`, 1), "v"},
		{"arg named twice", strings.Replace(g, `"userId":"u-123"`, `"userId":"u-123","userId":"u-9"`, 1), "args.userId"},
		{"a known name in another case", strings.Replace(g, `"messageId"`, `"MessageId"`, 1), "body"},
		{"invalid UTF-8", strings.Replace(g, `"key":"verify:u-123"`, "\"key\":\"verify:u-\xff\"", 1), "body"},
		{"enqueuedAt not a time", strings.Replace(g, `"enqueuedAt":"2026-11-30T08:00:00Z"`, `"enqueuedAt":"Monday"`, 1), "enqueuedAt"},
		{"oversize", `{"v":1,"key":"` + strings.Repeat("a", MaxEnvelopeBytes) + `"}`, "body"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decode([]byte(tc.body))
			var verr *ValidationError
			if !errors.As(err, &verr) || !errors.Is(err, ErrMalformed) {
				t.Fatalf("Decode = %v; want a ValidationError matching ErrMalformed", err)
			}
			found := false
			for _, f := range verr.Fields {
				found = found || f.Field == tc.field || strings.HasPrefix(f.Field, tc.field+".")
			}
			if !found {
				t.Fatalf("errors %v do not name field %q", verr.Fields, tc.field)
			}
		})
	}
}

// TestDecodeSaysWhy: every way a body breaks the JSON contract has a reason
// in words, and the reason quotes no value the sender chose (a member's
// name, made safe, at most).
func TestDecodeSaysWhy(t *testing.T) {
	good, _ := validEnvelope().Encode()
	g := string(good)
	for _, tc := range []struct{ name, body, field, reason string }{
		{"empty", "", "body", "empty or truncated JSON"},
		{"truncated", g[:20], "body", "empty or truncated JSON"},
		{"not JSON", "hello", "body", "invalid JSON at offset 0"},
		{"trailing data", g + ` x`, "body", fmt.Sprintf("invalid JSON at offset %d", len(g)+1)},
		{"array", `[1,2]`, "body", "wrong type: got array, want message.Envelope"},
		{"version as string", strings.Replace(g, `"v":1`, `"v":"1"`, 1), "v", "wrong type: got string, want int"},
		{"unknown field", strings.Replace(g, `"v":1`, `"v":1,"email":"a@b.c"`, 1), "body", `unknown field "email"`},
		{"unknown field's name made safe", strings.Replace(g, `"v":1`, `"v":1,"a\u0000b":1`, 1), "body", `unknown field "a?b"`},
		{"member named twice", strings.Replace(g, `"key":"verify:u-123"`, `"key":"verify:u-123","key":"verify:u-9"`, 1), "key", "named twice"},
		{"nested arg", strings.Replace(g, `"userId":"u-123"`, `"userId":{"id":1}`, 1), "args.userId", "must be a flat object of string IDs, not object"},
		{"args an array", strings.Replace(g, `"args":{`, `"args":[{`, 1), "args", "must be a flat object of string IDs, not array"},
		{"time", strings.Replace(g, `"enqueuedAt":"2026-11-30T08:00:00Z"`, `"enqueuedAt":"yesterday bob@example.com"`, 1), "enqueuedAt", "must be an RFC 3339 time"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decode([]byte(tc.body))
			var verr *ValidationError
			if !errors.As(err, &verr) || len(verr.Fields) != 1 {
				t.Fatalf("Decode = %v; want a ValidationError of one field", err)
			}
			if f := verr.Fields[0]; f.Field != tc.field || !strings.HasPrefix(f.Reason, tc.reason) || strings.Contains(f.Reason, "@") {
				t.Fatalf("field %q, reason %q; want %q, %q…", f.Field, f.Reason, tc.field, tc.reason)
			}
		})
	}
}

func TestValidateArgs(t *testing.T) {
	reg := testRegistry()
	pv, _ := reg.Lookup(typeVerify)
	digest, _ := reg.Lookup(typeDigest)
	ok := map[string]string{"userId": "u-123", "roleCode": "city-partner", "countryCode": "BD"}
	with := func(k, v string) map[string]string {
		m := map[string]string{}
		for a, b := range ok {
			m[a] = b
		}
		if v == "\x00delete" {
			delete(m, k)
		} else {
			m[k] = v
		}
		return m
	}
	for _, tc := range []struct {
		name   string
		typ    JobType
		args   map[string]string
		field  string
		reason string
	}{
		{"valid", pv, ok, "", ""},
		{"valid digest", digest, map[string]string{"userId": "u-1", "digestId": "2026-W48"}, "", ""},
		{"missing", pv, with("roleCode", "\x00delete"), "args.roleCode", "required"},
		{"unknown", pv, with("email", "x"), "args.email", "not an argument"},
		{"e-mail address", pv, with("userId", "bob@example.com"), "args.userId", "e-mail"},
		{"URL", pv, with("userId", "https://evil.example/x"), "args.userId", "URL"},
		{"path", pv, with("userId", "a/b"), "args.userId", "URL"},
		{"whitespace", pv, with("userId", "Robert Smith"), "args.userId", "whitespace"},
		{"newline", pv, with("userId", "u-1\n"), "args.userId", "whitespace"},
		{"empty", pv, with("userId", ""), "args.userId", "empty"},
		{"too long", pv, with("roleCode", strings.Repeat("r", 33)), "args.roleCode", "longer"},
		{"lower-case country", pv, with("countryCode", "bd"), "args.countryCode", "country"},
		{"three-letter country", pv, with("countryCode", "BGD"), "args.countryCode", "country"},
		{"bad week", digest, map[string]string{"userId": "u-1", "digestId": "2026-W60"}, "args.digestId", "week"},
		{"leading dash id", pv, with("userId", "-u"), "args.userId", "id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.typ.ValidateArgs(tc.args)
			if tc.field == "" {
				if err != nil {
					t.Fatalf("ValidateArgs = %v; want nil", err)
				}
				return
			}
			var verr *ValidationError
			if !errors.As(err, &verr) {
				t.Fatalf("ValidateArgs = %v; want a ValidationError", err)
			}
			for _, f := range verr.Fields {
				if f.Field == tc.field && strings.Contains(f.Reason, tc.reason) {
					return
				}
			}
			t.Fatalf("errors %v; want %s mentioning %q", verr.Fields, tc.field, tc.reason)
		})
	}
}

func TestDeriveMessageID(t *testing.T) {
	a := DeriveMessageID("alice", "k1")
	if a != DeriveMessageID("alice", "k1") {
		t.Fatal("not deterministic")
	}
	for _, other := range []string{DeriveMessageID("bob", "k1"), DeriveMessageID("alice", "k2"), DeriveMessageID("alicek", "1"), DeriveMessageID("alice", "k1 ")} {
		if other == a {
			t.Fatal("different (caller, key) pairs share a message id")
		}
	}
	env := validEnvelope()
	env.MessageID = a
	if err := env.Check(); err != nil {
		t.Fatalf("derived id is not a valid messageId: %v", err)
	}
}

func TestDeriveKey(t *testing.T) {
	jt, _ := testRegistry().Lookup(typeDigest)
	got := jt.DeriveKey(map[string]string{"userId": "u-123", "digestId": "2026-W48"})
	if got != "digest:u-123:2026-W48" || !ValidKey(got) {
		t.Errorf("key = %q; want the prefix and the key args joined by ':'", got)
	}
	if _, err := testRegistry().Lookup("test.welcome.v2"); !errors.Is(err, ErrUnknownType) {
		t.Fatalf("Lookup(unregistered) = %v; want ErrUnknownType", err)
	}
}

// A payload change is a new version registered beside the old one; both
// decode and validate while the old messages drain.
func TestVersionsCoexist(t *testing.T) {
	v2 := JobType{
		Name: "test.welcome.v2", Queue: "default", EnabledByDefault: true, Lease: true,
		Args:      []ArgSpec{{Name: "userId", Required: true}, {Name: "countryCode", Format: testFormatCountry, Required: true}},
		KeyPrefix: "welcome", KeyArgs: []string{"userId"},
	}
	reg, err := NewRegistry(append(testTypes(), v2)...)
	if err != nil {
		t.Fatal(err)
	}
	old := validEnvelope()
	old.Type, old.Args = typeWelcome, map[string]string{"userId": "u-1"}
	next := old
	next.Type, next.Args = "test.welcome.v2", map[string]string{"userId": "u-1", "countryCode": "BD"}
	for _, env := range []Envelope{old, next} {
		b, _ := env.Encode()
		got, err := Decode(b)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := reg.Validate(got); err != nil {
			t.Fatalf("%s: %v", env.Type, err)
		}
	}
	// The v1 args do not satisfy v2: a payload change really is a new type.
	old.Type = "test.welcome.v2"
	if _, err := reg.Validate(old); err == nil {
		t.Fatal("v1 args accepted as v2")
	}
}

func TestNewRegistryRefuses(t *testing.T) {
	base := testTypes()[2]
	for name, mutate := range map[string]func(*JobType){
		"unversioned name": func(t *JobType) { t.Name = "test.welcome" },
		"no queue":         func(t *JobType) { t.Queue = "" },
		"bad queue name":   func(t *JobType) { t.Queue = "Fast Lane" },
		"empty prefix":     func(t *JobType) { t.KeyPrefix = "" },
		"undeclared key":   func(t *JobType) { t.KeyArgs = []string{"nope"} },
		"format without a check": func(t *JobType) {
			t.Args = append(slices.Clone(t.Args), ArgSpec{Name: "extra", Format: NewFormat("order", "o-1", nil)})
		},
		"format refusing its example": func(t *JobType) {
			t.Args = append(slices.Clone(t.Args), ArgSpec{Name: "extra", Format: NewFormat("order", "o-1", func(string) bool { return false })})
		},
		"format without a name": func(t *JobType) {
			t.Args = append(slices.Clone(t.Args), ArgSpec{Name: "extra", Format: NewFormat("", "o-1", validID)})
		},
	} {
		jt := base
		mutate(&jt)
		if _, err := NewRegistry(jt); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := NewRegistry(base, base); err == nil {
		t.Error("duplicate name accepted")
	}
}

func TestNearest(t *testing.T) {
	reg := testRegistry()
	for in, want := range map[string]string{
		"test.digets.v1":  typeDigest,
		"test.welcome.v2": typeWelcome,
		"test.rest.v1":    typeReset,
	} {
		if got, ok := reg.Nearest(in); !ok || got != want {
			t.Errorf("Nearest(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
	if got, ok := reg.Nearest("payroll"); ok {
		t.Errorf("Nearest(payroll) suggested %q", got)
	}
}

func TestValidationErrorJSONFields(t *testing.T) {
	err := ValidateArgs(testTypes()[2].Args, map[string]string{"userId": "a b", "x\x00y": "1"})
	var verr *ValidationError
	if !errors.As(err, &verr) {
		t.Fatal(err)
	}
	b, _ := json.Marshal(verr.Fields)
	if strings.Contains(string(b), `\u0000`) {
		t.Fatalf("control characters leak into errors: %s", b)
	}
}
