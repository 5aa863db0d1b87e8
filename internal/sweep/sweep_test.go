package sweep

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/jobs"
	"github.com/runstwice/runstwice/internal/runner"
)

// fakeSweeper answers one sweep with rep and err, and counts the sweeps.
type fakeSweeper struct {
	rep   jobs.SweepReport
	err   error
	calls int
}

func (f *fakeSweeper) SweepSchedules(context.Context) (jobs.SweepReport, error) {
	f.calls++
	return f.rep, f.err
}

func TestHandlersNeedASweeper(t *testing.T) {
	if _, err := Handlers(nil); err == nil {
		t.Fatal("Handlers(nil) made a handler")
	}
	h, err := Handlers(&fakeSweeper{})
	if err != nil || len(h) != 1 || h[contract.ScheduleSweep.Name] == nil {
		t.Fatalf("Handlers = %v, %v; want the sweep's handler alone, under %s", h, err, contract.ScheduleSweep.Name)
	}
}

// A tick sweeps once and logs what it deleted and kept; a sweep that
// could not delete a schedule, or stopped for time before every listed
// job, fails the job (SQS retries it), what it did delete is logged all
// the same.
func TestATickSweepsAndFailsOnlyWhenADeleteFailed(t *testing.T) {
	for _, tc := range []struct {
		name       string
		err        error
		unfinished bool
		wantErr    error
	}{
		{"all deleted", nil, false, nil},
		{"a delete failed", errors.New("scheduler: throttled"), false, errors.New("scheduler: throttled")},
		{"out of time", nil, true, jobs.ErrSweepUnfinished},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.err != nil {
				tc.wantErr = tc.err
			}
			s := &fakeSweeper{rep: jobs.SweepReport{Listed: 3, Deleted: []string{"job-a", "job-b"}, Kept: []string{"job-c"}, Unfinished: tc.unfinished}, err: tc.err}
			h, _ := Handlers(s)
			var logs bytes.Buffer
			err := h[contract.ScheduleSweep.Name].Handle(context.Background(), runner.Job{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			if (err != nil) != (tc.wantErr != nil) || (tc.wantErr != nil && !errors.Is(err, tc.wantErr)) {
				t.Fatalf("Handle = %v; want an error wrapping %v", err, tc.wantErr)
			}
			if s.calls != 1 {
				t.Fatalf("%d sweeps; want one per tick", s.calls)
			}
			for _, want := range []string{"listed=3", "deleted=2", "deletedJobIds=\"[job-a job-b]\"", "kept=1"} {
				if !strings.Contains(logs.String(), want) {
					t.Errorf("the log lacks %s:\n%s", want, logs.String())
				}
			}
		})
	}
}
