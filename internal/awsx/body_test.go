package awsx

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
)

// sdkBody behaves as the SDK's request body does: readable until closed,
// and once closed its WriteTo answers io.EOF. It waits in WriteTo until it
// is closed, so the transport's check for bytes after the body always
// happens after the SDK closed it: the race, every time.
type sdkBody struct {
	r      *bytes.Reader
	closed chan struct{}
	once   sync.Once
}

func newSDKBody(s string) *sdkBody {
	return &sdkBody{r: bytes.NewReader([]byte(s)), closed: make(chan struct{})}
}

func (b *sdkBody) Read(p []byte) (int, error) {
	select {
	case <-b.closed:
		return 0, io.EOF
	default:
		return b.r.Read(p)
	}
}

func (b *sdkBody) WriteTo(io.Writer) (int64, error) {
	<-b.closed
	return 0, io.EOF
}

func (b *sdkBody) Close() error {
	b.once.Do(func() { close(b.closed) })
	return nil
}

// roundTrip sends a request as the SDK does (closing its body as soon as the
// response is back) to a server that answers once it has the whole body and
// sends the response's body a moment after its headers; it returns the
// response body the client read.
func roundTrip(t *testing.T, client aws.HTTPClient, url string) (string, error) {
	t.Helper()
	const payload = `{"TableName":"t"}`
	body := newSDKBody(payload)
	req, err := http.NewRequest(http.MethodPost, url, body)
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = int64(len(payload))
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	_ = req.Body.Close() // what the SDK does once Do returns
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

func slowBodyServer(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		w.Header().Set("Content-Length", "2")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		time.Sleep(100 * time.Millisecond)
		_, _ = io.WriteString(w, "{}")
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestHTTPClientSurvivesAnEarlyBodyClose: with HTTPClient, a response is read
// whole even when the SDK closes the request body before the transport has
// finished with it; with the SDK's own client the connection is closed
// under the response.
func TestHTTPClientSurvivesAnEarlyBodyClose(t *testing.T) {
	srv := slowBodyServer(t)
	for range 3 {
		got, err := roundTrip(t, HTTPClient(), srv.URL)
		if err != nil || got != "{}" {
			t.Fatalf("HTTPClient: response body %q, %v; want {} and no error", got, err)
		}
	}
	// The failure HTTPClient prevents, shown with the SDK's own client.
	_, err := roundTrip(t, awshttp.NewBuildableClient(), srv.URL)
	if err == nil || !strings.Contains(err.Error(), "use of closed network connection") {
		t.Fatalf("the SDK's own client read the response: %v; want use of closed network connection "+
			"(Go's transport no longer fails on a body closed under it: see whether PlainBodies is still needed)", err)
	}
}

// TestLoadUsesPlainBodies: every function's configuration comes with a
// client that survives the race, a caller's own client included (wrapped).
func TestLoadUsesPlainBodies(t *testing.T) {
	for _, c := range []struct {
		name     string
		caBundle string
	}{{"default client", ""}, {"client with a CA bundle", "testdata/ca.pem"}} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("AWS_REGION", "eu-west-1")
			t.Setenv("AWS_CA_BUNDLE", c.caBundle)
			cfg, err := Load(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := cfg.HTTPClient.(plainBodies); !ok {
				t.Fatalf("Load's HTTP client is %T; want PlainBodies'", cfg.HTTPClient)
			}
		})
	}
	t.Setenv("AWS_CA_BUNDLE", "") // a CA bundle needs the SDK's own client
	other := &http.Client{}
	cfg, err := Load(t.Context(), config.WithHTTPClient(other))
	if err != nil {
		t.Fatal(err)
	}
	if pb, ok := cfg.HTTPClient.(plainBodies); !ok || pb.next != other {
		t.Fatalf("a caller's own HTTP client came back as %#v; want it wrapped by PlainBodies", cfg.HTTPClient)
	}
}
