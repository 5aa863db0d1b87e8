//go:build integration

package email_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/internal/dev/testenv"
	"github.com/runstwice/runstwice/internal/email"
	"github.com/runstwice/runstwice/internal/email/smtprelay"
	"github.com/runstwice/runstwice/internal/obs"
	"github.com/runstwice/runstwice/internal/runner"
)

// mailpitModule is the pinned Mailpit the SMTP tests run, built from the Go
// module proxy into the checkout's ./bin on first use.
const mailpitModule = "github.com/axllent/mailpit@v1.33.1"

type mailpit struct {
	smtpAddr string
	api      string
}

// startMailpit runs a real Mailpit SMTP server with its HTTP API on free
// loopback ports for this test. It fails the test when Mailpit cannot run.
func startMailpit(t *testing.T, extraArgs ...string) mailpit {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(root, "bin", "mailpit")
	if _, err := os.Stat(bin); err != nil {
		cmd := exec.Command("go", "install", mailpitModule)
		cmd.Env = append(os.Environ(), "GOBIN="+filepath.Join(root, "bin"))
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("install %s: %v\n%s", mailpitModule, err, out)
		}
	}
	// Two free ports, each checked as every caller of FreePort checks it.
	smtpPort, err := testenv.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	httpPort, err := testenv.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	m := mailpit{smtpAddr: fmt.Sprintf("127.0.0.1:%d", smtpPort), api: fmt.Sprintf("http://127.0.0.1:%d", httpPort)}
	var logBuf bytes.Buffer
	args := append([]string{"--smtp", m.smtpAddr, "--listen", fmt.Sprintf("127.0.0.1:%d", httpPort),
		"--database", filepath.Join(t.TempDir(), "mailpit.db"), "--disable-version-check", "--quiet"}, extraArgs...)
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = &logBuf, &logBuf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start mailpit: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(3 * time.Second):
			_ = cmd.Process.Kill()
		}
	})
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get(m.api + "/api/v1/info")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return m
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("mailpit not ready after 20s: %v\n%s", err, logBuf.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

type mailpitMessage struct {
	ID        string `json:"ID"`
	MessageID string `json:"MessageID"`
	Subject   string `json:"Subject"`
	From      struct{ Address string }
	To        []struct{ Address string }
	Text      string `json:"Text"`
	HTML      string `json:"HTML"`
}

// messages reads every message Mailpit received, with bodies.
func (m mailpit) messages(t *testing.T) []mailpitMessage {
	t.Helper()
	var list struct {
		Messages []mailpitMessage `json:"messages"`
	}
	getJSON(t, m.api+"/api/v1/messages", &list)
	out := make([]mailpitMessage, 0, len(list.Messages))
	for _, s := range list.Messages {
		var full mailpitMessage
		getJSON(t, m.api+"/api/v1/message/"+s.ID, &full)
		out = append(out, full)
	}
	return out
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
}

// TestSMTPSenderAgainstMailpit runs a verification job through the real
// runner with the SMTP sender and reads the mail back from Mailpit's API:
// subject, both bodies, the link, and a Message-ID derived from the job id.
func TestSMTPSenderAgainstMailpit(t *testing.T) {
	mp := startMailpit(t)
	h := newHarness(t)
	users := newFakeUsers(h.tr, email.User{ID: "u-smtp", Email: "smtp.user@example.com", DisplayName: "Zoë Smtp"})
	handlers, err := email.Handlers(email.Config{Users: users, Sender: smtprelay.New(mp.smtpAddr, "Runstwice <noreply@runstwice.test>"), BaseURL: baseURL})
	if err != nil {
		t.Fatal(err)
	}
	env := jobFor("email.partner-verification.v1", "u-smtp")
	job := runner.Job{Envelope: env, Logger: obs.NewLogger(io.Discard, "error")}
	if err := handlers[env.Type].Handle(context.Background(), job); err != nil {
		t.Fatal(err)
	}
	msgs := mp.messages(t)
	if len(msgs) != 1 {
		t.Fatalf("mailpit received %d messages; want 1", len(msgs))
	}
	got := msgs[0]
	switch {
	case got.From.Address != "noreply@runstwice.test" || len(got.To) != 1 || got.To[0].Address != "smtp.user@example.com":
		t.Fatalf("from %v to %v", got.From, got.To)
	case !strings.Contains(got.Subject, "Confirm your e-mail address"):
		t.Fatalf("subject %q", got.Subject)
	case !strings.Contains(got.Text, "Zoë Smtp") || !strings.Contains(got.Text, baseURL+"/verify-email?"):
		t.Fatalf("text body:\n%s", got.Text)
	case !strings.Contains(got.HTML, `href="`+baseURL+"/verify-email?"):
		t.Fatalf("HTML body:\n%s", got.HTML)
	case got.MessageID != env.MessageID+"@runstwice.test":
		t.Fatalf("Message-ID %q; want the job id", got.MessageID)
	}
	link, err := url.Parse(linkPattern.FindString(got.Text))
	if err != nil {
		t.Fatal(err)
	}
	if users.tokens["u-smtp"].Hash != email.HashToken(link.Query().Get("token")) {
		t.Fatal("the token in the delivered link does not match the stored hash")
	}
}

// TestSMTPErrorsAreClassified: a relay that refuses the recipient (5xx) is a
// permanent failure; a relay that is down is retried.
func TestSMTPErrorsAreClassified(t *testing.T) {
	mp := startMailpit(t, "--smtp-allowed-recipients", `@example\.com$`)
	deadPort, err := testenv.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	msg := email.Message{ID: "m-1", Subject: "s", Text: "t", HTML: "<p>t</p>"}
	for _, tc := range []struct {
		name      string
		addr, to  string
		permanent bool
	}{
		{"recipient refused", mp.smtpAddr, "someone@blocked.test", true},
		{"relay down", fmt.Sprintf("127.0.0.1:%d", deadPort), "someone@example.com", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := msg
			m.To = tc.to
			err := smtprelay.New(tc.addr, "noreply@runstwice.test").Send(context.Background(), m)
			if err == nil || engine.IsPermanent(err) != tc.permanent {
				t.Fatalf("err %v; want permanent=%v", err, tc.permanent)
			}
		})
	}
}
