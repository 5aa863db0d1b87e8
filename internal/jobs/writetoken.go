package jobs

import (
	"crypto/rand"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/runstwice/runstwice/internal/ddb"
)

// attrWriteToken is the attribute a conditional write stores its own
// token in when a failed condition would otherwise read as "another got
// there first". An UpdateItem applied whose response is lost is retried
// by the SDK; the retry's condition then fails against the item this very
// write left. Asked for the item it failed against
// (ReturnValuesOnConditionCheckFailure), the retry finds its own token
// there, and knows the write is its own, not another's.
const attrWriteToken = "writeToken"

// writeToken is a fresh token for one conditional write.
type writeToken string

func newWriteToken() writeToken { return writeToken(rand.Text()) }

// set adds the token to upd.
func (t writeToken) set(upd expression.UpdateBuilder) expression.UpdateBuilder {
	return upd.Set(expression.Name(attrWriteToken), expression.Value(string(t)))
}

// ownsFailure reports whether err, a failed condition of a write that
// asked for the item it failed against, found that item as this token's
// write left it: the write was applied, and its retry failed against it.
func (t writeToken) ownsFailure(err error) bool {
	v, ok := ddb.OldItem(err)[attrWriteToken].(*types.AttributeValueMemberS)
	return ok && v.Value == string(t)
}
