package chaos

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"time"

	smithytime "github.com/aws/smithy-go/time"
	"github.com/google/uuid"

	"github.com/runstwice/runstwice/aws/sqsqueue"
	"github.com/runstwice/runstwice/client"
	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/dev/devstack"
	"github.com/runstwice/runstwice/internal/dev/faults"
	"github.com/runstwice/runstwice/internal/email/digest"
	"github.com/runstwice/runstwice/message"
)

// fanoutWeek is the week the clock campaign fans out with the fan-out
// switched off while its first page runs and on again once the next page
// met the switch, odd user ids in the directory.
type fanoutWeek struct {
	Week string
	At   time.Time
	// Partners get one digest each; Odd are the ids no digest arg accepts
	// (an '@', a '|' at the first page's end, a ':'), each to be recorded
	// with its reason.
	Partners, Odd []string
	// SwitchedOff: the switch went off while the first page ran.
	SwitchedOff bool
	// Retriggered: the tick came back while off and skipped, so the week
	// was ticked again once the switch was on.
	Retriggered bool
	// NextPage is the job of the page the first one enqueued.
	NextPage string
	// Recorded are the reasons the fan-out logged for the odd ids, by id.
	Recorded map[string]string
}

// oddIDs are the user ids the clock campaign adds to the weekly digest's
// directory, placed among partners (sorted): one with an '@' in the first
// page, one with a '|' as the first page's last id (the cursor the next
// page would refuse), one with a ':' in the second page.
func oddIDs(partners []string) []string {
	n := len(partners)
	if n == 0 {
		return nil
	}
	odd := []string{partners[min(9, n-1)] + "@odd"}
	if n >= digest.PageSize-2 {
		odd = append(odd, partners[digest.PageSize-3]+"|odd")
	}
	if n >= 2 {
		odd = append(odd, partners[n-2]+":odd")
	}
	return odd
}

func (r *clockRunner) seedOddUsers(ctx context.Context) error {
	c := r.c
	r.run.Week.Partners = slices.Sorted(slices.Values(c.partners))
	r.run.Week.Odd = oddIDs(r.run.Week.Partners)
	var users []devstack.DemoUser
	for _, id := range r.run.Week.Odd {
		users = append(users, devstack.DemoUser{UserID: id, Email: "odd@example.com", DisplayName: "Chaos odd id", EmailConfirmed: true, Digest: "weekly"})
	}
	return devstack.SeedUsers(ctx, c.db, c.res.Users, users)
}

// fanoutWeek ticks the fan-out for the week of the virtual now, switches
// it off while the first page runs (its digests' sends slowed down, so
// that the page lasts longer than the switch's cache), waits until the
// next page met the switch, and switches it on again.
func (r *clockRunner) fanoutWeek(ctx context.Context) error {
	c, w := r.c, &r.run.Week
	now := r.clock.Now().UTC()
	at := time.Date(now.Year(), now.Month(), now.Day(), 9, 0, 0, 0, time.UTC).AddDate(0, 0, -(int(now.Weekday())+6)%7)
	if at.After(now) {
		at = at.AddDate(0, 0, -7)
	}
	w.At, w.Week = at, contract.ISOWeek(at)
	tickID := message.TickMessageID(digest.ScheduleName, at)
	w.NextPage = message.DeriveMessageID(digest.Caller, digest.PageKey(w.Week, tickID, firstCursor(w.Week, append(slices.Clone(w.Partners), w.Odd...))))
	slow := c.clockFaults.Add(faults.Rule{Service: "sqs", Operation: "SendMessage", Contains: []string{client.TypePartnerDigest + `\"`},
		Kind: faults.Delay, Delay: 10 * time.Millisecond, P: 1})
	defer slow()
	if err := r.sendTick(ctx, at); err != nil {
		return err
	}
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline) && ctx.Err() == nil; {
		j, ok := c.readJob(ctx, tickID, digest.Caller)
		if ok && j.State == client.StateProcessing {
			w.SwitchedOff = true
			break
		}
		if ok && j.State.Terminal() {
			break
		}
		_ = smithytime.SleepWithContext(ctx, 50*time.Millisecond)
	}
	if !w.SwitchedOff {
		c.problem(fmt.Errorf("chaos: clock: the fan-out's first page of %s was not seen running; its switch was not flipped mid-week", w.Week))
		c.waitQuiet(ctx)
		return nil
	}
	if err := c.toggle(ctx, contract.Fanout.Name, false); err != nil {
		return err
	}
	c.mark("clock: fan-out switched off mid-week")
	if !c.obs.awaitOutcome(ctx, w.NextPage, 2*time.Minute) {
		c.problem(fmt.Errorf("chaos: clock: the fan-out's next page %s of %s never ran", w.NextPage, w.Week))
	}
	if err := c.toggle(ctx, contract.Fanout.Name, true); err != nil {
		return err
	}
	c.mark("clock: fan-out switched on again")
	slow()
	c.waitQuiet(ctx)
	if j, ok := c.readJob(ctx, tickID, digest.Caller); ok && j.LastOutcome == "skipped" {
		// The tick itself came back while off (a kill, a deadline) and
		// skipped, as a tick does: the week is re-triggered, as the
		// kill-switch docs advise, an hour later.
		w.Retriggered = true
		if err := r.sendTick(ctx, at.Add(time.Hour)); err != nil {
			return err
		}
		c.waitQuiet(ctx)
	}
	return nil
}

