package enqueue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/jobs"
	"github.com/runstwice/runstwice/internal/obs"
	"github.com/runstwice/runstwice/message"
)

// listParams are the query parameters GET /v1/jobs takes.
var listParams = []string{"state", "type", "limit", "cursor"}

// jobList is the answer of GET /v1/jobs.
type jobList struct {
	Jobs []jobs.Job `json:"jobs"`
	Next string     `json:"next,omitempty"`
}

// list serves GET /v1/jobs: the caller's own jobs, newest first, filtered
// by state and type, a page of limit (1-100, 25) at a time. A bad filter is
// a 400 naming it; another caller's jobs never appear, and a cursor of
// another caller's list is refused.
func (h *Handler) list(ctx context.Context, log *slog.Logger, caller string, params map[string]string, corr string) reply {
	q := jobs.ListQuery{Caller: caller}
	var bad []message.FieldError
	for name := range params {
		if !slices.Contains(listParams, name) {
			bad = append(bad, message.FieldError{Field: "query " + contract.Printable(name), Reason: "is not a parameter of GET /v1/jobs; they are " + strings.Join(listParams, ", ")})
		}
	}
	if v, ok := params["state"]; ok {
		if s := jobs.State(v); slices.Contains(jobs.States, s) {
			q.State = s
		} else {
			bad = append(bad, message.FieldError{Field: "query state", Reason: "must be one of " + statesList()})
		}
	}
	if v, ok := params["type"]; ok {
		if _, err := h.Registry.Lookup(v); err != nil {
			reason := "is not a job type of this API"
			if near, ok := h.Registry.Nearest(v); ok {
				reason += "; did you mean " + near + "?"
			}
			bad = append(bad, message.FieldError{Field: "query type", Reason: reason})
		} else {
			q.Type = v
		}
	}
	if v, ok := params["limit"]; ok {
		if n, err := strconv.Atoi(v); err != nil || n < 1 || n > jobs.MaxListLimit {
			bad = append(bad, message.FieldError{Field: "query limit", Reason: fmt.Sprintf("must be a whole number from 1 to %d", jobs.MaxListLimit)})
		} else {
			q.Limit = n
		}
	}
	q.Cursor = params["cursor"]
	if len(bad) > 0 {
		slices.SortFunc(bad, func(a, b message.FieldError) int { return strings.Compare(a.Field, b.Field) })
		p := newProblem(http.StatusBadRequest, ProblemValidation, "GET /v1/jobs takes ?state=S&type=T&limit=N&cursor=C")
		p.Errors = bad
		return p.response(corr)
	}
	if h.List == nil {
		return unavailable(corr)
	}
	page, err := h.List.List(ctx, q)
	switch {
	case errors.Is(err, jobs.ErrBadCursor):
		p := newProblem(http.StatusBadRequest, ProblemValidation, "the cursor is not one this API gave you: pass the next of your previous page as it was")
		p.Errors = []message.FieldError{{Field: "query cursor", Reason: "is not a cursor of your list"}}
		return p.response(corr)
	case err != nil:
		log.Error("enqueue: list jobs", obs.KeyError, obs.Redact(err))
		return unavailable(corr)
	}
	if page.Jobs == nil {
		page.Jobs = []jobs.Job{}
	}
	return reply{
		StatusCode: http.StatusOK,
		Headers:    map[string]string{HeaderContentType: ContentTypeJSON, HeaderCorrelationID: corr, "Cache-Control": "no-store"},
		Body:       mustJSON(jobList{Jobs: page.Jobs, Next: page.Next}),
	}
}

// statesList names the states, for a bad state filter.
func statesList() string {
	names := make([]string, len(jobs.States))
	for i, s := range jobs.States {
		names[i] = string(s)
	}
	return strings.Join(names, ", ")
}
