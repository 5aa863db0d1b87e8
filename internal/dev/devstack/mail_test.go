package devstack

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sesv2"
	"github.com/aws/aws-sdk-go-v2/service/sesv2/types"

	"github.com/runstwice/runstwice/internal/dev/awsproxy"
	"github.com/runstwice/runstwice/internal/dev/moto"
)

// TestMailboxRecordsWhatSESAccepts: the SDK's own SendEmail request, passed
// through the proxy, is recorded with its recipients, subject, link and
// job id, once SES accepted it; a refused one is not.
func TestMailboxRecordsWhatSESAccepts(t *testing.T) {
	refuse := false
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		if refuse {
			w.Header().Set("X-Amzn-Errortype", "MessageRejected")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, `{"message":"rejected"}`)
			return
		}
		_, _ = io.WriteString(w, `{"MessageId":"ses-1"}`)
	}))
	defer upstream.Close()
	var printed []Mail
	mb := &Mailbox{OnMail: func(m Mail) { printed = append(printed, m) }}
	srv, err := awsproxy.Start(upstream.URL, mb.Hook)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	client := sesv2.NewFromConfig(moto.Config(srv.URL, moto.Region))
	send := func() error {
		_, err := client.SendEmail(context.Background(), &sesv2.SendEmailInput{
			FromEmailAddress: aws.String("no-reply@example.com"),
			Destination:      &types.Destination{ToAddresses: []string{"demo1@example.com"}},
			Content: &types.EmailContent{Simple: &types.Message{
				Subject: &types.Content{Data: aws.String("Confirm")},
				Body: &types.Body{Text: &types.Content{Data: aws.String("text")},
					Html: &types.Content{Data: aws.String(`<a href="https://app.example.com/verify?a=1&amp;token=t">go</a>`)}},
			}},
			EmailTags: []types.MessageTag{{Name: aws.String("jobId"), Value: aws.String("job-1")}},
		})
		return err
	}
	if err := send(); err != nil {
		t.Fatal(err)
	}
	refuse = true
	if err := send(); err == nil {
		t.Fatal("the refused send succeeded")
	}
	got := mb.Recent(10)
	if len(got) != 1 || len(printed) != 1 {
		t.Fatalf("recorded %+v, printed %d; want the accepted mail only", got, len(printed))
	}
	m := got[0]
	if m.MessageID != "ses-1" || m.JobID != "job-1" || m.From != "no-reply@example.com" || strings.Join(m.To, ",") != "demo1@example.com" ||
		m.Subject != "Confirm" || m.Link != "https://app.example.com/verify?a=1&token=t" || m.Time.IsZero() {
		t.Fatalf("mail %+v", m)
	}
}

func TestMailboxKeepsTheLatest(t *testing.T) {
	var mb Mailbox
	for i := range mailboxSize + 5 {
		mb.add(Mail{Subject: fmt.Sprint(i)})
	}
	got := mb.Recent(3)
	if len(got) != 3 || got[0].Subject != fmt.Sprint(mailboxSize+2) || got[2].Subject != fmt.Sprint(mailboxSize+4) {
		t.Fatalf("Recent(3) = %+v; want the last three, oldest first", got)
	}
	if n := len(mb.Recent(5000)); n != mailboxSize {
		t.Fatalf("Recent(5000) = %d mails; want the %d kept", n, mailboxSize)
	}
	if mb.Total() != mailboxSize+5 || len(mb.Recent(-1)) != 0 {
		t.Fatalf("Total %d", mb.Total())
	}
	var few Mailbox
	few.add(Mail{Subject: "a"})
	few.add(Mail{Subject: "b"})
	if got := few.Recent(5); len(got) != 2 || got[0].Subject != "a" || got[1].Subject != "b" {
		t.Fatalf("Recent(5) of 2 = %+v", got)
	}
}

