package devstack

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	smithytime "github.com/aws/smithy-go/time"
)

// StreamsAPI is the part of the DynamoDB Streams client a stream poller
// uses.
type StreamsAPI interface {
	DescribeStream(ctx context.Context, in *dynamodbstreams.DescribeStreamInput, optFns ...func(*dynamodbstreams.Options)) (*dynamodbstreams.DescribeStreamOutput, error)
	GetShardIterator(ctx context.Context, in *dynamodbstreams.GetShardIteratorInput, optFns ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetShardIteratorOutput, error)
	GetRecords(ctx context.Context, in *dynamodbstreams.GetRecordsInput, optFns ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetRecordsOutput, error)
}

// SendAPI is the part of the SQS client a stream poller uses: it sends the
// description of a batch it gave up on to the on-failure destination.
type SendAPI interface {
	SendMessage(ctx context.Context, in *sqs.SendMessageInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
}

// StreamPoller is a DynamoDB stream event source mapping: it reads each
// shard of the stream in order and hands the records to a function in
// batches, as Lambda does. On batch item failures it retries from the first
// failed record; on a function error it splits the batch in two (Bisect)
// and retries each half; a batch that has used up its retries, or records
// older than MaxRecordAge, are described on the on-failure queue and
// skipped, so a shard is never blocked. Progress is kept in memory: a new
// poller starts at the source's starting position again.
type StreamPoller struct {
	Source   StreamSource
	Streams  StreamsAPI
	SQS      SendAPI
	Function Invoker
	Region   string
	// PollInterval is the pause after an empty read of a shard
	// (streamPollInterval when zero).
	PollInterval time.Duration
	// RetryDelay is the pause before a failed batch is retried.
	RetryDelay time.Duration
	Logger     *slog.Logger
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

func (p *StreamPoller) now() time.Time {
	if p.Now != nil {
		return p.Now()
	}
	return time.Now()
}

func (p *StreamPoller) pause(ctx context.Context, d time.Duration) {
	if d > 0 {
		_ = smithytime.SleepWithContext(ctx, d)
	}
}

// Run reads the stream until ctx is done: one reader per shard, a child
// shard after its parent.
func (p *StreamPoller) Run(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	done := map[string]chan struct{}{}
	first := true
	for ctx.Err() == nil {
		shards, err := p.shards(ctx)
		if err != nil && ctx.Err() == nil {
			p.Logger.Warn("stream poller: describe stream", "stream", p.Source.StreamARN, "error", err)
		}
		for _, sh := range shards {
			id := aws.ToString(sh.ShardId)
			if _, ok := done[id]; ok {
				continue
			}
			ch := make(chan struct{})
			done[id] = ch
			parent := done[aws.ToString(sh.ParentShardId)]
			// A shard found after the first look is new: it is read from
			// its start, whatever the starting position.
			trim := p.Source.TrimHorizon || !first
			wg.Go(func() {
				defer close(ch)
				if parent != nil {
					select {
					case <-parent:
					case <-ctx.Done():
						return
					}
				}
				p.readShard(ctx, id, trim)
			})
		}
		if err == nil {
			first = false
		}
		p.pause(ctx, describeInterval)
	}
}

func (p *StreamPoller) shards(ctx context.Context) ([]streamtypes.Shard, error) {
	var out []streamtypes.Shard
	var start *string
	for {
		d, err := p.Streams.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(p.Source.StreamARN), ExclusiveStartShardId: start})
		if err != nil {
			return out, err
		}
		out = append(out, d.StreamDescription.Shards...)
		if start = d.StreamDescription.LastEvaluatedShardId; start == nil {
			return out, nil
		}
	}
}

// readShard reads one shard to its end (a closed shard) or until ctx is
// done, handing each batch over before the next.
func (p *StreamPoller) readShard(ctx context.Context, shard string, trim bool) {
	var (
		it       *string
		fetched  string // the last sequence number read
		buf      []streamtypes.Record
		firstAt  time.Time // when buf's first record was read
		closed   bool
		more     bool // the last read returned records: there may be more at once
		interval = p.PollInterval
	)
	if interval <= 0 {
		interval = streamPollInterval
	}
	for ctx.Err() == nil {
		if !closed {
			if it == nil {
				var err error
				if it, err = p.iterator(ctx, shard, fetched, trim); err != nil {
					p.Logger.Warn("stream poller: shard iterator", "shard", shard, "error", err)
					p.pause(ctx, time.Second)
					continue
				}
			}
			out, err := p.Streams.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: it})
			if err != nil {
				if ctx.Err() == nil {
					p.Logger.Warn("stream poller: get records", "shard", shard, "error", err)
					p.pause(ctx, time.Second)
				}
				it = nil // a fresh iterator after the last record read
				continue
			}
			// What the filter drops is read and gone, never handed over.
			kept := slices.DeleteFunc(slices.Clone(out.Records), func(r streamtypes.Record) bool { return !p.Source.passes(r) })
			if len(buf) == 0 && len(kept) > 0 {
				firstAt = p.now()
			}
			buf = append(buf, kept...)
			if n := len(out.Records); n > 0 {
				fetched = aws.ToString(out.Records[n-1].Dynamodb.SequenceNumber)
			}
			it = out.NextShardIterator
			closed = it == nil
			more = len(out.Records) > 0
		}
		size := max(p.Source.BatchSize, 1)
		if !closed && more && len(buf) < size {
			continue // fill the batch with what is there already
		}
		if len(buf) == 0 || (!closed && len(buf) < size && p.now().Sub(firstAt) < p.Source.Window) {
			if closed && len(buf) == 0 {
				return
			}
			p.pause(ctx, interval)
			continue
		}
		n := min(len(buf), size)
		if !p.deliver(ctx, shard, buf[:n]) {
			return
		}
		buf = buf[n:]
		firstAt = p.now()
	}
}

