package scalemodel_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/runstwice/runstwice/internal/dev/scalemodel"
)

func add(db *scalemodel.DB, pk string, ids ...string) error {
	_, err := db.UpdateItem(context.Background(), &dynamodb.UpdateItemInput{TableName: aws.String("jobs"),
		Key:                       map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: pk}},
		UpdateExpression:          aws.String("ADD #0 :0 SET #1 = if_not_exists(#1, :1) + :2"),
		ConditionExpression:       aws.String("attribute_not_exists(#0) OR size (#0) < :3"),
		ExpressionAttributeNames:  map[string]string{"#0": "jobIds", "#1": "n"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":0": &types.AttributeValueMemberSS{Value: ids}, ":1": &types.AttributeValueMemberN{Value: "0"}, ":2": &types.AttributeValueMemberN{Value: "1"}, ":3": &types.AttributeValueMemberN{Value: "100000"}},
	})
	return err
}

func code(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

// The simulated table refuses what DynamoDB would: an item past 400 KB
// (names and values counted), and the 1,001st write of one item in a
// second; the next second takes writes again.
func TestTheTableRefusesWhatDynamoDBWould(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		db := scalemodel.NewDB()
		id := strings.Repeat("x", 1000)
		var err error
		n := 0
		for ; err == nil && n < 500; n++ {
			err = add(db, "big", id+string(rune('a'+n%26))+strings.Repeat("y", n/26))
		}
		if code(err) != "ValidationException" || n < 390 || n > 410 {
			t.Fatalf("after %d ids of 1 KB: %v; want the item refused past 400 KB", n, err)
		}
		if got := db.Stats(); got.LargestItem > scalemodel.MaxItemSize || got.TooLarge != 1 {
			t.Fatalf("stats %+v; want no item over the limit and one write refused", got)
		}
		for i := range scalemodel.MaxWritesPerSecond {
			if err := add(db, "hot", "a"); err != nil {
				t.Fatalf("write %d: %v", i, err)
			}
		}
		if err := add(db, "hot", "a"); code(err) != "ThrottlingException" {
			t.Fatalf("the 1,001st write in a second: %v; want ThrottlingException", err)
		}
		if err := add(db, "other", "a"); err != nil {
			t.Fatalf("another item: %v", err)
		}
		time.Sleep(time.Second)
		if err := add(db, "hot", "a"); err != nil {
			t.Fatalf("the next second: %v", err)
		}
		if st := db.Stats(); st.MostItemWrites != scalemodel.MaxWritesPerSecond || st.Throttled != 1 {
			t.Fatalf("stats %+v; want 1,000 writes of one item in a second and one throttled", st)
		}
		it := db.Item("hot")
		if n, ok := it["n"].(*types.AttributeValueMemberN); !ok || n.Value != "1001" {
			t.Fatalf("the counter reads %v; want the 1,001 writes applied", it["n"])
		}
	})
}
