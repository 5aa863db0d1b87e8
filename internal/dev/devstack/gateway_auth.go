package devstack

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"regexp"
	"strings"

	"github.com/aws/aws-lambda-go/events"

	"github.com/runstwice/runstwice/internal/dev/moto"
	"github.com/runstwice/runstwice/internal/dev/sigv4"
)

// LocalIdentity is a test identity whose SigV4 signatures the local gateway
// accepts, standing in for an IAM principal of the account.
type LocalIdentity struct {
	sigv4.Credentials
	// ARN is what API Gateway reports as the caller's userArn: an IAM user
	// ARN, or an assumed-role session's STS ARN (session included).
	ARN string
}

// LocalIdentities are the credentials the local gateway verifies signed
// requests against: moto's test/test (the default caller, so a signed and
// an unsigned local request are the same caller), and sessions of two
// assumed roles, so a test can act as different callers, or as two sessions
// of one role.
var LocalIdentities = []LocalIdentity{
	{sigv4.Credentials{AccessKeyID: moto.AccessKeyID, SecretAccessKey: moto.SecretAccessKey},
		"arn:aws:iam::" + LocalAccount + ":user/" + DefaultCaller},
	{sigv4.Credentials{AccessKeyID: "ASIALOCALPRODUCER1", SecretAccessKey: "local-producer-secret-1", SessionToken: "local-producer-token-1"},
		"arn:aws:sts::" + LocalAccount + ":assumed-role/local-producer/session-1"},
	{sigv4.Credentials{AccessKeyID: "ASIALOCALPRODUCER2", SecretAccessKey: "local-producer-secret-2", SessionToken: "local-producer-token-2"},
		"arn:aws:sts::" + LocalAccount + ":assumed-role/local-producer/session-2"},
	{sigv4.Credentials{AccessKeyID: "ASIALOCALOTHERROLE", SecretAccessKey: "local-other-secret", SessionToken: "local-other-token"},
		"arn:aws:sts::" + LocalAccount + ":assumed-role/local-other/session-1"},
}

// localVerifier checks signatures for execute-api in the local region.
var localVerifier = &sigv4.Verifier{
	Service: "execute-api",
	Region:  moto.Region,
	Lookup: func(key string) (sigv4.Credentials, bool) {
		for _, id := range LocalIdentities {
			if id.AccessKeyID == key {
				return id.Credentials, true
			}
		}
		return sigv4.Credentials{}, false
	},
}

// principalARN is the ARN of every kind of IAM principal API Gateway
// reports: an IAM user (with its path), the account's root user, an
// assumed-role session (an IAM Identity Center role's too), an STS
// federated user.
var principalARN = regexp.MustCompile(`^arn:aws:(?:iam::(\d{12}):(?:user/(?:[\w+=,.@-]+/)*[\w+=,.@-]{1,64}|root)|sts::(\d{12}):(?:assumed-role/[\w+=,.@-]{1,64}/[\w+=,.@-]{2,64}|federated-user/[\w+=,.@-]{2,32}))$`)

// cognitoCaller is X-Caller naming a Cognito identity pool's identity:
// cognito:<identity id>.
var cognitoCaller = regexp.MustCompile(`^cognito:([a-z]{2}(?:-[a-z]+)+-[0-9]:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$`)

// callerForms is what X-Caller may hold, for the 403 that refuses another.
const callerForms = CallerHeader + " must be a name, cognito:<identity id>, or an IAM ARN: arn:aws:iam::<account>:user/<name>, " +
	"arn:aws:iam::<account>:root, arn:aws:sts::<account>:assumed-role/<role>/<session> (AWSReservedSSO_… for IAM Identity Center), " +
	"or arn:aws:sts::<account>:federated-user/<name>"

// LocalCognitoRole is the role every identity of the local Cognito pool
// signs with, under one session name, as a real pool's do.
const LocalCognitoRole = "arn:aws:sts::" + LocalAccount + ":assumed-role/local-cognito-pool/CognitoIdentityCredentials"

