package email

import (
	"net/url"

	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/runner"
)

// passwordResetMail is email.password-reset.v1 as mail: its declaration, its
// template and its link (listed in mailJobs).
var passwordResetMail = mailJob{
	Type:     contract.PasswordReset,
	template: "password-reset",
	purpose:  PurposePasswordReset,
	link: func(base *url.URL, job runner.Job, token string) string {
		return withQuery(base, "reset-password", url.Values{"userId": {job.Envelope.Args["userId"]}, "token": {token}})
	},
}
