package enqueue

import (
	"strings"

	"github.com/aws/aws-lambda-go/events"
)

// MaxCallerLen bounds a caller id.
const MaxCallerLen = 512

// ssoRolePrefix starts the name of every role IAM Identity Center creates for
// a permission set (AWSReservedSSO_<permission set>_<hash>).
const ssoRolePrefix = "AWSReservedSSO_"

// Caller returns the authenticated principal of a request, the namespace of
// its Idempotency-Keys and jobs (docs/api.md, "Callers"):
//
//   - a Cognito identity pool's caller is "cognito:" and its identity id,
//     from requestContext.authorizer.iam.cognitoIdentity: every identity of a
//     pool signs with the one role of the pool, under one session name, so
//     the role would make all the pool's users one caller;
//   - else the IAM ARN API Gateway puts in requestContext.authorizer.iam.
//     An IAM Identity Center role (assumed-role/AWSReservedSSO_…/<session>)
//     keeps its session, the person signed in: every user of a permission
//     set assumes the same role. Any other assumed role drops its session:
//     arn:aws:sts::<acct>:assumed-role/<role>/<session> is the caller
//     arn:aws:sts::<acct>:assumed-role/<role>, because ECS tasks, Lambda
//     functions and CI jobs get a new session name on every credential
//     refresh and must still see their jobs and replays. IAM users keep
//     their user ARN;
//   - without an ARN, "iam:" with the account id and the caller id (a role's
//     session likewise dropped: without the ARN the role's name is unknown);
//   - else "jwt:" and the JWT authorizer's sub claim (prefixed so that no
//     token subject can pose as an IAM principal).
//
// ok is false when there is none, or it is not printable ASCII of at most
// MaxCallerLen bytes.
func Caller(rc events.APIGatewayV2HTTPRequestContext) (string, bool) {
	a := rc.Authorizer
	if a == nil {
		return "", false
	}
	c := ""
	switch {
	case a.IAM != nil && a.IAM.CognitoIdentity.IdentityID != "":
		c = "cognito:" + a.IAM.CognitoIdentity.IdentityID
	case a.IAM != nil && a.IAM.UserARN != "":
		c = principalARN(a.IAM.UserARN)
	case a.IAM != nil && a.IAM.AccountID != "" && (a.IAM.CallerID != "" || a.IAM.UserID != ""):
		id := a.IAM.CallerID
		if id == "" {
			id = a.IAM.UserID
		}
		if strings.HasPrefix(id, "AROA") { // <role id>:<session>
			id, _, _ = strings.Cut(id, ":")
		}
		c = "iam:" + a.IAM.AccountID + ":" + id
	case a.JWT != nil && a.JWT.Claims["sub"] != "":
		c = "jwt:" + a.JWT.Claims["sub"]
	}
	if c == "" || len(c) > MaxCallerLen {
		return "", false
	}
	for i := 0; i < len(c); i++ {
		if c[i] < 0x20 || c[i] > 0x7e {
			return "", false
		}
	}
	return c, true
}

// principalARN drops the session of an assumed-role ARN, except an IAM
// Identity Center role's; any other ARN is the principal as is.
func principalARN(arn string) string {
	parts := strings.SplitN(arn, ":", 6)
	if len(parts) != 6 || parts[2] != "sts" || !strings.HasPrefix(parts[5], "assumed-role/") {
		return arn
	}
	role := strings.Split(strings.TrimPrefix(parts[5], "assumed-role/"), "/")
	if len(role) < 2 || role[0] == "" || strings.HasPrefix(role[0], ssoRolePrefix) {
		return arn
	}
	return strings.Join(parts[:5], ":") + ":assumed-role/" + role[0]
}
