package chaos

import (
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"

	"github.com/runstwice/runstwice/internal/dev/awsproxy"
)

// send is one SES v2 SendEmail a function made that reached SES.
type send struct {
	JobID string
	// MessageID is the id SES gave the mail ("" when SES refused it).
	MessageID string
	Status    int
	Time      time.Time
	// CallerGone: the function was gone (its process killed) before the
	// answer reached it, so it never learned that the mail went out.
	CallerGone bool
}

// sends records every SendEmail that reaches SES, by the job id the mail
// is tagged with, so each mail SES holds can be traced to its job. It is an
// awsproxy hook (after the fault injector: it sees what was applied).
type sends struct {
	now func() time.Time
	mu  sync.Mutex
	all []send
}

func newSends() *sends { return &sends{now: time.Now} }

// Hook is the awsproxy hook.
func (s *sends) Hook(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := awsproxy.CallOf(r)
		if c == nil || c.Service != "ses" || c.Operation != "SendEmail" {
			next.ServeHTTP(w, r)
			return
		}
		// The call goes on to SES even if the function dies meanwhile, so
		// the mail it may send is known; its answer is passed on after.
		rec := httptest.NewRecorder()
		next.ServeHTTP(rec, r.WithContext(context.WithoutCancel(r.Context())))
		var out struct{ MessageId string }
		if rec.Code == http.StatusOK {
			_ = json.Unmarshal(rec.Body.Bytes(), &out)
		}
		s.mu.Lock()
		s.all = append(s.all, send{JobID: mailJobID(c.Body), MessageID: out.MessageId, Status: rec.Code, Time: s.now(),
			CallerGone: r.Context().Err() != nil})
		s.mu.Unlock()
		maps.Copy(w.Header(), rec.Header())
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
	})
}

// mailJobID reads the jobId tag of a SendEmail request.
func mailJobID(body []byte) string {
	var in struct {
		EmailTags []struct{ Name, Value string }
	}
	_ = json.Unmarshal(body, &in)
	for _, t := range in.EmailTags {
		if t.Name == "jobId" {
			return t.Value
		}
	}
	return ""
}

func (s *sends) snapshot() []send {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]send(nil), s.all...)
}

// count is how many mails SES accepted so far.
func (s *sends) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, m := range s.all {
		if m.MessageID != "" {
			n++
		}
	}
	return n
}
