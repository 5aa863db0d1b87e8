package devstack

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/runstwice/runstwice/internal/dev/moto"
)

// startError is a start-up failure: a plain message for the user, and the
// kind of failure for errors.Is.
type startError struct {
	kind error
	msg  string
}

func (e *startError) Error() string { return e.msg }
func (e *startError) Unwrap() error { return e.kind }

func failure(kind error, format string, args ...any) error {
	return &startError{kind: kind, msg: fmt.Sprintf(format, args...)}
}

// ErrEndpoint means the AWS endpoint given cannot serve the stack.
var ErrEndpoint = errors.New("AWS endpoint unusable")

// CheckEndpoint makes sure endpoint answers, and answers as AWS (an SQS
// ListQueues), before anything is provisioned on it.
func CheckEndpoint(ctx context.Context, endpoint string) error {
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return failure(ErrEndpoint, "the AWS endpoint %q is not an http(s) URL", endpoint)
	}
	host := u.Host
	if u.Port() == "" {
		host = net.JoinHostPort(u.Hostname(), map[string]string{"http": "80", "https": "443"}[u.Scheme])
	}
	c, err := (&net.Dialer{Timeout: 3 * time.Second}).DialContext(ctx, "tcp", host)
	if err != nil {
		return failure(ErrEndpoint, "the AWS endpoint %s does not answer — is it running? (%v)", endpoint, err)
	}
	c.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	client := sqs.NewFromConfig(moto.Config(endpoint, moto.Region))
	if _, err := client.ListQueues(ctx, &sqs.ListQueuesInput{MaxResults: aws.Int32(1)}); err != nil {
		return failure(ErrEndpoint, "the AWS endpoint %s answers, but not as AWS (SQS ListQueues: %v)", endpoint, err)
	}
	return nil
}

// ErrNoCredentials means --aws found no credentials.
var ErrNoCredentials = errors.New("no AWS credentials")

// checkCredentials makes sure cfg has credentials before the stack uses
// AWS (the chain may otherwise wait on an instance metadata service that is
// not there).
func checkCredentials(ctx context.Context, cfg aws.Config) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if cfg.Credentials == nil {
		return failure(ErrNoCredentials, "--aws needs credentials: set AWS_PROFILE, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or drop --aws to run on moto)")
	}
	if _, err := cfg.Credentials.Retrieve(ctx); err != nil {
		return failure(ErrNoCredentials, "--aws needs credentials: set AWS_PROFILE, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or drop --aws to run on moto): %v", err)
	}
	return nil
}

// freeStartAttempts is how often StartOnFreePorts picks new ports for a
// stack whose ports another process took first.
const freeStartAttempts = 5

// StartOnFreePorts is Start on a moto port that was free a moment ago
// (opts.MotoPort is ignored). A free port can be taken by another process
// between its pick and moto's listen (tests run their packages side by
// side); a start refused for a port in use is tried again on a new one.
func StartOnFreePorts(ctx context.Context, opts Options) (*Local, error) {
	return startOnFreePorts(ctx, opts, moto.FreePort)
}

func startOnFreePorts(ctx context.Context, opts Options, pick func() (int, error)) (*Local, error) {
	var err error
	for range freeStartAttempts {
		if opts.MotoPort, err = pick(); err != nil {
			return nil, err
		}
		var l *Local
		l, err = Start(ctx, opts)
		if err == nil || !(errors.Is(err, ErrPortInUse) || errors.Is(err, moto.ErrPortInUse)) {
			return l, err
		}
	}
	return nil, err
}
