package devstack

import (
	"io"
	"net"
	"net/http"
	"slices"

	"github.com/runstwice/runstwice/internal/dev/lambdarie"
)

// FunctionOutputPath is where a function run beside the stack (`make
// invoke`) hands its output to the stack: POST the raw output with
// ?fn=<function directory>. The stack sorts it as it sorts its own
// functions' output, so its lines land in functions.log (and the job
// outcomes in `make run`'s output) beside the stack's.
const FunctionOutputPath = ViewPath + "function-output"

// maxForwarded bounds one forwarded output.
const maxForwarded = 16 << 20

// FunctionOutput is the handler of FunctionOutputPath: it sorts the body
// into sinks, as a function of the stack named by ?fn, one of functions
// (directories under functions/: FunctionDirs of the template). It answers
// only loopback clients and same-origin or non-browser requests, like the
// view.
func FunctionOutput(sinks lambdarie.Sinks, functions []string) http.Handler {
	csrf := http.NewCrossOriginProtection()
	return csrf.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, _ := net.SplitHostPort(r.RemoteAddr)
		if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
			http.Error(w, "function output is taken from loopback clients only", http.StatusForbidden)
			return
		}
		fn := r.URL.Query().Get("fn")
		if !slices.Contains(functions, fn) {
			http.Error(w, "fn must name one of the stack's functions", http.StatusBadRequest)
			return
		}
		split := lambdarie.NewSplitter(fn, sinks)
		if _, err := io.Copy(split, http.MaxBytesReader(w, r.Body, maxForwarded)); err != nil {
			http.Error(w, "cannot read the output: "+err.Error(), http.StatusBadRequest)
			return
		}
		split.Flush()
		w.WriteHeader(http.StatusNoContent)
	}))
}
