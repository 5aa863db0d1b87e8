package awsx

import (
	"io"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
)

// HTTPClient returns the SDK's default HTTP client with one change: a
// request body reaches Go's transport as a plain reader.
//
// The SDK hands the transport a body that, once the SDK has closed it,
// answers io.EOF to WriteTo. The transport writes a body, then reads it on
// to make sure nothing follows; by then a fast server may have answered and
// the SDK closed the body, and the transport takes that io.EOF for a failed
// write and closes the kept-alive connection under the response it is
// still reading ("use of closed network connection",
// aws/aws-sdk-go-v2#2737). The SDK's retryer then sends again a write the
// service has already applied: a conditional write fails its own
// condition. Read, unlike WriteTo, ends a closed body cleanly.
func HTTPClient() aws.HTTPClient {
	return PlainBodies(awshttp.NewBuildableClient())
}

// PlainBodies wraps client as HTTPClient wraps the SDK's default client.
func PlainBodies(client aws.HTTPClient) aws.HTTPClient {
	if _, ok := client.(plainBodies); ok {
		return client
	}
	return plainBodies{client}
}

type plainBodies struct{ next aws.HTTPClient }

func (c plainBodies) Do(req *http.Request) (*http.Response, error) {
	if req.Body != nil && req.Body != http.NoBody {
		req.Body = plainBody{req.Body}
	}
	return c.next.Do(req)
}

// plainBody hides every method of the body but Read and Close.
type plainBody struct{ rc io.ReadCloser }

func (b plainBody) Read(p []byte) (int, error) { return b.rc.Read(p) }
func (b plainBody) Close() error               { return b.rc.Close() }
