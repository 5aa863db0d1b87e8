// Package email is the e-mail use case of runstwice: one runner.Handler per
// e-mail job type (docs/job-types.md), the Users port with its DynamoDB adapter, the
// Sender port with an SES v2 and an SMTP adapter, and the embedded text and
// HTML templates.
//
// The rules it keeps:
//   - A message carries IDs only; the address and the name are loaded from
//     the users table at send time.
//   - Work already unnecessary (user deleted, address already confirmed) is a
//     quiet successful no-op: logged, counted, no mail, and the runner still
//     claims the marker so redeliveries stay cheap.
//   - Secrets are produced at send time: a verification or reset token is 32
//     random bytes; only its SHA-256 and expiry are stored on the user, and the
//     raw token exists only in the link of the mail. It is never logged and
//     never carried in a job message.
package email

import (
	"context"
	"errors"
	"net/mail"
	"time"
)

// User is what the e-mail jobs need of a user record (users table, key
// userId).
type User struct {
	ID             string
	Email          string
	DisplayName    string
	EmailConfirmed bool
}

// Purpose names what a token is for. It is stored beside the token hash so a
// reset token can never confirm an address, nor the reverse.
type Purpose string

// The token purposes.
const (
	PurposeVerification  Purpose = "email-verification"
	PurposePasswordReset Purpose = "password-reset"
)

// Token is a token as stored on a user: the hex SHA-256 of the raw token,
// never the raw token itself.
type Token struct {
	Hash      string
	Purpose   Purpose
	ExpiresAt time.Time
}

// ErrUserGone is returned (wrapped) by Users.SetToken when the user no longer
// exists, or no longer needs the token (an address confirmed meanwhile). The
// handler turns it into a successful no-op.
var ErrUserGone = errors.New("email: user gone or no longer needs the mail")

// PlainAddress returns the address a mail to the stored address s goes to,
// and whether s is usable as it is stored: one address with no display name
// ("ada@example.com", not "Ada <ada@example.com>" nor a list). A mail job
// refuses any other as a permanent failure.
func PlainAddress(s string) (string, bool) {
	addr, err := mail.ParseAddress(s)
	if err != nil || addr.Name != "" {
		return "", false
	}
	return addr.Address, true
}

// Users is the port to the users table.
type Users interface {
	// Get loads a user with a consistent read; ok is false when there is none.
	Get(ctx context.Context, userID string) (u User, ok bool, err error)
	// SetToken stores tok on the user, conditionally: the user must exist
	// and, when onlyUnconfirmed is set, its address must not be confirmed.
	// Otherwise it returns an error matching ErrUserGone.
	SetToken(ctx context.Context, userID string, tok Token, onlyUnconfirmed bool) error
}

// Message is one e-mail to send.
type Message struct {
	// ID identifies the mail: the job's messageId, so a receiving system (or
	// a person) can see that two deliveries are the same mail.
	ID      string
	To      string
	Subject string
	Text    string
	HTML    string
}

// Sender is the port to a mail service. An error that no retry can fix (a
// rejected address) is returned as engine.Permanent.
type Sender interface {
	Send(ctx context.Context, m Message) error
}
