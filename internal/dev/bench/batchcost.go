package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/runstwice/runstwice/aws/dynamostore"
	"github.com/runstwice/runstwice/aws/sqsqueue"
	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/dev/moto"
	"github.com/runstwice/runstwice/internal/dev/testenv"
	"github.com/runstwice/runstwice/internal/enqueue"
	"github.com/runstwice/runstwice/internal/envvar"
	"github.com/runstwice/runstwice/internal/idempotency"
	"github.com/runstwice/runstwice/internal/jobs"
	"github.com/runstwice/runstwice/internal/marker"
	"github.com/runstwice/runstwice/internal/obs"
	"github.com/runstwice/runstwice/message"
)

// dynamoWrites are the DynamoDB operations that write.
var dynamoWrites = []string{"PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems", "BatchWriteItem"}

// BatchCost measures, on moto at endpoint, the DynamoDB write calls per job
// of the enqueue path: singles new jobs one request each, against batches
// of jobs.MaxBatch new jobs (the API's handler in-process, its own tables
// and queues).
func BatchCost(ctx context.Context, endpoint string, singles, batches int) ([]Row, error) {
	counter := testenv.NewCallCounter()
	cfg := moto.Config(endpoint, moto.Region)
	cfg.APIOptions = append(cfg.APIOptions, counter.Option)
	db, sq := dynamodb.NewFromConfig(cfg), sqs.NewFromConfig(cfg)
	run := fmt.Sprintf("bench-cost-%d", time.Now().UnixNano())
	idem, jobsTable, markers := run+"-idem", run+"-jobs", run+"-markers"
	for _, t := range [][3]string{{idem, idempotency.AttrPK}, {jobsTable, jobs.AttrPK}, {markers, dynamostore.AttrHandler, dynamostore.AttrMessageKey}} {
		if err := createTable(ctx, db, t[0], t[1], t[2]); err != nil {
			return nil, err
		}
	}
	urls := map[message.Queue]string{}
	for _, q := range []message.Queue{contract.Welcome.Queue, contract.QueueChain} {
		out, err := sq.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(run + "-" + string(q))})
		if err != nil {
			return nil, fmt.Errorf("bench: create queue %s: %w", q, err)
		}
		urls[q] = aws.ToString(out.QueueUrl)
	}
	store := jobs.NewStore(db, jobsTable, marker.NewStore(db, markers))
	h := &enqueue.Handler{Registry: contract.Registry(), Idempotency: idempotency.NewStore(db, idem), Jobs: store, Batches: store,
		Queue: sqsqueue.New(sq, envvar.ByName(urls), ""), Logger: obs.NewLogger(io.Discard, "error")}
	post := func(path, key, body string) error {
		resp, err := h.Handle(ctx, events.APIGatewayV2HTTPRequest{Version: "2.0", RawPath: path, Body: body,
			Headers: map[string]string{"content-type": "application/json", "idempotency-key": key},
			RequestContext: events.APIGatewayV2HTTPRequestContext{Stage: "$default",
				HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: http.MethodPost, Path: path},
				Authorizer: &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
					IAM: &events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription{UserARN: "arn:aws:iam::123456789012:user/bench"}}}})
		if err == nil && resp.StatusCode != http.StatusAccepted {
			err = fmt.Errorf("bench: POST %s: %d %s", path, resp.StatusCode, resp.Body)
		}
		return err
	}
	writes := func() int {
		n := 0
		for _, op := range dynamoWrites {
			n += counter.Get("DynamoDB." + op)
		}
		return n
	}
	counter.Reset()
	for i := range singles {
		if err := post("/v1/jobs/"+contract.Welcome.Name, fmt.Sprintf("%s-single-%d", run, i), fmt.Sprintf(`{"args":{"userId":"u-%s-%d"}}`, run, i)); err != nil {
			return nil, err
		}
	}
	single := float64(writes()) / float64(singles)
	counter.Reset()
	for b := range batches {
		parts := make([]string, jobs.MaxBatch)
		for i := range parts {
			parts[i] = fmt.Sprintf(`{"type":%q,"args":{"userId":"u-%s-b%d-%d"}}`, contract.Welcome.Name, run, b, i)
		}
		if err := post("/v1/batches", fmt.Sprintf("%s-batch-%d", run, b), `{"jobs":[`+strings.Join(parts, ",")+`]}`); err != nil {
			return nil, err
		}
	}
	batched := float64(writes()) / float64(batches*jobs.MaxBatch)
	return []Row{
		{"chain", "enqueue DynamoDB write calls per job: single request", fmt.Sprintf("%.2f", single), "", true},
		{"chain", fmt.Sprintf("enqueue DynamoDB write calls per job: in a batch of %d", jobs.MaxBatch), fmt.Sprintf("%.2f", batched),
			fmt.Sprintf("≤ a single's (%.2f)", single), batched <= single},
	}, nil
}

// createTable creates a pay-per-request table keyed by hash (and range,
// when given), both strings.
func createTable(ctx context.Context, db *dynamodb.Client, name, hash, rng string) error {
	in := &dynamodb.CreateTableInput{TableName: aws.String(name), BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String(hash), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String(hash), KeyType: types.KeyTypeHash}}}
	if rng != "" {
		in.AttributeDefinitions = append(in.AttributeDefinitions, types.AttributeDefinition{AttributeName: aws.String(rng), AttributeType: types.ScalarAttributeTypeS})
		in.KeySchema = append(in.KeySchema, types.KeySchemaElement{AttributeName: aws.String(rng), KeyType: types.KeyTypeRange})
	}
	if _, err := db.CreateTable(ctx, in); err != nil {
		return fmt.Errorf("bench: create %s: %w", name, err)
	}
	return nil
}
