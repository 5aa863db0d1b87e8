package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/runstwice/runstwice/aws/dynamostore"
	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/engine/idempotencykey"
	"github.com/runstwice/runstwice/internal/dev/moto"
	"github.com/runstwice/runstwice/internal/dev/testenv"
	"github.com/runstwice/runstwice/internal/obs"
)

// The DynamoDB operations the rows count as reads and as writes.
var (
	readOps  = []string{"DynamoDB.GetItem", "DynamoDB.BatchGetItem", "DynamoDB.Query"}
	writeOps = []string{"DynamoDB.PutItem", "DynamoDB.UpdateItem", "DynamoDB.DeleteItem", "DynamoDB.TransactWriteItems"}
)

// Do measures engine.Do and the Idempotency-Key middleware on DynamoDB on
// moto at endpoint: the reads and writes of a first call and of a replay,
// each the same through the middleware (it adds no call of its own).
func Do(ctx context.Context, endpoint string) ([]Row, error) {
	counter := testenv.NewCallCounter()
	cfg := moto.Config(endpoint, moto.Region)
	cfg.APIOptions = append(cfg.APIOptions, counter.Option)
	db := dynamodb.NewFromConfig(cfg)
	table := fmt.Sprintf("bench-do-%d", time.Now().UnixNano())
	if err := createTable(ctx, db, table, dynamostore.AttrHandler, dynamostore.AttrMessageKey); err != nil {
		return nil, err
	}
	store := dynamostore.New(db, table)
	count := func(f func() error) (reads, writes int, err error) {
		counter.Reset()
		err = f()
		return counter.Sum(readOps...), counter.Sum(writeOps...), err
	}
	charge := func(context.Context) (string, error) { return "ch-1", nil }
	key := fmt.Sprintf("k-%d", time.Now().UnixNano())
	fr, fw, err := count(func() error { _, err := engine.Do(ctx, store, "bench.charge", key, charge); return err })
	if err != nil {
		return nil, err
	}
	rr, rw, err := count(func() error { _, err := engine.Do(ctx, store, "bench.charge", key, charge); return err })
	if err != nil {
		return nil, err
	}
	h := idempotencykey.Middleware(store, idempotencykey.Options{Required: true})(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"charge":"ch-1"}`)
	}))
	post := func() error {
		r := httptest.NewRequest(http.MethodPost, "/charges", strings.NewReader(`{"amount":12}`))
		r.Header.Set("Idempotency-Key", key)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusCreated {
			return fmt.Errorf("bench: the middleware answered %d", w.Code)
		}
		return nil
	}
	mr, mw, err := count(post)
	if err != nil {
		return nil, err
	}
	mrr, mrw, err := count(post)
	if err != nil {
		return nil, err
	}
	calls := func(r, w int) string { return fmt.Sprintf("%d read, %d writes", r, w) }
	return []Row{
		{"do", "Do on moto: first call", calls(fr, fw), "≤ 2 writes", fw <= 2},
		{"do", "Do on moto: replay", calls(rr, rw), "1 read, no write", rr == 1 && rw == 0},
		{"do", "Idempotency-Key middleware: first request", calls(mr, mw), "Do's: " + calls(fr, fw), mr == fr && mw == fw},
		{"do", "Idempotency-Key middleware: replay", calls(mrr, mrw), "Do's: " + calls(rr, rw), mrr == rr && mrw == rw},
	}, nil
}

// StreamRecords is the size of the stream section's batch.
const StreamRecords = 100

// Streams measures a Kinesis batch of StreamRecords records of one shard,
// each with an EffectTime effect and a lease, on DynamoDB on moto, against
// its floor: one batched peek, then each record's lease, effect and claim
// in shard order, each DynamoDB call at the median latency moto answers
// it with. rounds batches are run; their median is the figure.
func Streams(ctx context.Context, endpoint string, rounds int) ([]Row, error) {
	cfg := moto.Config(endpoint, moto.Region)
	db := dynamodb.NewFromConfig(cfg)
	table := fmt.Sprintf("bench-stream-%d", time.Now().UnixNano())
	if err := createTable(ctx, db, table, dynamostore.AttrHandler, dynamostore.AttrMessageKey); err != nil {
		return nil, err
	}
	store := dynamostore.New(db, table)
	h, err := engine.NewHandler(orderKind(true), func(ctx context.Context, _ engine.Job[benchOrder]) error {
		select {
		case <-time.After(EffectTime):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}, engine.Options{Store: store, Logger: obs.NewLogger(io.Discard, "info"), Metrics: engine.NewMetrics(io.Discard, obs.Namespace)})
	if err != nil {
		return nil, err
	}
	var took, floors []time.Duration
	for range rounds {
		floor, err := streamFloor(ctx, store)
		if err != nil {
			return nil, err
		}
		ev := events.KinesisEvent{}
		for i, r := range orderBatch(StreamRecords).Records {
			ev.Records = append(ev.Records, events.KinesisEventRecord{
				EventID: fmt.Sprintf("shardId-000000000000:%d", i), EventSourceArn: "arn:aws:kinesis:us-east-1:123456789012:stream/bench",
				Kinesis: events.KinesisRecord{SequenceNumber: fmt.Sprint(i), Data: []byte(r.Body), PartitionKey: "p"},
			})
		}
		bctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
		start := time.Now()
		resp, err := h.HandleKinesis(bctx, ev)
		d := time.Since(start)
		cancel()
		if err != nil || len(resp.BatchItemFailures) > 0 {
			return nil, fmt.Errorf("bench: the stream batch failed: %v %v", err, resp.BatchItemFailures)
		}
		took, floors = append(took, d), append(floors, floor)
	}
	t, f := median(took), median(floors)
	ratio := float64(t) / float64(f)
	return []Row{{"stream", fmt.Sprintf("Kinesis batch of %d records, one shard, %s effect each, lease, on moto", StreamRecords, EffectTime),
		fmt.Sprintf("%s (floor %s: %.2f×)", ms(t), ms(f), ratio), "≤ 1.10× the floor", ratio <= 1.10}}, nil
}

// streamFloor is the least a batch of StreamRecords records can take: a
// BatchGetItem of their keys, then each record's lease, effect and claim
// one after another, each call at the median of a few measured now.
func streamFloor(ctx context.Context, store *dynamostore.Store) (time.Duration, error) {
	keys := make([]engine.Key, StreamRecords)
	for i := range keys {
		keys[i] = engine.Key{Type: "bench.floor", JobID: fmt.Sprintf("f-%d-%d", time.Now().UnixNano(), i)}
	}
	start := time.Now()
	if _, err := store.PeekBatch(ctx, keys); err != nil {
		return 0, err
	}
	peek := time.Since(start)
	var leases, claims []time.Duration
	for i := range 10 {
		k := keys[i]
		start := time.Now()
		if _, err := store.Lease(ctx, k, engine.Mark{Owner: "o", Until: time.Now().Add(time.Minute)}); err != nil {
			return 0, err
		}
		leases = append(leases, time.Since(start))
		start = time.Now()
		if _, err := store.Claim(ctx, k, engine.Mark{Owner: "o"}); err != nil {
			return 0, err
		}
		claims = append(claims, time.Since(start))
	}
	return peek + StreamRecords*(median(leases)+EffectTime+median(claims)), nil
}
