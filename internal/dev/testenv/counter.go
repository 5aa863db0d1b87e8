package testenv

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/smithy-go/middleware"
)

type middlewareStack = middleware.Stack

// CallCounter counts AWS API calls by "Service.Operation". Add its Option to
// a configuration's APIOptions; it counts each call once, retries included in
// the one call.
type CallCounter struct {
	mu     sync.Mutex
	counts map[string]int
}

// NewCallCounter returns an empty counter.
func NewCallCounter() *CallCounter { return &CallCounter{counts: map[string]int{}} }

// Option is the API option that installs the counter on a client.
func (c *CallCounter) Option(stack *middleware.Stack) error {
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("runstwiceCallCounter",
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			name := awsmiddleware.GetServiceID(ctx) + "." + awsmiddleware.GetOperationName(ctx)
			c.mu.Lock()
			c.counts[name]++
			c.mu.Unlock()
			return next.HandleInitialize(ctx, in)
		}), middleware.After)
}

// Get returns the number of calls to "Service.Operation", e.g.
// "DynamoDB.PutItem".
func (c *CallCounter) Get(op string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.counts[op]
}

// Sum returns the total calls to the given operations.
func (c *CallCounter) Sum(ops ...string) int {
	n := 0
	for _, op := range ops {
		n += c.Get(op)
	}
	return n
}

// Reset forgets every count.
func (c *CallCounter) Reset() {
	c.mu.Lock()
	c.counts = map[string]int{}
	c.mu.Unlock()
}

// String lists the counts, sorted, e.g. "DynamoDB.PutItem=10 SQS.SendMessage=1".
func (c *CallCounter) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	parts := make([]string, 0, len(c.counts))
	for k, v := range c.counts {
		parts = append(parts, fmt.Sprintf("%s=%d", k, v))
	}
	sort.Strings(parts)
	return strings.Join(parts, " ")
}

// Total returns every call counted.
func (c *CallCounter) Total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, v := range c.counts {
		n += v
	}
	return n
}
