// Package ses is the e-mail Sender on Amazon SES v2.
package ses

import (
	"context"
	"errors"
	"fmt"
	"regexp"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sesv2"
	"github.com/aws/aws-sdk-go-v2/service/sesv2/types"

	"github.com/runstwice/runstwice/internal/email"
	"github.com/runstwice/runstwice/internal/runner"
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

// Send sends m as a simple message with a text and an HTML body. A request SES
// rejects for this message (bad request, rejected message) is permanent;
// anything else (throttling, outage) is retried.
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
		var bad *types.BadRequestException
		var rejected *types.MessageRejected
		if errors.As(err, &bad) || errors.As(err, &rejected) {
			return runner.Permanent(fmt.Errorf("ses: send %s: %w", m.ID, err))
		}
		return fmt.Errorf("ses: send %s: %w", m.ID, err)
	}
	return nil
}
