package email

import (
	"net/url"

	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/internal/contract"
)

// PasswordReset is email.password-reset.v1: a password-reset link with a
// token made at send time (valid one hour).
//
// Every type declares itself in its own file, beside its handler, so the
// e-mail type files share their form on purpose (docs/job-types.md).
var PasswordReset = contract.JobType{
	Name: "email.password-reset.v1",
	Args: []contract.ArgSpec{
		{Name: "userId", Format: contract.FormatID, Required: true},
		{Name: "countryCode", Format: contract.FormatCountry, Required: true},
	},
	Queue:            contract.QueueCritical,
	EnabledByDefault: true,
	Bias:             contract.EffectThenClaim,
	Lease:            true,
	KeyPrefix:        "password-reset",
	KeyArgs:          []string{"userId"},
}

func init() {
	declare(mailJob{
		Type:     PasswordReset,
		template: "password-reset",
		purpose:  PurposePasswordReset,
		link: func(base *url.URL, job engine.Job, token string) string {
			return withQuery(base, "reset-password", url.Values{"userId": {job.Envelope.Args["userId"]}, "token": {token}})
		},
	})
}
