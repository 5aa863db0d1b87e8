package main

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/engine/enginetest"
	"github.com/runstwice/runstwice/examples/internal/exampletest"
)

// pointsService is a fake loyalty points service: it keeps every
// purchase POSTed to it, with its Idempotency-Key, and answers 201, or the
// status Fail names for a purchase id. Its Effects are a purchase's
// credits.
type pointsService = exampletest.Receiver[Purchase]

// credit is one POST the points service got.
type credit = exampletest.Post[Purchase]

func newPointsService(t *testing.T) *pointsService {
	return exampletest.NewReceiver(t, http.StatusCreated, func(p Purchase) string { return p.ID })
}

// pointsAt is the example's points client, crediting at svc.
func pointsAt(svc *pointsService) Points { return Points{URL: svc.URL, Client: svc.Client()} }

// TestCreditAnswersByTheServicesStatus: a 2xx credits; a 4xx other than
// 408 and 429 is permanent; 408, 429, a 5xx and a service that cannot be
// reached fail the record (its shard stops there, to be retried); a
// purchase without a customer or a positive amount is permanent before any
// call. Every POST carries the purchase and its id as the Idempotency-Key.
func TestCreditAnswersByTheServicesStatus(t *testing.T) {
	cases := []struct {
		name          string
		status        int
		purchase      Purchase
		unreachable   bool
		ok, permanent bool
		posts         int
	}{
		{name: "created", status: http.StatusCreated, purchase: Purchase{"p-1", "c-7", 12}, ok: true, posts: 1},
		{name: "ok", status: http.StatusOK, purchase: Purchase{"p-1", "c-7", 12}, ok: true, posts: 1},
		{name: "bad request", status: http.StatusBadRequest, purchase: Purchase{"p-1", "c-7", 12}, permanent: true, posts: 1},
		{name: "unknown customer", status: http.StatusNotFound, purchase: Purchase{"p-1", "c-7", 12}, permanent: true, posts: 1},
		{name: "request timeout", status: http.StatusRequestTimeout, purchase: Purchase{"p-1", "c-7", 12}, posts: 1},
		{name: "too many requests", status: http.StatusTooManyRequests, purchase: Purchase{"p-1", "c-7", 12}, posts: 1},
		{name: "unavailable", status: http.StatusServiceUnavailable, purchase: Purchase{"p-1", "c-7", 12}, posts: 1},
		{name: "unreachable", status: http.StatusCreated, purchase: Purchase{"p-1", "c-7", 12}, unreachable: true},
		{name: "no customer", status: http.StatusCreated, purchase: Purchase{"p-1", "", 12}, permanent: true},
		{name: "zero amount", status: http.StatusCreated, purchase: Purchase{"p-1", "c-7", 0}, permanent: true},
		{name: "negative amount", status: http.StatusCreated, purchase: Purchase{"p-1", "c-7", -4}, permanent: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			svc := newPointsService(t)
			if c.status != http.StatusCreated {
				svc.Fail(c.purchase.ID, c.status)
			}
			if c.unreachable {
				svc.Close()
			}
			job := engine.Job[Purchase]{Key: c.purchase.ID, Payload: c.purchase, Attempt: 1, Logger: slog.New(slog.DiscardHandler)}
			err := pointsAt(svc).Credit(context.Background(), job)
			if (err == nil) != c.ok || engine.IsPermanent(err) != c.permanent {
				t.Fatalf("Credit = %v; want ok %v, permanent %v", err, c.ok, c.permanent)
			}
			got := svc.Posts()
			if len(got) != c.posts || (c.posts == 1 && got[0] != (credit{Key: "p-1", Payload: c.purchase})) {
				t.Fatalf("the service got %+v; want %d POST(s) of the purchase keyed by its id", got, c.posts)
			}
		})
	}
}

// TestCreditConverges: delivered from a Kinesis stream through the real
// runner twice, concurrently and across a crash at each step, a purchase
// is one credit at a service that dedups by the Idempotency-Key
// (ExactlyOnce: the crash between the POST and the claim repeats the
// POST, under the same key).
func TestCreditConverges(t *testing.T) {
	svc := newPointsService(t)
	enginetest.RunTwice(t, enginetest.Case[Purchase]{
		Kind:        Credit,
		Work:        pointsAt(svc).Credit,
		New:         func(key string) Purchase { return Purchase{ID: key, Customer: "c-7", Amount: 12} },
		Effects:     svc.Effects,
		ExactlyOnce: true,
		Source:      enginetest.Kinesis,
	})
}

