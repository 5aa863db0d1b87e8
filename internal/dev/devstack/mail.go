package devstack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/aws/smithy-go"
)

// Mail is one e-mail moto's SES accepted.
type Mail struct {
	ID           string              `json:"id"`
	Source       string              `json:"source"`
	Subject      string              `json:"subject"`
	Body         string              `json:"body"` // the HTML body when there is one
	Destinations map[string][]string `json:"destinations"`
}

// To returns the recipients.
func (m Mail) To() []string { return m.Destinations["ToAddresses"] }

var linkPattern = regexp.MustCompile(`https?://[^\s"'<>]+`)

// Link returns the first link in the body, or "".
func (m Mail) Link() string {
	return strings.ReplaceAll(linkPattern.FindString(m.Body), "&amp;", "&")
}

// SentMail reads every mail moto's SES has sent, oldest first, from its
// GET /moto-api/data.json.
func SentMail(ctx context.Context, endpoint string) ([]Mail, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(endpoint, "/")+"/moto-api/data.json", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("devstack: read sent mail: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return nil, fmt.Errorf("devstack: read sent mail: %s: %s", resp.Status, b)
	}
	var data struct {
		SES map[string]json.RawMessage `json:"ses"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&data); err != nil {
		return nil, fmt.Errorf("devstack: read sent mail: %w", err)
	}
	var mails []Mail
	if raw, ok := data.SES["Message"]; ok {
		if err := json.Unmarshal(raw, &mails); err != nil {
			return nil, fmt.Errorf("devstack: read sent mail: %w", err)
		}
	}
	return mails, nil
}

// WatchMail prints every new mail (to, subject, link) to w until ctx is done.
func WatchMail(ctx context.Context, endpoint string, w io.Writer, every time.Duration) {
	seen := map[string]bool{}
	for {
		if mails, err := SentMail(ctx, endpoint); err == nil {
			for _, m := range mails {
				if seen[m.ID] {
					continue
				}
				seen[m.ID] = true
				fmt.Fprintf(w, "mail  to=%s  subject=%q  link=%s\n", strings.Join(m.To(), ","), m.Subject, m.Link())
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(every):
		}
	}
}

// isAlreadyExists reports an AlreadyExistsException from any service.
func isAlreadyExists(err error) bool {
	var ae smithy.APIError
	return errors.As(err, &ae) && strings.Contains(ae.ErrorCode(), "AlreadyExists")
}
