package client_test

import (
	"context"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/runstwice/runstwice/client"
	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/dev/sigv4"
)

func staticCreds(key, secret string) aws.CredentialsProvider {
	return credentials.NewStaticCredentialsProvider(key, secret, "")
}

// verifyingAPI verifies every request's signature as API Gateway would and
// answers 403 with AWS's message when it does not hold.
func verifyingAPI(t *testing.T, region string) (*httptest.Server, *[]string) {
	t.Helper()
	known := map[string]sigv4.Credentials{"AKIDPRODUCER": {AccessKeyID: "AKIDPRODUCER", SecretAccessKey: "producer-secret", SessionToken: "tok"}}
	v := &sigv4.Verifier{Service: "execute-api", Region: region,
		Lookup: func(k string) (sigv4.Credentials, bool) { c, ok := known[k]; return c, ok }}
	var signers []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		creds, err := v.Verify(r, body)
		var se *sigv4.Error
		if errors.As(err, &se) {
			w.WriteHeader(http.StatusForbidden)
			_, _ = io.WriteString(w, `{"message":`+strconv.Quote(se.Message)+`}`)
			return
		}
		signers = append(signers, creds.AccessKeyID)
		w.WriteHeader(http.StatusAccepted)
		_, _ = io.WriteString(w, `{"jobId":"j-1","state":"Enqueued"}`)
	}))
	t.Cleanup(srv.Close)
	return srv, &signers
}

