package testkit

import (
	"testing"

	"github.com/runstwice/runstwice/engine/enginetest"
	"github.com/runstwice/runstwice/internal/runner"
	"github.com/runstwice/runstwice/message"
)

// Case is one of the bundle's job types to prove with RunTwice: the
// engine's test kit (enginetest) with the envelope as the payload.
type Case struct {
	// Type is the job type's declaration.
	Type message.JobType
	// Handler is its handler, wired to fakes the test owns.
	Handler runner.Handler
	// Args are valid args of the job (ValidArgs(Type) if nil). Each
	// scenario runs its own job (a new job id) with these args.
	Args map[string]string
	// Effects reports how often the job's effect happened so far, by job
	// id.
	Effects func(jobID string) int
	// ExactlyOnce makes the kit strict (enginetest.Case.ExactlyOnce).
	ExactlyOnce bool
}

// RunTwice is enginetest.RunTwice for a job type of the bundle.
func RunTwice(t *testing.T, c Case) {
	t.Helper()
	ec, err := c.engine()
	if err != nil {
		t.Fatal(err)
	}
	enginetest.RunTwice(t, ec)
}

// Check is enginetest.Check for a job type of the bundle.
func Check(c Case) error {
	ec, err := c.engine()
	if err != nil {
		return err
	}
	return enginetest.Check(ec)
}

// engine is c as the engine's test kit takes it: the type's kind as the
// runner makes it, each scenario's envelope with the job id the kit picks.
func (c Case) engine() (enginetest.Case[*runner.Payload], error) {
	reg, err := message.NewRegistry(c.Type)
	if err != nil {
		return enginetest.Case[*runner.Payload]{}, err
	}
	args := c.Args
	if args == nil {
		args = ValidArgs(c.Type)
	}
	return enginetest.Case[*runner.Payload]{
		Kind: runner.KindOf(reg, c.Type), Work: runner.Work(c.Handler),
		New: func(key string) *runner.Payload {
			env := Envelope(c.Type.Name, args)
			env.MessageID = key
			return &runner.Payload{Envelope: env, Type: c.Type}
		},
		Encode:      func(p *runner.Payload) ([]byte, error) { return p.Envelope.Encode() },
		Effects:     c.Effects,
		ExactlyOnce: c.ExactlyOnce,
	}, nil
}