func TestReporterPrintsOneLinePerOutcome(t *testing.T) {
	var out bytes.Buffer
	r := NewReporter(&out)
	r.now = func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) }
	app := r.OutcomeWriter(io.Discard)
	r.Mail(Mail{To: []string{"a@example.com"}, Subject: "Hi", Link: "https://x", JobID: "j1", Time: r.now()})
	for _, line := range []string{
		`{"level":"INFO","msg":"job outcome","outcome":"succeeded","jobId":"j1","type":"email.welcome.v1","function":"email"}`,
		`{"level":"INFO","msg":"job outcome","outcome":"noop","reason":"no mail needed: user not found","jobId":"j2","type":"email.welcome.v1"}`,
		`{"level":"WARN","msg":"job outcome","outcome":"parked","reason":"switched off","jobId":"j3","type":"email.welcome.v1"}`,
		`{"level":"ERROR","msg":"job outcome","outcome":"dead-lettered","reason":"invalid JSON","jobId":"","type":""}`,
		`{"level":"INFO","msg":"job outcome","outcome":"something-new","jobId":"j5","type":"t"}`,
		`{"level":"INFO","msg":"job outcome","outcome":"succeeded","jobId":"j6","type":"t"}`,
		`{"level":"INFO","msg":"mail sent","jobId":"j1"}`,
		`{"level":"INFO","msg":"job outcome"}`,
		`not json but says job outcome`,
	} {
		if _, err := app.Write([]byte(line + "\n")); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{
		`03:04:05  mail sent      to=a@example.com  subject="Hi"  link=https://x  job=j1`,
		`03:04:05  noop           email.welcome.v1  job=j2  reason="no mail needed: user not found"`,
		`03:04:05  parked         email.welcome.v1  job=j3  reason="switched off"`,
		`03:04:05  dead-lettered  -  job=-  reason="invalid JSON"`,
		`03:04:05  something-new  t  job=j5`,
		`03:04:05  succeeded      t  job=j6`,
	}
	if got := strings.TrimSpace(out.String()); got != strings.Join(want, "\n") {
		t.Fatalf("printed:\n%s\nwant:\n%s", got, strings.Join(want, "\n"))
	}
}

// runstwice's own jobs (a sweep's tick, a batch's finisher) are the
// user's noise while they go well: `make run` prints them only when they
// go wrong, or every one with ShowInternal (--show-internal).
func TestReporterLeavesOutRunstwicesOwnJobsThatWentWell(t *testing.T) {
	lines := []string{
		`{"level":"INFO","msg":"job outcome","outcome":"succeeded","jobId":"j1","type":"runstwice.continuation-sweep.v1"}`,
		`{"level":"INFO","msg":"job outcome","outcome":"succeeded","jobId":"j2","type":"runstwice.batch-finish.v1"}`,
		`{"level":"INFO","msg":"job outcome","outcome":"skipped","jobId":"j3","type":"runstwice.schedule-sweep.v1"}`,
		`{"level":"ERROR","msg":"job outcome","outcome":"dead-lettered","reason":"permanent: boom","jobId":"j4","type":"runstwice.batch-finish.v1"}`,
		`{"level":"INFO","msg":"job outcome","outcome":"succeeded","jobId":"j5","type":"webhook.deliver.v1"}`,
	}
	for _, tc := range []struct {
		show bool
		want []string
	}{
		{false, []string{"j4", "j5"}},
		{true, []string{"j1", "j2", "j3", "j4", "j5"}},
	} {
		var out bytes.Buffer
		r := NewReporter(&out)
		r.ShowInternal = tc.show
		app := r.OutcomeWriter(io.Discard)
		for _, l := range lines {
			if _, err := app.Write([]byte(l + "\n")); err != nil {
				t.Fatal(err)
			}
		}
		var got []string
		for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
			_, job, _ := strings.Cut(l, "job=")
			got = append(got, strings.Fields(job)[0])
		}
		if strings.Join(got, " ") != strings.Join(tc.want, " ") {
			t.Errorf("ShowInternal=%v printed the jobs %q; want %q:\n%s", tc.show, got, tc.want, out.String())
		}
	}
}

// What the stack's parts log beside the job lines (the web view's switch
// flips) is printed in the form of the job lines, not log's or slog's own.
func TestReporterLoggerPrintsLikeTheJobLines(t *testing.T) {
	var out bytes.Buffer
	r := NewReporter(&out)
	at := time.Date(2026, 12, 1, 14, 45, 51, 0, time.UTC)
	log := r.Logger()
	for _, tc := range []struct {
		log  func()
		want string
	}{
		{func() { log.Info("webview: switch set", "type", "email.welcome.v1", "enabled", true) },
			`14:45:51  webview: switch set  type=email.welcome.v1 enabled=true`},
		{func() { log.Warn("webview: read dead letters", "error", errors.New("throttled: slow down")) },
			`14:45:51  webview: read dead letters  level=WARN error="throttled: slow down"`},
		{func() { log.With("stage", "local").WithGroup("req").Error("failed", "path", "/_local/") },
			`14:45:51  failed          level=ERROR stage=local req.path=/_local/`},
		{func() { log.Debug("not shown") }, ``},
	} {
		out.Reset()
		r.now = func() time.Time { return at }
		tc.log()
		got := strings.TrimSpace(regexp.MustCompile(`^\d\d:\d\d:\d\d`).ReplaceAllString(out.String(), "14:45:51"))
		if got != tc.want {
			t.Errorf("printed %q; want %q", got, tc.want)
		}
	}
}
