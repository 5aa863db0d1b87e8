package obs

import (
	"errors"
	"fmt"
	"net/textproto"
	"strings"
	"testing"

	"github.com/aws/smithy-go"

	"github.com/runstwice/runstwice/internal/obs/obstest"
)

// Provider messages quote addresses; only the provider's code may leave the
// process. (Table-driven, the common form of a test over cases.)
func TestRedactDropsProviderMessages(t *testing.T) {
	ses := obstest.SESRejection()
	for _, tc := range []struct {
		name string
		err  error
		want []string
	}{
		{"ses rejection", fmt.Errorf("email: send welcome to user u-1: %w", ses), []string{"email: send welcome to user u-1: ", "MessageRejected"}},
		{"generic api error", fmt.Errorf("x: %w", &smithy.GenericAPIError{Code: "AccessDenied", Message: "not authorized to send as " + obstest.PII}), []string{"x: ", "AccessDenied"}},
		{"smtp reply", fmt.Errorf("smtp: send m-1: %w", &textproto.Error{Code: 550, Msg: "<" + obstest.PII + ">: Recipient address rejected"}), []string{"smtp: send m-1: ", "smtp reply 550"}},
		{"joined", errors.Join(errors.New("first"), &textproto.Error{Code: 451, Msg: obstest.PII}), []string{"smtp reply 451"}},
		{"our own", errors.New("email: user u-1: stored e-mail address is not a plain address"), []string{"u-1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Redact(tc.err)
			if strings.Contains(got, obstest.PII) || strings.Contains(got, "not verified") {
				t.Fatalf("Redact = %q: the provider's message leaked", got)
			}
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Fatalf("Redact = %q; want it to contain %q", got, w)
				}
			}
		})
	}
	if Redact(nil) != "" || ErrorCode(ses) != "MessageRejected" || ErrorCode(&textproto.Error{Code: 550}) != "smtp 550" {
		t.Fatal("nil, or error codes")
	}
}

// Input → want: the form of every small parser test (client's TestRegionOf
// too); there is nothing to share across packages.
func TestTraceRoot(t *testing.T) {
	for in, want := range map[string]string{
		"Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1": "1-5759e988-bd862e3fe1be46a994272793",
		"Sampled=1; Root=1-5759e988-bd862e3fe1be46a994272793":                        "1-5759e988-bd862e3fe1be46a994272793",
		"Root=1-XYZ":    "",
		"":              "",
		"Root=<b>x</b>": "",
	} {
		if got := TraceRoot(in); got != want {
			t.Errorf("TraceRoot(%q) = %q; want %q", in, got, want)
		}
	}
}

type ownAdvice struct{}

func (ownAdvice) Error() string                 { return "AccessDenied: verify the sender identity" }
func (ownAdvice) ErrorCode() string             { return "AccessDenied" }
func (ownAdvice) ErrorMessage() string          { return "verify the sender identity" }
func (ownAdvice) ErrorFault() smithy.ErrorFault { return smithy.FaultClient }
func (ownAdvice) Redacted() bool                { return true }

// An error built from the provider's code and our own advice keeps the
// advice.
func TestRedactKeepsOurOwnAdvice(t *testing.T) {
	if got := Redact(fmt.Errorf("send: %w", ownAdvice{})); got != "send: AccessDenied: verify the sender identity" {
		t.Fatalf("Redact = %q", got)
	}
}
