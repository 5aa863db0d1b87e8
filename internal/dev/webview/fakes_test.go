package webview

import (
	"context"
	"sync"
)

// fakeJobs is a JobLister with fixed rows.
type fakeJobs struct {
	rows []Job
	err  error
}

func (f *fakeJobs) Recent(_ context.Context, n int) ([]Job, error) {
	return f.rows[:min(n, len(f.rows))], f.err
}

// fakeMail is a MailLog with fixed rows.
type fakeMail struct{ rows []Mail }

func (f *fakeMail) Recent(n int) []Mail { return f.rows[:min(n, len(f.rows))] }

// fakeLetters is a DeadLetterLister with fixed rows.
type fakeLetters struct {
	rows []DeadLetter
	err  error
}

func (f *fakeLetters) Recent(_ context.Context, n int) ([]DeadLetter, error) {
	return f.rows[:min(n, len(f.rows))], f.err
}

// setCall is one call of fakeSwitches.Set.
type setCall struct {
	Type    string
	Enabled bool
}

// fakeSwitches is a Switchboard in memory: Set changes what List returns.
type fakeSwitches struct {
	mu      sync.Mutex
	rows    []Switch
	listErr error
	setErr  error
	sets    []setCall
}

func (f *fakeSwitches) List(context.Context) ([]Switch, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.listErr != nil {
		return nil, f.listErr
	}
	return append([]Switch(nil), f.rows...), nil
}

func (f *fakeSwitches) Set(_ context.Context, jobType string, enabled bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.setErr != nil {
		return f.setErr
	}
	f.sets = append(f.sets, setCall{jobType, enabled})
	for i := range f.rows {
		if f.rows[i].Type == jobType {
			f.rows[i].Stored, f.rows[i].HasStored, f.rows[i].Readable, f.rows[i].Effective = map[bool]string{true: "on", false: "off"}[enabled], true, true, enabled
		}
	}
	return nil
}

func (f *fakeSwitches) calls() []setCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]setCall(nil), f.sets...)
}

type fakeSchedules []Schedule

func (f fakeSchedules) List(context.Context) ([]Schedule, error) { return f, nil }

// fakeJobReader is a JobReader over fixed jobs, by id.
type fakeJobReader map[string]Job

func (f fakeJobReader) Job(_ context.Context, id string) (Job, bool, error) {
	j, ok := f[id]
	return j, ok, nil
}

// act is one call of fakeOperator.Act.
type act struct {
	Action Action
	JobID  string
}

// fakeOperator records every action and answers with said, or err.
type fakeOperator struct {
	mu   sync.Mutex
	acts []act
	said string
	err  error
}

func (f *fakeOperator) Act(_ context.Context, a Action, id string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.acts = append(f.acts, act{a, id})
	return f.said, f.err
}

func (f *fakeOperator) calls() []act {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]act(nil), f.acts...)
}