func TestSignedRequestsVerify(t *testing.T) {
	srv, signers := verifyingAPI(t, "eu-west-1")
	for _, tc := range []struct {
		name   string
		creds  aws.CredentialsProvider
		region string
		ok     bool
	}{
		{"right credentials", credentials.NewStaticCredentialsProvider("AKIDPRODUCER", "producer-secret", "tok"), "eu-west-1", true},
		{"wrong secret", credentials.NewStaticCredentialsProvider("AKIDPRODUCER", "guess", "tok"), "eu-west-1", false},
		{"wrong region", credentials.NewStaticCredentialsProvider("AKIDPRODUCER", "producer-secret", "tok"), "us-east-1", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := client.New(srv.URL, client.WithCredentials(tc.creds, tc.region), client.WithRetry(2, time.Millisecond, time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			_, err = c.Enqueue(context.Background(), client.TypeWelcome, client.WelcomeArgs{UserID: "u-1"}, client.EnqueueOptions{})
			if tc.ok {
				if err != nil || !slices.Contains(*signers, "AKIDPRODUCER") {
					t.Fatalf("Enqueue: %v (signers %v)", err, *signers)
				}
				if _, err := c.Get(context.Background(), "j-1"); err != nil {
					t.Fatalf("signed GET: %v", err)
				}
				return
			}
			var p *client.Problem
			if !errors.As(err, &p) || p.Status != http.StatusForbidden || p.Detail == "" {
				t.Fatalf("error %v; want a 403 problem with the gateway's message", err)
			}
		})
	}
}

// TestRegionComesFromAnExecuteAPIEndpoint: a signature for another region is
// always refused, so the region an execute-api host names wins over the
// configuration's.
func TestRegionComesFromAnExecuteAPIEndpoint(t *testing.T) {
	srv, _ := verifyingAPI(t, "ap-south-1")
	via := &http.Client{Transport: rewriteTo(srv.URL)}
	c, err := client.New("https://abc123.execute-api.ap-south-1.amazonaws.com",
		client.WithCredentials(credentials.NewStaticCredentialsProvider("AKIDPRODUCER", "producer-secret", "tok"), "us-east-1"),
		client.WithHTTPClient(via))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Welcome(context.Background(), client.WelcomeArgs{UserID: "u-1"}, client.EnqueueOptions{}); err != nil {
		t.Fatalf("signed for the endpoint's region: %v", err)
	}
}

// rewriteTo sends every request to target's host, keeping its Host header
// (what was signed).
type rewriteTo string

func (r rewriteTo) RoundTrip(req *http.Request) (*http.Response, error) {
	out := req.Clone(req.Context())
	out.Host = req.URL.Host
	out.URL.Scheme, out.URL.Host = "http", strings.TrimPrefix(string(r), "http://")
	return http.DefaultTransport.RoundTrip(out)
}

func TestCredentialsThatCannotBeRetrievedAreNotRetried(t *testing.T) {
	f := newFakeAPI(t, created)
	broken := aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
		return aws.Credentials{}, errors.New("no credentials in this environment")
	})
	c, err := client.New(f.URL, client.WithCredentials(broken, "us-east-1"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Welcome(context.Background(), client.WelcomeArgs{UserID: "u-1"}, client.EnqueueOptions{}); err == nil || !strings.Contains(err.Error(), "no credentials") {
		t.Fatalf("error %v; want the credential failure", err)
	}
	if reqs, _ := f.received(); len(reqs) != 0 {
		t.Fatalf("%d requests sent without credentials", len(reqs))
	}
}

// TestTypedArgsMatchTheShippedTypes keeps the client's typed methods in step
// with the job types the service declares.
func TestTypedArgsMatchTheShippedTypes(t *testing.T) {
	reg := contract.Registry()
	for name, args := range map[string]any{
		client.TypePartnerVerification: client.PartnerVerificationArgs{},
		client.TypePasswordReset:       client.PasswordResetArgs{},
		client.TypeWelcome:             client.WelcomeArgs{},
		client.TypePartnerDigest:       client.PartnerDigestArgs{},
		client.TypeWebhookDeliver:      client.WebhookDeliverArgs{},
	} {
		jt, err := reg.Lookup(name)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		var declared, typed []string
		for _, a := range jt.Args {
			declared = append(declared, a.Name)
		}
		rt := reflect.TypeOf(args)
		for i := range rt.NumField() {
			typed = append(typed, strings.Split(rt.Field(i).Tag.Get("json"), ",")[0])
		}
		slices.Sort(declared)
		slices.Sort(typed)
		if !slices.Equal(declared, typed) {
			t.Errorf("%s: the client sends %v; the type declares %v", name, typed, declared)
		}
	}
	// No count of types: a type without a typed method is still one
	// Enqueue sends (docs/job-types.md, Add a job type).
}

// TestPublicPackageNamesNoInternalType: the client is imported from outside
// the module, which cannot name a type of an internal package, so no
// exported declaration of the client may mention one (it may use the
// server's own rules inside, as OutboxPut does: an outside program builds
// with it, TestOutsideModuleBuildsWithTheClient).
func TestPublicPackageNamesNoInternalType(t *testing.T) {
	files, _ := filepath.Glob("*.go")
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		parsed, err := parser.ParseFile(token.NewFileSet(), f, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		internal := map[string]bool{}
		for _, imp := range parsed.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if strings.Contains(p, "/internal/") && strings.HasPrefix(p, "github.com/runstwice/") {
				name := p[strings.LastIndex(p, "/")+1:]
				if imp.Name != nil {
					name = imp.Name.Name
				}
				internal[name] = true
			}
		}
		for _, d := range parsed.Decls {
			var nodes []ast.Node
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Name.IsExported() && (d.Recv == nil || exportedRecv(d.Recv)) {
					nodes = append(nodes, d.Type)
				}
			case *ast.GenDecl:
				for _, sp := range d.Specs {
					switch sp := sp.(type) {
					case *ast.TypeSpec:
						if sp.Name.IsExported() {
							nodes = append(nodes, exportedParts(sp.Type)...)
						}
					case *ast.ValueSpec:
						for _, n := range sp.Names {
							if n.IsExported() && sp.Type != nil {
								nodes = append(nodes, sp.Type)
							}
						}
					}
				}
			}
			for _, n := range nodes {
				ast.Inspect(n, func(n ast.Node) bool {
					if sel, ok := n.(*ast.SelectorExpr); ok {
						if id, ok := sel.X.(*ast.Ident); ok && internal[id.Name] {
							t.Errorf("%s: an exported declaration names %s.%s, an internal package's", f, id.Name, sel.Sel.Name)
						}
					}
					return true
				})
			}
		}
	}
}

// exportedRecv reports whether a method's receiver type is exported.
func exportedRecv(r *ast.FieldList) bool {
	if len(r.List) == 0 {
		return false
	}
	typ := r.List[0].Type
	if star, ok := typ.(*ast.StarExpr); ok {
		typ = star.X
	}
	id, ok := typ.(*ast.Ident)
	return ok && id.IsExported()
}

// exportedParts is what outside code sees of a type: a struct's exported
// fields, or the whole type.
func exportedParts(typ ast.Expr) []ast.Node {
	st, ok := typ.(*ast.StructType)
	if !ok {
		return []ast.Node{typ}
	}
	var out []ast.Node
	for _, f := range st.Fields.List {
		for _, n := range f.Names {
			if n.IsExported() {
				out = append(out, f.Type)
			}
		}
	}
	return out
}