// sendTick sends the weekly schedule's tick for at.
func (r *clockRunner) sendTick(ctx context.Context, at time.Time) error {
	c := r.c
	body := c.tickInput.Fill(at, "chaos-clock-"+uuid.NewString())
	tk, err := message.DecodeTick([]byte(body))
	if err != nil {
		return fmt.Errorf("chaos: clock: the schedule's input is no tick: %w", err)
	}
	return c.sender.Send(ctx, sqsqueue.Message{Queue: string(contract.Fanout.Queue), Body: body, Type: tk.Type, CorrelationID: tk.CorrelationID})
}

// firstCursor is the after of the page the first page of a week enqueues,
// as the fan-out picks it from the directory ids (sorted): the first
// page's last id when the fan-out's args accept it, else the last one
// before it that they accept.
func firstCursor(week string, ids []string) string {
	slices.Sort(ids)
	if len(ids) <= digest.PageSize {
		return ""
	}
	page := ids[:digest.PageSize]
	for i := len(page) - 1; i >= 0; i-- {
		if contract.Fanout.ValidateArgs(map[string]string{"digestId": week, "after": page[i]}) == nil {
			return page[i]
		}
	}
	return ""
}

// userIDDigest is how the fan-out's refusal line names a user: the start of
// its id's SHA-256.
func userIDDigest(id string) string {
	sum := sha256.Sum256([]byte(id))
	return hex.EncodeToString(sum[:6])
}

// relayCase is two outbox items with one natural key: the first makes a
// job, the second is relayed while that job is active (deduplicated onto
// it: no job of its own), then written again once that job ended. A
// rewrite case is one item written again, after its job ended, with
// another runAt (a dead letter, never a second job).
type relayCase struct {
	Key           string
	First, Second string // the job ids the items' Idempotency-Keys name
	Rewrite       bool
}

// relayAgain writes the relay cases' items and writes them again once the
// job they made (or deduplicated onto) ended.
func (r *clockRunner) relayAgain(ctx context.Context) error {
	c := r.c
	k := kinds[slices.IndexFunc(kinds, func(k kind) bool { return k.Type == client.TypeWelcome })]
	users, _ := usersOf(k, c.cfg.UsersPerType)
	caller := contract.OutboxCallerPrefix + Producer
	for i := range relayCases {
		key := fmt.Sprintf("chaos-%d-relay-%d", c.cfg.Seed, i)
		first := plannedJob{Index: 20000 + i, Kind: k, User: users[0].ID, Args: k.args(users[0].ID, 20000+i), IdemKey: key + "-a", Key: key, Delay: 6}
		second := first
		second.IdemKey, second.Delay = key+"-b", 0
		rc := relayCase{Key: key, First: message.DeriveMessageID(caller, first.IdemKey), Second: message.DeriveMessageID(caller, second.IdemKey),
			Rewrite: i == relayCases-1}
		if rc.Rewrite {
			first.Delay = 0
		}
		if _, err := c.transact(ctx, first, false); err != nil {
			return fmt.Errorf("chaos: clock: outbox item %s: %w", first.IdemKey, err)
		}
		if !c.awaitJob(ctx, rc.First) {
			continue
		}
		if !rc.Rewrite {
			if _, err := c.transact(ctx, second, false); err != nil {
				return fmt.Errorf("chaos: clock: outbox item %s: %w", second.IdemKey, err)
			}
		}
		c.waitQuiet(ctx) // the first job ran: its message waited out its delay
		again := second
		if rc.Rewrite {
			again = first
			again.Delay, again.RunAt = 0, r.clock.Now().Add(time.Hour).Truncate(time.Second)
		}
		if _, err := c.transact(ctx, again, false); err != nil {
			return fmt.Errorf("chaos: clock: outbox item %s again: %w", again.IdemKey, err)
		}
		r.run.Relay = append(r.run.Relay, rc)
	}
	c.waitQuiet(ctx)
	return nil
}

// relayCases is how many relay cases the clock campaign writes (the last
// is the rewrite with another runAt).
const relayCases = 3
