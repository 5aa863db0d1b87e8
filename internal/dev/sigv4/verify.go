// Package sigv4 verifies AWS Signature Version 4 on HTTP requests the way an
// AWS front door does (API Gateway's IAM authorization, for the local stack):
// it rebuilds the canonical request from what arrived, derives the signing
// key from the secret of the access key named in the Authorization header,
// and compares signatures. Refusals carry the messages AWS answers with.
//
// Only the header form (Authorization: AWS4-HMAC-SHA256 …) is verified;
// presigned query strings are refused.
package sigv4

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/aws/smithy-go/encoding/httpbinding"
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
	canonical := CanonicalRequest(r, a.signedHeaders, payload)
	want := Signature(creds.SecretAccessKey, signedAt, v.Region, v.Service, canonical)
	if !hmac.Equal([]byte(want), []byte(a.signature)) {
		return Credentials{}, refuse(ReasonBadSignature, MessageSignatureMismatch)
	}
	return creds, nil
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

// CanonicalRequest is the SigV4 canonical request of r over the signed
// headers (lower case) and the payload hash: method, URI (escaped once more,
// as for every service but S3), sorted query, canonical headers, signed
// header list and payload hash.
func CanonicalRequest(r *http.Request, signedHeaders []string, payloadHash string) string {
	path := r.URL.EscapedPath()
	if path == "" {
		path = "/"
	}
	names := append([]string(nil), signedHeaders...)
	sort.Strings(names)
	var headers strings.Builder
	for _, name := range names {
		headers.WriteString(name)
		headers.WriteByte(':')
		headers.WriteString(headerValue(r, name))
		headers.WriteByte('\n')
	}
	return strings.Join([]string{
		r.Method,
		httpbinding.EscapePath(path, false),
		canonicalQuery(r.URL.Query()),
		headers.String(),
		strings.Join(names, ";"),
		payloadHash,
	}, "\n")
}

// headerValue is the canonical value of a signed header: its values
// trimmed, inner runs of spaces collapsed, joined by commas.
func headerValue(r *http.Request, name string) string {
	var values []string
	switch name {
	case "host":
		values = []string{r.Host}
	case "content-length":
		values = r.Header.Values(name)
		if len(values) == 0 && r.ContentLength > 0 {
			values = []string{strconv.FormatInt(r.ContentLength, 10)}
		}
	default:
		values = r.Header.Values(name)
	}
	out := make([]string, len(values))
	for i, v := range values {
		out[i] = strings.Join(strings.Fields(v), " ")
	}
	return strings.Join(out, ",")
}

// canonicalQuery is the query sorted by name then value, each part
// percent-encoded with every character outside A-Z a-z 0-9 - _ . ~.
func canonicalQuery(q url.Values) string {
	type param struct{ k, v string }
	var ps []param
	for k, vs := range q {
		for _, v := range vs {
			ps = append(ps, param{escape(k), escape(v)})
		}
	}
	sort.Slice(ps, func(i, j int) bool {
		if ps[i].k != ps[j].k {
			return ps[i].k < ps[j].k
		}
		return ps[i].v < ps[j].v
	})
	parts := make([]string, len(ps))
	for i, p := range ps {
		parts[i] = p.k + "=" + p.v
	}
	return strings.Join(parts, "&")
}

func escape(s string) string { return strings.ReplaceAll(url.QueryEscape(s), "+", "%20") }

// Signature is the hex signature of a canonical request signed at t with
// secret for region and service.
func Signature(secret string, t time.Time, region, service, canonicalRequest string) string {
	t = t.UTC()
	day := t.Format("20060102")
	sum := sha256.Sum256([]byte(canonicalRequest))
	toSign := strings.Join([]string{
		Algorithm, t.Format(timeFormat), day + "/" + region + "/" + service + "/aws4_request", hex.EncodeToString(sum[:]),
	}, "\n")
	key := []byte("AWS4" + secret)
	for _, part := range []string{day, region, service, "aws4_request"} {
		key = mac(key, part)
	}
	return hex.EncodeToString(mac(key, toSign))
}

func mac(key []byte, data string) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(data))
	return h.Sum(nil)
}
