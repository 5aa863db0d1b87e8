// Package client is the producer's client of the runstwice enqueue API: it
// enqueues jobs, reads them back and cancels them over HTTP, the way a
// producer service calls a deployed stack.
//
// Requests are signed with AWS Signature Version 4 for the service
// execute-api, with credentials from the standard AWS configuration chain
// (Load), or sent unsigned with an X-Caller header to the local stack
// (WithCaller). Every enqueue carries an Idempotency-Key (generated when
// the caller gives none) and is retried with the same key after a 5xx, a
// 429, a lost connection or a "request in flight" 409, with exponential
// backoff and jitter, honouring Retry-After, bounded by the attempts and
// the context. A 503 schedule-quota-exceeded is not retried: no retry
// succeeds until the service's schedule quota is raised. A retried enqueue
// therefore creates at most one job, and a response the API replayed says
// so (Result.Replayed).
//
// Errors from the API are *Problem values (RFC 9457); match them with
// errors.As, or with errors.Is against ErrNotFound, ErrDuplicateRejected,
// ErrKeyReused, ErrConflict and ErrScheduleQuota.
package client

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/config"
)

// Service is the SigV4 signing name of an API Gateway API.
const Service = "execute-api"

// CallerHeader names the caller of an unsigned request to the local stack.
const CallerHeader = "X-Caller"

// Retry defaults.
const (
	DefaultMaxAttempts = 5
	DefaultBaseDelay   = 200 * time.Millisecond
	DefaultMaxDelay    = 5 * time.Second
)

// maxResponse bounds how much of a response body is read.
const maxResponse = 1 << 20

// Client calls one runstwice API. It is safe for concurrent use.
type Client struct {
	endpoint *url.URL
	httpc    *http.Client

	// signed mode
	creds  aws.CredentialsProvider
	region string
	signer *v4.Signer
	// unsigned mode
	unsigned bool
	caller   string

	maxAttempts         int
	baseDelay, maxDelay time.Duration
}

// Option configures a Client.
type Option func(*Client) error

// WithAWSConfig signs requests with the configuration's credentials and
// region (the API's own region wins when the endpoint is an execute-api
// host, since a signature for another region is always refused).
func WithAWSConfig(cfg aws.Config) Option {
	return WithCredentials(cfg.Credentials, cfg.Region)
}

// WithCredentials signs requests with creds for region.
func WithCredentials(creds aws.CredentialsProvider, region string) Option {
	return func(c *Client) error {
		if creds == nil {
			return errors.New("client: no AWS credentials")
		}
		if _, cached := creds.(*aws.CredentialsCache); !cached {
			creds = aws.NewCredentialsCache(creds)
		}
		c.creds, c.region = creds, region
		return nil
	}
}

// WithCaller sends requests unsigned, naming the caller in the X-Caller
// header: the local stack's stand-in for a signature. name is a bare name
// (an IAM user of the local account) or a full IAM ARN; empty sends no
// header (the local stack's default caller). A deployed API refuses
// unsigned requests.
func WithCaller(name string) Option {
	return func(c *Client) error {
		c.unsigned, c.caller = true, name
		return nil
	}
}

// WithHTTPClient sends requests through hc (http.DefaultClient otherwise).
func WithHTTPClient(hc *http.Client) Option {
	return func(c *Client) error {
		if hc == nil {
			return errors.New("client: nil HTTP client")
		}
		c.httpc = hc
		return nil
	}
}

// WithRetry sets how often a request is tried (at least 1) and the backoff
// between tries: exponential from base, capped at max, with jitter.
func WithRetry(maxAttempts int, base, max time.Duration) Option {
	return func(c *Client) error {
		if maxAttempts < 1 || base <= 0 || max < base {
			return fmt.Errorf("client: retry needs at least one attempt and 0 < base <= max (got %d, %s, %s)", maxAttempts, base, max)
		}
		c.maxAttempts, c.baseDelay, c.maxDelay = maxAttempts, base, max
		return nil
	}
}

// New returns a client of the API at endpoint (its base URL, e.g.
// https://abc123.execute-api.eu-west-1.amazonaws.com). It needs a way to
// authenticate: WithAWSConfig or WithCredentials (signed), or WithCaller
// (unsigned, local stack).
func New(endpoint string, opts ...Option) (*Client, error) {
	u, err := url.Parse(strings.TrimSuffix(endpoint, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" {
		return nil, fmt.Errorf("client: endpoint %q is not an http(s) base URL", endpoint)
	}
	c := &Client{
		endpoint: u, httpc: http.DefaultClient, signer: v4.NewSigner(),
		maxAttempts: DefaultMaxAttempts, baseDelay: DefaultBaseDelay, maxDelay: DefaultMaxDelay,
	}
	for _, opt := range opts {
		if err := opt(c); err != nil {
			return nil, err
		}
	}
	switch {
	case c.unsigned && c.creds != nil:
		return nil, errors.New("client: WithCaller (unsigned) and AWS credentials (signed) exclude each other")
	case !c.unsigned && c.creds == nil:
		return nil, errors.New("client: no way to authenticate: use WithAWSConfig, WithCredentials or WithCaller")
	}
	if r := regionOf(u.Hostname()); r != "" && !c.unsigned {
		c.region = r
	}
	if !c.unsigned && c.region == "" {
		return nil, errors.New("client: no AWS region to sign for (set AWS_REGION or use an execute-api endpoint)")
	}
	return c, nil
}

// Load returns a client that signs with the standard AWS configuration
// chain (environment, shared config and credentials files, SSO, web
// identity, container and instance roles).
func Load(ctx context.Context, endpoint string, opts ...Option) (*Client, error) {
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("client: load AWS configuration: %w", err)
	}
	return New(endpoint, append([]Option{WithAWSConfig(cfg)}, opts...)...)
}

