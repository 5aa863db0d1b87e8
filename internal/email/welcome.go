package email

import (
	"net/url"

	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/internal/contract"
)

// Welcome is email.welcome.v1: a welcome mail with a link to the
// application. It carries no token.
//
// Every type declares itself in its own file, beside its handler, so the
// e-mail type files share their form on purpose (docs/job-types.md).
var Welcome = contract.JobType{
	Name:             "email.welcome.v1",
	Args:             []contract.ArgSpec{{Name: "userId", Format: contract.FormatID, Required: true}},
	Queue:            contract.QueueDefault,
	EnabledByDefault: true,
	Bias:             contract.EffectThenClaim,
	Lease:            true,
	KeyPrefix:        "welcome",
	KeyArgs:          []string{"userId"},
}

func init() {
	declare(mailJob{
		Type:     Welcome,
		template: "welcome",
		link:     func(base *url.URL, _ engine.Job, _ string) string { return base.JoinPath("/").String() },
	})
}
