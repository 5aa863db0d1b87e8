package enqueue

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/jobs"
	"github.com/runstwice/runstwice/message"
)

// batchItem is one valid job of a batch request.
type batchItem struct {
	jt message.JobType
	in contract.Body
}

// batchShape says what a batch body is, for its errors.
var batchShape = "must be a JSON object with one field, jobs: an array of 1-" + strconv.Itoa(jobs.MaxBatch) +
	" jobs, each {\"type\":…,\"args\":{…}} with the fields of a single enqueue"

// decodeBatch parses and validates a batch body, {"jobs":[{"type":…,
// <the fields of a single enqueue's body>},…]} with 1–jobs.MaxBatch jobs,
// and reports every problem of every job at once, each field named
// jobs[<index>].<field>. An after of "#<k>" must name an earlier job of
// the batch. A body that says two things (a member twice, or two names
// that differ only in case, at any depth: contract.CheckMembers) is
// refused before any job is read.
func (h *Handler) decodeBatch(body []byte, now time.Time) ([]batchItem, *Problem) {
	list, p := decodeBatchJobs(body)
	if p != nil {
		return nil, p
	}
	items := make([]batchItem, len(list))
	var fields []message.FieldError
	add := func(i int, field, reason string) {
		fields = append(fields, message.FieldError{Field: fmt.Sprintf("jobs[%d].%s", i, field), Reason: reason})
	}
	for i, raw := range list {
		var obj map[string]json.RawMessage
		if json.Unmarshal(raw, &obj) != nil || obj == nil {
			fields = append(fields, message.FieldError{Field: fmt.Sprintf("jobs[%d]", i), Reason: "must be an object: {\"type\":…,\"args\":{…}}"})
			continue
		}
		var name string
		if t, ok := obj["type"]; !ok || json.Unmarshal(t, &name) != nil {
			for _, n := range slices.Sorted(maps.Keys(obj)) {
				if known, ok := contract.CaseVariant(n, []string{"type"}); ok {
					add(i, contract.Printable(n), contract.CaseReason(known))
				}
			}
			add(i, "type", "is required: a job type such as email.welcome.v1")
			continue
		}
		jt, err := h.Registry.Lookup(name)
		if err != nil {
			add(i, "type", "unknown job type "+contract.Printable(name)+"; the job types are "+strings.Join(h.Registry.Names(), ", "))
			continue
		}
		if p := scheduledOnly(jt); p != nil {
			add(i, "type", strings.TrimPrefix(p.Detail, "path type "))
			continue
		}
		delete(obj, "type")
		rest, _ := json.Marshal(obj)
		in, err := contract.DecodeBodyAt(jt, rest, now)
		var ve *message.ValidationError
		if errors.As(err, &ve) {
			for _, f := range ve.Fields {
				add(i, f.Field, f.Reason)
			}
			continue
		} else if err != nil {
			add(i, "body", "is invalid")
			continue
		}
		if k, ok := strings.CutPrefix(in.After, "#"); ok {
			if n, err := strconv.Atoi(k); err != nil || n < 0 || n >= i || strconv.Itoa(n) != k {
				add(i, "after", "#"+contract.Printable(k)+" must name an earlier job of this batch by its index, #0 to #"+strconv.Itoa(max(i-1, 0)))
				continue
			}
		}
		items[i] = batchItem{jt: jt, in: in}
	}
	if len(fields) > 0 {
		return nil, batchRefused(fields)
	}
	return items, nil
}

// decodeBatchJobs reads a batch body's one field, jobs: 1–jobs.MaxBatch
// values, each still to be read as a job. The body is one JSON object of
// valid UTF-8 whose members say one thing, with no field but jobs (a
// "JOBS" is refused as such, never read as jobs).
func decodeBatchJobs(body []byte) ([]json.RawMessage, *Problem) {
	if !utf8.Valid(body) {
		return nil, validation("body", "is not valid UTF-8")
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil || top == nil {
		detail := batchShape
		if err != nil {
			detail += " (" + contract.Printable(err.Error()) + ")"
		}
		return nil, validation("body", detail)
	}
	if err := contract.CheckMembers(body, ""); err != nil {
		var ve *message.ValidationError
		if !errors.As(err, &ve) {
			return nil, validation("body", batchShape)
		}
		return nil, batchRefused(ve.Fields)
	}
	var fields []message.FieldError
	for _, name := range slices.Sorted(maps.Keys(top)) {
		reason := "is not a field of a batch; its one field is jobs"
		if known, ok := contract.CaseVariant(name, []string{"jobs"}); ok {
			reason = contract.CaseReason(known)
		}
		if name != "jobs" {
			fields = append(fields, message.FieldError{Field: contract.Printable(name), Reason: reason})
		}
	}
	if len(fields) > 0 {
		return nil, batchRefused(fields)
	}
	var list []json.RawMessage
	if raw, ok := top["jobs"]; ok && json.Unmarshal(raw, &list) != nil {
		return nil, validation("jobs", "must be an array of 1-"+strconv.Itoa(jobs.MaxBatch)+" jobs, each {\"type\":…,\"args\":{…}}")
	}
	if len(list) == 0 || len(list) > jobs.MaxBatch {
		return nil, validation("jobs", fmt.Sprintf("must hold 1-%d jobs, not %d", jobs.MaxBatch, len(list)))
	}
	return list, nil
}

// batchRefused is the 400 that refuses a whole batch for fields.
func batchRefused(fields []message.FieldError) *Problem {
	p := newProblem(http.StatusBadRequest, ProblemValidation, fmt.Sprintf("the batch is refused: %d problems; no job was made", len(fields)))
	p.Errors = fields
	return p
}
