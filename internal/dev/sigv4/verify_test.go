package sigv4_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/runstwice/runstwice/internal/dev/sigv4"
)

// The AWS Signature Version 4 test suite's example credentials and time.
var (
	suiteCreds = sigv4.Credentials{AccessKeyID: "AKIDEXAMPLE", SecretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"}
	suiteTime  = time.Date(2015, 8, 30, 12, 36, 0, 0, time.UTC)
)

// TestVerifierMatchesTheAWSTestSuite verifies AWS's published get-vanilla
// requests, signed with the suite's credentials at the suite's time, and
// refuses each with one signature digit changed.
func TestVerifierMatchesTheAWSTestSuite(t *testing.T) {
	suite := &sigv4.Verifier{
		Service: "service", Region: "us-east-1", Now: func() time.Time { return suiteTime },
		Lookup: func(k string) (sigv4.Credentials, bool) { return suiteCreds, k == suiteCreds.AccessKeyID },
	}
	for _, tc := range []struct{ name, url, signature string }{
		{"get-vanilla", "https://example.amazonaws.com/", "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"},
		{"get-vanilla-query-order-key-case", "https://example.amazonaws.com/?Param2=value2&Param1=value1", "b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, sig := range []string{tc.signature, "0" + tc.signature[1:]} {
				r := httptest.NewRequest(http.MethodGet, tc.url, nil)
				r.Header.Set("X-Amz-Date", "20150830T123600Z")
				r.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, "+
					"SignedHeaders=host;x-amz-date, Signature="+sig)
				_, err := suite.Verify(r, nil)
				var se *sigv4.Error
				switch {
				case sig == tc.signature && err != nil:
					t.Fatalf("the suite's signature refused: %v", err)
				case sig != tc.signature && (!errors.As(err, &se) || se.Reason != sigv4.ReasonBadSignature):
					t.Fatalf("a changed signature: %v; want %s", err, sigv4.ReasonBadSignature)
				}
			}
		})
	}
}

// local is the verifier of these tests: execute-api in us-east-1 with two
// identities, one of them temporary.
func local(now time.Time) *sigv4.Verifier {
	ids := map[string]sigv4.Credentials{
		"AKIDLOCAL": {AccessKeyID: "AKIDLOCAL", SecretAccessKey: "secret-1"},
		"ASIALOCAL": {AccessKeyID: "ASIALOCAL", SecretAccessKey: "secret-2", SessionToken: "token-2"},
	}
	return &sigv4.Verifier{
		Service: "execute-api", Region: "us-east-1", Now: func() time.Time { return now },
		Lookup: func(k string) (sigv4.Credentials, bool) { c, ok := ids[k]; return c, ok },
	}
}

// received signs a request with the SDK's signer, sends it through a real
// HTTP server and returns the request and body as the server saw them.
func received(t *testing.T, method, path string, body []byte, creds aws.Credentials, service, region string, at time.Time, tamper func(*http.Request)) (*http.Request, []byte) {
	t.Helper()
	var got *http.Request
	var gotBody []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotBody, _ = io.ReadAll(r.Body)
		got = r
	}))
	defer srv.Close()
	req, err := http.NewRequest(method, srv.URL+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", "k-1")
	sum := sha256.Sum256(body)
	if err := v4.NewSigner().SignHTTP(context.Background(), creds, req, hex.EncodeToString(sum[:]), service, region, at); err != nil {
		t.Fatal(err)
	}
	if tamper != nil {
		tamper(req)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return got, gotBody
}

func TestVerifierAcceptsWhatTheSDKSigns(t *testing.T) {
	now := time.Now().UTC()
	for _, tc := range []struct {
		name, method, path string
		body               string
		creds              aws.Credentials
		at                 time.Time
	}{
		{"post with body", "POST", "/v1/jobs/email.welcome.v1", `{"args":{"userId":"u-1"}}`, aws.Credentials{AccessKeyID: "AKIDLOCAL", SecretAccessKey: "secret-1"}, now},
		{"get", "GET", "/v1/jobs/3f0c8a8e-0000-4000-8000-000000000001", "", aws.Credentials{AccessKeyID: "AKIDLOCAL", SecretAccessKey: "secret-1"}, now},
		{"query and escaped path", "GET", "/v1/a%20b/c?z=1&a=x%20y&a=b", "", aws.Credentials{AccessKeyID: "AKIDLOCAL", SecretAccessKey: "secret-1"}, now},
		{"session token", "DELETE", "/v1/jobs/x", "", aws.Credentials{AccessKeyID: "ASIALOCAL", SecretAccessKey: "secret-2", SessionToken: "token-2"}, now},
		{"clock skew within 15 minutes", "GET", "/", "", aws.Credentials{AccessKeyID: "AKIDLOCAL", SecretAccessKey: "secret-1"}, now.Add(-14 * time.Minute)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, body := received(t, tc.method, tc.path, []byte(tc.body), tc.creds, "execute-api", "us-east-1", tc.at, nil)
			if !sigv4.Signed(r) {
				t.Fatal("Signed = false for a signed request")
			}
			got, err := local(now).Verify(r, body)
			if err != nil {
				t.Fatalf("Verify: %v", err)
			}
			if got.AccessKeyID != tc.creds.AccessKeyID {
				t.Fatalf("identity %q; want %q", got.AccessKeyID, tc.creds.AccessKeyID)
			}
		})
	}
}

