package main

import (
	"context"
	"errors"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/runstwice/runstwice/internal/jobs"
	"github.com/runstwice/runstwice/internal/marker"
)

func (a *app) jobsGet(ctx context.Context, rest []string) error {
	if len(rest) != 1 {
		return usagef("jobs get needs one job ID")
	}
	client := dynamodb.NewFromConfig(a.cfg)
	store := jobs.NewStore(client, a.res.JobsTable, marker.NewDynamo(client, a.res.MarkersTable))
	j, err := store.Get(ctx, rest[0])
	if errors.Is(err, jobs.ErrNotFound) {
		return &notFoundError{fmt.Sprintf("job %s not found in %s", rest[0], a.res.JobsTable)}
	}
	if err != nil {
		return err
	}
	if a.json {
		return a.printJSON(j)
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	for _, row := range [][2]string{
		{"jobId", j.ID}, {"type", j.Type}, {"state", string(j.State)}, {"key", j.Key}, {"queue", j.Queue},
		{"correlationId", j.CorrelationID}, {"attempts", fmt.Sprint(j.Attempts)}, {"lastErrorClass", j.LastErrorClass},
		{"createdAt", j.CreatedAt.Format(time.RFC3339)}, {"runAt", j.RunAt.Format(time.RFC3339)}, {"updatedAt", j.UpdatedAt.Format(time.RFC3339)},
	} {
		if row[1] != "" {
			fmt.Fprintf(tw, "%s\t%s\n", row[0], row[1])
		}
	}
	return tw.Flush()
}
