package chaos

import (
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"

	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/internal/dev/awsproxy"
)

// send is one SES v2 SendEmail a function made that reached SES.
type send struct {
	JobID string
	// MessageID is the id SES gave the mail ("" when SES refused it).
	MessageID string
	Status    int
	// Began is when the function's request reached the proxy; Time is
	// when SES had answered it (the mail is out from then on).
	Began time.Time
	Time  time.Time
	// CallerGone: the function was gone (its process killed) before the
	// answer reached it, so it never learned that the mail went out.
	CallerGone bool
}

// claim is one claim of a job's marker that reached DynamoDB and was
// applied (the marker written DONE).
type claim struct {
	JobID string
	Time  time.Time
}

// witness sees, on the wire, the two writes a job's story turns on: every
// SendEmail that reaches SES (by the job id the mail is tagged with, so
// each mail SES holds can be traced to its job) and every claim of a
// marker. It is an awsproxy hook after the fault injector: it sees what was
// applied. Both calls go on upstream even when the function dies meanwhile,
// so what they did is known.
type witness struct {
	now    func() time.Time
	mu     sync.Mutex
	sends  []send
	claims []claim
}

func newWitness() *witness { return &witness{now: time.Now} }

// Hook is the awsproxy hook.
func (s *witness) Hook(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := awsproxy.CallOf(r)
		claimOf := ""
		switch {
		case c == nil:
		case c.Service == "ses" && c.Operation == "SendEmail":
		case c.Service == "dynamodb" && c.Operation == "PutItem":
			if claimOf = claimedJob(c.Body); claimOf != "" {
				break
			}
			fallthrough
		default:
			next.ServeHTTP(w, r)
			return
		}
		began := s.now()
		rec := httptest.NewRecorder()
		next.ServeHTTP(rec, r.WithContext(context.WithoutCancel(r.Context())))
		now := s.now()
		s.mu.Lock()
		if claimOf != "" {
			if rec.Code == http.StatusOK {
				s.claims = append(s.claims, claim{JobID: claimOf, Time: now})
			}
		} else {
			var out struct{ MessageId string }
			if rec.Code == http.StatusOK {
				_ = json.Unmarshal(rec.Body.Bytes(), &out)
			}
			s.sends = append(s.sends, send{JobID: mailJobID(c.Body), MessageID: out.MessageId, Status: rec.Code, Began: began, Time: now,
				CallerGone: r.Context().Err() != nil})
		}
		s.mu.Unlock()
		maps.Copy(w.Header(), rec.Header())
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
	})
}

// claimedJob returns the job a PutItem claims (a marker item written
// DONE), or "".
func claimedJob(body []byte) string {
	var in struct {
		Item struct {
			HandlerName struct{ S string }
			MessageKey  struct{ S string }
			State       struct{ S string } `json:"state"`
		}
	}
	if json.Unmarshal(body, &in) != nil || in.Item.HandlerName.S == "" || in.Item.State.S != string(engine.StateDone) {
		return ""
	}
	return in.Item.MessageKey.S
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

func (s *witness) snapshot() ([]send, []claim) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]send(nil), s.sends...), append([]claim(nil), s.claims...)
}

// count is how many mails SES accepted so far.
func (s *witness) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, m := range s.sends {
		if m.MessageID != "" {
			n++
		}
	}
	return n
}
