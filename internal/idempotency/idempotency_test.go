package idempotency

import (
	"testing"
)

func TestFingerprint(t *testing.T) {
	base, err := Fingerprint("POST", "/v1/jobs/email.welcome.v1", []byte(`{"args":{"userId":"u-1"},"delaySeconds":0}`))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name          string
		method, route string
		body          string
		same          bool
	}{
		{"reordered and spaced", "post", "/v1/jobs/email.welcome.v1", "{ \"delaySeconds\" : 0,\n \"args\": {\"userId\":\"u-1\"} }", true},
		{"other arg", "POST", "/v1/jobs/email.welcome.v1", `{"args":{"userId":"u-2"},"delaySeconds":0}`, false},
		{"other route", "POST", "/v1/jobs/email.password-reset.v1", `{"args":{"userId":"u-1"},"delaySeconds":0}`, false},
		{"other method", "PUT", "/v1/jobs/email.welcome.v1", `{"args":{"userId":"u-1"},"delaySeconds":0}`, false},
		{"other number", "POST", "/v1/jobs/email.welcome.v1", `{"args":{"userId":"u-1"},"delaySeconds":1}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Fingerprint(tt.method, tt.route, []byte(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			if (got == base) != tt.same {
				t.Fatalf("same fingerprint = %v; want %v", got == base, tt.same)
			}
		})
	}
	for _, bad := range []string{"", "{", `{} {}`, "nul"} {
		if _, err := Fingerprint("POST", "/", []byte(bad)); err == nil {
			t.Errorf("Fingerprint(%q) accepted", bad)
		}
	}
}

func TestCanonicalJSON(t *testing.T) {
	got, err := CanonicalJSON([]byte(` {"b":[1, 2.50, "<&>"], "a": {"y":null,"x":true}} `))
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"a":{"x":true,"y":null},"b":[1,2.50,"<&>"]}`; string(got) != want {
		t.Fatalf("CanonicalJSON = %s; want %s", got, want)
	}
}

func TestPKNamespacesCaller(t *testing.T) {
	if PK("a#b", "c") == PK("a", "b#c") {
		t.Fatal("caller#key collides")
	}
	if got := PK("arn:aws:iam::1:user/x", "k"); got != "arn:aws:iam::1:user/x#k" {
		t.Fatalf("PK = %s", got)
	}
}
