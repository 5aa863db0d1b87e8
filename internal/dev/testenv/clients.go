package testenv

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
)

// DynamoDB returns a DynamoDB client of this test binary's moto server (see
// Moto), with the given extra API options (such as a CallCounter's).
func DynamoDB(t testing.TB, apiOptions ...func(*middlewareStack) error) *dynamodb.Client {
	t.Helper()
	return dynamodb.NewFromConfig(Moto(t).Config(apiOptions...))
}

// SQS returns an SQS client of this test binary's moto server, with the
// given extra API options.
func SQS(t testing.TB, apiOptions ...func(*middlewareStack) error) *sqs.Client {
	t.Helper()
	return sqs.NewFromConfig(Moto(t).Config(apiOptions...))
}

// SSM returns an SSM client of this test binary's moto server, with the
// given extra API options.
func SSM(t testing.TB, apiOptions ...func(*middlewareStack) error) *ssm.Client {
	t.Helper()
	return ssm.NewFromConfig(Moto(t).Config(apiOptions...))
}

// NewTable creates a table named after base, unique in this test binary
// (see Name), with the keys and TTL of CreateTable, and returns its name.
func NewTable(t testing.TB, client *dynamodb.Client, base, hashKey, rangeKey string) string {
	t.Helper()
	name := Name(t, base)
	CreateTable(t, client, name, hashKey, rangeKey)
	return name
}

// NewQueue creates a queue named after base, unique in this test binary
// (see Name), with the given attributes (see CreateQueue).
func NewQueue(t testing.TB, client *sqs.Client, base string, attrs map[string]string) Queue {
	t.Helper()
	return CreateQueue(t, client, Name(t, base), attrs)
}
