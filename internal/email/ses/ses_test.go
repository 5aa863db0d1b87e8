package ses

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sesv2"
	"github.com/aws/aws-sdk-go-v2/service/sesv2/types"
	"github.com/aws/smithy-go"

	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/internal/email"
)

// fakeSES answers SendEmail with err, as the SDK does: wrapped in an
// operation error. It records the last request.
type fakeSES struct {
	err error
	in  *sesv2.SendEmailInput
}

func (f *fakeSES) SendEmail(_ context.Context, in *sesv2.SendEmailInput, _ ...func(*sesv2.Options)) (*sesv2.SendEmailOutput, error) {
	f.in = in
	if f.err != nil {
		return nil, &smithy.OperationError{ServiceID: "SESv2", OperationName: "SendEmail", Err: f.err}
	}
	return &sesv2.SendEmailOutput{MessageId: aws.String("ses-1")}, nil
}

// recipient is an address SES quotes in its messages; it must never appear
// in an error.
const recipient = "bob@example.org"

var msg = email.Message{ID: "m-1", To: recipient, Subject: "s", Text: "t", HTML: "<p>t</p>"}

// TestSendClassifiesSESErrors: a send SES will never accept (not authorised,
// an unverified identity, a rejected or invalid message) is permanent and
// says what to fix; throttling and outages are retried. Every error SES
// answered carries its code and never SES's message text.
func TestSendClassifiesSESErrors(t *testing.T) {
	denied := "User `arn:aws:sts::123456789012:assumed-role/email/fn' is not authorized to perform `ses:SendEmail' on resource `arn:aws:ses:us-east-1:123456789012:identity/" + recipient + "'"
	tests := []struct {
		name      string
		err       error
		code      string
		permanent bool
		fix       []string // what the message must say
		wait      error    // the wait it wraps, if any
	}{
		{"IAM denies the recipient's identity in the sandbox", &smithy.GenericAPIError{Code: "AccessDeniedException", Message: denied, Fault: smithy.FaultClient},
			"AccessDeniedException", true, []string{"verify the sender identity", "SES sandbox, verify every recipient", "grants ses:SendEmail"}, nil},
		{"query-style AccessDenied", &smithy.GenericAPIError{Code: "AccessDenied", Message: denied}, "AccessDenied", true, []string{"grants ses:SendEmail"}, nil},
		{"not authorized", &smithy.GenericAPIError{Code: "NotAuthorized", Message: denied}, "NotAuthorized", true, []string{"verify the sender identity"}, nil},
		{"unverified recipient in the sandbox", &types.MessageRejected{Message: aws.String("Email address is not verified. The following identities failed the check in region US-EAST-1: " + recipient)},
			"MessageRejected", true, []string{"every recipient must be a verified identity"}, nil},
		{"MAIL FROM domain not verified", &types.MailFromDomainNotVerifiedException{Message: aws.String("MAIL FROM domain of " + recipient + " is not verified")},
			"MailFromDomainNotVerifiedException", true, []string{"MAIL FROM domain"}, nil},
		{"invalid address", &types.BadRequestException{Message: aws.String("Illegal address " + recipient)}, "BadRequestException", true, []string{"invalid"}, nil},
		{"throttled", &types.TooManyRequestsException{Message: aws.String("Maximum sending rate exceeded for " + recipient)}, "TooManyRequestsException", false, nil, nil},
		{"SES outage", &types.InternalServiceErrorException{Message: aws.String("internal error")}, "InternalServiceErrorException", false, nil, nil},
		{"the daily quota, as SES v2's throttle", &types.TooManyRequestsException{Message: aws.String("Daily message quota exceeded.")},
			"TooManyRequestsException", false, nil, email.ErrDailyQuota},
		{"the daily quota, as a limit", &types.LimitExceededException{Message: aws.String("Daily message quota exceeded.")},
			"LimitExceededException", false, nil, email.ErrDailyQuota},
		{"the daily quota, query-style", &smithy.GenericAPIError{Code: "Throttling", Message: "Daily message quota exceeded."},
			"Throttling", false, nil, email.ErrDailyQuota},
		{"the rate is not the quota", &smithy.GenericAPIError{Code: "Throttling", Message: "Maximum sending rate exceeded."},
			"Throttling", false, nil, nil},
		{"sending paused", &types.SendingPausedException{Message: aws.String("Sending paused for this account. For more information, contact " + recipient)},
			"SendingPausedException", false, nil, email.ErrSendingPaused},
		{"account suspended", &types.AccountSuspendedException{Message: aws.String("suspended")}, "AccountSuspendedException", true, []string{"permanently restricted"}, nil},
		{"no such configuration set", &types.NotFoundException{Message: aws.String("Configuration set <tracking> does not exist.")},
			"NotFoundException", true, []string{"SesConfigurationSet"}, nil},
		{"denied on the configuration set", &smithy.GenericAPIError{Code: "AccessDeniedException", Message: "not authorized on configuration-set/tracking"},
			"AccessDeniedException", true, []string{"configuration set"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := New(&fakeSES{err: tc.err}, "no-reply@runstwice.dev").Send(context.Background(), msg)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range []error{email.ErrDailyQuota, email.ErrSendingPaused} {
				if errors.Is(err, w) != (w == tc.wait) {
					t.Errorf("errors.Is(%v, %v) = %v; want %v", err, w, !(w == tc.wait), w == tc.wait)
				}
			}
			if got := engine.IsPermanent(err); got != tc.permanent {
				t.Errorf("permanent = %v, want %v: %v", got, tc.permanent, err)
			}
			var se *SendError
			if !errors.As(err, &se) || se.Code != tc.code || se.MessageID != msg.ID {
				t.Fatalf("got %#v, want a *SendError with code %s", err, tc.code)
			}
			var api smithy.APIError
			if !errors.As(err, &api) || api.ErrorCode() != tc.code {
				t.Errorf("the code is not readable as a smithy.APIError: %v", err)
			}
			text := err.Error()
			if !strings.Contains(text, tc.code) {
				t.Errorf("%q does not carry the code %s", text, tc.code)
			}
			for _, want := range tc.fix {
				if !strings.Contains(text, want) {
					t.Errorf("%q does not say %q", text, want)
				}
			}
			if strings.Contains(text, recipient) || strings.Contains(text, "failed the check") || strings.Contains(text, "not authorized") ||
				strings.Contains(text, "quota exceeded") || strings.Contains(text, "does not exist") {
				t.Errorf("%q carries SES's message text", text)
			}
		})
	}
}

