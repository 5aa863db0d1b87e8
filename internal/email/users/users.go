// Package users is the users table: the email.Users port on DynamoDB.
package users

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/runstwice/runstwice/internal/ddb"
	"github.com/runstwice/runstwice/internal/email"
)

// Attribute names of the users table (docs/storage.md). UserID is the hash key.
const (
	AttrUserID         = "userId"
	AttrEmail          = "email"
	AttrDisplayName    = "displayName"
	AttrEmailConfirmed = "emailConfirmed"
	AttrTokenHash      = "tokenHash"
	AttrTokenExpiresAt = "tokenExpiresAt" // epoch seconds
	AttrTokenPurpose   = "tokenPurpose"
)

// DynamoAPI is the part of the DynamoDB client the users adapter uses.
// Like every store, it declares its own SDK methods on purpose: the
// template's IAM test derives each function's actions from these interfaces
// (internal/dev/stack/iam_test.go).
type DynamoAPI interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
}

// Table is the email.Users port on the users table.
type Table struct {
	client DynamoAPI
	table  string
}

// New returns the adapter for table.
func New(client DynamoAPI, table string) *Table {
	return &Table{client: client, table: table}
}

// userItem is a user as stored; the token attributes are write-only here.
type userItem struct {
	UserID         string `dynamodbav:"userId"`
	Email          string `dynamodbav:"email"`
	DisplayName    string `dynamodbav:"displayName"`
	EmailConfirmed bool   `dynamodbav:"emailConfirmed"`
}

// Get loads a user with a consistent read, projecting only what a mail needs
// (never the token attributes).
func (d *Table) Get(ctx context.Context, userID string) (email.User, bool, error) {
	proj := expression.NamesList(expression.Name(AttrUserID), expression.Name(AttrEmail),
		expression.Name(AttrDisplayName), expression.Name(AttrEmailConfirmed))
	expr, err := expression.NewBuilder().WithProjection(proj).Build()
	if err != nil {
		return email.User{}, false, fmt.Errorf("users: projection: %w", err)
	}
	out, err := d.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:                aws.String(d.table),
		Key:                      ddb.KeyS(AttrUserID, userID),
		ConsistentRead:           aws.Bool(true),
		ProjectionExpression:     expr.Projection(),
		ExpressionAttributeNames: expr.Names(),
	})
	if err != nil {
		return email.User{}, false, fmt.Errorf("users: get %s: %w", userID, err)
	}
	if len(out.Item) == 0 {
		return email.User{}, false, nil
	}
	var it userItem
	if err := attributevalue.UnmarshalMap(out.Item, &it); err != nil {
		return email.User{}, false, fmt.Errorf("users: decode %s: %w", userID, err)
	}
	return email.User{ID: it.UserID, Email: it.Email, DisplayName: it.DisplayName, EmailConfirmed: it.EmailConfirmed}, true, nil
}

// SetToken stores the token hash, purpose and expiry on an existing user in
// one conditional UpdateItem (the user must exist; with onlyUnconfirmed its
// address must not be confirmed). A failed condition returns email.ErrUserGone.
func (d *Table) SetToken(ctx context.Context, userID string, tok email.Token, onlyUnconfirmed bool) error {
	cond := expression.AttributeExists(expression.Name(AttrUserID))
	if onlyUnconfirmed {
		cond = cond.And(expression.Or(
			expression.AttributeNotExists(expression.Name(AttrEmailConfirmed)),
			expression.Name(AttrEmailConfirmed).Equal(expression.Value(false)),
		))
	}
	upd := expression.Set(expression.Name(AttrTokenHash), expression.Value(tok.Hash)).
		Set(expression.Name(AttrTokenPurpose), expression.Value(string(tok.Purpose))).
		Set(expression.Name(AttrTokenExpiresAt), expression.Value(ddb.Epoch(tok.ExpiresAt)))
	u, err := ddb.Update(d.table, ddb.KeyS(AttrUserID, userID), upd, cond, false)
	if err != nil {
		return fmt.Errorf("users: token: %w", err)
	}
	if _, err = d.client.UpdateItem(ctx, ddb.UpdateInput(u)); err != nil {
		if ddb.IsConditionFailed(err) {
			return fmt.Errorf("%w: %s", email.ErrUserGone, userID)
		}
		return fmt.Errorf("users: set token on %s: %w", userID, err)
	}
	return nil
}

// ErrNoUser is returned (wrapped) by SetEmail for a user that does not exist.
var ErrNoUser = errors.New("users: no such user")

