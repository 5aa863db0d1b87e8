package devstack

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/runstwice/runstwice/internal/dev/moto"
)

// authCase is one request through the gateway and what the function saw.
type authCase struct {
	name    string
	creds   *aws.Credentials // sign with these when set
	caller  string           // X-Caller
	status  int
	userARN string // what the function must see (when status is 202)
	account string
	// callerID, when set, is the callerId the function must see;
	// identityID the Cognito identity id.
	callerID, identityID string
	message              string // part of the 403 body
}

func TestGatewayTakesTheCallerFromTheSignatureOrXCaller(t *testing.T) {
	producer1 := aws.Credentials{AccessKeyID: LocalIdentities[1].AccessKeyID, SecretAccessKey: LocalIdentities[1].SecretAccessKey, SessionToken: LocalIdentities[1].SessionToken}
	wrong := producer1
	wrong.SecretAccessKey = "not-the-secret"
	unknown := aws.Credentials{AccessKeyID: "AKIAUNKNOWN", SecretAccessKey: "x"}
	testCreds := aws.Credentials{AccessKeyID: moto.AccessKeyID, SecretAccessKey: moto.SecretAccessKey}
	cases := []authCase{
		{name: "signed with test/test is the default local user", creds: &testCreds, status: 202,
			userARN: "arn:aws:iam::123456789012:user/local-user", account: LocalAccount},
		{name: "signed by an assumed-role session", creds: &producer1, status: 202,
			userARN: "arn:aws:sts::123456789012:assumed-role/local-producer/session-1", account: LocalAccount},
		{name: "a signature wins over X-Caller", creds: &producer1, caller: "mallory", status: 202,
			userARN: "arn:aws:sts::123456789012:assumed-role/local-producer/session-1", account: LocalAccount},
		{name: "wrong secret", creds: &wrong, status: 403, message: "signature we calculated does not match"},
		{name: "unknown access key", creds: &unknown, status: 403, message: "security token included in the request is invalid"},
		{name: "unsigned bare name", caller: "alice", status: 202, userARN: "arn:aws:iam::123456789012:user/alice", account: LocalAccount},
		{name: "unsigned default", status: 202, userARN: "arn:aws:iam::123456789012:user/local-user", account: LocalAccount},
		{name: "unsigned user ARN as is", caller: "arn:aws:iam::210987654321:user/ci/bob", status: 202,
			userARN: "arn:aws:iam::210987654321:user/ci/bob", account: "210987654321"},
		{name: "unsigned assumed-role ARN as is", caller: "arn:aws:sts::123456789012:assumed-role/worker/i-0abc", status: 202,
			userARN: "arn:aws:sts::123456789012:assumed-role/worker/i-0abc", account: LocalAccount},
		{name: "unsigned SSO role session as is", caller: "arn:aws:sts::123456789012:assumed-role/AWSReservedSSO_Support_0123456789abcdef/alice@example.com", status: 202,
			userARN: "arn:aws:sts::123456789012:assumed-role/AWSReservedSSO_Support_0123456789abcdef/alice@example.com", account: LocalAccount},
		{name: "unsigned federated user as is", caller: "arn:aws:sts::210987654321:federated-user/bob", status: 202,
			userARN: "arn:aws:sts::210987654321:federated-user/bob", account: "210987654321", callerID: "210987654321:bob"},
		{name: "unsigned root user as is", caller: "arn:aws:iam::123456789012:root", status: 202,
			userARN: "arn:aws:iam::123456789012:root", account: LocalAccount, callerID: LocalAccount},
		{name: "unsigned Cognito identity", caller: "cognito:us-east-1:3f291106-8703-466b-8f2b-3ecee1ca56ce", status: 202,
			userARN: LocalCognitoRole, account: LocalAccount, identityID: "us-east-1:3f291106-8703-466b-8f2b-3ecee1ca56ce"},
		{name: "unsigned malformed ARN", caller: "arn:aws:iam::1:role/x", status: 403, message: "X-Caller must be a name, cognito:<identity id>, or an IAM ARN"},
		{name: "unsigned malformed Cognito identity", caller: "cognito:alice", status: 403, message: "federated-user/<name>"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got *events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription
			invoked := false
			srv := httptest.NewServer(NewGateway(fnFunc(func(_ context.Context, p []byte) ([]byte, error) {
				invoked = true
				var ev events.APIGatewayV2HTTPRequest
				if err := json.Unmarshal(p, &ev); err != nil {
					return nil, err
				}
				got = ev.RequestContext.Authorizer.IAM
				return []byte(`{"statusCode":202,"body":"{}"}`), nil
			})))
			defer srv.Close()
			body := `{"args":{"userId":"u-1"}}`
			req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/jobs/email.welcome.v1", strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Idempotency-Key", "k-1")
			if tc.caller != "" {
				req.Header.Set(CallerHeader, tc.caller)
			}
			if tc.creds != nil {
				sum := sha256.Sum256([]byte(body))
				if err := v4.NewSigner().SignHTTP(context.Background(), *tc.creds, req, hex.EncodeToString(sum[:]), "execute-api", moto.Region, time.Now()); err != nil {
					t.Fatal(err)
				}
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d %s; want %d", resp.StatusCode, b, tc.status)
			}
			if tc.status == http.StatusForbidden {
				if invoked {
					t.Fatal("the function was invoked for a refused request")
				}
				var m struct{ Message string }
				if json.Unmarshal(b, &m) != nil || !strings.Contains(m.Message, tc.message) {
					t.Fatalf("403 body %s; want a message containing %q", b, tc.message)
				}
				return
			}
			if got == nil || got.UserARN != tc.userARN || got.AccountID != tc.account || got.CallerID == "" || got.UserID != got.CallerID {
				t.Fatalf("authorizer.iam %+v; want userArn %s in account %s", got, tc.userARN, tc.account)
			}
			if (tc.callerID != "" && got.CallerID != tc.callerID) || got.CognitoIdentity.IdentityID != tc.identityID {
				t.Fatalf("authorizer.iam %+v; want callerId %q, Cognito identity %q", got, tc.callerID, tc.identityID)
			}
			if strings.Contains(tc.userARN, ":assumed-role/") && !(strings.HasPrefix(got.CallerID, "AROA") && strings.HasSuffix(got.CallerID, ":"+tc.userARN[strings.LastIndex(tc.userARN, "/")+1:])) {
				t.Fatalf("callerId %q; want AROA…:<session>", got.CallerID)
			}
		})
	}
}

func TestTwoSessionsOfOneRoleShareTheRoleID(t *testing.T) {
	a := iamAuthorizer(LocalIdentities[1].ARN, LocalIdentities[1].AccessKeyID)
	b := iamAuthorizer(LocalIdentities[2].ARN, LocalIdentities[2].AccessKeyID)
	other := iamAuthorizer(LocalIdentities[3].ARN, LocalIdentities[3].AccessKeyID)
	role := func(id string) string { r, _, _ := strings.Cut(id, ":"); return r }
	if role(a.CallerID) != role(b.CallerID) || a.CallerID == b.CallerID || role(a.CallerID) == role(other.CallerID) {
		t.Fatalf("caller ids %q %q %q: one role's sessions share the role id, another role does not", a.CallerID, b.CallerID, other.CallerID)
	}
}
