package scalemodel

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// The table's write counters hold the current second's keys alone: an
// hour of new items at 1,000 a second must not keep a counter for each.
func TestTheTableCountsOnlyThisSecondsWrites(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		db := NewDB()
		for sec := range 5 {
			for i := range 10 {
				pk := fmt.Sprintf("item#%d#%d", sec, i)
				_, err := db.UpdateItem(context.Background(), &dynamodb.UpdateItemInput{TableName: aws.String("jobs"),
					Key:                       map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: pk}},
					UpdateExpression:          aws.String("SET #0 = :0"),
					ExpressionAttributeNames:  map[string]string{"#0": "v"},
					ExpressionAttributeValues: map[string]types.AttributeValue{":0": &types.AttributeValueMemberN{Value: "1"}}})
				if err != nil {
					t.Fatal(err)
				}
				db.Drop(pk)
			}
			time.Sleep(time.Second)
		}
		if n := len(db.writes); n > 10 {
			t.Errorf("the table keeps %d write counters after 50 items written over 5 seconds; want this second's alone, at most 10", n)
		}
	})
}