func TestVerifierRefuses(t *testing.T) {
	now := time.Now().UTC()
	good := aws.Credentials{AccessKeyID: "AKIDLOCAL", SecretAccessKey: "secret-1"}
	for _, tc := range []struct {
		name    string
		creds   aws.Credentials
		service string
		region  string
		at      time.Time
		tamper  func(*http.Request)
		reason  sigv4.Reason
		message string
	}{
		{name: "wrong secret", creds: aws.Credentials{AccessKeyID: "AKIDLOCAL", SecretAccessKey: "wrong"},
			reason: sigv4.ReasonBadSignature, message: sigv4.MessageSignatureMismatch},
		{name: "unknown key", creds: aws.Credentials{AccessKeyID: "AKIDNOBODY", SecretAccessKey: "secret-1"},
			reason: sigv4.ReasonUnknownKey, message: sigv4.MessageInvalidToken},
		{name: "temporary key without its token", creds: aws.Credentials{AccessKeyID: "ASIALOCAL", SecretAccessKey: "secret-2"},
			reason: sigv4.ReasonUnknownKey, message: sigv4.MessageInvalidToken},
		{name: "another service", creds: good, service: "s3", reason: sigv4.ReasonBadScope, message: "correct service: 'execute-api'"},
		{name: "another region", creds: good, region: "eu-west-1", reason: sigv4.ReasonBadScope, message: "not 'eu-west-1'"},
		{name: "signed 16 minutes ago", creds: good, at: now.Add(-16 * time.Minute), reason: sigv4.ReasonExpired, message: "Signature expired"},
		{name: "signed 16 minutes ahead", creds: good, at: now.Add(16 * time.Minute), reason: sigv4.ReasonExpired, message: "not yet current"},
		{name: "body changed after signing", creds: good, tamper: func(r *http.Request) {
			b := []byte(`{"args":{"userId":"u-2"}}`)
			r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(b)), int64(len(b))
		}, reason: sigv4.ReasonBadSignature, message: sigv4.MessageSignatureMismatch},
		{name: "signed header changed", creds: good, tamper: func(r *http.Request) { r.Header.Set("Idempotency-Key", "k-2") },
			reason: sigv4.ReasonBadSignature, message: sigv4.MessageSignatureMismatch},
		{name: "no signature parameter", creds: good, tamper: func(r *http.Request) {
			a := r.Header.Get("Authorization")
			r.Header.Set("Authorization", a[:strings.Index(a, ", Signature=")])
		}, reason: sigv4.ReasonMalformed, message: "requires 'Signature' parameter"},
		{name: "no date", creds: good, tamper: func(r *http.Request) { r.Header.Del("X-Amz-Date") },
			reason: sigv4.ReasonMalformed, message: "X-Amz-Date"},
		{name: "scope date differs from X-Amz-Date", creds: good, tamper: func(r *http.Request) {
			r.Header.Set("X-Amz-Date", now.Add(-24*time.Hour).Format("20060102T150405Z"))
		}, reason: sigv4.ReasonBadScope, message: "Date in Credential scope"},
		{name: "host not signed", creds: good, tamper: func(r *http.Request) {
			r.Header.Set("Authorization", strings.Replace(r.Header.Get("Authorization"), "host;", "", 1))
		}, reason: sigv4.ReasonMalformed, message: "'Host'"},
		{name: "a header the SDK never signs", creds: good, tamper: func(r *http.Request) {
			r.Header.Set("Authorization", strings.Replace(r.Header.Get("Authorization"), "SignedHeaders=", "SignedHeaders=user-agent;", 1))
		}, reason: sigv4.ReasonUnverifiable, message: "SignedHeaders=user-agent;"},
		{name: "X-Amz-Date not signed", creds: good, tamper: func(r *http.Request) {
			r.Header.Set("Authorization", strings.Replace(r.Header.Get("Authorization"), ";x-amz-date", "", 1))
		}, reason: sigv4.ReasonUnverifiable, message: "signs content-length;content-type;host;idempotency-key;x-amz-date"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			service, region, at := tc.service, tc.region, tc.at
			if service == "" {
				service = "execute-api"
			}
			if region == "" {
				region = "us-east-1"
			}
			if at.IsZero() {
				at = now
			}
			r, body := received(t, "POST", "/v1/jobs/email.welcome.v1", []byte(`{"args":{"userId":"u-1"}}`), tc.creds, service, region, at, tc.tamper)
			_, err := local(now).Verify(r, body)
			var se *sigv4.Error
			if !errors.As(err, &se) {
				t.Fatalf("Verify = %v; want a *sigv4.Error", err)
			}
			if se.Reason != tc.reason || !strings.Contains(se.Message, tc.message) {
				t.Fatalf("refusal %q %q; want %q containing %q", se.Reason, se.Message, tc.reason, tc.message)
			}
		})
	}
}

func TestPresignedAndUnsignedRequests(t *testing.T) {
	unsigned := httptest.NewRequest("GET", "/v1/jobs/x", nil)
	if sigv4.Signed(unsigned) {
		t.Fatal("an unsigned request reads as signed")
	}
	pre := httptest.NewRequest("GET", "/v1/jobs/x?X-Amz-Signature=abc&X-Amz-Algorithm=AWS4-HMAC-SHA256", nil)
	if !sigv4.Signed(pre) {
		t.Fatal("a presigned request reads as unsigned")
	}
	var se *sigv4.Error
	if _, err := local(time.Now()).Verify(pre, nil); !errors.As(err, &se) || se.Reason != sigv4.ReasonPresigned {
		t.Fatalf("presigned: %v", err)
	}
}
