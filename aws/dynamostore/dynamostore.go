// Package dynamostore is the engine.Store on a DynamoDB table: the markers
// of a function built on the engine.
//
// The table has the string hash key HandlerName, which holds
// "<job type>#<job id>" (one partition per job, so no type's markers share
// a hot key), the string range key MessageKey (the job id), and TTL on the
// number attribute expiresAt. Reads ignore an item past its expiresAt
// rather than trust TTL deletion, which can lag by days. The function's
// role needs dynamodb:GetItem, BatchGetItem, PutItem and DeleteItem on it.
package dynamostore

import (
	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/internal/marker"
)

// API is the part of the DynamoDB client (*dynamodb.Client) the store uses.
type API = marker.DynamoAPI

// Store is the marker store on one table. Its Retention (how long a settled
// marker lives, engine.DefaultRetention if 0) and Now (the clock) may be
// set before use.
type Store = marker.Dynamo

// New returns the store on table.
func New(client API, table string) *Store { return marker.NewDynamo(client, table) }

var _ engine.Store = (*Store)(nil)
