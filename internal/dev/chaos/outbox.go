package chaos

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	smithytime "github.com/aws/smithy-go/time"

	"github.com/runstwice/runstwice/client"
	"github.com/runstwice/runstwice/internal/email"
	"github.com/runstwice/runstwice/internal/email/users"
	"github.com/runstwice/runstwice/internal/jobs"
)

// producerAttempts bounds how often the campaign, as a producer, writes one
// transaction again after a failure it cannot read as a refusal.
const producerAttempts = 10

// produce enqueues one planned job the way a producer does with the
// outbox: its own write and the job's outbox item in one
// TransactWriteItems, through the fault proxy, retried with the same
// Idempotency-Key after any failure but a refusal. A job planned to be
// refused signs up its user again, which exists: the transaction fails its
// condition and makes no job. A job planned to be rewritten is written by
// a second transaction too (a MODIFY of its item: the same job). Copies of
// its message go out once the relay has made the job. Like the HTTP
// requests, each job's natural key is its Idempotency-Key: two jobs of one
// type for one user are two jobs, not one deduplicated onto the other
// (whose id the producer would not know).
func (c *campaign) produce(ctx context.Context, j plannedJob) result {
	r := result{Job: j}
	refused, err := c.transact(ctx, j, j.Refuse)
	switch {
	case refused && j.Refuse:
		r.Refused = true
		return r
	case refused:
		err = errors.New("the transaction failed its condition, which holds")
	case err == nil && j.Refuse:
		c.problem(fmt.Errorf("chaos: job %d: signing up %s again committed; the user was there", j.Index, j.User))
	}
	if err != nil {
		r.Err = err.Error()
		return r
	}
	r.Accepted, r.JobID = true, j.JobID
	if j.Rewrite {
		if _, err := c.transact(ctx, j, false); err != nil {
			c.problem(fmt.Errorf("chaos: job %d: write its outbox item again: %w", j.Index, err))
		} else {
			r.Rewritten = true
		}
	}
	if j.Copies > 0 && c.awaitJob(ctx, j.JobID) {
		r.CopiesSent = c.sendCopies(ctx, j.JobID, j.Copies)
	}
	return r
}

// transact writes j's transaction until it commits or is refused by its
// condition (refused true), each attempt built afresh as a producer
// rebuilds it: the same Idempotency-Key, a new expiry. signup makes the
// producer's own write a new user's put (conditional on the id being free)
// instead of a conditional update of the existing user.
func (c *campaign) transact(ctx context.Context, j plannedJob, signup bool) (refused bool, err error) {
	for attempt := 1; ; attempt++ {
		c.outboxTx.Add(1)
		err = c.transactOnce(ctx, j, signup)
		var cancelled *types.TransactionCanceledException
		if errors.As(err, &cancelled) && len(cancelled.CancellationReasons) > 0 && aws.ToString(cancelled.CancellationReasons[0].Code) == "ConditionalCheckFailed" {
			return true, err
		}
		if err == nil || attempt == producerAttempts || ctx.Err() != nil {
			return false, err
		}
		_ = smithytime.SleepWithContext(ctx, time.Duration(attempt)*200*time.Millisecond)
	}
}

func (c *campaign) transactOnce(ctx context.Context, j plannedJob, signup bool) error {
	put, _, err := client.OutboxPut(c.res.Outbox, client.OutboxJob{Producer: Producer, IdempotencyKey: j.IdemKey, Type: j.Kind.Type,
		Args: j.Args, Options: client.EnqueueOptions{Key: j.key(), DelaySeconds: j.Delay, RunAt: j.RunAt}}, c.clockNow())
	if err != nil {
		return fmt.Errorf("chaos: outbox put of job %d: %w", j.Index, err)
	}
	own := types.TransactWriteItem{Update: &types.Update{
		TableName: aws.String(c.res.Users), Key: map[string]types.AttributeValue{users.AttrUserID: &types.AttributeValueMemberS{Value: j.User}},
		UpdateExpression:          aws.String("SET #change = :key"),
		ConditionExpression:       aws.String("attribute_exists(#id)"),
		ExpressionAttributeNames:  map[string]string{"#change": "lastChaosChange", "#id": users.AttrUserID},
		ExpressionAttributeValues: map[string]types.AttributeValue{":key": &types.AttributeValueMemberS{Value: j.IdemKey}},
	}}
	if signup {
		if own, err = users.NewUserPut(c.res.Users, email.User{ID: j.User, Email: j.User + "@example.com"}); err != nil {
			return err
		}
	}
	_, err = c.producer.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{own, put}})
	return err
}

// awaitJob waits until the relay has made job id (its record exists), and
// reports whether it has.
func (c *campaign) awaitJob(ctx context.Context, id string) bool {
	store := jobs.NewStore(c.db, c.res.Jobs, nil)
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline) && ctx.Err() == nil; {
		if _, err := store.Get(ctx, id); err == nil {
			return true
		}
		_ = smithytime.SleepWithContext(ctx, 200*time.Millisecond)
	}
	c.problem(fmt.Errorf("chaos: the relay made no job %s within a minute; no copies sent", id))
	return false
}
