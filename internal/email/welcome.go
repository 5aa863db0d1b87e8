package email

import (
	"github.com/runstwice/runstwice/internal/contract"
	"net/url"

	"github.com/runstwice/runstwice/engine"
)

// Welcome is email.welcome.v1: a welcome mail with a link to the
// application. It carries no token.
//
// Every type declares itself in its own file, beside its handler, so the
// e-mail type files share their form on purpose (docs/job-types.md).
var Welcome = engine.JobType{
	Name:             "email.welcome.v1",
	Args:             []engine.ArgSpec{{Name: "userId", Format: engine.FormatID, Required: true}},
	Queue:            contract.QueueDefault,
	EnabledByDefault: true,
	Bias:             engine.EffectThenClaim,
	Lease:            true,
	KeyPrefix:        "welcome",
	KeyArgs:          []string{"userId"},
}

// welcomeMail is email.welcome.v1 as mail: its declaration, its
// template and its link (listed in mailJobs).
var welcomeMail = mailJob{
	Type:     Welcome,
	template: "welcome",
	link:     func(base *url.URL, _ engine.Job, _ string) string { return base.JoinPath("/").String() },
}
