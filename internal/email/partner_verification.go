package email

import (
	"github.com/runstwice/runstwice/internal/contract"
	"net/url"

	"github.com/runstwice/runstwice/engine"
)

// PartnerVerification is email.partner-verification.v1: the mail that asks a
// new partner to confirm their address. It carries a verification token
// (made at send time, 48 hours) and is unnecessary once the address is
// confirmed.
//
// Every type declares itself in its own file, beside its handler, so the
// e-mail type files share their form on purpose (docs/job-types.md).
var PartnerVerification = engine.JobType{
	Name: "email.partner-verification.v1",
	Args: []engine.ArgSpec{
		{Name: "userId", Format: engine.FormatID, Required: true},
		{Name: "roleCode", Format: engine.FormatID, Required: true, MaxLen: 32},
		{Name: "countryCode", Format: contract.FormatCountry, Required: true},
	},
	Queue:            contract.QueueCritical,
	EnabledByDefault: true,
	Bias:             engine.EffectThenClaim,
	Lease:            true,
	KeyPrefix:        "partner-verification",
	KeyArgs:          []string{"userId"},
}

// partnerVerificationMail is email.partner-verification.v1 as mail: its
// declaration, its template and its link (listed in mailJobs).
var partnerVerificationMail = mailJob{
	Type:     PartnerVerification,
	template: "partner-verification",
	purpose:  PurposeVerification,
	skip: func(u User) string {
		if u.EmailConfirmed {
			return "address already confirmed"
		}
		return ""
	},
	link: func(base *url.URL, job engine.Job, token string) string {
		return withQuery(base, "verify-email", url.Values{"userId": {job.Envelope.Args["userId"]}, "token": {token}})
	},
}