func (p *StreamPoller) iterator(ctx context.Context, shard, after string, trim bool) (*string, error) {
	in := &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(p.Source.StreamARN), ShardId: aws.String(shard)}
	switch {
	case after != "":
		in.ShardIteratorType, in.SequenceNumber = streamtypes.ShardIteratorTypeAfterSequenceNumber, aws.String(after)
	case trim:
		in.ShardIteratorType = streamtypes.ShardIteratorTypeTrimHorizon
	default:
		in.ShardIteratorType = streamtypes.ShardIteratorTypeLatest
	}
	out, err := p.Streams.GetShardIterator(ctx, in)
	if err != nil {
		return nil, err
	}
	return out.ShardIterator, nil
}

// attempt is a part of a batch still to be handed over, with how many times
// its first record failed.
type attempt struct {
	recs     []streamtypes.Record
	failures int
	lastErr  error // the last invocation's function error
}

// Give-up conditions of an on-failure record, as Lambda names them.
const (
	conditionRetries = "RetryAttemptsExhausted"
	conditionAge     = "RecordAgeExceeded"
)

// deliver hands recs over until each record succeeded or was given up on.
// It reports false when ctx ended first.
func (p *StreamPoller) deliver(ctx context.Context, shard string, recs []streamtypes.Record) bool {
	work := []attempt{{recs: recs}}
	for len(work) > 0 {
		if ctx.Err() != nil {
			return false
		}
		a := work[0]
		if old := p.expired(a.recs); old > 0 {
			p.giveUp(ctx, shard, a, a.recs[:old], conditionAge)
			if a.recs = a.recs[old:]; len(a.recs) == 0 {
				work = work[1:]
				continue
			}
			a.failures = 0
		}
		failedAt, err := p.invoke(ctx, a.recs)
		switch {
		case err != nil && ctx.Err() != nil:
			return false // the stack is stopping: not the function's failure
		case err == nil && failedAt < 0:
			work = work[1:]
			continue
		case err == nil:
			// Retried from the first failed record; the ones before it
			// succeeded.
			if failedAt > 0 {
				a = attempt{recs: a.recs[failedAt:]}
			}
			a.failures++
			a.lastErr = nil
		case p.Source.Bisect && len(a.recs) > 1:
			// Splitting does not count as a retry.
			h := len(a.recs) / 2
			work = append([]attempt{{recs: a.recs[:h], failures: a.failures}, {recs: a.recs[h:], failures: a.failures}}, work[1:]...)
			continue
		default:
			a.failures++
			a.lastErr = err
		}
		if p.Source.MaxRetries >= 0 && a.failures > p.Source.MaxRetries {
			p.giveUp(ctx, shard, a, a.recs, conditionRetries)
			work = work[1:]
			continue
		}
		work[0] = a
		p.pause(ctx, p.RetryDelay)
	}
	return true
}

// expired counts the leading records of recs older than MaxRecordAge
// (records are in order, so the old ones come first).
func (p *StreamPoller) expired(recs []streamtypes.Record) int {
	if p.Source.MaxRecordAge <= 0 {
		return 0
	}
	n := 0
	for _, r := range recs {
		if t := r.Dynamodb.ApproximateCreationDateTime; t == nil || p.now().Sub(*t) <= p.Source.MaxRecordAge {
			break
		}
		n++
	}
	return n
}

// invoke hands recs to the function. It returns the index of the first
// failed record (-1 for none) or the function error. A batch item failure
// that names no stream record of the batch fails the whole batch, as in Lambda.
func (p *StreamPoller) invoke(ctx context.Context, recs []streamtypes.Record) (int, error) {
	ev := events.DynamoDBEvent{Records: make([]events.DynamoDBEventRecord, len(recs))}
	for i, r := range recs {
		ev.Records[i] = p.record(r)
	}
	body, err := invoke(ctx, p.Function, ev)
	if err != nil {
		return 0, fmt.Errorf("invoke: %w", err)
	}
	if !p.Source.ReportItemFailures {
		return -1, nil
	}
	var resp events.DynamoDBEventResponse
	if len(body) > 0 {
		if err := json.Unmarshal(body, &resp); err != nil {
			return 0, fmt.Errorf("function response %q: %w", truncate(string(body)), err)
		}
	}
	first := -1
	for _, f := range resp.BatchItemFailures {
		i := -1
		for j, r := range recs {
			if aws.ToString(r.Dynamodb.SequenceNumber) == f.ItemIdentifier {
				i = j
			}
		}
		if i < 0 {
			p.Logger.Warn("stream poller: a batch item failure names no stream record of the batch; the whole batch is retried", "itemIdentifier", f.ItemIdentifier)
			return 0, nil
		}
		if first < 0 || i < first {
			first = i
		}
	}
	return first, nil
}