// SetEmail stores address as the user's e-mail address, in one conditional
// UpdateItem (the user must exist, or it returns an error matching
// ErrNoUser), and returns the address it replaced. The confirmation is left
// as it was: this mends how an address is stored, it does not change whose
// it is (jobctl users set-email).
func (d *Table) SetEmail(ctx context.Context, userID, address string) (previous string, err error) {
	u, err := ddb.Update(d.table, ddb.KeyS(AttrUserID, userID),
		expression.Set(expression.Name(AttrEmail), expression.Value(address)),
		expression.AttributeExists(expression.Name(AttrUserID)), false)
	if err != nil {
		return "", fmt.Errorf("users: e-mail: %w", err)
	}
	in := ddb.UpdateInput(u)
	in.ReturnValues = types.ReturnValueUpdatedOld
	out, err := d.client.UpdateItem(ctx, in)
	if ddb.IsConditionFailed(err) {
		return "", fmt.Errorf("%w: %s", ErrNoUser, userID)
	}
	if err != nil {
		return "", fmt.Errorf("users: set e-mail of %s: %w", userID, err)
	}
	var old userItem
	if err := attributevalue.UnmarshalMap(out.Attributes, &old); err != nil {
		return "", fmt.Errorf("users: decode %s: %w", userID, err)
	}
	return old.Email, nil
}

// ErrUserExists is returned (wrapped) when a new user's id is taken.
var ErrUserExists = errors.New("users: user exists")

// NewUserPut is the Put of a new user, unconfirmed, for the application's
// own TransactWriteItems (a signup that enqueues its verification mail
// through the outbox in the same transaction): conditional on the id being
// free, so a second signup of one user fails the whole transaction.
func NewUserPut(table string, u email.User) (types.TransactWriteItem, error) {
	item, err := attributevalue.MarshalMap(userItem{UserID: u.ID, Email: u.Email, DisplayName: u.DisplayName})
	if err != nil {
		return types.TransactWriteItem{}, fmt.Errorf("users: new user %s: %w", u.ID, err)
	}
	expr, err := expression.NewBuilder().WithCondition(expression.AttributeNotExists(expression.Name(AttrUserID))).Build()
	if err != nil {
		return types.TransactWriteItem{}, fmt.Errorf("users: new user %s: %w", u.ID, err)
	}
	return types.TransactWriteItem{Put: &types.Put{
		TableName: aws.String(table), Item: item, ConditionExpression: expr.Condition(),
		ExpressionAttributeNames: expr.Names(),
	}}, nil
}

// The weekly digest's sparse index (template.yaml, UsersTable's
// DigestIndex): only an item with a digest attribute is in it, keyed by
// digest with userId as its range key, so a query pages the weekly digest's
// users in user id order without reading anyone else.
const (
	DigestIndexName = "digest"
	AttrDigest      = "digest"
	DigestWeekly    = "weekly"
)

// QueryAPI is the part of the DynamoDB client the digest index uses.
type QueryAPI interface {
	Query(ctx context.Context, in *dynamodb.QueryInput, optFns ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
}

// DigestIndex pages the users of the weekly partner digest (digest.Directory).
type DigestIndex struct {
	client QueryAPI
	table  string
}

// NewDigestIndex returns the digest index of table.
func NewDigestIndex(client QueryAPI, table string) *DigestIndex {
	return &DigestIndex{client: client, table: table}
}

// WeeklyDigestPage reads at most limit items of the index with digest =
// weekly and a user id greater than after, keeps those whose address is
// confirmed, and returns their ids with the last id it read as next (""
// when the index has no more). The index is eventually consistent: a user
// who opted in a moment ago may be read by next week's run.
func (d *DigestIndex) WeeklyDigestPage(ctx context.Context, after string, limit int) ([]string, string, error) {
	key := expression.Key(AttrDigest).Equal(expression.Value(DigestWeekly))
	if after != "" {
		key = key.And(expression.Key(AttrUserID).GreaterThan(expression.Value(after)))
	}
	expr, err := expression.NewBuilder().WithKeyCondition(key).
		WithFilter(expression.Name(AttrEmailConfirmed).Equal(expression.Value(true))).
		WithProjection(expression.NamesList(expression.Name(AttrUserID))).Build()
	if err != nil {
		return nil, "", fmt.Errorf("users: digest query: %w", err)
	}
	out, err := d.client.Query(ctx, &dynamodb.QueryInput{
		TableName: aws.String(d.table), IndexName: aws.String(DigestIndexName),
		KeyConditionExpression: expr.KeyCondition(), FilterExpression: expr.Filter(), ProjectionExpression: expr.Projection(),
		ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(), Limit: aws.Int32(int32(limit)),
	})
	if err != nil {
		return nil, "", fmt.Errorf("users: digest page after %q: %w", after, err)
	}
	ids := make([]string, 0, len(out.Items))
	for _, item := range out.Items {
		var it userItem
		if err := attributevalue.UnmarshalMap(item, &it); err != nil {
			return nil, "", fmt.Errorf("users: decode digest page: %w", err)
		}
		ids = append(ids, it.UserID)
	}
	next := ""
	if lek := out.LastEvaluatedKey; len(lek) > 0 {
		if err := attributevalue.Unmarshal(lek[AttrUserID], &next); err != nil {
			return nil, "", fmt.Errorf("users: digest page: last key: %w", err)
		}
	}
	return ids, next, nil
}
