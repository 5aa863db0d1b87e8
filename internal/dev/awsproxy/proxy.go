// Package awsproxy is a reverse proxy in front of an AWS endpoint (moto):
// the local functions' AWS_ENDPOINT_URL points at it, it forwards every
// call unchanged and lets hooks see or shape each call on the way, named by
// service and operation. The local stack records sent mail with a hook;
// fault injection (throttling, errors, cut connections, delays, lost
// responses) is another hook at the same point.
package awsproxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"time"

	"github.com/runstwice/runstwice/internal/dev/proc"
)

// maxBody is the largest request body the proxy reads (an SQS message is at
// most 1 MiB, a DynamoDB item 400 KB).
const maxBody = 32 << 20

// Hook wraps the step that forwards a call upstream. It may look at the call
// (CallOf), answer it itself, delay it, or call next and look at or replace
// the response. Hooks run in the order given, the first outermost.
type Hook func(next http.Handler) http.Handler

// Proxy forwards AWS API calls to an upstream endpoint through its hooks.
type Proxy struct {
	handler http.Handler
}

// New returns a proxy to upstream (e.g. http://127.0.0.1:5000) with hooks.
func New(upstream string, hooks ...Hook) (*Proxy, error) {
	u, err := url.Parse(upstream)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return nil, fmt.Errorf("awsproxy: upstream %q is not a URL", upstream)
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(u)
			// The client signed its own Host; keep it, so the upstream sees
			// the request as sent (and names itself by it in URLs).
			r.Out.Host = r.In.Host
		},
		Transport: &http.Transport{
			Proxy:               nil,
			DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
			MaxIdleConns:        256,
			MaxIdleConnsPerHost: 256,
			IdleConnTimeout:     90 * time.Second,
			DisableCompression:  true,
		},
		ErrorHandler: upstreamError,
	}
	var h http.Handler = rp
	for i := len(hooks) - 1; i >= 0; i-- {
		h = hooks[i](h)
	}
	return &Proxy{handler: h}, nil
}

// ServeHTTP implements http.Handler: it reads the call, names it and passes
// it through the hooks to the upstream.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil || len(body) > maxBody {
		http.Error(w, "awsproxy: request body unreadable or over 32 MiB", http.StatusRequestEntityTooLarge)
		return
	}
	c := Identify(r, body)
	r = r.WithContext(context.WithValue(r.Context(), callKey{}, c))
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	p.handler.ServeHTTP(w, r)
}

type callKey struct{}

// CallOf returns the call a request carries through the proxy's hooks, or
// nil for a request that did not come through a Proxy.
func CallOf(r *http.Request) *Call {
	c, _ := r.Context().Value(callKey{}).(*Call)
	return c
}

// upstreamError answers a call the upstream did not answer the way AWS's
// front end would: 502, which the SDKs retry.
func upstreamError(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, context.Canceled) && r.Context().Err() != nil {
		return // the client went away
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadGateway)
	_, _ = fmt.Fprintf(w, `{"__type":"ServiceUnavailable","message":%q}`, "awsproxy: upstream: "+err.Error())
}

// Server is a Proxy serving on a loopback port.
type Server struct {
	// URL is where the proxy serves, e.g. http://127.0.0.1:41234.
	URL string
	srv *http.Server
	ln  net.Listener
	end chan struct{}
}

// Start serves a proxy to upstream with hooks (see New) on a free loopback
// port until Close.
func Start(upstream string, hooks ...Hook) (*Server, error) {
	p, err := New(upstream, hooks...)
	if err != nil {
		return nil, err
	}
	return Serve("127.0.0.1:0", p)
}

// Serve serves h on addr ("127.0.0.1:0" for a free port) until Close.
func Serve(addr string, h http.Handler) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("awsproxy: listen: %w", err)
	}
	s := &Server{URL: "http://" + ln.Addr().String(), ln: ln, end: make(chan struct{}),
		srv: &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}}
	go func() { defer close(s.end); _ = s.srv.Serve(ln) }()
	return s, nil
}

// Close stops serving; calls under way get a moment to finish.
func (s *Server) Close() {
	if s == nil {
		return
	}
	proc.Shutdown(s.srv, 2*time.Second)
	<-s.end
}
