package email

import (
	"net/url"

	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/runner"
)

// welcomeMail is email.welcome.v1 as mail: its declaration, its
// template and its link (listed in mailJobs).
var welcomeMail = mailJob{
	Type:     contract.Welcome,
	template: "welcome",
	link:     func(base *url.URL, _ runner.Job, _ string) string { return base.JoinPath("/").String() },
}
