package switchview

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	"github.com/aws/aws-sdk-go-v2/service/ssm/types"

	"github.com/runstwice/runstwice/internal/contract"
)

// fakeSSM holds parameters under one path, on one page.
type fakeSSM struct {
	params map[string]string
	user   string
	err    error
}

func (f *fakeSSM) GetParametersByPath(_ context.Context, in *ssm.GetParametersByPathInput, _ ...func(*ssm.Options)) (*ssm.GetParametersByPathOutput, error) {
	if f.err != nil {
		return nil, f.err
	}
	out := &ssm.GetParametersByPathOutput{}
	for n, v := range f.params {
		if strings.HasPrefix(n, aws.ToString(in.Path)+"/") {
			out.Parameters = append(out.Parameters, types.Parameter{Name: aws.String(n), Value: aws.String(v)})
		}
	}
	return out, nil
}

func (f *fakeSSM) DescribeParameters(_ context.Context, in *ssm.DescribeParametersInput, _ ...func(*ssm.Options)) (*ssm.DescribeParametersOutput, error) {
	if f.err != nil {
		return nil, f.err
	}
	out := &ssm.DescribeParametersOutput{}
	for n := range f.params {
		if strings.HasPrefix(n, in.ParameterFilters[0].Values[0]+"/") {
			out.Parameters = append(out.Parameters, types.ParameterMetadata{
				Name: aws.String(n), LastModifiedUser: aws.String(f.user), LastModifiedDate: aws.Time(time.Unix(1_700_000_000, 0)),
			})
		}
	}
	return out, nil
}

const (
	digest  = "email.partner-digest.v1"
	welcome = "email.welcome.v1"
)

func TestRead(t *testing.T) {
	f := &fakeSSM{user: "arn:aws:iam::123456789012:user/oncall", params: map[string]string{
		"/runstwice/test/toggles/" + welcome:              `{"enabled":false,"until":"2027-01-15T08:00:10Z","reason":"SES incident 4711"}`,
		"/runstwice/test/toggles/" + digest:               "garbage",
		"/runstwice/test/toggles/email.partner-digets.v1": "true",
	}}
	now := time.Date(2027, 1, 15, 8, 0, 0, 0, time.UTC)
	defaults := map[string]bool{welcome: true, digest: false}
	snap, err := Read(context.Background(), f, contract.SwitchPath("test"), defaults, now)
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Entries) != 2 || snap.Parameters != 3 || !snap.At.Equal(now) {
		t.Fatalf("entries %+v, %d parameters", snap.Entries, snap.Parameters)
	}
	d, w := snap.Entries[0], snap.Entries[1]
	if d.Type != digest || !d.HasStored || d.Readable || d.Problem == "" || d.Effective || d.LastModifiedUser != f.user {
		t.Errorf("digest entry %+v; want unreadable, default (off) applies, who changed it", d)
	}
	until := time.Date(2027, 1, 15, 8, 0, 10, 0, time.UTC)
	if w.Type != welcome || !w.Readable || w.Enabled || w.Effective || !w.Until.Equal(until) || w.Expired ||
		w.Reason != "SES incident 4711" || w.LastModifiedUser != f.user || w.LastModified.IsZero() {
		t.Errorf("welcome entry %+v; want off until %s with its reason and who", w, until)
	}
	if snap.Unknown["email.partner-digets.v1"] != "true" || len(snap.Unknown) != 1 {
		t.Fatalf("unknown = %v", snap.Unknown)
	}
	// Ten seconds later the time-boxed value has expired: the default is back.
	snap, err = Read(context.Background(), f, contract.SwitchPath("test"), defaults, now.Add(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if w := snap.Entries[1]; !w.Expired || !w.Effective || w.Enabled {
		t.Fatalf("welcome after its expiry %+v; want expired and on (its default)", w)
	}
	f.err = errors.New("AccessDenied")
	if _, err := Read(context.Background(), f, contract.SwitchPath("test"), defaults, now); err == nil {
		t.Fatal("Read must return SSM errors to the operator")
	}
}