// executeAPIHost is an API Gateway default endpoint; it names its region.
var executeAPIHost = regexp.MustCompile(`^[a-z0-9]+\.execute-api\.([a-z0-9-]+)\.amazonaws\.com(\.cn)?$`)

func regionOf(host string) string {
	if m := executeAPIHost.FindStringSubmatch(host); m != nil {
		return m[1]
	}
	return ""
}

// call is one logical API call, tried up to maxAttempts times.
type call struct {
	method, path string
	query        string // the encoded query string, "" for none
	body         []byte
	header       http.Header
}

// reply is the answer to a call.
type reply struct {
	resp     *http.Response // body already read and closed
	body     []byte
	attempts int
}

// do sends a call, retrying what may succeed later. It returns the first
// answer that is final (2xx, or an error that is not retryable) or, once
// the attempts or the context run out, the last error.
func (c *Client) do(ctx context.Context, k call) (reply, error) {
	var last error
	for attempt := 1; ; attempt++ {
		r, err := c.once(ctx, k)
		r.attempts = attempt
		var p *Problem
		switch {
		case err == nil && r.resp.StatusCode < 300:
			return r, nil
		case err == nil:
			p = problemFrom(r.resp, r.body)
			if !p.retryable() {
				return r, p
			}
			last = p
		case ctx.Err() != nil && last != nil:
			return r, k.ended(ctx, attempt, last)
		case ctx.Err() != nil || errors.As(err, new(*permanent)):
			return r, fmt.Errorf("client: %s %s: %w", k.method, k.path, err)
		default:
			last = fmt.Errorf("client: %s %s: %w", k.method, k.path, err)
		}
		if attempt >= c.maxAttempts {
			return r, fmt.Errorf("client: %s %s: gave up after %d attempts: %w", k.method, k.path, attempt, last)
		}
		wait := c.backoff(attempt)
		if p != nil && p.RetryAfter > 0 {
			wait = p.RetryAfter + rand.N(c.baseDelay)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return r, k.ended(ctx, attempt, last)
		case <-t.C:
		}
	}
}

// ended is the error of a call whose context ended after attempts tries:
// it matches both the context's error and the last answer.
func (k call) ended(ctx context.Context, attempts int, last error) error {
	return fmt.Errorf("client: %s %s: %w after %d attempts; last error: %w", k.method, k.path, ctx.Err(), attempts, last)
}

// backoff is the wait after the given attempt: exponential from baseDelay,
// capped at maxDelay, the upper half jittered ("equal jitter").
func (c *Client) backoff(attempt int) time.Duration {
	d := c.maxDelay
	if attempt < 31 {
		d = min(c.maxDelay, c.baseDelay<<(attempt-1))
	}
	return d/2 + rand.N(d/2+1)
}

// once sends one attempt of a call.
func (c *Client) once(ctx context.Context, k call) (reply, error) {
	u := *c.endpoint
	u.Path = c.endpoint.Path + k.path
	u.RawPath = ""
	u.RawQuery = k.query
	req, err := http.NewRequestWithContext(ctx, k.method, u.String(), bytes.NewReader(k.body))
	if err != nil {
		return reply{}, &permanent{err}
	}
	for name, vs := range k.header {
		req.Header[name] = vs
	}
	req.Header.Set("Accept", "application/json, application/problem+json")
	if err := c.authenticate(ctx, req, k.body); err != nil {
		return reply{}, &permanent{err}
	}
	resp, err := c.httpc.Do(req)
	if err != nil {
		return reply{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	if err != nil {
		return reply{}, fmt.Errorf("read response: %w", err)
	}
	return reply{resp: resp, body: body}, nil
}

// permanent is a failure before anything was sent that a retry cannot
// mend (no credentials, a request that cannot be built).
type permanent struct{ error }

func (p *permanent) Unwrap() error { return p.error }

// authenticate signs req, or names its caller when the client is unsigned.
func (c *Client) authenticate(ctx context.Context, req *http.Request, body []byte) error {
	if c.unsigned {
		if c.caller != "" {
			req.Header.Set(CallerHeader, c.caller)
		}
		return nil
	}
	creds, err := c.creds.Retrieve(ctx)
	if err != nil {
		return fmt.Errorf("AWS credentials: %w", err)
	}
	sum := sha256.Sum256(body)
	if err := c.signer.SignHTTP(ctx, creds, req, hex.EncodeToString(sum[:]), Service, c.region, time.Now()); err != nil {
		return fmt.Errorf("sign: %w", err)
	}
	return nil
}
