// Package localapi is the local stack's API as a producer sees it: where it
// listens, whether a stack runs and how to reach it (.devstack/stack.json,
// which `make run` writes), how to tell a URL on this machine, and the credentials its
// gateway verifies signatures with (moto's test/test, the local stack's
// default caller). Commands that call the API (jobctl enqueue, smoke) sign
// local requests with them, so a developer's real AWS credentials never
// reach a local gateway that would refuse them.
package localapi

import (
	"net"
	"net/url"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/runstwice/runstwice/internal/dev/moto"
)

// DefaultURL is where `make run` serves the API.
const DefaultURL = "http://127.0.0.1:3000"

// Region is the region the local gateway verifies signatures for.
const Region = moto.Region

// IsLocal reports whether rawURL names this machine (localhost or a
// loopback address).
func IsLocal(rawURL string) bool {
	u, err := url.Parse(rawURL)
	if err != nil {
		return false
	}
	if u.Hostname() == "localhost" {
		return true
	}
	ip := net.ParseIP(u.Hostname())
	return ip != nil && ip.IsLoopback()
}

// Credentials are the local test credentials the local gateway accepts.
func Credentials() aws.CredentialsProvider {
	return credentials.NewStaticCredentialsProvider(moto.AccessKeyID, moto.SecretAccessKey, "")
}
