package ddb

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

func reasons(codes ...string) error {
	var rs []types.CancellationReason
	for _, c := range codes {
		rs = append(rs, types.CancellationReason{Code: aws.String(c)})
	}
	return fmt.Errorf("put: %w", &types.TransactionCanceledException{CancellationReasons: rs})
}

func TestIsConditionFailed(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"conditional check failed", fmt.Errorf("wrapped: %w", &types.ConditionalCheckFailedException{}), true},
		{"transaction: condition failed", reasons("ConditionalCheckFailed"), true},
		{"transaction: condition failed beside None", reasons("None", "ConditionalCheckFailed"), true},
		{"transaction: conflict", reasons("TransactionConflict"), false},
		{"transaction: condition failed and throttled", reasons("ConditionalCheckFailed", "ThrottlingError"), false},
		{"transaction: no reasons", reasons(), false},
		{"throttling", &types.ProvisionedThroughputExceededException{}, false},
		{"other", errors.New("boom"), false},
		{"nil", nil, false},
	} {
		if got := IsConditionFailed(tc.err); got != tc.want {
			t.Errorf("%s: IsConditionFailed = %v; want %v", tc.name, got, tc.want)
		}
	}
}

func TestExpired(t *testing.T) {
	now := time.Unix(1000, 0)
	for _, tc := range []struct {
		exp  int64
		want bool
	}{{0, false}, {999, true}, {1000, true}, {1001, false}} {
		if got := Expired(tc.exp, now); got != tc.want {
			t.Errorf("Expired(%d) = %v; want %v", tc.exp, got, tc.want)
		}
	}
}

func TestOldItem(t *testing.T) {
	item := map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "x"}}
	if got := OldItem(fmt.Errorf("w: %w", &types.ConditionalCheckFailedException{Item: item})); got["pk"] == nil {
		t.Fatal("old item not returned")
	}
	if OldItem(errors.New("x")) != nil {
		t.Fatal("old item from a plain error")
	}
}

func TestDurationOr(t *testing.T) {
	for _, tc := range []struct{ d, want time.Duration }{
		{0, time.Hour}, {-time.Second, time.Hour}, {time.Minute, time.Minute},
	} {
		if got := DurationOr(tc.d, time.Hour); got != tc.want {
			t.Errorf("DurationOr(%v, 1h) = %v; want %v", tc.d, got, tc.want)
		}
	}
}
