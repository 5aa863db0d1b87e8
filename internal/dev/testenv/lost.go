package testenv

import (
	"context"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/smithy-go/middleware"

	"github.com/runstwice/runstwice/internal/dev/moto"
)

// LostResponses makes chosen calls happen and then fail as if their
// response had been lost on the way back, so the SDK's retryer sends them
// again: the hardest case for a conditional write, whose retry meets the
// item its first try wrote.
type LostResponses struct {
	mu sync.Mutex
	// left counts, by "Service.Operation", how many more responses to lose.
	left map[string]int
	lost int
}

// NewLostResponses loses the next response of each named operation once
// (e.g. "DynamoDB.PutItem").
func NewLostResponses(ops ...string) *LostResponses {
	l := &LostResponses{left: map[string]int{}}
	for _, op := range ops {
		l.left[op]++
	}
	return l
}

// Lost is how many responses were lost so far.
func (l *LostResponses) Lost() int { l.mu.Lock(); defer l.mu.Unlock(); return l.lost }

// errLostResponse is retryable, as a reset connection is.
type errLostResponse struct{}

func (errLostResponse) Error() string        { return "testenv: response lost after the request was applied" }
func (errLostResponse) RetryableError() bool { return true }

// Option installs the loss on a client: the request is sent and applied,
// then its response is replaced by a retryable error.
func (l *LostResponses) Option(stack *middleware.Stack) error {
	return stack.Deserialize.Add(middleware.DeserializeMiddlewareFunc("runstwiceLostResponse",
		func(ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler) (middleware.DeserializeOutput, middleware.Metadata, error) {
			out, md, err := next.HandleDeserialize(ctx, in)
			op := awsmiddleware.GetServiceID(ctx) + "." + awsmiddleware.GetOperationName(ctx)
			l.mu.Lock()
			lose := err == nil && l.left[op] > 0
			if lose {
				l.left[op]--
				l.lost++
			}
			l.mu.Unlock()
			if lose {
				return out, md, errLostResponse{}
			}
			return out, md, err
		}), middleware.After)
}

// ConfigWithRetries is the server's configuration with the SDK's standard
// retryer (the tests' default has none) and the given API options.
func (s *Server) ConfigWithRetries(apiOptions ...func(*middleware.Stack) error) aws.Config {
	cfg := moto.Config(s.Endpoint, Region)
	cfg.Retryer = func() aws.Retryer { return retry.NewStandard() }
	cfg.APIOptions = append(cfg.APIOptions, apiOptions...)
	return cfg
}
