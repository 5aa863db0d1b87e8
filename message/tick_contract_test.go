package message

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/runstwice/runstwice/engine"
)

const typeFanout = "test.fanout.v1"

// fanoutType is a tick type shaped like the weekly digest fan-out.
func fanoutType() JobType {
	return JobType{
		Name: typeFanout, Args: []ArgSpec{
			{Name: "digestId", Format: testFormatWeek, Required: true, MaxLen: 8},
			{Name: "after", Format: FormatID},
		},
		Queue: "bulk", KeyPrefix: "fanout", KeyArgs: []string{"digestId"}, WhileOff: engine.Skip,
		TickArgs: func(at time.Time) map[string]string { return map[string]string{"digestId": testISOWeek(at)} },
	}
}

func tickRegistry(t *testing.T) *Registry {
	t.Helper()
	r, err := NewRegistry(append(testTypes(), fanoutType())...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func tickBody(scheduled string) string {
	return `{"v":1,"type":"` + typeFanout + `","schedule":"weekly","scheduledTime":"` + scheduled + `","correlationId":"exec-1"}`
}

// A tick's job id comes from the schedule and the scheduled time alone: the
// same time (however it is written) is the same job, another time or
// another schedule is another, and it is the id an API request of caller
// schedule:<name> with the time as its Idempotency-Key gets.
func TestTickEnvelopeDerivesTheJob(t *testing.T) {
	reg := tickRegistry(t)
	derive := func(body string) Envelope {
		t.Helper()
		if !IsTick([]byte(body)) {
			t.Fatalf("IsTick(%s) = false", body)
		}
		tick, err := DecodeTick([]byte(body))
		if err != nil {
			t.Fatal(err)
		}
		env, err := reg.TickEnvelope(tick)
		if err != nil {
			t.Fatal(err)
		}
		return env
	}
	env := derive(tickBody("2026-12-07T09:00:00Z"))
	want := DeriveMessageID("schedule:weekly", "2026-12-07T09:00:00Z")
	if env.MessageID != want {
		t.Fatalf("job id %s, want DeriveMessageID(schedule:weekly, the time) = %s", env.MessageID, want)
	}
	if env.Type != typeFanout || env.Key != "fanout:2026-W50" || env.Args["digestId"] != "2026-W50" || len(env.Args) != 1 ||
		env.CorrelationID != "exec-1" || !env.EnqueuedAt.Equal(time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC)) {
		t.Fatalf("envelope %+v", env)
	}
	for _, tc := range []struct {
		name, body string
		same       bool
	}{
		{"the same tick again", tickBody("2026-12-07T09:00:00Z"), true},
		{"the same instant with an offset", tickBody("2026-12-07T10:00:00+01:00"), true},
		{"another time", tickBody("2026-12-07T09:01:00Z"), false},
		{"another schedule", strings.Replace(tickBody("2026-12-07T09:00:00Z"), `"weekly"`, `"weekly-2"`, 1), false},
	} {
		if got := derive(tc.body).MessageID; (got == env.MessageID) != tc.same {
			t.Errorf("%s: id %s vs %s, want same=%v", tc.name, got, env.MessageID, tc.same)
		}
	}
}

func TestTickRejects(t *testing.T) {
	reg := tickRegistry(t)
	for _, tc := range []struct {
		name, body string
		want       error
	}{
		{"unknown field", strings.Replace(tickBody("2026-12-07T09:00:00Z"), `{"v":1`, `{"v":1,"x":2`, 1), ErrMalformed},
		{"bad time", tickBody("next monday"), ErrMalformed},
		{"bad schedule", strings.Replace(tickBody("2026-12-07T09:00:00Z"), `"weekly"`, `"a/b"`, 1), ErrMalformed},
		{"no correlation id", strings.Replace(tickBody("2026-12-07T09:00:00Z"), `"exec-1"`, `""`, 1), ErrMalformed},
		{"not a tick type", strings.Replace(tickBody("2026-12-07T09:00:00Z"), typeFanout, typeDigest, 1), ErrMalformed},
		{"unknown type", strings.Replace(tickBody("2026-12-07T09:00:00Z"), typeFanout, "test.nope.v1", 1), ErrUnknownType},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tick, err := DecodeTick([]byte(tc.body))
			if err == nil {
				_, err = reg.TickEnvelope(tick)
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("error %v, want one matching %v", err, tc.want)
			}
		})
	}
}

func TestIsTickTellsTicksFromEnvelopes(t *testing.T) {
	env, _ := validEnvelope().Encode()
	withID := strings.Replace(tickBody("2026-12-07T09:00:00Z"), `{"v":1`, `{"v":1,"messageId":"x"`, 1)
	for body, want := range map[string]bool{
		tickBody("2026-12-07T09:00:00Z"): true, string(env): false, withID: false, "not json": false, `[]`: false,
	} {
		if got := IsTick([]byte(body)); got != want {
			t.Errorf("IsTick(%s) = %v, want %v", body, got, want)
		}
	}
}

// A tick type that would park while off is refused: its ticks would pile up.
func TestTickTypeMustSkip(t *testing.T) {
	ft := fanoutType()
	ft.WhileOff = engine.Park
	if _, err := NewRegistry(ft); err == nil {
		t.Fatal("a tick type that parks was registered")
	}
}
