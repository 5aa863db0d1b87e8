package librarytest_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/runstwice/runstwice/internal/testkit"
)

// root is the checkout, from this package's directory.
const root = "../../.."

// order is the program every outside module starts from: a team's own
// messages, with its own key, on the engine and its in-memory store.
const order = `package main

import (
	"context"
	"fmt"

	"github.com/aws/aws-lambda-go/events"

	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/engine/memstore"
)

type Order struct {
	ID     string ` + "`json:\"orderId\"`" + `
	Amount int    ` + "`json:\"amount\"`" + `
}

var ship = engine.Kind[Order]{
	Name: "orders.ship",
	Key:  func(o Order) (string, error) { return o.ID, nil },
}

func handler(store engine.Store) (*engine.Handler[Order], error) {
	return engine.NewHandler(ship, func(ctx context.Context, job engine.Job[Order]) error {
		fmt.Println("ship", job.Key, job.Payload.Amount)
		return nil
	}, engine.Options{Store: store})
}

func main() {
	h, err := handler(memstore.New())
	if err != nil {
		panic(err)
	}
	body := ` + "`{\"orderId\":\"o-1\",\"amount\":12}`" + `
	for i := range 2 { // the same order twice: shipped once
		resp, _ := h.HandleSQS(context.Background(), events.SQSEvent{Records: []events.SQSMessage{{MessageId: fmt.Sprint("m-", i), Body: body}}})
		fmt.Println("failures", len(resp.BatchItemFailures))
	}
	adapters()
}
`

// TestOutsideModuleRunsAnyPayload: a module of its own, importing the
// engine and its in-memory store only, runs a team's own message once per
// key; its go.sum stays small (27 lines is the floor of the three
// third-party modules it needs alone).
func TestOutsideModuleRunsAnyPayload(t *testing.T) {
	o := testkit.NewOutside(t, root, "example.com/orders", map[string]string{
		"main.go": order, "adapters.go": "package main\n\nfunc adapters() {}\n",
	}, "github.com/runstwice/runstwice/engine")
	var printed []string // the program's own lines, without the engine's log lines
	for _, l := range strings.Split(o.Go("run", "."), "\n") {
		if strings.HasPrefix(l, "ship") || strings.HasPrefix(l, "failures") {
			printed = append(printed, l)
		}
	}
	if got := strings.Join(printed, "; "); got != "ship o-1 12; failures 0; failures 0" {
		t.Fatalf("the program printed %q; want the order shipped once", got)
	}
	n := o.SumLines()
	fmt.Printf("go.sum of a module on engine and memstore: %d lines (at most 35)\n", n)
	if n > 35 {
		t.Errorf("go.sum has %d lines; want at most 35", n)
	}
	o.Go("vet", ".")
}

// adaptersGo wires every adapter into the handler's options.
const adaptersGo = `package main

import (
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/ssm"

	"github.com/runstwice/runstwice/aws/dynamostore"
	"github.com/runstwice/runstwice/aws/sqsqueue"
	"github.com/runstwice/runstwice/aws/ssmswitch"
	"github.com/runstwice/runstwice/engine"
)

func adapters() {
	cfg := aws.Config{Region: "eu-west-1"}
	queues := sqsqueue.New(sqs.NewFromConfig(cfg), map[string]string{"orders": "https://sqs.eu-west-1.amazonaws.com/123456789012/orders"}, "")
	_ = engine.Options{
		Store:  dynamostore.New(dynamodb.NewFromConfig(cfg), "orders-markers"),
		Switch: ssmswitch.New(ssm.NewFromConfig(cfg), "/orders/toggles", func(string) bool { return true }),
		Parker: queues, DeadLetterer: queues,
	}
}
`

// dynamoGo wires the DynamoDB store alone.
const dynamoGo = `package main

import (
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/runstwice/runstwice/aws/dynamostore"
)

func adapters() {
	if _, err := handler(dynamostore.New(dynamodb.NewFromConfig(aws.Config{Region: "eu-west-1"}), "orders-markers")); err != nil {
		panic(err)
	}
}
`

// TestOutsideModuleOnTheDynamoDBStore: the same program with the DynamoDB
// store pays for the DynamoDB client and its attribute helpers alone (47
// lines is their floor).
func TestOutsideModuleOnTheDynamoDBStore(t *testing.T) {
	o := testkit.NewOutside(t, root, "example.com/orders", map[string]string{"main.go": order, "adapters.go": dynamoGo},
		"github.com/runstwice/runstwice/engine", "github.com/runstwice/runstwice/aws/dynamostore")
	o.Go("build", "-o", t.TempDir()+"/orders", ".")
	n := o.SumLines()
	fmt.Printf("go.sum of a module on engine, memstore and aws/dynamostore: %d lines (at most 60)\n", n)
	if n > 60 {
		t.Errorf("go.sum has %d lines; want at most 60", n)
	}
}

// TestOutsideModuleGraphWithEveryAdapter: with all three adapters, the
// module graph names nothing of the bundle's own dependencies: no browser
// driver, no CloudFormation, no gRPC or protobuf, no OpenTelemetry SDK or
// exporter.
func TestOutsideModuleGraphWithEveryAdapter(t *testing.T) {
	o := testkit.NewOutside(t, root, "example.com/orders", map[string]string{"main.go": order, "adapters.go": adaptersGo},
		"github.com/runstwice/runstwice/engine", "github.com/runstwice/runstwice/aws/dynamostore",
		"github.com/runstwice/runstwice/aws/sqsqueue", "github.com/runstwice/runstwice/aws/ssmswitch")
	o.Go("build", "-o", t.TempDir()+"/orders", ".")
	graph := o.Go("mod", "graph")
	for _, banned := range []string{"chromedp", "service/cloudformation", "google.golang.org/grpc", "google.golang.org/protobuf",
		"github.com/golang/protobuf", "go.opentelemetry.io/otel/sdk", "go.opentelemetry.io/otel/exporters", "go.opentelemetry.io/proto",
		"github.com/runstwice/runstwice "} {
		for _, line := range strings.Split(graph, "\n") {
			if strings.Contains(line, banned) {
				t.Errorf("the module graph names %s: %s", strings.TrimSpace(banned), line)
				break
			}
		}
	}
	fmt.Printf("go.sum of a module on engine and all three adapters: %d lines\n", o.SumLines())
}
