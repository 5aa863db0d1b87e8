// Package sigv4 verifies AWS Signature Version 4 on HTTP requests the way an
// AWS front door does (API Gateway's IAM authorization, for the local stack):
// it checks the Authorization header's scope, date and clock skew, signs
// the request again with the AWS SDK's own signer (aws/signer/v4), over the
// headers the client signed and with the secret of the access key it names,
// and compares signatures. Refusals carry the messages AWS answers with.
//
// Only the header form (Authorization: AWS4-HMAC-SHA256 …) is verified;
// presigned query strings are refused.
package sigv4

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/textproto"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// Algorithm is the signing algorithm of the Authorization header.
const Algorithm = "AWS4-HMAC-SHA256"

// MaxSkew is how far the signing time may be from the verifier's clock.
const MaxSkew = 15 * time.Minute

// timeFormat is the ISO 8601 basic format of X-Amz-Date.
const timeFormat = "20060102T150405Z"

// Credentials are the signing credentials of one identity.
type Credentials struct {
	AccessKeyID     string
	SecretAccessKey string
	// SessionToken, when set, must arrive as X-Amz-Security-Token
	// (temporary credentials, such as an assumed role's).
	SessionToken string
}

// Verifier checks signed requests for one service and region.
type Verifier struct {
	// Service and Region are the credential scope a request must name,
	// e.g. "execute-api" and "us-east-1".
	Service, Region string
	// Lookup returns the credentials of an access key id.
	Lookup func(accessKeyID string) (Credentials, bool)
	// Now is the clock (time.Now if nil).
	Now func() time.Time
}

// Reason says why a request was refused.
type Reason string

// The reasons of a refusal.
const (
	ReasonMalformed    Reason = "malformed"     // the Authorization header cannot be read
	ReasonUnknownKey   Reason = "unknown-key"   // no such access key, or a wrong session token
	ReasonBadScope     Reason = "bad-scope"     // another service, region or date in the scope
	ReasonExpired      Reason = "expired"       // signed more than MaxSkew away from now
	ReasonBadSignature Reason = "bad-signature" // the signature does not match
	ReasonPresigned    Reason = "presigned"     // query-string signatures are not verified
	// ReasonUnverifiable: the client signed headers the AWS SDK's signer,
	// which the verifier signs with, would not (such as User-Agent).
	ReasonUnverifiable Reason = "unverifiable"
)

// Error is a refused request, with the message AWS answers with.
type Error struct {
	Reason  Reason
	Message string
}

func (e *Error) Error() string { return "sigv4: " + string(e.Reason) + ": " + e.Message }

// MessageSignatureMismatch is what AWS answers when the signature differs.
const MessageSignatureMismatch = "The request signature we calculated does not match the signature you provided. " +
	"Check your AWS Secret Access Key and signing method. Consult the service documentation for details."

// MessageInvalidToken is what AWS answers for an unknown access key.
const MessageInvalidToken = "The security token included in the request is invalid."

func refuse(r Reason, format string, args ...any) *Error {
	return &Error{Reason: r, Message: fmt.Sprintf(format, args...)}
}

// Signed reports whether r carries a SigV4 signature, in its Authorization
// header or in its query string.
func Signed(r *http.Request) bool {
	return strings.HasPrefix(r.Header.Get("Authorization"), Algorithm+" ") ||
		r.URL.Query().Has("X-Amz-Signature")
}

// authorization is a parsed Authorization header.
type authorization struct {
	accessKey, date, region, service string
	signedHeaders                    []string
	signature                        string
}

func parseAuthorization(h string) (authorization, *Error) {
	var a authorization
	rest, ok := strings.CutPrefix(h, Algorithm+" ")
	if !ok {
		return a, refuse(ReasonMalformed, "Authorization header requires the %s algorithm.", Algorithm)
	}
	var credential, signed string
	for part := range strings.SplitSeq(rest, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "Credential":
			credential = v
		case "SignedHeaders":
			signed = v
		case "Signature":
			a.signature = v
		}
	}
	var missing []string
	for _, p := range [][2]string{{"Credential", credential}, {"Signature", a.signature}, {"SignedHeaders", signed}} {
		if p[1] == "" {
			missing = append(missing, "Authorization header requires '"+p[0]+"' parameter.")
		}
	}
	if len(missing) > 0 {
		return a, refuse(ReasonMalformed, "%s Authorization=%s", strings.Join(missing, " "), h)
	}
	scope := strings.Split(credential, "/")
	if len(scope) != 5 || scope[4] != "aws4_request" {
		return a, refuse(ReasonMalformed, "Credential should be scoped to a valid region, service and date (<key>/<date>/<region>/<service>/aws4_request). ")
	}
	a.accessKey, a.date, a.region, a.service = scope[0], scope[1], scope[2], scope[3]
	a.signedHeaders = strings.Split(signed, ";")
	return a, nil
}

