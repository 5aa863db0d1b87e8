package devstack

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sesv2"
)

// DemoUser is a user the local stack seeds.
type DemoUser struct {
	UserID         string `dynamodbav:"userId"`
	Email          string `dynamodbav:"email"`
	DisplayName    string `dynamodbav:"displayName"`
	EmailConfirmed bool   `dynamodbav:"emailConfirmed"`
	// Digest is "weekly" for a user of the weekly partner digest (the
	// users table's sparse digest index holds only users with one).
	Digest string `dynamodbav:"digest,omitempty"`
}

// DemoUsers are the seeded users: u-demo-1 has not confirmed its address
// (a verification mail goes out), u-demo-2 has (a verification is a no-op)
// and gets the weekly partner digest,
// and u-bad's stored address is not a plain address (BadUserEmail), so a
// mail job for it is dead-lettered at once, the failure to try the
// dead-letter workflow on.
var DemoUsers = []DemoUser{
	{UserID: "u-demo-1", Email: "demo1@example.com", DisplayName: "Demo One", EmailConfirmed: false},
	{UserID: "u-demo-2", Email: "demo2@example.com", DisplayName: "Demo Two", EmailConfirmed: true, Digest: "weekly"},
	{UserID: BadUser, Email: BadUserEmail, DisplayName: "Bad Address", EmailConfirmed: false},
}

// BadUser is the seeded user whose stored address is unusable; BadUserEmail
// is that address, a display name and an address in one field, which the
// e-mail job refuses as a permanent failure. Setting its address to
// FixedBadUserEmail (`jobctl users set-email`) fixes it.
const (
	BadUser           = "u-bad"
	BadUserEmail      = "Bad Address <bad@example.com>"
	FixedBadUserEmail = "bad@example.com"
)

// PutItemAPI is the part of the DynamoDB client seeding uses.
type PutItemAPI interface {
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
}

// SeedUsers writes users into the users table, replacing them (make run
// seeds DemoUsers; make chaos its own).
func SeedUsers(ctx context.Context, client PutItemAPI, table string, users []DemoUser) error {
	for _, u := range users {
		item, err := attributevalue.MarshalMap(u)
		if err != nil {
			return err
		}
		if _, err := client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: item}); err != nil {
			return fmt.Errorf("devstack: seed %s: %w", u.UserID, err)
		}
	}
	return nil
}

// IdentityAPI is the part of the SES v2 client sender verification uses.
type IdentityAPI interface {
	CreateEmailIdentity(ctx context.Context, in *sesv2.CreateEmailIdentityInput, optFns ...func(*sesv2.Options)) (*sesv2.CreateEmailIdentityOutput, error)
}

// VerifySender registers the sender address, which SES (and moto) require
// before it sends from it. An identity that already exists is fine.
func VerifySender(ctx context.Context, client IdentityAPI, from string) error {
	_, err := client.CreateEmailIdentity(ctx, &sesv2.CreateEmailIdentityInput{EmailIdentity: aws.String(from)})
	if err != nil && !isAlreadyExists(err) {
		return fmt.Errorf("devstack: verify sender %s: %w", from, err)
	}
	return nil
}