// TestTheBatchCreditsEachPurchaseOnce plays the example's event on the
// in-memory store twice (p-1, p-2, p-1 again as a producer's retry put it,
// spelt differently, and p-3, all in one shard): each purchase is credited
// once, in the shard's order, and neither invocation reports a failure.
func TestTheBatchCreditsEachPurchaseOnce(t *testing.T) {
	svc := newPointsService(t)
	h, _ := exampletest.NewHandler(t, Credit, pointsAt(svc).Credit)
	batch := exampletest.DecodeEvent[events.KinesisEvent](t, "kinesis-batch.json")
	for i := range 2 {
		if failed := exampletest.Failures(t, h.HandleKinesis, batch); len(failed) != 0 {
			t.Fatalf("batch %d: failures %v", i+1, failed)
		}
	}
	if got := svc.Posted(); got != "p-1 p-2 p-3" {
		t.Fatalf("the service got %s; want p-1, p-2 and p-3 once each, in order", got)
	}
}

// TestAFailedCreditStopsItsShard: with the points service down for p-2,
// the batch stops at p-2: the response names its sequence number alone,
// and p-3, after it in the shard, is not run. Lambda retries from p-2
// once the service is back: p-2 and p-3 are credited, and a replay of the
// whole batch (from an older checkpoint) credits nothing again.
func TestAFailedCreditStopsItsShard(t *testing.T) {
	svc := newPointsService(t)
	h, _ := exampletest.NewHandler(t, Credit, pointsAt(svc).Credit)
	batch := exampletest.DecodeEvent[events.KinesisEvent](t, "kinesis-batch.json")
	svc.Fail("p-2", http.StatusServiceUnavailable)
	failed := exampletest.Failures(t, h.HandleKinesis, batch)
	if want := batch.Records[1].Kinesis.SequenceNumber; len(failed) != 1 || failed[0] != want {
		t.Fatalf("failures %v; want p-2's sequence number %s alone", failed, want)
	}
	if got := svc.Posted(); got != "p-1 p-2" {
		t.Fatalf("the service got %s; want p-1, then p-2 failing, and nothing after it", got)
	}

	svc.Fail("p-2", 0)
	retry := events.KinesisEvent{Records: batch.Records[1:]}
	if failed := exampletest.Failures(t, h.HandleKinesis, retry); len(failed) != 0 {
		t.Fatalf("the retry from p-2: failures %v", failed)
	}
	if failed := exampletest.Failures(t, h.HandleKinesis, batch); len(failed) != 0 {
		t.Fatalf("the replay: failures %v", failed)
	}
	for _, id := range []string{"p-1", "p-2", "p-3"} {
		if n := svc.Effects(id); n != 1 {
			t.Errorf("%s credited %d times; want once", id, n)
		}
	}
	if got := svc.Posted(); got != "p-1 p-2 p-2 p-3" {
		t.Fatalf("the service got %s; want p-2 again on the retry, then p-3", got)
	}
}

// TestARecordThatCanNeverSucceedIsDeadLettered: a record that is not a
// purchase, and p-1 reused with another amount, go to the dead-letter
// queue with their reasons, never credited, and the shard goes on past
// them: the purchase after them is credited and nothing is retried.
func TestARecordThatCanNeverSucceedIsDeadLettered(t *testing.T) {
	svc := newPointsService(t)
	h, dead := exampletest.NewHandler(t, Credit, pointsAt(svc).Credit)
	batch := exampletest.DecodeEvent[events.KinesisEvent](t, "kinesis-batch.json")
	if failed := exampletest.Failures(t, h.HandleKinesis, batch); len(failed) != 0 {
		t.Fatalf("failures %v", failed)
	}
	shard := batch.Records[0]
	record := func(seq, data string) events.KinesisEventRecord {
		r := shard
		r.EventID, r.Kinesis.SequenceNumber, r.Kinesis.Data = "shardId-000000000003:"+seq, seq, []byte(data)
		return r
	}
	later := events.KinesisEvent{Records: []events.KinesisEventRecord{
		record("900", `purchase p-4 for c-7`),
		record("901", `{"purchaseId":"p-1","customerId":"c-7","amount":99}`),
		record("902", `{"purchaseId":"p-4","customerId":"c-7","amount":8}`),
	}}
	if failed := exampletest.Failures(t, h.HandleKinesis, later); len(failed) != 0 {
		t.Fatalf("failures %v; want the bad records dead-lettered and the shard gone on", failed)
	}
	for seq, want := range map[string]string{"900": "invalid character", "901": engine.ErrFingerprint.Error()} {
		if reason, ok := dead.DeadReason(seq); !ok || !strings.Contains(reason, want) {
			t.Errorf("dead letter of %s: %q (%v); want a reason with %q", seq, reason, ok, want)
		}
	}
	if got := svc.Posted(); got != "p-1 p-2 p-3 p-4" {
		t.Fatalf("the service got %s; want p-4 credited after the bad records, and p-1 never again", got)
	}
}