// Verify checks r, whose body has already been read into body, and returns
// the credentials that signed it, or an *Error.
func (v *Verifier) Verify(r *http.Request, body []byte) (Credentials, error) {
	if r.URL.Query().Has("X-Amz-Signature") {
		return Credentials{}, refuse(ReasonPresigned, "Forbidden")
	}
	a, err := parseAuthorization(r.Header.Get("Authorization"))
	if err != nil {
		return Credentials{}, err
	}
	if a.service != v.Service {
		return Credentials{}, refuse(ReasonBadScope, "Credential should be scoped to correct service: '%s'. ", v.Service)
	}
	if a.region != v.Region {
		return Credentials{}, refuse(ReasonBadScope, "Credential should be scoped to a valid region, not '%s'. ", a.region)
	}
	amzDate := r.Header.Get("X-Amz-Date")
	signedAt, perr := time.Parse(timeFormat, amzDate)
	if perr != nil {
		return Credentials{}, refuse(ReasonMalformed, "Authorization header requires existence of a valid 'X-Amz-Date' header.")
	}
	if d := signedAt.Format("20060102"); d != a.date {
		return Credentials{}, refuse(ReasonBadScope,
			"Date in Credential scope does not match YYYYMMDD from ISO-8601 version of date from HTTP: '%s' != '%s', from '%s'.", a.date, d, amzDate)
	}
	now := time.Now
	if v.Now != nil {
		now = v.Now
	}
	t := now().UTC()
	switch {
	case signedAt.Before(t.Add(-MaxSkew)):
		return Credentials{}, refuse(ReasonExpired, "Signature expired: %s is now earlier than %s (%s - 15 min.)",
			amzDate, t.Add(-MaxSkew).Format(timeFormat), t.Format(timeFormat))
	case signedAt.After(t.Add(MaxSkew)):
		return Credentials{}, refuse(ReasonExpired, "Signature not yet current: %s is still later than %s (%s + 15 min.)",
			amzDate, t.Add(MaxSkew).Format(timeFormat), t.Format(timeFormat))
	}
	if !slices.Contains(a.signedHeaders, "host") {
		return Credentials{}, refuse(ReasonMalformed, "'Host' or ':authority' must be a 'SignedHeader' in the AWS Authorization.")
	}
	creds, ok := v.Lookup(a.accessKey)
	if !ok || creds.SessionToken != r.Header.Get("X-Amz-Security-Token") {
		return Credentials{}, refuse(ReasonUnknownKey, MessageInvalidToken)
	}
	payload, herr := payloadHash(r, body)
	if herr != nil {
		return Credentials{}, herr
	}
	want, serr := v.resign(r, a, creds, payload, signedAt)
	if serr != nil {
		return Credentials{}, serr
	}
	if subtle.ConstantTimeCompare([]byte(want), []byte(a.signature)) != 1 {
		return Credentials{}, refuse(ReasonBadSignature, MessageSignatureMismatch)
	}
	return creds, nil
}

// resign signs a copy of r that carries only the headers the client signed
// with the SDK's signer, for the verifier's service and region at the time
// the client signed, and returns the signature it made.
//
// The SDK's signer signs every header it is given, except the few it never
// signs (User-Agent, X-Amzn-Trace-Id, Expect, Transfer-Encoding), and always
// host and X-Amz-Date: a request whose signed headers differ from what it
// signs (one of those, or no X-Amz-Date, which AWS requires signed when
// present) cannot be checked this way, and is refused.
func (v *Verifier) resign(r *http.Request, a authorization, creds Credentials, payload string, at time.Time) (string, *Error) {
	u := *r.URL
	req := &http.Request{Method: r.Method, URL: &u, Host: r.Host, Header: http.Header{}}
	for _, name := range a.signedHeaders {
		switch name {
		case "host":
		case "content-length":
			// The signer takes it from ContentLength (and signs it when
			// positive), never from the header map.
			req.ContentLength = r.ContentLength
			if n, err := strconv.ParseInt(r.Header.Get("Content-Length"), 10, 64); err == nil {
				req.ContentLength = n
			}
		default:
			req.Header[textproto.CanonicalMIMEHeaderKey(name)] = r.Header.Values(name)
		}
	}
	signer := v4.NewSigner(func(o *v4.SignerOptions) {
		// The token is signed only when the client signed it.
		o.DisableSessionToken = !slices.Contains(a.signedHeaders, "x-amz-security-token")
	})
	sdkCreds := aws.Credentials{AccessKeyID: creds.AccessKeyID, SecretAccessKey: creds.SecretAccessKey, SessionToken: creds.SessionToken}
	if err := signer.SignHTTP(context.Background(), sdkCreds, req, payload, v.Service, v.Region, at); err != nil {
		return "", refuse(ReasonMalformed, "The request cannot be signed again: %v", err)
	}
	got, err := parseAuthorization(req.Header.Get("Authorization"))
	if err != nil {
		return "", err
	}
	if !sameHeaders(got.signedHeaders, a.signedHeaders) {
		return "", refuse(ReasonUnverifiable,
			"SignedHeaders=%s cannot be verified locally: the AWS SDK's signer, which checks it, signs %s for this request.",
			strings.Join(a.signedHeaders, ";"), strings.Join(got.signedHeaders, ";"))
	}
	return got.signature, nil
}

// sameHeaders reports whether two signed-header lists name the same headers.
func sameHeaders(a, b []string) bool {
	a, b = slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(b))
	return slices.Equal(a, b)
}

// payloadHash is the hex SHA-256 of body; an X-Amz-Content-Sha256 header
// that disagrees with the body is a signature mismatch.
func payloadHash(r *http.Request, body []byte) (string, *Error) {
	sum := sha256.Sum256(body)
	h := hex.EncodeToString(sum[:])
	if claimed := r.Header.Get("X-Amz-Content-Sha256"); claimed != "" && claimed != h && claimed != "UNSIGNED-PAYLOAD" {
		return "", refuse(ReasonBadSignature, "The provided 'x-amz-content-sha256' header does not match what was computed.")
	}
	return h, nil
}
