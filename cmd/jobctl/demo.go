package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/runstwice/runstwice/client"
	"github.com/runstwice/runstwice/internal/email"
	"github.com/runstwice/runstwice/internal/email/users"
)

// signupProducer is the producer the signup demo writes its outbox items as.
const signupProducer = "signup"

// demoSignup is `jobctl demo signup USER_ID EMAIL`: what an application's
// signup does with the outbox. One TransactWriteItems writes the new user
// (unconfirmed, conditional on the id being free) and the outbox item of its
// partner verification mail; the relay then enqueues the job and the mail
// goes out. Signing the same user up again fails the transaction, and no
// second job is made.
func (a *app) demoSignup(ctx context.Context, args []string) error {
	p, userID, address, err := userAndAddress(args, map[string]bool{"name": true, "role": true, "country": true}, "demo signup")
	if err != nil {
		return err
	}
	role, country := cmp.Or(p.vals["role"], "city-partner"), cmp.Or(p.vals["country"], "BD")
	job := client.OutboxJob{
		Producer: signupProducer, IdempotencyKey: "signup-" + userID, Type: client.TypePartnerVerification,
		Args: client.PartnerVerificationArgs{UserID: userID, RoleCode: role, CountryCode: country},
	}
	if err := a.connect(ctx); err != nil {
		return err
	}
	outboxPut, jobID, err := client.OutboxPut(a.res.OutboxTable, job, a.now())
	if err != nil {
		return usagef("demo signup: %v", err)
	}
	userPut, err := users.NewUserPut(a.res.UsersTable, email.User{ID: userID, Email: address, DisplayName: cmp.Or(p.vals["name"], userID)})
	if err != nil {
		return err
	}
	_, err = dynamodb.NewFromConfig(a.cfg).TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{
		TransactItems: []types.TransactWriteItem{userPut, outboxPut},
	})
	var cancelled *types.TransactionCanceledException
	if errors.As(err, &cancelled) && len(cancelled.CancellationReasons) > 0 && ptrIs(cancelled.CancellationReasons[0].Code, "ConditionalCheckFailed") {
		return refusedf("user %s exists already: the transaction wrote nothing, so no job was made", userID)
	}
	if err != nil {
		return fmt.Errorf("demo signup: %w", err)
	}
	if a.json {
		return a.printJSON(map[string]string{"userId": userID, "email": address, "jobId": jobID, "producer": signupProducer, "idempotencyKey": job.IdempotencyKey})
	}
	fmt.Fprintf(a.stdout, "user %s signed up (%s), with its verification job in the same transaction: job %s\n", userID, address, jobID)
	fmt.Fprintf(a.stdout, "the outbox relay enqueues it; follow it with: jobctl jobs get %s\n", jobID)
	return nil
}

func ptrIs(p *string, v string) bool { return p != nil && *p == v }
