package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/runstwice/runstwice/internal/deadletter"
	"github.com/runstwice/runstwice/internal/queue"
)

func (a *app) deadLetters() *deadletter.Store {
	return deadletter.NewStore(dynamodb.NewFromConfig(a.cfg), a.res.DeadLettersTable)
}

func (a *app) dlqList(ctx context.Context, rest []string) error {
	if err := noArgs("dlq list", rest); err != nil {
		return err
	}
	recs, err := a.deadLetters().List(ctx, "")
	if err != nil {
		return err
	}
	if a.json {
		if recs == nil {
			recs = []deadletter.Record{}
		}
		return a.printJSON(recs)
	}
	if len(recs) == 0 {
		fmt.Fprintln(a.stdout, "no dead letters")
		return nil
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tTYPE\tSTATUS\tATTEMPTS\tLAST SEEN\tREASON")
	for _, r := range recs {
		reason := r.Reason
		if len(reason) > 80 {
			reason = reason[:80] + "…"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", r.ID, r.Type, r.Status, r.ReceiveCount, r.LastSeen.Format(time.RFC3339), reason)
	}
	return tw.Flush()
}

func (a *app) dlqRedrive(ctx context.Context, rest []string) error {
	if len(rest) != 1 {
		return usagef("dlq redrive needs one dead-letter ID or --all")
	}
	client := sqs.NewFromConfig(a.cfg)
	if err := a.lookupQueueURLs(ctx, client); err != nil {
		return err
	}
	r := deadletter.NewRedriver(a.deadLetters(), queue.New(client, a.res.Queues, ""), a.reg)
	var results []deadletter.Redriven
	var failed error
	if rest[0] == "--all" {
		var err error
		if results, err = r.RedriveAll(ctx); err != nil {
			return err
		}
		for _, res := range results {
			if res.Err != nil {
				failed = errors.Join(failed, fmt.Errorf("%s: %w", res.ID, res.Err))
			}
		}
	} else {
		res, err := r.Redrive(ctx, rest[0])
		if errors.Is(err, deadletter.ErrNotFound) {
			return &notFoundError{fmt.Sprintf("dead letter %s not found in %s", rest[0], a.res.DeadLettersTable)}
		}
		if err != nil {
			return err
		}
		results = []deadletter.Redriven{res}
	}
	if a.json {
		if results == nil {
			results = []deadletter.Redriven{}
		}
		if err := a.printJSON(results); err != nil {
			return err
		}
		return failed
	}
	if len(results) == 0 {
		fmt.Fprintln(a.stdout, "nothing to redrive")
	}
	for _, res := range results {
		switch {
		case res.Err != nil:
			fmt.Fprintf(a.stdout, "FAILED   %s (%s): %v\n", res.ID, res.Type, res.Err)
		case res.Skipped != "":
			fmt.Fprintf(a.stdout, "skipped  %s (%s): %s\n", res.ID, res.Type, res.Skipped)
		default:
			fmt.Fprintf(a.stdout, "redriven %s (%s) to the %s queue under the same messageId\n", res.ID, res.Type, res.Queue)
		}
	}
	return failed
}

// lookupQueueURLs asks SQS for the URL of every work queue the environment
// did not name, by the template's naming convention (runstwice-<stage>-<queue>).
func (a *app) lookupQueueURLs(ctx context.Context, client *sqs.Client) error {
	for q, url := range a.res.Queues {
		if url != "" {
			continue
		}
		name := "runstwice-" + a.stage + "-" + string(q)
		out, err := client.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(name)})
		if err != nil {
			return fmt.Errorf("find queue %s (set QUEUE_URL_%s to name it): %w", name, strings.ToUpper(string(q)), err)
		}
		a.res.Queues[q] = aws.ToString(out.QueueUrl)
	}
	return nil
}
