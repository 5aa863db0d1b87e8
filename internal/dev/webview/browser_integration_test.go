//go:build integration

package webview_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"image/png"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/chromedp"

	"github.com/runstwice/runstwice/aws/dynamostore"
	"github.com/runstwice/runstwice/aws/sqsqueue"
	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/deadletter"
	"github.com/runstwice/runstwice/internal/dev/otlp"
	"github.com/runstwice/runstwice/internal/dev/testenv"
	"github.com/runstwice/runstwice/internal/dev/webview"
	"github.com/runstwice/runstwice/internal/enqueue"
	"github.com/runstwice/runstwice/internal/idempotency"
	"github.com/runstwice/runstwice/internal/jobs"
	"github.com/runstwice/runstwice/internal/obs"
)

// update rewrites the screenshot the README shows:
//
//	go test -tags integration -run TestIntegrationBrowser ./internal/dev/webview -update
var update = flag.Bool("update", false, "write the screenshots to docs/img/local-view.png and docs/img/local-job.png")

// screenshotPath is the README's screenshot, relative to the repository root;
// jobScreenshotPath is a job's page (docs/local.md).
const (
	screenshotPath      = "docs/img/local-view.png"
	jobScreenshotPath   = "docs/img/local-job.png"
	traceScreenshotPath = "docs/img/local-trace.png"
)

// chromiumFlags keep headless Chromium off the network: without them it
// stalls on calls this machine cannot make.
var chromiumFlags = []string{
	"headless", "no-sandbox", "disable-gpu", "disable-quic", "no-first-run",
	"disable-background-networking", "disable-component-update", "disable-sync",
	"no-default-browser-check",
}

// chromium returns the browser tools/chromium.sh finds (RUNSTWICE_CHROMIUM,
// else one on the PATH, else the macOS app), or fails the test saying how
// to get one.
func chromium(t *testing.T) string {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	find := exec.Command("sh", filepath.Join(root, "tools", "chromium.sh"), "find")
	find.Stderr = &stderr
	out, err := find.Output()
	if err != nil {
		t.Fatalf("no Chromium or Google Chrome found (%v) %s: run `make chromium`, which installs Debian's on Debian and "+
			"says what to install elsewhere, or set RUNSTWICE_CHROMIUM", err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(string(out))
}

// mailLog is a fixed webview.MailLog (the stack's recorder lives in devstack).
type mailLog []webview.Mail

func (m mailLog) Recent(n int) []webview.Mail { return m[:min(n, len(m))] }

// enqueueHandler is the enqueue function's handler wired as
// functions/enqueue/main.go wires it, from the stack's function environment.
func enqueueHandler(t *testing.T, l local) *enqueue.Handler {
	t.Helper()
	env, err := l.st.FunctionEnv("EnqueueFunction")
	if err != nil {
		t.Fatal(err)
	}
	return &enqueue.Handler{
		Registry:    contract.Registry(),
		Idempotency: idempotency.NewStore(l.db, env["IDEMPOTENCY_TABLE"]),
		Jobs:        jobs.NewStore(l.db, env["JOBS_TABLE"], dynamostore.New(l.db, env["MARKERS_TABLE"])),
		Queue: sqsqueue.New(sqs.NewFromConfig(l.cfg), map[string]string{
			string(contract.QueueCritical): env["QUEUE_URL_CRITICAL"],
			string(contract.QueueDefault):  env["QUEUE_URL_DEFAULT"],
			string(contract.QueueBulk):     env["QUEUE_URL_BULK"],
		}, ""),
		Logger: obs.NewLogger(io.Discard, "error"),
	}
}

// enqueueJob POSTs /v1/jobs/{type} through the handler as API Gateway would
// and returns the job id.
func enqueueJob(t *testing.T, h *enqueue.Handler, jobType, key, body string) string {
	t.Helper()
	path := "/v1/jobs/" + jobType
	resp, err := h.Handle(context.Background(), events.APIGatewayV2HTTPRequest{
		Version: "2.0", RawPath: path, Body: body,
		Headers: map[string]string{"content-type": "application/json", "idempotency-key": key},
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			Stage: "$default", HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: http.MethodPost, Path: path},
			Authorizer: &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
				IAM: &events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription{UserARN: "arn:aws:iam::123456789012:user/local-user"},
			},
		},
	})
	if err != nil || resp.StatusCode != http.StatusAccepted {
		t.Fatalf("enqueue %s: %d %s %v", jobType, resp.StatusCode, resp.Body, err)
	}
	var out struct {
		JobID string `json:"jobId"`
	}
	if err := json.Unmarshal([]byte(resp.Body), &out); err != nil || out.JobID == "" {
		t.Fatalf("enqueue answer %s: %v", resp.Body, err)
	}
	return out.JobID
}

