package email

import (
	"github.com/runstwice/runstwice/internal/contract"
	"net/url"

	"github.com/runstwice/runstwice/engine"
)

// PartnerDigest is email.partner-digest.v1: a partner's weekly digest
// (digestId is an ISO week such as 2026-W48), sent only to confirmed
// addresses. It is fail-closed: it runs only while its switch
// /runstwice/<stage>/toggles/email.partner-digest.v1 says on, so
// template.yaml creates that parameter set to false.
//
// Every type declares itself in its own file, beside its handler, so the
// e-mail type files share their form on purpose (docs/job-types.md).
var PartnerDigest = engine.JobType{
	Name: "email.partner-digest.v1",
	Args: []engine.ArgSpec{
		{Name: "userId", Format: engine.FormatID, Required: true},
		{Name: "digestId", Format: contract.FormatISOWeek, Required: true, MaxLen: 8},
	},
	Queue:            contract.QueueBulk,
	EnabledByDefault: false,
	Bias:             engine.EffectThenClaim,
	Lease:            true,
	KeyPrefix:        "partner-digest",
	KeyArgs:          []string{"userId", "digestId"},
}

// partnerDigestMail is email.partner-digest.v1 as mail: its declaration, its
// template and its link (listed in mailJobs).
var partnerDigestMail = mailJob{
	Type:     PartnerDigest,
	template: "partner-digest",
	skip: func(u User) string {
		if !u.EmailConfirmed {
			return "address not confirmed; no digest to unconfirmed addresses"
		}
		return ""
	},
	link: func(base *url.URL, job engine.Job, _ string) string {
		return base.JoinPath("partners", "digests", job.Envelope.Args["digestId"]).String()
	},
}
