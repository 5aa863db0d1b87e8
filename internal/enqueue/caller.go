package enqueue

import (
	"regexp"
	"strings"

	"github.com/aws/aws-lambda-go/events"
)

// MaxCallerLen bounds a caller id.
const MaxCallerLen = 512

// ssoRolePrefix starts the name of every role IAM Identity Center creates for
// a permission set (AWSReservedSSO_<permission set>_<hash>).
const ssoRolePrefix = "AWSReservedSSO_"

// PrincipalKind is the kind of principal a request's caller is
// (docs/api.md, "Callers").
type PrincipalKind string

// The principal kinds, each with the caller it becomes (Principal).
const (
	// PrincipalIAMUser: an IAM user, its user ARN.
	PrincipalIAMUser PrincipalKind = "IAM user"
	// PrincipalRoot: the account's root user, arn:aws:iam::<acct>:root.
	PrincipalRoot PrincipalKind = "root user"
	// PrincipalAssumedRole: an assumed role, its role (the session dropped).
	PrincipalAssumedRole PrincipalKind = "assumed role"
	// PrincipalSSO: a person signed in through IAM Identity Center, its
	// role session (the person) kept.
	PrincipalSSO PrincipalKind = "IAM Identity Center user"
	// PrincipalCognito: a Cognito identity pool's identity, cognito:<id>.
	PrincipalCognito PrincipalKind = "Cognito identity"
	// PrincipalFederatedUser: an STS federated user (GetFederationToken),
	// its ARN as is; refused unless the stack allows federated users.
	PrincipalFederatedUser PrincipalKind = "federated user"
	// PrincipalJWT: a JWT authorizer's subject, jwt:<sub>.
	PrincipalJWT PrincipalKind = "JWT subject"
	// PrincipalIAMID: an IAM principal API Gateway gave no ARN for,
	// iam:<account>:<caller id>.
	PrincipalIAMID PrincipalKind = "IAM principal without an ARN"
	// PrincipalOther: another IAM ARN, kept as is.
	PrincipalOther PrincipalKind = "other IAM principal"
)

var (
	// federatedUserARN is an STS federated user's ARN.
	federatedUserARN = regexp.MustCompile(`^arn:aws[a-z-]*:sts::[0-9]{12}:federated-user/`)
	// federatedUserID is a federated user's unique id: <account>:<name>.
	federatedUserID = regexp.MustCompile(`^[0-9]{12}:`)
)

// Caller returns the authenticated principal of a request, the namespace of
// its Idempotency-Keys and jobs (docs/api.md, "Callers"): Principal without
// its kind.
func Caller(rc events.APIGatewayV2HTTPRequestContext) (string, bool) {
	c, _, ok := Principal(rc)
	return c, ok
}

// Principal returns the caller of a request and the kind of principal it
// is:
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
//     refresh and must still see their jobs and replays. IAM users, the
//     root user and federated users keep their ARN (a federated user's name
//     is chosen by whoever minted its token: the handler refuses it unless
//     the stack allows it);
//   - without an ARN, "iam:" with the account id and the caller id (a role's
//     session likewise dropped: without the ARN the role's name is unknown;
//     a caller id <account>:<name> is a federated user's);
//   - else "jwt:" and the JWT authorizer's sub claim (prefixed so that no
//     token subject can pose as an IAM principal).
//
// ok is false when there is none, or it is not printable ASCII of at most
// MaxCallerLen bytes.
func Principal(rc events.APIGatewayV2HTTPRequestContext) (string, PrincipalKind, bool) {
	a := rc.Authorizer
	if a == nil {
		return "", "", false
	}
	c, kind := "", PrincipalKind("")
	switch {
	case a.IAM != nil && a.IAM.CognitoIdentity.IdentityID != "":
		c, kind = "cognito:"+a.IAM.CognitoIdentity.IdentityID, PrincipalCognito
	case a.IAM != nil && a.IAM.UserARN != "":
		c, kind = principalARN(a.IAM.UserARN)
	case a.IAM != nil && a.IAM.AccountID != "" && (a.IAM.CallerID != "" || a.IAM.UserID != ""):
		id := a.IAM.CallerID
		if id == "" {
			id = a.IAM.UserID
		}
		kind = PrincipalIAMID
		switch {
		case strings.HasPrefix(id, "AROA"): // <role id>:<session>
			id, _, _ = strings.Cut(id, ":")
		case federatedUserID.MatchString(id):
			kind = PrincipalFederatedUser
		}
		c = "iam:" + a.IAM.AccountID + ":" + id
	case a.JWT != nil && a.JWT.Claims["sub"] != "":
		c, kind = "jwt:"+a.JWT.Claims["sub"], PrincipalJWT
	}
	if c == "" || len(c) > MaxCallerLen {
		return "", "", false
	}
	for i := 0; i < len(c); i++ {
		if c[i] < 0x20 || c[i] > 0x7e {
			return "", "", false
		}
	}
	return c, kind, true
}

// principalARN is the caller of an IAM ARN and its kind: an assumed role
// drops its session, except an IAM Identity Center role's; any other ARN
// is the principal as is.
func principalARN(arn string) (string, PrincipalKind) {
	parts := strings.SplitN(arn, ":", 6)
	switch {
	case federatedUserARN.MatchString(arn):
		return arn, PrincipalFederatedUser
	case len(parts) != 6:
		return arn, PrincipalOther
	case parts[2] == "iam" && parts[5] == "root":
		return arn, PrincipalRoot
	case parts[2] == "iam" && strings.HasPrefix(parts[5], "user/"):
		return arn, PrincipalIAMUser
	case parts[2] != "sts" || !strings.HasPrefix(parts[5], "assumed-role/"):
		return arn, PrincipalOther
	}
	role := strings.Split(strings.TrimPrefix(parts[5], "assumed-role/"), "/")
	switch {
	case len(role) < 2 || role[0] == "":
		return arn, PrincipalAssumedRole
	case strings.HasPrefix(role[0], ssoRolePrefix):
		return arn, PrincipalSSO
	}
	return strings.Join(parts[:5], ":") + ":assumed-role/" + role[0], PrincipalAssumedRole
}
