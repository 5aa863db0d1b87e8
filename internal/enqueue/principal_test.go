package enqueue_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/runstwice/runstwice/internal/enqueue"
)

// Each kind of principal, in the request context API Gateway sends for it
// (testdata/callers), becomes its caller (docs/api.md's caller table).
func TestEveryPrincipalKindBecomesItsCaller(t *testing.T) {
	for _, tc := range []struct {
		file, caller string
		kind         enqueue.PrincipalKind
	}{
		{"iam-user", "arn:aws:iam::111122223333:user/alice", enqueue.PrincipalIAMUser},
		{"assumed-role", "arn:aws:sts::111122223333:assumed-role/orders-task", enqueue.PrincipalAssumedRole},
		{"sso-role", "arn:aws:sts::111122223333:assumed-role/AWSReservedSSO_SupportAgents_0123456789abcdef/alice@example.com", enqueue.PrincipalSSO},
		{"cognito-identity-pool", "cognito:us-east-1:3f291106-8703-466b-8f2b-3ecee1ca56ce", enqueue.PrincipalCognito},
		{"federated-user", "arn:aws:sts::111122223333:federated-user/alice", enqueue.PrincipalFederatedUser},
		{"federated-user-no-arn", "iam:111122223333:111122223333:alice", enqueue.PrincipalFederatedUser},
		{"root", "arn:aws:iam::111122223333:root", enqueue.PrincipalRoot},
		{"jwt", "jwt:7f3b3c2e-5d1a-4e0b-9a51-2c7d6f0e8a11", enqueue.PrincipalJWT},
	} {
		t.Run(tc.file, func(t *testing.T) {
			c, kind, ok := enqueue.Principal(goldenRequest(t, tc.file).RequestContext)
			if !ok || c != tc.caller || kind != tc.kind {
				t.Fatalf("Principal = %q, %q, %v; want %q, %q", c, kind, ok, tc.caller, tc.kind)
			}
		})
	}
}

// A federated user names itself (any IAM user allowed GetFederationToken
// picks the name), so by default it is refused on every route with a 403
// that names the kind of caller and how a stack allows it, and nothing is
// reserved or sent. With AllowFederatedUsers the name is the caller: its
// jobs are its own, and another name is another caller.
func TestFederatedUsersAreRefusedUnlessAllowed(t *testing.T) {
	for _, file := range []string{"federated-user", "federated-user-no-arn"} {
		t.Run(file+" refused", func(t *testing.T) {
			w := newWorld()
			h := newHandler(w)
			for _, method := range []string{http.MethodPost, http.MethodGet, http.MethodDelete} {
				req := goldenRequest(t, file)
				if method != http.MethodPost {
					req.RequestContext.HTTP.Method, req.RawPath, req.Body = method, "/v1/jobs/5d49b723-717f-530e-8853-d91ffd2b64fc", ""
					req.PathParameters = nil
				}
				resp := call(t, h, req)
				p := checkProblem(t, resp, http.StatusForbidden)
				if p.Type != enqueue.ProblemTypePrefix+enqueue.ProblemCallerRefused ||
					!strings.Contains(p.Detail, "federated user") || !strings.Contains(p.Detail, "AllowFederatedUsers=true") {
					t.Fatalf("%s: problem %+v; want caller-not-accepted naming the kind and AllowFederatedUsers", method, p)
				}
			}
			if len(w.jobs) != 0 || len(w.messages()) != 0 || len(w.requests) != 0 {
				t.Fatalf("a refused caller left %d jobs, %d messages, %d stored requests", len(w.jobs), len(w.messages()), len(w.requests))
			}
		})
	}
	t.Run("allowed", func(t *testing.T) {
		h := newHandler(newWorld())
		h.AllowFederatedUsers = true
		job := mustBody(t, call(t, h, goldenRequest(t, "federated-user")), http.StatusAccepted)
		read := func(r events.APIGatewayV2HTTPRequest) int {
			r.RequestContext.HTTP.Method, r.RawPath, r.Body = http.MethodGet, "/v1/jobs/"+job.JobID, ""
			return call(t, h, r).StatusCode
		}
		if s := read(goldenRequest(t, "federated-user")); s != http.StatusOK {
			t.Fatalf("GET of its own job = %d; want 200", s)
		}
		bob := goldenRequest(t, "federated-user")
		bob.RequestContext.Authorizer.IAM.UserARN = strings.Replace(bob.RequestContext.Authorizer.IAM.UserARN, "/alice", "/bob", 1)
		if s := read(bob); s != http.StatusNotFound {
			t.Fatalf("GET by another federated name = %d; want 404", s)
		}
	})
}
