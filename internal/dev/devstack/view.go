package devstack

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/runstwice/runstwice/internal/dev/lambdarie"
	"github.com/runstwice/runstwice/internal/dev/otlp"
	"github.com/runstwice/runstwice/internal/dev/stack"
	"github.com/runstwice/runstwice/internal/dev/webview"
)

// ViewPath is where the local web view is served beside the API.
const ViewPath = webview.DefaultPrefix

// handler serves the API, the local web view of the whole stack under
// ViewPath (jobs, mails, dead letters, switches), which logs to logger, and
// takes the output of a function run beside the stack at FunctionOutputPath
// into sinks.
func handler(api http.Handler, cfg aws.Config, st *stack.Stack, mail MailLog, traces *otlp.Receiver, sinks lambdarie.Sinks, logger *slog.Logger) (http.Handler, error) {
	var log webview.MailLog
	if mail != nil {
		log = viewMails{mail}
	}
	src, err := webview.FromStack(cfg, st, log)
	if err != nil {
		return nil, err
	}
	if traces != nil {
		src.Traces = traces // never a nil *otlp.Receiver in the interface
	}
	mux := http.NewServeMux()
	mux.Handle(ViewPath, webview.New(src, webview.Options{Stage: st.Param("Stage"), Logger: logger}))
	mux.Handle("POST "+FunctionOutputPath, FunctionOutput(sinks, FunctionDirs(st.Template())))
	mux.Handle("GET "+TracesPath+"{jobId}", tracesAPI(traces))
	mux.Handle("/", api)
	return mux, nil
}

// viewMails shows the stack's mail log in the web view, newest first.
type viewMails struct{ log MailLog }

// Recent implements webview.MailLog.
func (v viewMails) Recent(n int) []webview.Mail {
	mails := v.log.Recent(n)
	out := make([]webview.Mail, 0, len(mails))
	for _, m := range slices.Backward(mails) {
		out = append(out, webview.Mail{To: strings.Join(m.To, ", "), Subject: m.Subject, Link: m.Link, JobID: m.JobID, Time: m.Time})
	}
	return out
}

// TracesPath is where the local stack answers a job's trace:
// GET {TracesPath}{jobId}.
const TracesPath = ViewPath + "api/traces/"

// tracesAPI serves GET {TracesPath}{jobId}: {"jobId","traceId","spans"}
// with every span of the job's trace and every span that names the job
// (otlp.Receiver.Trace); 404 when no span names it, 503 when traces are
// off.
func tracesAPI(traces *otlp.Receiver) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if traces == nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			_ = json.NewEncoder(w).Encode(map[string]string{"error": "traces are off in this stack (--otlp-addr off)"})
			return
		}
		id := r.PathValue("jobId")
		traceID, spans := traces.Trace(id)
		if traceID == "" {
			w.WriteHeader(http.StatusNotFound)
			_ = json.NewEncoder(w).Encode(map[string]string{"error": "no span names job " + id + " (yet)"})
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"jobId": id, "traceId": traceID, "spans": spans})
	})
}
