package email

import (
	"github.com/runstwice/runstwice/internal/contract"
	"net/url"

	"github.com/runstwice/runstwice/engine"
)

// PasswordReset is email.password-reset.v1: a password-reset link with a
// token made at send time (valid one hour).
//
// Every type declares itself in its own file, beside its handler, so the
// e-mail type files share their form on purpose (docs/job-types.md).
var PasswordReset = engine.JobType{
	Name: "email.password-reset.v1",
	Args: []engine.ArgSpec{
		{Name: "userId", Format: engine.FormatID, Required: true},
		{Name: "countryCode", Format: contract.FormatCountry, Required: true},
	},
	Queue:            contract.QueueCritical,
	EnabledByDefault: true,
	Bias:             engine.EffectThenClaim,
	Lease:            true,
	KeyPrefix:        "password-reset",
	KeyArgs:          []string{"userId"},
}

// passwordResetMail is email.password-reset.v1 as mail: its declaration, its
// template and its link (listed in mailJobs).
var passwordResetMail = mailJob{
	Type:     PasswordReset,
	template: "password-reset",
	purpose:  PurposePasswordReset,
	link: func(base *url.URL, job engine.Job, token string) string {
		return withQuery(base, "reset-password", url.Values{"userId": {job.Envelope.Args["userId"]}, "token": {token}})
	},
}
