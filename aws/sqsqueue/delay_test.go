package sqsqueue

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/runstwice/runstwice/engine"
)

// sends is an SQSAPI that records every SendMessage.
type sends struct {
	mu sync.Mutex
	in []*sqs.SendMessageInput
}

func (s *sends) SendMessage(_ context.Context, in *sqs.SendMessageInput, _ ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.in = append(s.in, in)
	return &sqs.SendMessageOutput{}, nil
}

// A delay is sent rounded up to the whole second, on every path that sends
// one (a new job, a park), so a message never becomes visible before it is
// due: SQS counts DelaySeconds in whole seconds, and a job due in 1.4 s
// sent with 1 would run 0.4 s early.
func TestDelaysRoundUp(t *testing.T) {
	for _, tc := range []struct {
		delay time.Duration
		want  int32
	}{
		{0, 0},
		{-time.Second, 0},
		{time.Nanosecond, 1},
		{400 * time.Millisecond, 1},
		{999 * time.Millisecond, 1},
		{time.Second, 1},
		{time.Second + time.Millisecond, 2},
		{1999 * time.Millisecond, 2},
		{899*time.Second + time.Millisecond, 900},
		{engine.MaxDelay, 900},
		{engine.MaxDelay + time.Second, 900},
	} {
		t.Run(tc.delay.String(), func(t *testing.T) {
			if got := DelaySeconds(tc.delay); got != tc.want {
				t.Errorf("DelaySeconds(%v) = %d, want %d", tc.delay, got, tc.want)
			}
			api := &sends{}
			s := New(api, map[string]string{"default": "https://sqs.us-east-1.amazonaws.com/123456789012/default"}, "")
			ctx := context.Background()
			if err := s.Send(ctx, Message{Queue: "default", Body: "{}", Delay: tc.delay}); err != nil {
				t.Fatal(err)
			}
			rec := events.SQSMessage{MessageId: "m-1", Body: "{}", EventSourceARN: "arn:aws:sqs:us-east-1:123456789012:default"}
			if err := s.Park(ctx, rec, tc.delay); err != nil {
				t.Fatal(err)
			}
			for i, in := range api.in {
				if in.DelaySeconds != tc.want {
					t.Errorf("send %d went with DelaySeconds %d, want %d", i, in.DelaySeconds, tc.want)
				}
			}
		})
	}
}
