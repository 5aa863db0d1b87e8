package email

import (
	"net/url"

	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/runner"
)

// partnerVerificationMail is email.partner-verification.v1 as mail: its
// declaration, its template and its link (listed in mailJobs).
var partnerVerificationMail = mailJob{
	Type:     contract.PartnerVerification,
	template: "partner-verification",
	purpose:  PurposeVerification,
	skip: func(u User) string {
		if u.EmailConfirmed {
			return "address already confirmed"
		}
		return ""
	},
	link: func(base *url.URL, job runner.Job, token string) string {
		return withQuery(base, "verify-email", url.Values{"userId": {job.Envelope.Args["userId"]}, "token": {token}})
	},
}
