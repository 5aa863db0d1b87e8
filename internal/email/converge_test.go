package email_test

import (
	"testing"

	"github.com/runstwice/runstwice/engine/enginetest"
	"github.com/runstwice/runstwice/internal/email"
	"github.com/runstwice/runstwice/internal/testkit"
)

// Every shipped e-mail type converges: one mail however the job is
// delivered (twice, concurrently, after a crash at each step), at most two
// where a crash fell between the send and the claim.
func TestEveryTypeConverges(t *testing.T) {
	for _, jt := range email.Types() {
		t.Run(jt.Name, func(t *testing.T) {
			tr := &enginetest.Trace{}
			sender := &fakeSender{tr: tr}
			users := newFakeUsers(tr, sendable(jt.Name))
			handlers, err := email.Handlers(email.Config{Users: users, Sender: sender, BaseURL: baseURL})
			if err != nil {
				t.Fatal(err)
			}
			testkit.RunTwice(t, testkit.Case{
				Type:    jt,
				Handler: handlers[jt.Name],
				Args:    jobFor(jt.Name, "u-123").Args,
				Effects: sender.sentFor,
			})
		})
	}
}
