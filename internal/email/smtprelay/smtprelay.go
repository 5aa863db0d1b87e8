// Package smtprelay is the e-mail Sender through any SMTP relay.
package smtprelay

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net"
	"net/mail"
	"net/smtp"
	"net/textproto"
	"strings"
	"time"

	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/internal/email"
)

// DefaultSMTPTimeout bounds one SMTP conversation when the context has no
// deadline.
const DefaultSMTPTimeout = 30 * time.Second

// SMTP sends mail to any SMTP relay (SMTP_ADDR, host:port) with the standard
// library's net/smtp. It upgrades to TLS when the server offers STARTTLS.
type SMTP struct {
	addr string
	from string
	// Auth authenticates to the relay, if set (net/smtp refuses PLAIN over
	// an unencrypted connection except to localhost).
	Auth smtp.Auth
	// TLS configures STARTTLS (server name from the address if nil).
	TLS *tls.Config
	// Now is the clock for the Date header (time.Now if nil).
	Now func() time.Time
}

// New returns a sender through the relay at addr (host:port) from the
// address from.
func New(addr, from string) *SMTP { return &SMTP{addr: addr, from: from} }

// Send delivers m in one SMTP conversation. A 5xx reply (the relay refuses
// the sender, the recipient or the message) is permanent; connection errors
// and 4xx replies are retried.
func (s *SMTP) Send(ctx context.Context, m email.Message) error {
	from, body, err := s.compose(m)
	if err != nil {
		return engine.Permanent(err)
	}
	if err := s.deliver(ctx, from, m.To, body); err != nil {
		var tp *textproto.Error
		if errors.As(err, &tp) && tp.Code >= 500 {
			return engine.Permanent(fmt.Errorf("smtp: send %s: %w", m.ID, err))
		}
		return fmt.Errorf("smtp: send %s: %w", m.ID, err)
	}
	return nil
}

// deliver runs the SMTP conversation: envelope sender from, recipient to.
func (s *SMTP) deliver(ctx context.Context, from, to string, body []byte) error {
	host, _, err := net.SplitHostPort(s.addr)
	if err != nil {
		return fmt.Errorf("address %q: %w", s.addr, err)
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", s.addr)
	if err != nil {
		return err
	}
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(DefaultSMTPTimeout)
	}
	_ = conn.SetDeadline(deadline)
	c, err := smtp.NewClient(conn, host)
	if err != nil {
		conn.Close()
		return err
	}
	defer c.Close()
	if ok, _ := c.Extension("STARTTLS"); ok {
		cfg := s.TLS
		if cfg == nil {
			cfg = &tls.Config{ServerName: host, MinVersion: tls.VersionTLS12}
		}
		if err := c.StartTLS(cfg); err != nil {
			return err
		}
	}
	if s.Auth != nil {
		if err := c.Auth(s.Auth); err != nil {
			return err
		}
	}
	if err := c.Mail(from); err != nil {
		return err
	}
	if err := c.Rcpt(to); err != nil {
		return err
	}
	w, err := c.Data()
	if err != nil {
		return err
	}
	if _, err := w.Write(body); err != nil {
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	// The relay accepted the message when DATA closed: a failed QUIT must
	// not fail the job, or the retry would send the mail again.
	_ = c.Quit()
	return nil
}

// compose builds a multipart/alternative message with a quoted-printable text
// and HTML part, and returns it with the bare sender address for the SMTP
// envelope. Header values come from checked addresses and a one-line subject,
// so nothing can inject a header.
func (s *SMTP) compose(m email.Message) (string, []byte, error) {
	from, err := mail.ParseAddress(s.from)
	if err != nil {
		return "", nil, fmt.Errorf("smtp: sender %q: %w", s.from, err)
	}
	to, err := mail.ParseAddress(m.To)
	if err != nil {
		return "", nil, fmt.Errorf("smtp: recipient: %w", err)
	}
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	domain := from.Address[strings.LastIndexByte(from.Address, '@')+1:]
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	headers := []string{
		"From: " + from.String(),
		"To: " + to.String(),
		"Subject: " + mime.QEncoding.Encode("utf-8", strings.Join(strings.Fields(m.Subject), " ")),
		"Date: " + now().UTC().Format(time.RFC1123Z),
		"Message-ID: <" + m.ID + "@" + domain + ">",
		"MIME-Version: 1.0",
		"Content-Type: multipart/alternative; boundary=" + mw.Boundary(),
	}
	buf.WriteString(strings.Join(headers, "\r\n") + "\r\n\r\n")
	for _, part := range []struct{ typ, body string }{{"text/plain", m.Text}, {"text/html", m.HTML}} {
		pw, err := mw.CreatePart(textproto.MIMEHeader{
			"Content-Type":              {part.typ + "; charset=utf-8"},
			"Content-Transfer-Encoding": {"quoted-printable"},
		})
		if err != nil {
			return "", nil, fmt.Errorf("smtp: compose: %w", err)
		}
		qp := quotedprintable.NewWriter(pw)
		if _, err := qp.Write([]byte(part.body)); err != nil {
			return "", nil, fmt.Errorf("smtp: compose: %w", err)
		}
		if err := qp.Close(); err != nil {
			return "", nil, fmt.Errorf("smtp: compose: %w", err)
		}
	}
	if err := mw.Close(); err != nil {
		return "", nil, fmt.Errorf("smtp: compose: %w", err)
	}
	return from.Address, buf.Bytes(), nil
}
