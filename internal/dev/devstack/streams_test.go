package devstack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// fakeStream is one shard of records; an iterator is the index of the next
// record. A closed shard ends after its last record.
type fakeStream struct {
	mu      sync.Mutex
	recs    []streamtypes.Record
	perCall int
	closed  bool
}

const testStreamARN = "arn:aws:dynamodb:us-east-1:123456789012:table/t/stream/2026-01-01T00:00:00.000"

func seqOf(i int) string { return strconv.Itoa(100000 + i) }

func newFakeStream(n int, created time.Time) *fakeStream {
	s := &fakeStream{perCall: 7, closed: true}
	for i := range n {
		s.add(i, created)
	}
	return s
}

func (s *fakeStream) add(i int, created time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	pk := &streamtypes.AttributeValueMemberS{Value: fmt.Sprintf("p#k-%d", i)}
	s.recs = append(s.recs, streamtypes.Record{
		EventID: aws.String(fmt.Sprintf("ev-%d", i)), EventName: streamtypes.OperationTypeInsert,
		Dynamodb: &streamtypes.StreamRecord{
			ApproximateCreationDateTime: aws.Time(created), SequenceNumber: aws.String(seqOf(i)), SizeBytes: aws.Int64(42),
			StreamViewType: streamtypes.StreamViewTypeNewImage,
			Keys:           map[string]streamtypes.AttributeValue{"pk": pk},
			NewImage: map[string]streamtypes.AttributeValue{"pk": pk, "delaySeconds": &streamtypes.AttributeValueMemberN{Value: "5"},
				"args": &streamtypes.AttributeValueMemberM{Value: map[string]streamtypes.AttributeValue{"userId": &streamtypes.AttributeValueMemberS{Value: "u-1"}}}},
		},
	})
}

func (s *fakeStream) DescribeStream(_ context.Context, in *dynamodbstreams.DescribeStreamInput, _ ...func(*dynamodbstreams.Options)) (*dynamodbstreams.DescribeStreamOutput, error) {
	return &dynamodbstreams.DescribeStreamOutput{StreamDescription: &streamtypes.StreamDescription{
		StreamArn: in.StreamArn, Shards: []streamtypes.Shard{{ShardId: aws.String("shard-1")}},
	}}, nil
}

func (s *fakeStream) GetShardIterator(_ context.Context, in *dynamodbstreams.GetShardIteratorInput, _ ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetShardIteratorOutput, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	pos := 0
	switch in.ShardIteratorType {
	case streamtypes.ShardIteratorTypeLatest:
		pos = len(s.recs)
	case streamtypes.ShardIteratorTypeAfterSequenceNumber:
		pos = slices.IndexFunc(s.recs, func(r streamtypes.Record) bool { return *r.Dynamodb.SequenceNumber == *in.SequenceNumber }) + 1
	}
	return &dynamodbstreams.GetShardIteratorOutput{ShardIterator: aws.String(strconv.Itoa(pos))}, nil
}

func (s *fakeStream) GetRecords(_ context.Context, in *dynamodbstreams.GetRecordsInput, _ ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetRecordsOutput, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i, _ := strconv.Atoi(*in.ShardIterator)
	j := min(i+s.perCall, len(s.recs))
	out := &dynamodbstreams.GetRecordsOutput{Records: slices.Clone(s.recs[i:j]), NextShardIterator: aws.String(strconv.Itoa(j))}
	if s.closed && j == len(s.recs) {
		out.NextShardIterator = nil
	}
	return out, nil
}

// fakeSQS collects what is sent.
type fakeSQS struct {
	mu     sync.Mutex
	bodies []string
}

func (f *fakeSQS) SendMessage(_ context.Context, in *sqs.SendMessageInput, _ ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.bodies = append(f.bodies, *in.MessageBody)
	return &sqs.SendMessageOutput{}, nil
}

