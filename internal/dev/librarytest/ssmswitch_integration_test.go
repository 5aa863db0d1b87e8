//go:build integration

package librarytest_test

import (
	"bytes"
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	"github.com/aws/aws-sdk-go-v2/service/ssm/types"

	"github.com/runstwice/runstwice/aws/ssmswitch"
	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/dev/moto"
	"github.com/runstwice/runstwice/internal/dev/testenv"
	"github.com/runstwice/runstwice/internal/obs"
	"github.com/runstwice/runstwice/internal/obs/obstest"
)

func put(t *testing.T, client *ssm.Client, name, value string) {
	t.Helper()
	if _, err := client.PutParameter(context.Background(), &ssm.PutParameterInput{
		Name: aws.String(name), Value: aws.String(value), Type: types.ParameterTypeString, Overwrite: aws.Bool(true),
	}); err != nil {
		t.Fatal(err)
	}
}

// TestFlipSeenAfterTTL flips a real parameter on moto: the change is seen
// after the TTL and not before, with one SSM call per TTL.
func TestFlipSeenAfterTTL(t *testing.T) {
	counter := testenv.NewCallCounter()
	client := testenv.SSM(t, counter.Option)
	stage := testenv.Name(t, "flip")
	reg := contract.Registry()
	put(t, client, contract.SwitchParameter(stage, contract.PartnerDigest.Name), "false")

	now := time.Unix(1_800_000_000, 0)
	src := ssmswitch.New(client, contract.SwitchPath(stage), func(n string) bool { _, err := reg.Lookup(n); return err == nil })
	src.Now = func() time.Time { return now }
	src.TTL = 30 * time.Second
	ctx := context.Background()
	counter.Reset()

	if src.IsJobEnabled(ctx, contract.PartnerDigest.Name, false) {
		t.Fatal("digest enabled while its parameter is false")
	}
	put(t, client, contract.SwitchParameter(stage, contract.PartnerDigest.Name), "true")
	now = now.Add(29 * time.Second)
	for range 50 {
		if src.IsJobEnabled(ctx, contract.PartnerDigest.Name, false) {
			t.Fatal("flip seen before the TTL passed")
		}
	}
	now = now.Add(2 * time.Second)
	if !src.IsJobEnabled(ctx, contract.PartnerDigest.Name, false) {
		t.Fatal("flip not seen after the TTL")
	}
	if n := counter.Get("SSM.GetParametersByPath"); n != 2 {
		t.Fatalf("SSM calls over two TTL windows and 52 checks: %s; want 2", counter)
	}
	t.Logf("AWS calls for 52 toggle checks over 2 TTL windows: %s", counter)
}

// TestUnreachableStaysClosed points the source at a port nobody listens on:
// a fail-closed type stays off, a fail-open one stays on, and the failed
// read is counted as ToggleReadFailed{type=unreachable}, from the error the
// real SDK returns.
func TestUnreachableStaysClosed(t *testing.T) {
	port, err := testenv.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	cfg := moto.Config("http://127.0.0.1:"+itoa(port), testenv.Region)
	src := ssmswitch.New(ssm.NewFromConfig(cfg), contract.SwitchPath("local"), nil)
	var metrics bytes.Buffer
	src.Metrics = engine.NewMetrics(&metrics, obs.Namespace)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if src.IsJobEnabled(ctx, contract.PartnerDigest.Name, false) {
		t.Fatal("fail-closed type enabled with SSM unreachable")
	}
	if !src.IsJobEnabled(ctx, contract.Welcome.Name, true) {
		t.Fatal("fail-open type disabled with SSM unreachable")
	}
	src.Metrics.Flush()
	if n := obstest.Count(metrics.String(), "unreachable", engine.ToggleReadFailed); n != 1 {
		t.Fatalf("ToggleReadFailed{type=unreachable} = %d; want 1 (one refresh):\n%s", n, metrics.String())
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
