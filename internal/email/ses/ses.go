// Package ses is the e-mail Sender on Amazon SES v2.
package ses

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sesv2"
	"github.com/aws/aws-sdk-go-v2/service/sesv2/types"
	"github.com/aws/smithy-go"

	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/internal/email"
)

// SESAPI is the part of the SES v2 client the sender uses.
type SESAPI interface {
	SendEmail(ctx context.Context, in *sesv2.SendEmailInput, optFns ...func(*sesv2.Options)) (*sesv2.SendEmailOutput, error)
}

// SES sends mail through SES v2 SendEmail from a fixed sender (MAIL_FROM).
type SES struct {
	client SESAPI
	from   string
	// ConfigurationSet is the SES configuration set, if any.
	ConfigurationSet string
}

// New returns a sender through client from the address from.
func New(client SESAPI, from string) *SES { return &SES{client: client, from: from} }

// tagValue is what SES accepts as a tag value.
var tagValue = regexp.MustCompile(`^[A-Za-z0-9_-]{1,256}$`)

func utf8Content(s string) *types.Content {
	return &types.Content{Data: aws.String(s), Charset: aws.String("UTF-8")}
}

// Send sends m as a simple message with a text and an HTML body, in the
// configuration set when one is set. A send SES refuses for good (not
// authorised, an unverified identity, a rejected or malformed message, a
// suspended account) is permanent and says what to fix; one it refuses for
// the daily quota or a pause wraps email.ErrDailyQuota or
// email.ErrSendingPaused (the job waits); anything else (throttling,
// outage) is retried. An error SES answered is a *SendError:
// its code, never SES's message text, which can quote addresses.
func (s *SES) Send(ctx context.Context, m email.Message) error {
	in := &sesv2.SendEmailInput{
		FromEmailAddress: aws.String(s.from),
		Destination:      &types.Destination{ToAddresses: []string{m.To}},
		Content: &types.EmailContent{Simple: &types.Message{
			Subject: utf8Content(m.Subject),
			Body:    &types.Body{Text: utf8Content(m.Text), Html: utf8Content(m.HTML)},
		}},
	}
	if tagValue.MatchString(m.ID) {
		// The job id travels with the mail (SES event destinations, the
		// local stack's mail view) so a mail can be traced to its job.
		in.EmailTags = []types.MessageTag{{Name: aws.String("jobId"), Value: aws.String(m.ID)}}
	}
	if s.ConfigurationSet != "" {
		in.ConfigurationSetName = aws.String(s.ConfigurationSet)
	}
	if _, err := s.client.SendEmail(ctx, in); err != nil {
		return classify(m.ID, err)
	}
	return nil
}

// notAuthorised is what to fix when SES refuses to authorise a send.
const notAuthorised = "SES did not authorise the send: verify the sender identity (MAIL_FROM or its domain) in SES; " +
	"while the account is in the SES sandbox, verify every recipient too; " +
	"and check that the function's role grants ses:SendEmail for this sender and for its configuration set " +
	"(the one SesConfigurationSet names, or the identity's default set)"

// permanentCodes are the SES v2 error codes no retry fixes, each with what an
// operator must fix.
var permanentCodes = map[string]string{
	"AccessDenied":           notAuthorised,
	"AccessDeniedException":  notAuthorised,
	"NotAuthorized":          notAuthorised,
	"NotAuthorizedException": notAuthorised,
	"UnauthorizedOperation":  notAuthorised,
	"MailFromDomainNotVerifiedException": "the custom MAIL FROM domain of the sender identity is not verified in SES: " +
		"publish its MX and SPF records or stop using a custom MAIL FROM domain",
	"MessageRejected": "SES rejected the message: while the account is in the SES sandbox every recipient must be a verified identity; " +
		"otherwise SES refused its content",
	"BadRequestException": "SES refused the request as invalid (a sender, recipient or content it does not accept)",
	"AccountSuspendedException": "SES has permanently restricted the account's sending: see the SES console's account dashboard; " +
		"redrive once AWS has lifted it",
	"NotFoundException": "SES does not know a resource the send names: check that the configuration set SesConfigurationSet names " +
		"(SES_CONFIGURATION_SET) exists in this region",
}

// dailyQuota is how SES says a send met the account's daily quota: the
// message of its throttling error, whatever the error's code.
const dailyQuota = "daily message quota exceeded"

// waits are the SES refusals a job waits out rather than retries: the
// daily quota, and sending paused.
func waits(api smithy.APIError) error {
	switch {
	case strings.Contains(strings.ToLower(api.ErrorMessage()), dailyQuota):
		return email.ErrDailyQuota
	case api.ErrorCode() == "SendingPausedException":
		return email.ErrSendingPaused
	}
	return nil
}

// SendError is a send SES answered with an error: the error code, and what
// to fix when no retry can. It never carries SES's message text, which can
// quote e-mail addresses. It implements smithy.APIError, so callers read the
// code as from any SDK error.
type SendError struct {
	// MessageID is the id of the message that was not sent.
	MessageID string
	// Code is SES's error code, e.g. AccessDeniedException.
	Code string
	// Fix says what to change; empty when a retry may succeed.
	Fix string
	// Fault says whether SES blamed the request or itself.
	Fault smithy.ErrorFault
	// Wait is email.ErrDailyQuota or email.ErrSendingPaused when SES
	// refused the send for one of them (the job waits), else nil.
	Wait error
}

// Unwrap returns Wait, so errors.Is finds the daily quota or a pause.
func (e *SendError) Unwrap() error { return e.Wait }

func (e *SendError) Error() string {
	msg := "ses: send " + e.MessageID + ": " + e.Code
	if e.Fix != "" {
		msg += ": " + e.Fix
	}
	return msg
}

// Redacted reports that the error's text carries no SES message: it is
// kept as it is in logs and dead-letter reasons (obs.Redact).
func (e *SendError) Redacted() bool { return true }

// ErrorCode returns SES's error code.
func (e *SendError) ErrorCode() string { return e.Code }

// ErrorMessage returns what to fix (never SES's own message).
func (e *SendError) ErrorMessage() string { return e.Fix }

// ErrorFault returns whether SES blamed the client or the server.
func (e *SendError) ErrorFault() smithy.ErrorFault { return e.Fault }

var _ smithy.APIError = (*SendError)(nil)

// classify turns a SendEmail error into a *SendError (permanent when its
// code is in permanentCodes) when SES answered with one; a failure before
// any answer (network, deadline) keeps its cause and is retried.
func classify(id string, err error) error {
	var api smithy.APIError
	if !errors.As(err, &api) {
		return fmt.Errorf("ses: send %s: %w", id, err)
	}
	se := &SendError{MessageID: id, Code: api.ErrorCode(), Fault: api.ErrorFault(), Wait: waits(api)}
	if se.Wait != nil {
		return se
	}
	fix, permanent := permanentCodes[se.Code]
	if !permanent {
		return se
	}
	se.Fix = fix
	return engine.Permanent(se)
}