func (f *fakeSQS) records(t *testing.T) []OnFailureRecord {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []OnFailureRecord
	for _, b := range f.bodies {
		var r OnFailureRecord
		if err := json.Unmarshal([]byte(b), &r); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

// fakeRelay is the function: behave decides, per invocation, the batch item
// failures or a function error. It logs every batch it is handed and every
// record of a batch that succeeded.
type fakeRelay struct {
	mu      sync.Mutex
	batches [][]string
	done    []string
	behave  func(seqs []string) ([]string, error)
}

func (f *fakeRelay) Invoke(_ context.Context, payload []byte) ([]byte, error) {
	var ev events.DynamoDBEvent
	if err := json.Unmarshal(payload, &ev); err != nil {
		return nil, err
	}
	var seqs []string
	for _, r := range ev.Records {
		seqs = append(seqs, r.Change.SequenceNumber)
	}
	f.mu.Lock()
	f.batches = append(f.batches, seqs)
	f.mu.Unlock()
	failed, err := f.behave(seqs)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	for _, s := range seqs {
		if !slices.Contains(failed, s) {
			f.done = append(f.done, s)
		}
	}
	f.mu.Unlock()
	var resp events.DynamoDBEventResponse
	for _, s := range failed {
		resp.BatchItemFailures = append(resp.BatchItemFailures, events.DynamoDBBatchItemFailure{ItemIdentifier: s})
	}
	return json.Marshal(resp)
}

func testSource() StreamSource {
	return StreamSource{
		Function: "outbox", FunctionARN: "arn:aws:lambda:us-east-1:123456789012:function:t-outbox", StreamARN: testStreamARN,
		TrimHorizon: true, BatchSize: 10, ReportItemFailures: true, Bisect: true, MaxRetries: 2, OnFailureURL: "http://q/failures",
	}
}

func newTestPoller(src StreamSource, stream *fakeStream, fn *fakeRelay, q *fakeSQS) *StreamPoller {
	return &StreamPoller{Source: src, Streams: stream, SQS: q, Function: fn, Region: "us-east-1",
		PollInterval: time.Millisecond, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
}

func seqs(from, to int) []string {
	var out []string
	for i := from; i < to; i++ {
		out = append(out, seqOf(i))
	}
	return out
}

// TestStreamBatchesInOrder: records come in batches of up to BatchSize, in
// the shard's order, each shaped like the record Lambda builds.
func TestStreamBatchesInOrder(t *testing.T) {
	created := time.Now().Truncate(time.Second)
	stream := newFakeStream(25, created)
	var first map[string]any
	fn := &fakeRelay{behave: func([]string) ([]string, error) { return nil, nil }}
	p := newTestPoller(testSource(), stream, fn, &fakeSQS{})
	p.Function = fnFunc(func(ctx context.Context, payload []byte) ([]byte, error) {
		if first == nil {
			var ev struct{ Records []map[string]any }
			if err := json.Unmarshal(payload, &ev); err != nil {
				t.Fatal(err)
			}
			first = ev.Records[0]
		}
		return fn.Invoke(ctx, payload)
	})
	p.readShard(context.Background(), "shard-1", true)

	want := [][]string{seqs(0, 10), seqs(10, 20), seqs(20, 25)}
	if !slices.EqualFunc(fn.batches, want, slices.Equal) {
		t.Fatalf("batches %v, want %v", fn.batches, want)
	}
	for k, v := range map[string]any{
		"eventID": "ev-0", "eventName": "INSERT", "eventVersion": "1.1", "eventSource": "aws:dynamodb",
		"awsRegion": "us-east-1", "eventSourceARN": testStreamARN,
	} {
		if first[k] != v {
			t.Errorf("record %s = %v, want %v", k, first[k], v)
		}
	}
	ddb, _ := first["dynamodb"].(map[string]any)
	wantDDB := map[string]any{
		"ApproximateCreationDateTime": float64(created.Unix()), "SequenceNumber": seqOf(0), "SizeBytes": float64(42), "StreamViewType": "NEW_IMAGE",
		"Keys":     map[string]any{"pk": map[string]any{"S": "p#k-0"}},
		"NewImage": map[string]any{"pk": map[string]any{"S": "p#k-0"}, "delaySeconds": map[string]any{"N": "5"}, "args": map[string]any{"M": map[string]any{"userId": map[string]any{"S": "u-1"}}}},
	}
	for k, v := range wantDDB {
		if got, _ := json.Marshal(ddb[k]); string(got) != string(must(json.Marshal(v))) {
			t.Errorf("dynamodb.%s = %s, want %s", k, got, must(json.Marshal(v)))
		}
	}
	if _, ok := ddb["OldImage"]; ok {
		t.Error("a NEW_IMAGE record carries an OldImage")
	}
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

// TestStreamRetriesFromTheFirstFailedRecord: with batch item failures the
// records before the first failed one are done; the retry starts at it.
func TestStreamRetriesFromTheFirstFailedRecord(t *testing.T) {
	stream := newFakeStream(12, time.Now())
	calls := 0
	fn := &fakeRelay{behave: func([]string) ([]string, error) {
		calls++
		if calls == 1 {
			return []string{seqOf(7), seqOf(3)}, nil
		}
		return nil, nil
	}}
	q := &fakeSQS{}
	newTestPoller(testSource(), stream, fn, q).readShard(context.Background(), "shard-1", true)
	want := [][]string{seqs(0, 10), seqs(3, 10), seqs(10, 12)}
	if !slices.EqualFunc(fn.batches, want, slices.Equal) {
		t.Fatalf("batches %v, want %v", fn.batches, want)
	}
	if got := slices.Compact(slices.Sorted(slices.Values(fn.done))); !slices.Equal(got, seqs(0, 12)) {
		t.Errorf("succeeded %v, want every record", got)
	}
	if got := q.records(t); len(got) != 0 {
		t.Errorf("on-failure records %v; want none", got)
	}
}

// TestStreamGivesUpAndMovesOn: a record the function keeps failing on is
// retried MaxRetries times, then described on the on-failure queue, and the
// shard goes on. With bisect the bad record is isolated first, so the
// others succeed; without, its whole batch is given up on.
func TestStreamGivesUpAndMovesOn(t *testing.T) {
	poison := seqOf(5)
	tests := []struct {
		name                string
		bisect, itemFailure bool
		wantFailed          []string // the batch given up on
		wantDone            []string
		wantSame            int // how many times the batch given up on was handed over as it is
		wantInvokeCount     int
		wantFunctionErr     string
	}{
		{name: "function error, bisect", bisect: true, wantFailed: []string{poison},
			wantDone: append(seqs(0, 5), seqs(6, 14)...), wantSame: 3, wantInvokeCount: 3, wantFunctionErr: "Unhandled"},
		{name: "function error, no bisect", wantFailed: seqs(0, 10), wantDone: seqs(10, 14), wantSame: 3, wantInvokeCount: 3, wantFunctionErr: "Unhandled"},
		// The function reports only the poison record: the ones after it
		// are retried with it (and given up on with it), as in Lambda.
		{name: "batch item failure", itemFailure: true, wantFailed: seqs(5, 10),
			wantDone: append(seqs(0, 5), seqs(6, 14)...), wantSame: 2, wantInvokeCount: 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			stream := newFakeStream(14, time.Now())
			fn := &fakeRelay{behave: func(s []string) ([]string, error) {
				if !slices.Contains(s, poison) {
					return nil, nil
				}
				if tc.itemFailure {
					return []string{poison}, nil
				}
				return nil, errors.New("boom")
			}}
			q := &fakeSQS{}
			src := testSource()
			src.Bisect = tc.bisect
			newTestPoller(src, stream, fn, q).readShard(context.Background(), "shard-1", true)

			got := q.records(t)
			if len(got) != 1 {
				t.Fatalf("on-failure records %+v; want 1", got)
			}
			r := got[0]
			info := r.BatchInfo
			if info.StartSequenceNumber != tc.wantFailed[0] || info.EndSequenceNumber != tc.wantFailed[len(tc.wantFailed)-1] ||
				info.BatchSize != len(tc.wantFailed) || info.ShardID != "shard-1" || info.StreamARN != testStreamARN || info.ApproximateArrivalOfFirstRecord == "" {
				t.Errorf("batch info %+v, want %v", info, tc.wantFailed)
			}
			if r.RequestContext.Condition != "RetryAttemptsExhausted" || r.RequestContext.FunctionARN != src.FunctionARN ||
				r.RequestContext.ApproximateInvokeCount != tc.wantInvokeCount || r.ResponseContext.FunctionError != tc.wantFunctionErr || r.Version != "1.0" {
				t.Errorf("on-failure record %+v", r)
			}
			done := slices.Sorted(slices.Values(fn.done))
			if got := slices.Compact(slices.Clone(done)); !slices.Equal(got, tc.wantDone) || (!tc.itemFailure && len(done) != len(got)) {
				t.Errorf("succeeded %v, want each of %v once", done, tc.wantDone)
			}
			same := 0
			for _, b := range fn.batches {
				if slices.Equal(b, tc.wantFailed) {
					same++
				}
			}
			if same != tc.wantSame {
				t.Errorf("the batch given up on was handed over %d times, want %d (batches %v)", same, tc.wantSame, fn.batches)
			}
		})
	}
}

// TestStreamItemFailureNamingNoRecordFailsTheBatch: as in Lambda, a batch
// item failure whose identifier is in no record retries the whole batch.
func TestStreamItemFailureNamingNoRecordFailsTheBatch(t *testing.T) {
	stream := newFakeStream(3, time.Now())
	calls := 0
	fn := &fakeRelay{behave: func([]string) ([]string, error) {
		if calls++; calls == 1 {
			return []string{""}, nil
		}
		return nil, nil
	}}
	newTestPoller(testSource(), stream, fn, &fakeSQS{}).readShard(context.Background(), "shard-1", true)
	if want := [][]string{seqs(0, 3), seqs(0, 3)}; !slices.EqualFunc(fn.batches, want, slices.Equal) {
		t.Fatalf("batches %v, want %v", fn.batches, want)
	}
}

// TestStreamSkipsRecordsPastTheirAge: records older than MaxRecordAge are
// described on the on-failure queue, never handed over.
func TestStreamSkipsRecordsPastTheirAge(t *testing.T) {
	now := time.Now()
	stream := newFakeStream(0, now)
	for i := range 5 {
		created := now
		if i < 3 {
			created = now.Add(-2 * time.Hour)
		}
		stream.add(i, created)
	}
	fn := &fakeRelay{behave: func([]string) ([]string, error) { return nil, nil }}
	q := &fakeSQS{}
	src := testSource()
	src.MaxRecordAge = time.Hour
	newTestPoller(src, stream, fn, q).readShard(context.Background(), "shard-1", true)
	if want := [][]string{seqs(3, 5)}; !slices.EqualFunc(fn.batches, want, slices.Equal) {
		t.Fatalf("batches %v, want %v", fn.batches, want)
	}
	got := q.records(t)
	if len(got) != 1 || got[0].RequestContext.Condition != "RecordAgeExceeded" || got[0].BatchInfo.StartSequenceNumber != seqOf(0) ||
		got[0].BatchInfo.EndSequenceNumber != seqOf(2) || got[0].BatchInfo.BatchSize != 3 {
		t.Fatalf("on-failure records %+v", got)
	}
}

// TestStreamRunFollowsAnOpenShard: Run keeps reading an open shard, picks
// up records written later and stops with its context.
func TestStreamRunFollowsAnOpenShard(t *testing.T) {
	stream := newFakeStream(3, time.Now())
	stream.closed = false
	fn := &fakeRelay{behave: func([]string) ([]string, error) { return nil, nil }}
	p := newTestPoller(testSource(), stream, fn, &fakeSQS{})
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() { p.Run(ctx); close(stopped) }()
	waitFor := func(n int) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) {
			fn.mu.Lock()
			got := len(fn.done)
			fn.mu.Unlock()
			if got >= n {
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
		t.Fatalf("only %v handed over, want %d records", fn.done, n)
	}
	waitFor(3)
	stream.add(3, time.Now())
	stream.add(4, time.Now())
	waitFor(5)
	cancel()
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not stop with its context")
	}
	fn.mu.Lock()
	defer fn.mu.Unlock()
	if !slices.Equal(fn.done, seqs(0, 5)) {
		t.Fatalf("handed over %v, want %v once each, in order", fn.done, seqs(0, 5))
	}
}

// TestStreamSettings: the event source's properties, with Lambda's
// defaults for what is not set.
func TestStreamSettings(t *testing.T) {
	tests := []struct {
		name  string
		props map[string]any
		want  StreamSource
		err   bool
	}{
		{name: "everything set", props: map[string]any{
			"StartingPosition": "TRIM_HORIZON", "BatchSize": 10, "MaximumBatchingWindowInSeconds": 2, "MaximumRetryAttempts": 4,
			"MaximumRecordAgeInSeconds": 3600, "BisectBatchOnFunctionError": true, "FunctionResponseTypes": []any{"ReportBatchItemFailures"},
		}, want: StreamSource{TrimHorizon: true, BatchSize: 10, Window: 2 * time.Second, MaxRetries: 4, MaxRecordAge: time.Hour, Bisect: true, ReportItemFailures: true}},
		{name: "defaults", props: map[string]any{"StartingPosition": "LATEST"}, want: StreamSource{BatchSize: 100, MaxRetries: -1}},
		{name: "infinite age", props: map[string]any{"StartingPosition": "LATEST", "MaximumRecordAgeInSeconds": -1}, want: StreamSource{BatchSize: 100, MaxRetries: -1}},
		{name: "the template's filter", props: map[string]any{"StartingPosition": "LATEST",
			"FilterCriteria": map[string]any{"Filters": []any{map[string]any{"Pattern": `{"eventName":["INSERT","MODIFY"]}`}}}},
			want: StreamSource{BatchSize: 100, MaxRetries: -1, Filters: []StreamFilter{{EventNames: []string{"INSERT", "MODIFY"}}}}},
		{name: "the markers filter", props: map[string]any{"StartingPosition": "LATEST",
			"FilterCriteria": map[string]any{"Filters": []any{map[string]any{"Pattern": `{"eventName":["INSERT"],"dynamodb":{"NewImage":{"state":{"S":["DONE","FAILED"]}}}}`}}}},
			want: StreamSource{BatchSize: 100, MaxRetries: -1, Filters: []StreamFilter{{EventNames: []string{"INSERT"}, NewImage: map[string][]string{"state": {"DONE", "FAILED"}}}}}},
		{name: "a filter the local stack does not apply", props: map[string]any{"StartingPosition": "LATEST",
			"FilterCriteria": map[string]any{"Filters": []any{map[string]any{"Pattern": `{"dynamodb":{"NewImage":{"x":{"N":["1"]}}}}`}}}}, err: true},
		{name: "a prefix pattern", props: map[string]any{"StartingPosition": "LATEST",
			"FilterCriteria": map[string]any{"Filters": []any{map[string]any{"Pattern": `{"eventName":[{"prefix":"IN"}]}`}}}}, err: true},
		{name: "no starting position", props: map[string]any{}, err: true},
		{name: "bad number", props: map[string]any{"StartingPosition": "LATEST", "BatchSize": "ten"}, err: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := streamSettings(tc.props)
			if (err != nil) != tc.err {
				t.Fatalf("err %v, want error %v", err, tc.err)
			}
			if !tc.err && !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// The template's FilterCriteria (only INSERT and MODIFY) applies locally as
// in Lambda: a REMOVE the TTL writes is read and dropped, never handed to
// the function, and the shard goes on past it.
func TestStreamFilterDropsWhatItDoesNotLetThrough(t *testing.T) {
	stream := newFakeStream(6, time.Now())
	stream.mu.Lock()
	for _, i := range []int{1, 4} {
		stream.recs[i].EventName = streamtypes.OperationTypeRemove
	}
	stream.recs[2].EventName = streamtypes.OperationTypeModify
	stream.closed = true
	stream.mu.Unlock()
	fn := &fakeRelay{behave: func([]string) ([]string, error) { return nil, nil }}
	src := testSource()
	src.Filters = []StreamFilter{{EventNames: []string{"INSERT", "MODIFY"}}}
	newTestPoller(src, stream, fn, &fakeSQS{}).readShard(context.Background(), "shard-1", true)
	want := []string{seqOf(0), seqOf(2), seqOf(3), seqOf(5)}
	if !slices.Equal(fn.done, want) {
		t.Fatalf("handed over %v, want %v (no REMOVE)", fn.done, want)
	}
}

// A filter on the new image (the markers stream's: settled markers only)
// lets through the records whose attribute holds one of its values.
func TestStreamFilterOnTheNewImage(t *testing.T) {
	f := StreamFilter{EventNames: []string{"INSERT", "MODIFY"}, NewImage: map[string][]string{"state": {"DONE", "FAILED", "CANCELLED"}}}
	rec := func(ev streamtypes.OperationType, state string) streamtypes.Record {
		img := map[string]streamtypes.AttributeValue{"MessageKey": &streamtypes.AttributeValueMemberS{Value: "j"}}
		if state != "" {
			img["state"] = &streamtypes.AttributeValueMemberS{Value: state}
		}
		return streamtypes.Record{EventName: ev, Dynamodb: &streamtypes.StreamRecord{NewImage: img}}
	}
	src := StreamSource{Filters: []StreamFilter{f}}
	for _, tc := range []struct {
		r    streamtypes.Record
		pass bool
	}{
		{rec(streamtypes.OperationTypeInsert, "DONE"), true},
		{rec(streamtypes.OperationTypeModify, "CANCELLED"), true},
		{rec(streamtypes.OperationTypeInsert, "LEASED"), false},
		{rec(streamtypes.OperationTypeInsert, ""), false},
		{rec(streamtypes.OperationTypeRemove, "DONE"), false},
	} {
		if got := src.passes(tc.r); got != tc.pass {
			t.Errorf("%s %v: passes %t; want %t", tc.r.EventName, tc.r.Dynamodb.NewImage["state"], got, tc.pass)
		}
	}
}
