package engine

import (
	"context"

	"github.com/aws/aws-lambda-go/events"
)

// Handler runs the records of one kind of job: kill switch, batched peek,
// lease, work and claim, under the rules of Kind. Build it with NewHandler
// and hand HandleSQS to lambda.Start. It is safe for concurrent use.
type Handler[T any] struct {
	mux *Mux[T]
}

// NewHandler returns a Handler that runs work for each record of kind k.
// o.Store is required.
func NewHandler[T any](k Kind[T], work func(context.Context, Job[T]) error, o Options) (*Handler[T], error) {
	decode := k.Decode
	if decode == nil {
		decode = decodeJSON[T]
	}
	m, err := NewMux(o, decode, func(T) string { return "" })
	if err != nil {
		return nil, err
	}
	if err := m.Handle("", k, work); err != nil {
		return nil, err
	}
	m.only = m.routes[""]
	return &Handler[T]{mux: m}, nil
}

// HandleSQS runs an SQS batch and reports the records SQS must retry
// (ReportBatchItemFailures, which the event source mapping must enable).
// It never returns an error: every record's outcome is in the response, so
// one bad record never fails its neighbours. Records of a FIFO queue
// (with a MessageGroupId) run in order within their group, and a failed
// one stops its group: the records after it are reported failed with it,
// while the other groups go on.
func (h *Handler[T]) HandleSQS(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	return h.mux.core.handleSQS(ctx, ev), nil
}
