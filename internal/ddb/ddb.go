// Package ddb holds the DynamoDB rules every store in runstwice shares: what
// a failed condition looks like, and how a read honours TTL without trusting
// TTL deletion.
package ddb

import (
	"errors"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// IsConditionFailed reports whether err says a write's condition did not
// hold: a ConditionalCheckFailedException, or a TransactionCanceledException
// whose cancellation reasons are all ConditionalCheckFailed (or None, for the
// items of the transaction that did not fail). Anything else, throttling and
// validation errors included, is a real error.
func IsConditionFailed(err error) bool {
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return true
	}
	var tce *types.TransactionCanceledException
	if !errors.As(err, &tce) {
		return false
	}
	failed := false
	for _, r := range tce.CancellationReasons {
		switch code := deref(r.Code); code {
		case "ConditionalCheckFailed":
			failed = true
		case "None", "":
		default:
			return false
		}
	}
	return failed
}

// OldItem returns the item a failed conditional write returned with
// ReturnValuesOnConditionCheckFailure=ALL_OLD, or nil.
func OldItem(err error) map[string]types.AttributeValue {
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return ccf.Item
	}
	return nil
}

// Expired reports whether an item whose TTL attribute holds expiresAt (epoch
// seconds, 0 for none) is past its life at now. DynamoDB may keep expired
// items for days, so reads treat them as absent themselves.
func Expired(expiresAt int64, now time.Time) bool {
	return expiresAt > 0 && expiresAt <= now.Unix()
}

// Epoch returns t as epoch seconds, the unit of DynamoDB TTL attributes.
func Epoch(t time.Time) int64 { return t.Unix() }

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
