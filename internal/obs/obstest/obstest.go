// Package obstest reads what the obs package wrote, for tests: the counts in
// EMF documents and the fields of JSON log lines; and it makes the provider
// error whose message must never leave the process.
package obstest

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sesv2/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/runstwice/runstwice/engine/enginetest"
)

// Counts sums every job metric in the EMF documents of out: type → metric →
// count. Lines that are not EMF documents are ignored.
func Counts(out string) map[string]map[string]int { return enginetest.MetricCounts(out) }

// Count is Counts(out)[jobType][metric].
func Count(out, jobType, metric string) int { return Counts(out)[jobType][metric] }

// Lines parses every line of out that is a JSON object.
func Lines(out string) []map[string]any {
	var all []map[string]any
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil {
			all = append(all, m)
		}
	}
	return all
}

// PII is the address SESRejection's message quotes.
const PII = "bob@example.com"

// SESRejection is SES v2 refusing a mail for good, as its client returns
// it: an operation error whose provider message quotes the recipient's
// address (PII), which must never leave the process.
func SESRejection() error {
	return &smithy.OperationError{ServiceID: "SESv2", OperationName: "SendEmail", Err: &smithyhttp.ResponseError{
		Response: &smithyhttp.Response{Response: &http.Response{StatusCode: 400}},
		Err:      &types.MessageRejected{Message: aws.String("Email address is not verified: " + PII)},
	}}
}
