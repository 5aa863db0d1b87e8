package bench

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/runstwice/runstwice/aws/dynamostore"
	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/internal/dev/moto"
	"github.com/runstwice/runstwice/internal/dev/testenv"
	"github.com/runstwice/runstwice/internal/marker"
	"github.com/runstwice/runstwice/internal/obs"
	"github.com/runstwice/runstwice/internal/runner"
	"github.com/runstwice/runstwice/internal/testkit"
	"github.com/runstwice/runstwice/message"
)

// EffectTime is the simulated effect of every job in the worker section
// (an SES send takes about this).
const EffectTime = 25 * time.Millisecond

// Worker measures the worker against DynamoDB on moto at endpoint: the
// DynamoDB calls per job of a first delivery and of a duplicate, in seed and
// lease mode, and the time per batch of 10 jobs whose effect takes
// EffectTime (the median of rounds batches each).
func Worker(ctx context.Context, endpoint string, rounds int) ([]Row, error) {
	counter := testenv.NewCallCounter()
	cfg := moto.Config(endpoint, moto.Region)
	cfg.APIOptions = append(cfg.APIOptions, counter.Option)
	db := dynamodb.NewFromConfig(cfg)
	table := fmt.Sprintf("bench-markers-%d", time.Now().UnixNano())
	if err := createTable(ctx, db, table, dynamostore.AttrHandler, dynamostore.AttrMessageKey); err != nil {
		return nil, err
	}
	var rows []Row
	effect := func(ctx context.Context) error {
		select {
		case <-time.After(EffectTime):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	for _, payload := range []string{"envelope", "any payload"} {
		for _, lease := range []bool{false, true} {
			mode := payload + ", " + map[bool]string{false: "seed", true: "lease"}[lease] + " mode"
			handle, batch, err := workerOf(payload, lease, marker.NewStore(db, table), effect)
			if err != nil {
				return nil, err
			}
			r, err := measureWorker(ctx, handle, batch, counter, rounds, mode, lease)
			if err != nil {
				return nil, err
			}
			rows = append(rows, r...)
		}
	}
	return rows, nil
}

// handleFunc runs one SQS batch.
type handleFunc func(context.Context, events.SQSEvent) (events.SQSEventResponse, error)

// workerOf is the worker of the section's job, on the bundle's envelope
// (its runner) or on a team's own payload (engine.NewHandler), and a
// maker of fresh batches of 10 of its records.
func workerOf(payload string, lease bool, store engine.Store, effect func(context.Context) error) (handleFunc, func() events.SQSEvent, error) {
	logger, metrics := obs.NewLogger(io.Discard, "info"), engine.NewMetrics(io.Discard, obs.Namespace)
	if payload == "any payload" {
		h, err := engine.NewHandler(orderKind(lease), func(ctx context.Context, _ engine.Job[benchOrder]) error { return effect(ctx) },
			engine.Options{Store: store, Switch: &testkit.Switches{}, Parker: &testkit.Queues{}, Logger: logger, Metrics: metrics})
		if err != nil {
			return nil, nil, err
		}
		return h.HandleSQS, func() events.SQSEvent { return orderBatch(10) }, nil
	}
	jt := benchType(lease)
	reg, _ := message.NewRegistry(jt)
	r, err := runner.New(runner.Config{
		Registry: reg, Handlers: map[string]runner.Handler{jt.Name: runner.HandlerFunc(func(ctx context.Context, _ runner.Job) error { return effect(ctx) })},
		Switch: &testkit.Switches{}, Markers: store, Parker: &testkit.Queues{}, Logger: logger, Metrics: metrics,
	})
	if err != nil {
		return nil, nil, err
	}
	return r.Handle, func() events.SQSEvent { return batchOf(jt, 10) }, nil
}

// measureWorker runs rounds fresh batches twice each (the first delivery,
// then its duplicate) and returns the rows of mode: DynamoDB calls per job,
// and in lease mode the time per batch.
func measureWorker(ctx context.Context, handle handleFunc, batch func() events.SQSEvent, counter *testenv.CallCounter, rounds int, mode string, lease bool) ([]Row, error) {
	var rows []Row
	{
		var first, dup []time.Duration
		var firstCalls, dupCalls, jobs int
		for range rounds {
			ev := batch()
			d, calls, err := timeBatch(ctx, handle, ev, counter)
			if err != nil {
				return nil, err
			}
			first, firstCalls = append(first, d), firstCalls+calls
			d, calls, err = timeBatch(ctx, handle, ev, counter)
			if err != nil {
				return nil, err
			}
			dup, dupCalls, jobs = append(dup, d), dupCalls+calls, jobs+10
		}
		wantFirst := map[bool]float64{false: 1.1, true: 2.1}[lease]
		fc, dc := float64(firstCalls)/float64(jobs), float64(dupCalls)/float64(jobs)
		rows = append(rows,
			Row{"worker", mode + ": DynamoDB calls per job, first delivery", perJob(firstCalls, jobs), fmt.Sprintf("≤ %.1f", wantFirst), fc <= wantFirst+1e-9},
			Row{"worker", mode + ": DynamoDB calls per job, duplicate", perJob(dupCalls, jobs), "≤ 0.1", dc <= 0.1+1e-9},
		)
		if lease {
			mf, md := median(first), median(dup)
			rows = append(rows,
				Row{"worker", fmt.Sprintf("%s: batch of 10, %s effect, first delivery", mode, EffectTime), ms(mf), fmt.Sprintf("≤ %s (2.5 × the effect)", ms(EffectTime*5/2)), mf <= EffectTime*5/2},
				Row{"worker", mode + ": batch of 10 duplicates", ms(md), "≤ 15 ms", md <= 15*time.Millisecond},
			)
		}
	}
	return rows, nil
}

// timeBatch runs one batch and returns its wall time and DynamoDB calls.
func timeBatch(ctx context.Context, handle handleFunc, ev events.SQSEvent, counter *testenv.CallCounter) (time.Duration, int, error) {
	counter.Reset()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	start := time.Now()
	resp, err := handle(ctx, ev)
	d := time.Since(start)
	if err == nil && len(resp.BatchItemFailures) > 0 {
		err = fmt.Errorf("bench: %d records failed", len(resp.BatchItemFailures))
	}
	n := 0
	for _, op := range []string{"GetItem", "BatchGetItem", "PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems"} {
		n += counter.Get("DynamoDB." + op)
	}
	return d, n, err
}
