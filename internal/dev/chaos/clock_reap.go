package chaos

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/runstwice/runstwice/internal/ddb"
	"github.com/runstwice/runstwice/internal/dev/stack"
)

// ttlTables are the stack's tables whose items carry a TTL (expiresAt).
var ttlTables = []string{"JobsTable", "MarkersTable", "IdempotencyTable", "DeadLettersTable", "OutboxTable"}

// reapExpired deletes every item of the stack's TTL tables whose expiresAt
// is at or before now, as DynamoDB's TTL does (moto never does), and
// returns how many it deleted: a guard that expires too early on the
// virtual clock is really gone, not only read as absent. Each delete is
// conditional on the item still being expired (a rewrite since the scan
// keeps it).
func reapExpired(ctx context.Context, db *dynamodb.Client, st *stack.Stack, now time.Time) (int, error) {
	n := 0
	epoch := &types.AttributeValueMemberN{Value: strconv.FormatInt(now.Unix(), 10)}
	for _, id := range ttlTables {
		p, ok := st.Physical(id)
		if !ok {
			continue
		}
		desc, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(p.Name)})
		if err != nil {
			return n, fmt.Errorf("chaos: reap %s: %w", p.Name, err)
		}
		var keys []string
		for _, k := range desc.Table.KeySchema {
			keys = append(keys, aws.ToString(k.AttributeName))
		}
		pages := dynamodb.NewScanPaginator(db, &dynamodb.ScanInput{
			TableName:                 aws.String(p.Name),
			FilterExpression:          aws.String("#exp > :zero AND #exp <= :now"),
			ExpressionAttributeNames:  map[string]string{"#exp": ddb.AttrExpiresAt},
			ExpressionAttributeValues: map[string]types.AttributeValue{":now": epoch, ":zero": &types.AttributeValueMemberN{Value: "0"}},
		})
		for pages.HasMorePages() {
			page, err := pages.NextPage(ctx)
			if err != nil {
				return n, fmt.Errorf("chaos: reap %s: %w", p.Name, err)
			}
			for _, item := range page.Items {
				key := map[string]types.AttributeValue{}
				for _, k := range keys {
					key[k] = item[k]
				}
				_, err := db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(p.Name), Key: key,
					ConditionExpression:       aws.String("#exp <= :now"),
					ExpressionAttributeNames:  map[string]string{"#exp": ddb.AttrExpiresAt},
					ExpressionAttributeValues: map[string]types.AttributeValue{":now": epoch}})
				switch {
				case ddb.IsConditionFailed(err):
				case err != nil:
					return n, fmt.Errorf("chaos: reap %s: %w", p.Name, err)
				default:
					n++
				}
			}
		}
	}
	return n, nil
}
