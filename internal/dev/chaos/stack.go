package chaos

import (
	"cmp"
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"

	"github.com/runstwice/runstwice/client"
	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/dev/devstack"
	"github.com/runstwice/runstwice/internal/dev/faults"
	"github.com/runstwice/runstwice/internal/dev/stack"
	"github.com/runstwice/runstwice/message"
)

// resources are the tables and queues the campaign reads and writes.
type resources struct {
	Users, Jobs, Markers, DeadLetters, Outbox string
	Queues                                    map[message.Queue]string
	DLQ                                       string
}

func resolve(st *stack.Stack) (resources, error) {
	r := resources{Queues: map[message.Queue]string{}}
	for id, dst := range map[string]*string{"UsersTable": &r.Users, "JobsTable": &r.Jobs, "MarkersTable": &r.Markers, "DeadLettersTable": &r.DeadLetters,
		"OutboxTable": &r.Outbox} {
		p, ok := st.Physical(id)
		if !ok {
			return r, fmt.Errorf("chaos: the stack has no %s", id)
		}
		*dst = p.Name
	}
	ids := map[string]message.Queue{"DeadLetterQueue": ""}
	for q, id := range st.Template().WorkQueueIDs() {
		ids[id] = q
	}
	for id, q := range ids {
		p, ok := st.Physical(id)
		if !ok || p.URL == "" {
			return r, fmt.Errorf("chaos: the stack has no queue %s", id)
		}
		if q == "" {
			r.DLQ = p.URL
		} else {
			r.Queues[q] = p.URL
		}
	}
	return r, nil
}

// toggle sets the kill switch of jobType (straight to the endpoint, as an
// operator's jobctl would).
func (c *campaign) toggle(ctx context.Context, jobType string, on bool) error {
	_, err := ssm.NewFromConfig(c.aws).PutParameter(ctx, &ssm.PutParameterInput{
		Name: aws.String(contract.SwitchParameter(devstack.Stage, jobType)), Value: aws.String(fmt.Sprint(on)),
		Type: ssmtypes.ParameterTypeString, Overwrite: aws.Bool(true),
	})
	if err != nil {
		return fmt.Errorf("chaos: switch %s %v: %w", jobType, on, err)
	}
	return nil
}

// step is one action of the script, taken once the given fraction of the
// jobs has been enqueued and at least wait (scriptGap when zero; the SES
// outage's length when negative) after the step before.
type step struct {
	at   float64
	wait time.Duration
	what string
	do   func(ctx context.Context, c *campaign) error
}

// script is what the campaign does to the stack while the load runs: a
// tick of the weekly digest fan-out while it is off, a switch flipped off
// and on again, SSM away for a while, SES away long enough for jobs to
// exhaust their deliveries (the dead-letter path), the fail-closed digest
// (off from the start) switched on, then the fan-out, and ticks: one sent
// twice at once, another of the same week, another week, and the first
// one's time again.
var script = []step{
	{at: 0.10, what: tickOff, do: func(ctx context.Context, c *campaign) error { return c.tick(ctx, c.weeks.off) }},
	{at: 0.15, what: "welcome switched off", do: func(ctx context.Context, c *campaign) error { return c.toggle(ctx, client.TypeWelcome, false) }},
	{at: 0.25, what: "SSM down", do: func(_ context.Context, c *campaign) error { c.ssmUp = c.down("ssm"); return nil }},
	{at: 0.35, what: "welcome switched on", do: func(ctx context.Context, c *campaign) error { return c.toggle(ctx, client.TypeWelcome, true) }},
	{at: 0.45, what: "SSM up", do: func(_ context.Context, c *campaign) error { c.ssmUp(); return nil }},
	{at: 0.50, what: sesDown, do: func(_ context.Context, c *campaign) error { c.sesUp = c.down("ses"); return nil }},
	{at: 0.60, what: digestOn, do: func(ctx context.Context, c *campaign) error {
		return c.toggle(ctx, client.TypePartnerDigest, true)
	}},
	{at: 0.60, wait: -1, what: "SES up", do: func(_ context.Context, c *campaign) error { c.sesUp(); return nil }},
	{at: 0.62, what: fanoutOn, do: func(ctx context.Context, c *campaign) error {
		c.awaitTick(ctx, c.weeks.off) // the tick while off must have been handled while off
		return c.toggle(ctx, contract.Fanout.Name, true)
	}},
	// A duplicate tick (the same one twice at once), another time of the
	// same week, and another week; the switch's cache has expired by now.
	{at: 0.66, what: "ticks: a week twice at once, the same week an hour later, another week", do: func(ctx context.Context, c *campaign) error {
		return c.tick(ctx, c.weeks.on, c.weeks.on, c.weeks.onAgain, c.weeks.other)
	}},
	{at: 0.80, what: "tick: the first week's time again", do: func(ctx context.Context, c *campaign) error { return c.tick(ctx, c.weeks.on) }},
}

// tickOff names the script step that ticks the fan-out while it is off.
const tickOff = "tick while the fan-out is off"

// down takes service away (every call cut) until the returned func.
func (c *campaign) down(service string) (up func()) {
	return c.faults.Add(faults.Rule{Service: service, Operation: "*", Kind: faults.Down, P: 1})
}

// scriptGap is the least time between two steps of the script.
const scriptGap = 3 * time.Second

// digestOn names the script step that lets the fail-closed type run.
const digestOn = "digest switched on"

// due reports whether step s may be taken, the step before having been
// taken at last.
func (c *campaign) due(s step, last time.Time) bool {
	if s.wait < 0 {
		return time.Since(c.when(sesDown)) >= c.cfg.SESOutage
	}
	return time.Since(last) >= cmp.Or(s.wait, scriptGap)
}

// sesDown names the script step that takes SES away.
const sesDown = "SES down"

// runScript takes each step of the script when done() (the fraction of
// jobs enqueued) reaches it, and the remaining ones when ctx ends.
func (c *campaign) runScript(ctx context.Context, done func() float64, wg *sync.WaitGroup) {
	wg.Go(func() {
		last := time.Now()
		for _, s := range script {
			// Each state lasts a while, however fast the load goes: a
			// switch is cached for toggleTTL, an outage must outlast it.
			for (done() < s.at || !c.due(s, last)) && ctx.Err() == nil {
				time.Sleep(50 * time.Millisecond)
			}
			// The operator's writes go straight to the endpoint and are
			// retried until they land, even after the load ended. The
			// step is dated when it starts: a worker may see it at once.
			at := time.Now()
			for attempt := 0; ; attempt++ {
				err := s.do(context.WithoutCancel(ctx), c)
				if err == nil {
					break
				}
				if attempt == 10 {
					c.problem(err)
					break
				}
				time.Sleep(time.Second)
			}
			c.markAt(s.what, at)
			last = time.Now()
		}
	})
}
