package email

import (
	"net/url"

	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/internal/contract"
)

// welcomeMail is email.welcome.v1 as mail: its declaration, its
// template and its link (listed in mailJobs).
var welcomeMail = mailJob{
	Type:     contract.Welcome,
	template: "welcome",
	link:     func(base *url.URL, _ engine.Job, _ string) string { return base.JoinPath("/").String() },
}