// TestSendRetriesWhatSESNeverAnswered: a failure before SES answers
// (network, deadline) is retried and keeps its cause.
func TestSendRetriesWhatSESNeverAnswered(t *testing.T) {
	err := New(&fakeSES{err: context.DeadlineExceeded}, "no-reply@runstwice.dev").Send(context.Background(), msg)
	if err == nil || engine.IsPermanent(err) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want a retryable error wrapping the deadline", err)
	}
	var se *SendError
	if errors.As(err, &se) {
		t.Errorf("got a *SendError for an error SES never answered: %v", err)
	}
}

// TestSendRequest: one simple message from the sender to the one recipient,
// in the configuration set when one is set.
func TestSendRequest(t *testing.T) {
	f := &fakeSES{}
	s := New(f, "no-reply@runstwice.dev")
	s.ConfigurationSet = "tracking"
	if err := s.Send(context.Background(), msg); err != nil {
		t.Fatal(err)
	}
	in := f.in
	if aws.ToString(in.FromEmailAddress) != "no-reply@runstwice.dev" || len(in.Destination.ToAddresses) != 1 || in.Destination.ToAddresses[0] != recipient ||
		aws.ToString(in.ConfigurationSetName) != "tracking" || aws.ToString(in.Content.Simple.Subject.Data) != "s" {
		t.Errorf("request %+v", in)
	}
}
