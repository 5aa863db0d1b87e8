package devstack

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/aws/smithy-go"

	"github.com/runstwice/runstwice/internal/dev/awsproxy"
)

// Mail is one e-mail SES accepted from a function.
type Mail struct {
	// MessageID is the id SES gave the mail.
	MessageID string `json:"messageId"`
	// JobID is the job that sent it (the jobId e-mail tag), "" if untagged.
	JobID   string   `json:"jobId,omitempty"`
	From    string   `json:"from"`
	To      []string `json:"to"`
	Subject string   `json:"subject"`
	// Body is the HTML body when there is one, else the text body.
	Body string `json:"body"`
	// Link is the first link in the body, or "".
	Link string    `json:"link"`
	Time time.Time `json:"time"`
}

// MailLog is what the stack knows of the mail it sent.
type MailLog interface {
	// Recent returns up to n of the latest mails, oldest first.
	Recent(n int) []Mail
}

var linkPattern = regexp.MustCompile(`https?://[^\s"'<>]+`)

// firstLink returns the first link in body, HTML entities for & undone.
func firstLink(body string) string {
	return strings.ReplaceAll(linkPattern.FindString(body), "&amp;", "&")
}

// mailboxSize is how many mails a Mailbox keeps.
const mailboxSize = 1000

// Mailbox records every SES v2 SendEmail that passes the AWS proxy and that
// SES accepts. It is a MailLog.
type Mailbox struct {
	// OnMail, when set, is called with each mail as it is recorded.
	OnMail func(Mail)
	mu     sync.Mutex
	mails  []Mail // a ring of mailboxSize once full
	next   int
	total  int
}

// Hook is the awsproxy hook that records mail.
func (b *Mailbox) Hook(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := awsproxy.CallOf(r)
		if c == nil || c.Service != "ses" || c.Operation != "SendEmail" || r.URL.Path != "/v2/email/outbound-emails" {
			next.ServeHTTP(w, r)
			return
		}
		rec := &responseCopy{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(rec, r)
		if rec.status != http.StatusOK {
			return
		}
		if m, err := parseSendEmail(c.Body, rec.body.Bytes()); err == nil {
			b.add(m)
		}
	})
}

func (b *Mailbox) add(m Mail) {
	m.Time = time.Now()
	b.mu.Lock()
	if len(b.mails) < mailboxSize {
		b.mails = append(b.mails, m)
	} else {
		b.mails[b.next] = m
	}
	b.next = (b.next + 1) % mailboxSize
	b.total++
	onMail := b.OnMail
	b.mu.Unlock()
	if onMail != nil {
		onMail(m)
	}
}

// Recent implements MailLog.
func (b *Mailbox) Recent(n int) []Mail {
	b.mu.Lock()
	defer b.mu.Unlock()
	n = min(max(n, 0), len(b.mails))
	out := make([]Mail, 0, n)
	start := b.next - n // next is the oldest once the ring is full
	for i := range n {
		out = append(out, b.mails[(start+i+mailboxSize)%mailboxSize])
	}
	return out
}

// Total is how many mails were recorded since the start.
func (b *Mailbox) Total() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.total
}

// parseSendEmail reads a SES v2 SendEmail request (simple content) and its
// response.
func parseSendEmail(req, resp []byte) (Mail, error) {
	var in struct {
		FromEmailAddress string
		Destination      struct{ ToAddresses []string }
		Content          struct {
			Simple *struct {
				Subject struct{ Data string }
				Body    struct {
					Text, HTML *struct{ Data string }
				}
			}
		}
		EmailTags []struct{ Name, Value string }
	}
	if err := json.Unmarshal(req, &in); err != nil {
		return Mail{}, err
	}
	var out struct{ MessageId string }
	_ = json.Unmarshal(resp, &out)
	m := Mail{MessageID: out.MessageId, From: in.FromEmailAddress, To: in.Destination.ToAddresses}
	if s := in.Content.Simple; s != nil {
		m.Subject = s.Subject.Data
		switch {
		case s.Body.HTML != nil:
			m.Body = s.Body.HTML.Data
		case s.Body.Text != nil:
			m.Body = s.Body.Text.Data
		}
	}
	m.Link = firstLink(m.Body)
	for _, t := range in.EmailTags {
		if t.Name == "jobId" {
			m.JobID = t.Value
		}
	}
	return m, nil
}

// responseCopy passes a response through and keeps its status and body.
type responseCopy struct {
	http.ResponseWriter
	status int
	body   bytes.Buffer
}

func (r *responseCopy) WriteHeader(status int) {
	r.status = status
	r.ResponseWriter.WriteHeader(status)
}

func (r *responseCopy) Write(p []byte) (int, error) {
	if r.body.Len() < 64<<10 {
		r.body.Write(p)
	}
	return r.ResponseWriter.Write(p)
}

// isAlreadyExists reports an AlreadyExistsException from any service.
func isAlreadyExists(err error) bool {
	var ae smithy.APIError
	return errors.As(err, &ae) && strings.Contains(ae.ErrorCode(), "AlreadyExists")
}