// badUserReason is the dead-letter reason the e-mail job gives a mail to the
// seeded u-bad (docs/tour.md, "Dead letters: when a job cannot succeed").
const badUserReason = "permanent: email: user u-bad: stored e-mail address is not a plain address"

func TestIntegrationBrowser(t *testing.T) {
	exe := chromium(t)
	l := provisionLocal(t)
	ctx := context.Background()

	// Jobs through the real enqueue handler, as the seeded users make them:
	// one stays Enqueued, one is claimed (Succeeded, as after a worker,
	// its mail the one the stack sends), and u-bad's reset failed into the
	// DLQ with the reason the e-mail job gives it.
	h := enqueueHandler(t, l)
	welcome := enqueueJob(t, h, "email.welcome.v1", "k-welcome", `{"args":{"userId":"u-demo-1"}}`)
	verify := enqueueJob(t, h, "email.partner-verification.v1", "k-verify", `{"args":{"userId":"u-demo-1","roleCode":"city-partner","countryCode":"BD"}}`)
	reset := enqueueJob(t, h, "email.password-reset.v1", "k-reset", `{"args":{"userId":"u-bad","countryCode":"BD"}}`)
	markers := dynamostore.New(l.db, l.table("MarkersTable"))
	if _, err := markers.Claim(ctx, engine.Key{Type: "email.partner-verification.v1", JobID: verify}, engine.Mark{}); err != nil {
		t.Fatal(err)
	}
	if err := jobs.NewRecorder(l.db, l.table("JobsTable")).MarkFailed(ctx, reset, jobs.Failure{Class: "permanent", Attempts: 1}); err != nil {
		t.Fatal(err)
	}
	resetJob, err := jobs.NewStore(l.db, l.table("JobsTable"), markers).Get(ctx, reset)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := deadletter.NewStore(l.db, l.table("DeadLettersTable")).Save(ctx, deadletter.Record{
		ID: reset, JobID: reset, Type: "email.password-reset.v1", Body: resetJob.Message, Reason: badUserReason,
		ReceiveCount: 1, Status: deadletter.StatusDead, SourceQueue: "arn:aws:sqs:us-east-1:123456789012:runstwice-local-critical",
	}, "sqs-1"); err != nil {
		t.Fatal(err)
	}
	mail := mailLog{{To: "demo1@example.com", Subject: "Confirm your e-mail address for your partner account", JobID: verify, Time: time.Now(),
		Link: "https://app.example.com/verify-email?token=Yq3xV0n9Rk2c7Lw4&userId=u-demo-1"}}

	src, err := webview.FromStack(l.cfg, l.st, mail)
	if err != nil {
		t.Fatal(err)
	}
	src.Traces = cannedTrace{jobID: reset} // what the stack's OTLP receiver would hold
	mux := http.NewServeMux()
	mux.Handle("/_local/", webview.New(src, webview.Options{Stage: "local"}))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	opts := []chromedp.ExecAllocatorOption{chromedp.ExecPath(exe), chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1400, 1000)}
	for _, f := range chromiumFlags {
		opts = append(opts, chromedp.Flag(f, true))
	}
	// A guard against a hung browser, not a timing assertion.
	bctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	actx, cancelAlloc := chromedp.NewExecAllocator(bctx, opts...)
	defer cancelAlloc()
	cctx, cancelBrowser := chromedp.NewContext(actx)
	defer cancelBrowser()

	// text reads an element's visible text; do runs steps; both fail the test
	// on an error.
	text := func(what string, sel string) string {
		t.Helper()
		v, err := chromedp.Run(cctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("%s (%s): %v", what, sel, err)
		}
		return v
	}
	do := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(cctx, steps...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}

	do("load the page",
		chromedp.Navigate(srv.URL+"/_local/?refresh=0"),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-job="`+welcome+`"]`)))
	if v, err := chromedp.CallBrowser(cctx, browser.GetVersion, cdp.Empty{}); err == nil {
		t.Logf("browser: %s", v.Product)
	}
	if title, err := chromedp.Run(cctx, chromedp.Title()); err != nil || title != "runstwice · local" {
		t.Errorf("title %q, %v", title, err)
	}
	welcomeSwitch := `tr[data-switch="email.welcome.v1"]`
	for _, c := range []struct{ what, sel, want string }{
		{"the enqueued job", `tr[data-job="` + welcome + `"]`, "Enqueued"},
		{"the enqueued job", `tr[data-job="` + welcome + `"]`, "email.welcome.v1"},
		{"the claimed job", `tr[data-job="` + verify + `"]`, "Succeeded"},
		{"the failed job", `tr[data-job="` + reset + `"]`, "Failed"},
		{"the dead letter", `tr[data-letter="` + reset + `"]`, badUserReason},
		{"the mail", `#mail`, "demo1@example.com"},
		{"the welcome switch", welcomeSwitch, "turn off"},
	} {
		if got := text(c.what, c.sel); !strings.Contains(got, c.want) {
			t.Errorf("%s: %q lacks %q", c.what, got, c.want)
		}
	}

	do("flip the welcome switch",
		chromedp.Click(chromedp.CSS(`form[data-type="email.welcome.v1"] button`)),
		chromedp.WaitVisible(chromedp.CSS(welcomeSwitch+` .switch.off`)))
	if row := text("the flipped switch", welcomeSwitch); !strings.Contains(row, "turn on") {
		t.Errorf("after the flip the switch row reads %q", row)
	}
	if loc, err := chromedp.Run(cctx, chromedp.Location()); err != nil || !strings.HasSuffix(loc, "/_local/?refresh=0#switches") {
		t.Errorf("redirected to %s (%v); want the page, reload still off", loc, err)
	}
	p, err := l.ssm.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String(contract.SwitchParameter("local", "email.welcome.v1"))})
	if err != nil || aws.ToString(p.Parameter.Value) != "off" {
		t.Fatalf("stored switch after the flip: %v %v", p, err)
	}

	do("scroll to the top", chromedp.ScrollIntoView(chromedp.CSS("header")))
	screenshot(t, cctx, screenshotPath)

	// A job's page, from the list: cancel the enqueued welcome job, asked
	// first, through the paths jobctl takes (its tombstone is real).
	jobRow := `tr[data-job="` + welcome + `"]`
	do("open the welcome job's page",
		chromedp.Navigate(srv.URL+"/_local/?refresh=0"),
		chromedp.Click(chromedp.CSS(jobRow+` a.id`)),
		chromedp.WaitVisible(chromedp.CSS(`section#job[data-job="`+welcome+`"]`)))
	if got := text("the job's page", "section#job"); !strings.Contains(got, "Enqueued") || !strings.Contains(got, "email.welcome.v1") {
		t.Errorf("the job's page reads %q", got)
	}
	do("ask to cancel it",
		chromedp.Click(chromedp.CSS(`a[data-action="cancel"]`)),
		chromedp.WaitVisible(chromedp.CSS(`div.confirm[data-confirm="cancel"]`)))
	if m, ok, _ := markers.Peek(ctx, engine.Key{Type: "email.welcome.v1", JobID: welcome}); ok {
		t.Fatalf("asking cancelled already: marker %+v", m)
	}
	do("confirm the cancel",
		chromedp.Click(chromedp.CSS(`div.confirm button`)),
		chromedp.WaitVisible(chromedp.CSS(`p.flash.done`)))
	if got := text("the cancel's result", "p.flash"); got != "cancel: cancelled; it never runs" {
		t.Errorf("after the cancel the page says %q", got)
	}
	if got := text("the cancelled job", "section#job"); !strings.Contains(got, "Cancelled") {
		t.Errorf("the job's page after the cancel reads %q", got)
	}
	if m, ok, err := markers.Peek(ctx, engine.Key{Type: "email.welcome.v1", JobID: welcome}); err != nil || !ok || m.State != engine.StateCancelled {
		t.Fatalf("marker after the page's cancel: %+v %v %v; want a tombstone", m, ok, err)
	}

	// The failed reset job, redriven from its page: the letter goes back to
	// the critical queue and the job is active again.
	do("open the failed job's page and ask to redrive it",
		chromedp.Navigate(srv.URL+"/_local/jobs/"+reset),
		chromedp.WaitVisible(chromedp.CSS(`a[data-action="redrive"]`)),
		chromedp.Click(chromedp.CSS(`a[data-action="redrive"]`)),
		chromedp.WaitVisible(chromedp.CSS(`div.confirm[data-confirm="redrive"]`)),
		chromedp.Click(chromedp.CSS(`div.confirm button`)),
		chromedp.WaitVisible(chromedp.CSS(`p.flash`)))
	if got := text("the redrive's result", "p.flash"); got != "redrive: redriven to the critical queue under the same id; its job is active again" {
		t.Errorf("after the redrive the page says %q", got)
	}
	if got := text("the redriven job", "section#job"); !strings.Contains(got, "Enqueued") {
		t.Errorf("the job's page after the redrive reads %q", got)
	}
	if got := text("its history", "section#history"); !strings.Contains(got, "dead-lettered") {
		t.Errorf("the redriven job's history reads %q; want its failure", got)
	}
	if got := text("its actions", "section#actions"); strings.Contains(got, "Yes,") {
		t.Errorf("the page still asks: %q", got)
	}
	screenshot(t, cctx, jobScreenshotPath)

	// Its waterfall, from its page: a row per span, nested under its
	// parent, with its bar, and the record's link to the send it came from.
	do("open the waterfall",
		chromedp.Click(chromedp.CSS(`a[data-trace-link]`)),
		chromedp.WaitVisible(chromedp.CSS(`table.waterfall`)))
	for depth, name := range []string{"POST /v1/jobs/{type}", "send critical", "critical process"} {
		if got := text("a waterfall row", fmt.Sprintf(`table.waterfall tr[data-depth="%d"]`, depth)); !strings.Contains(got, name) {
			t.Errorf("row at depth %d reads %q; want %s", depth, got, name)
		}
	}
	if got := text("the record's row", `tr[data-depth="2"]`); !strings.Contains(got, "critical process") || !strings.Contains(got, "send critical") {
		t.Errorf("the record's row reads %q; want it under the send, linked to it", got)
	}
	do("follow the record's link to the send",
		chromedp.Click(chromedp.CSS(`tr[data-depth="2"] a`)),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-depth="1"]`)))
	if loc, err := chromedp.Run(cctx, chromedp.Location()); err != nil || !strings.HasSuffix(loc, "#span-"+cannedSend) {
		t.Errorf("the link went to %s (%v); want the send's row", loc, err)
	}
	screenshot(t, cctx, traceScreenshotPath)
}

// cannedTrace is a TraceReader holding one job's trace as the local
// receiver would: the request, its send, the worker's record span.
type cannedTrace struct{ jobID string }

const cannedSend = "b7ad6b7169203331"

func (c cannedTrace) Trace(jobID string) (string, []otlp.Span) {
	if jobID != c.jobID {
		return "", nil
	}
	at := func(ms int) time.Time {
		return time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC).Add(time.Duration(ms) * time.Millisecond)
	}
	const trace = "0af7651916cd43dd8448eb211c80319c"
	job := map[string]any{"runstwice.job.id": jobID}
	return trace, []otlp.Span{
		{TraceID: trace, SpanID: "00f067aa0ba902b7", Name: "POST /v1/jobs/{type}", Kind: "server", Service: "enqueue", StartTime: at(0), EndTime: at(48), Attributes: job},
		{TraceID: trace, SpanID: cannedSend, ParentSpanID: "00f067aa0ba902b7", Name: "send critical", Kind: "producer", Service: "enqueue", StartTime: at(21), EndTime: at(39), Attributes: job},
		{TraceID: trace, SpanID: "53995c3f42cd8ad8", ParentSpanID: cannedSend, Name: "critical process", Kind: "consumer", Service: "email", StartTime: at(140), EndTime: at(262),
			Attributes: job, Links: []otlp.Link{{TraceID: trace, SpanID: cannedSend}}},
	}
}

// screenshot takes the page's full screenshot, checks it is a PNG of a
// page, and writes it to the test's artifacts, or with -update to path in
// the repository (the docs show it).
func screenshot(t *testing.T, cctx context.Context, path string) {
	t.Helper()
	shot, err := chromedp.Run(cctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	img, err := png.Decode(bytes.NewReader(shot))
	if err != nil {
		t.Fatalf("screenshot is not a PNG: %v", err)
	}
	if b := img.Bounds(); b.Dx() < 800 || b.Dy() < 400 {
		t.Fatalf("screenshot is %v", b)
	}
	out := filepath.Join(t.ArtifactDir(), filepath.Base(path))
	if *update {
		root, err := testenv.RepoRoot()
		if err != nil {
			t.Fatal(err)
		}
		out = filepath.Join(root, path)
	}
	if err := os.WriteFile(out, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s (%dx%d)", out, img.Bounds().Dx(), img.Bounds().Dy())
}