// authorize is API Gateway's IAM authorization of a request: a signed one is
// verified against LocalIdentities; an unsigned one names its caller in
// X-Caller (a bare name is an IAM user of the local account, a full ARN of
// any principal kind is taken as is, cognito:<identity id> is an identity
// of the local Cognito pool; DefaultCaller without it). A refused request is answered
// with 403 here, and the function is never invoked.
func authorize(w http.ResponseWriter, r *http.Request, body []byte) (*events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription, bool) {
	iam, err := caller(r, body)
	if err != nil {
		msg := err.Error()
		if se := (*sigv4.Error)(nil); errors.As(err, &se) {
			msg = se.Message
		}
		b, _ := json.Marshal(map[string]string{"message": msg})
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Amzn-Errortype", "ForbiddenException")
		w.WriteHeader(http.StatusForbidden)
		_, _ = w.Write(b)
		return nil, false
	}
	return iam, true
}

// caller is the IAM principal of r, as API Gateway reports it.
func caller(r *http.Request, body []byte) (*events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription, error) {
	if sigv4.Signed(r) {
		creds, err := localVerifier.Verify(r, body)
		if err != nil {
			return nil, err
		}
		for _, id := range LocalIdentities {
			if id.AccessKeyID == creds.AccessKeyID {
				return iamAuthorizer(id.ARN, id.AccessKeyID), nil
			}
		}
	}
	name := r.Header.Get(CallerHeader)
	switch {
	case name == "":
		name = DefaultCaller
	case strings.HasPrefix(name, "arn:"):
		if !principalARN.MatchString(name) {
			return nil, errors.New(callerForms)
		}
		return iamAuthorizer(name, "ASIALOCALEXAMPLE"), nil
	case strings.HasPrefix(name, "cognito:"):
		m := cognitoCaller.FindStringSubmatch(name)
		if m == nil {
			return nil, errors.New(callerForms)
		}
		iam := iamAuthorizer(LocalCognitoRole, "ASIALOCALCOGNITO")
		iam.CognitoIdentity = events.APIGatewayV2HTTPRequestContextAuthorizerCognitoIdentity{
			IdentityID: m[1], IdentityPoolID: moto.Region + ":00000000-0000-4000-8000-00000000c091", AMR: []string{"authenticated"},
		}
		return iam, nil
	}
	return iamAuthorizer("arn:aws:iam::"+LocalAccount+":user/"+name, "ASIALOCALEXAMPLE"), nil
}

// iamAuthorizer is what API Gateway puts in requestContext.authorizer.iam for
// a request signed by the principal arn with accessKey: for a user its ARN
// and unique id (AIDA…), for an assumed-role session the session's ARN and
// the role's unique id (AROA…) with the session name, for a federated user
// <account>:<name>, for the root user the account id.
func iamAuthorizer(arn, accessKey string) *events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription {
	account, id := LocalAccount, ""
	if m := principalARN.FindStringSubmatch(arn); m != nil {
		account = m[1] + m[2]
	}
	role, isRole := strings.CutPrefix(arn, "arn:aws:sts::"+account+":assumed-role/")
	federated, isFederated := strings.CutPrefix(arn, "arn:aws:sts::"+account+":federated-user/")
	switch {
	case isRole:
		name, session, _ := strings.Cut(role, "/")
		id = uniqueID("AROA", name) + ":" + session
	case isFederated:
		id = account + ":" + federated
	case arn == "arn:aws:iam::"+account+":root":
		id = account
	default:
		id = uniqueID("AIDA", arn)
	}
	return &events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription{
		AccessKey: accessKey,
		AccountID: account,
		CallerID:  id,
		UserARN:   arn,
		UserID:    id,
	}
}

// uniqueID is a stable stand-in for an IAM unique id (prefix + 17 characters).
func uniqueID(prefix, of string) string {
	sum := sha256.Sum256([]byte(of))
	return prefix + strings.ToUpper(hex.EncodeToString(sum[:]))[:17]
}
