package devstack

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/enqueue"
	"github.com/runstwice/runstwice/internal/obs"
)

// Every caller rule can be tried locally: X-Caller takes each principal
// form, and the enqueue function behind the local gateway makes of it the
// caller it makes of API Gateway's request context, refusing a federated
// user unless the stack allows them.
func TestXCallerTriesEveryCallerRule(t *testing.T) {
	for _, tc := range []struct {
		xCaller, caller string
		kind            enqueue.PrincipalKind
	}{
		{"alice", "arn:aws:iam::123456789012:user/alice", enqueue.PrincipalIAMUser},
		{"arn:aws:iam::123456789012:user/ci/bob", "arn:aws:iam::123456789012:user/ci/bob", enqueue.PrincipalIAMUser},
		{"arn:aws:iam::123456789012:root", "arn:aws:iam::123456789012:root", enqueue.PrincipalRoot},
		{"arn:aws:sts::123456789012:assumed-role/worker/i-0abc", "arn:aws:sts::123456789012:assumed-role/worker", enqueue.PrincipalAssumedRole},
		{"arn:aws:sts::123456789012:assumed-role/AWSReservedSSO_Support_0123456789abcdef/alice@example.com",
			"arn:aws:sts::123456789012:assumed-role/AWSReservedSSO_Support_0123456789abcdef/alice@example.com", enqueue.PrincipalSSO},
		{"cognito:us-east-1:3f291106-8703-466b-8f2b-3ecee1ca56ce", "cognito:us-east-1:3f291106-8703-466b-8f2b-3ecee1ca56ce", enqueue.PrincipalCognito},
		{"arn:aws:sts::123456789012:federated-user/carol", "arn:aws:sts::123456789012:federated-user/carol", enqueue.PrincipalFederatedUser},
	} {
		t.Run(tc.xCaller, func(t *testing.T) {
			var seen events.APIGatewayV2HTTPRequest
			// The enqueue handler without stores: a refusal is answered
			// before any store is used; anything else is answered 202 here.
			h := &enqueue.Handler{Registry: contract.Registry(), Logger: obs.NewLogger(io.Discard, "error")}
			srv := httptest.NewServer(NewGateway(fnFunc(func(ctx context.Context, p []byte) ([]byte, error) {
				if err := json.Unmarshal(p, &seen); err != nil {
					return nil, err
				}
				if _, kind, _ := enqueue.Principal(seen.RequestContext); kind == enqueue.PrincipalFederatedUser {
					resp, err := h.Handle(ctx, seen)
					if err != nil {
						return nil, err
					}
					return json.Marshal(resp)
				}
				return []byte(`{"statusCode":202,"body":"{}"}`), nil
			})))
			defer srv.Close()
			req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/jobs/email.welcome.v1", strings.NewReader(`{"args":{"userId":"u-1"}}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Idempotency-Key", "k-1")
			req.Header.Set(CallerHeader, tc.xCaller)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			c, kind, ok := enqueue.Principal(seen.RequestContext)
			if !ok || c != tc.caller || kind != tc.kind {
				t.Fatalf("caller %q (%s, %v); want %q (%s)", c, kind, ok, tc.caller, tc.kind)
			}
			want := http.StatusAccepted
			if tc.kind == enqueue.PrincipalFederatedUser {
				want = http.StatusForbidden
			}
			if resp.StatusCode != want || (want == http.StatusForbidden && !strings.Contains(string(b), "AllowFederatedUsers")) {
				t.Fatalf("status %d %s; want %d", resp.StatusCode, b, want)
			}
		})
	}
}
