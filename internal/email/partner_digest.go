package email

import (
	"net/url"

	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/runner"
)

// partnerDigestMail is email.partner-digest.v1 as mail: its declaration, its
// template and its link (listed in mailJobs).
var partnerDigestMail = mailJob{
	Type:     contract.PartnerDigest,
	template: "partner-digest",
	skip: func(u User) string {
		if !u.EmailConfirmed {
			return "address not confirmed; no digest to unconfirmed addresses"
		}
		return ""
	},
	link: func(base *url.URL, job runner.Job, _ string) string {
		return base.JoinPath("partners", "digests", job.Envelope.Args["digestId"]).String()
	},
}
