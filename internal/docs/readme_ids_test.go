package docs

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/runstwice/runstwice/internal/dev/devstack"
	"github.com/runstwice/runstwice/internal/enqueue"
	"github.com/runstwice/runstwice/message"
)

// localCaller is the identity the local gateway gives a request with
// X-Caller name (or none: local-user), from which job ids are derived.
func localCaller(name string) string {
	if name == "" {
		name = devstack.DefaultCaller
	}
	return "arn:aws:iam::" + devstack.LocalAccount + ":user/" + name
}

// The README explains that a job id is derived from the caller and the
// Idempotency-Key, so the ids the new jobs and batches of its walk-through
// (the README, then docs/tour.md) show are the ones a reader gets: each
// POST's answer that made a new job (or batch) shows the id derived from
// its key, in its body and its Location.
func TestREADMEJobIDsAreTheDerivedOnes(t *testing.T) {
	steps, _ := walkSteps(t)
	checked := 0
	for _, st := range steps {
		if st.lang != "http" || len(st.cmds) != 1 {
			continue
		}
		w := words(st.cmds[0])
		if len(w) == 0 || w[0] != "curl" {
			continue
		}
		var key, caller string
		for i := 1; i+1 < len(w); i++ {
			if w[i] != "-H" {
				continue
			}
			name, value, _ := strings.Cut(w[i+1], ":")
			switch strings.ToLower(name) {
			case "idempotency-key":
				key = strings.TrimSpace(value)
			case strings.ToLower(devstack.CallerHeader):
				caller = strings.TrimSpace(value)
			}
		}
		head, body, _ := strings.Cut(st.output, "\n\n")
		var answer struct {
			JobID        string `json:"jobId"`
			Deduplicated *bool  `json:"deduplicated"`
			BatchID      string `json:"batchId"`
			Jobs         []struct {
				Index int    `json:"index"`
				JobID string `json:"jobId"`
			} `json:"jobs"`
		}
		if err := json.Unmarshal([]byte(body), &answer); err != nil || key == "" {
			continue
		}
		var want string
		switch {
		case answer.BatchID != "":
			want = enqueue.BatchID(localCaller(caller), key)
			if answer.BatchID != want {
				t.Errorf("%s: the batch of Idempotency-Key %q shows id %s; its derived id is %s", st.section, key, answer.BatchID, want)
			}
			for _, j := range answer.Jobs {
				if id := enqueue.BatchJobID(localCaller(caller), key, j.Index); j.JobID != id {
					t.Errorf("%s: job %d of the batch %q shows id %s; its derived id is %s", st.section, j.Index, key, j.JobID, id)
				}
			}
		case answer.JobID != "" && answer.Deduplicated != nil && !*answer.Deduplicated:
			want = message.DeriveMessageID(localCaller(caller), key)
			if answer.JobID != want {
				t.Errorf("%s: the new job of Idempotency-Key %q shows id %s; its derived id is %s", st.section, key, answer.JobID, want)
			}
		default:
			continue
		}
		for _, line := range strings.Split(head, "\n") {
			if loc, ok := strings.CutPrefix(line, "Location: "); ok && !strings.HasSuffix(loc, "/"+want) {
				t.Errorf("%s: Location %s; want the derived id %s", st.section, loc, want)
			}
		}
		checked++
	}
	if checked < 3 {
		t.Errorf("checked %d answers; want the first, third and batch requests at least", checked)
	}
}
