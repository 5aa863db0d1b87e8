//go:build integration

package switchview_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	"github.com/aws/aws-sdk-go-v2/service/ssm/types"

	"github.com/runstwice/runstwice/aws/ssmswitch"
	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/dev/testenv"
	"github.com/runstwice/runstwice/internal/switchview"
)

// TestReadWithMetadata reads a time-boxed value and SSM's record of who set
// it from a real parameter store.
func TestReadWithMetadata(t *testing.T) {
	client := testenv.SSM(t)
	stage := testenv.Name(t, "meta")
	v, err := ssmswitch.Value{Enabled: false, Until: time.Now().Add(time.Hour), Reason: "SES incident 4711"}.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.PutParameter(context.Background(), &ssm.PutParameterInput{
		Name: aws.String(contract.SwitchParameter(stage, contract.Welcome.Name)), Value: aws.String(v), Type: types.ParameterTypeString,
	}); err != nil {
		t.Fatal(err)
	}
	snap, err := switchview.Read(context.Background(), client, contract.SwitchPath(stage),
		map[string]bool{contract.Welcome.Name: true, contract.PartnerDigest.Name: false}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	var w switchview.Entry
	for _, e := range snap.Entries {
		if e.Type == contract.Welcome.Name {
			w = e
		}
	}
	if !w.Readable || w.Effective || w.Reason != "SES incident 4711" || w.Until.IsZero() || w.LastModifiedUser == "" || w.LastModified.IsZero() {
		t.Fatalf("entry %+v; want off with its reason, until, and who changed it", w)
	}
	t.Logf("LastModifiedUser from the emulator: %q", w.LastModifiedUser)
}
