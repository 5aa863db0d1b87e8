// Package samtest reads an example's SAM template for the example's tests:
// that the template deploys what the function's code needs (its variables,
// its queue, its markers table, its grants), so the two cannot drift. It is
// test support of examples/ only; the examples themselves import nothing
// internal.
package samtest

import (
	"os"
	"slices"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/runstwice/runstwice/aws/dynamostore"
)

// Template is a SAM template as far as the examples' tests read it.
// Intrinsic functions read as their argument: !Ref X is "X", !GetAtt X.Arn
// is "X.Arn", !Sub "/a/${Stage}" is "/a/${Stage}".
type Template struct {
	Resources map[string]Resource `yaml:"Resources"`
}

// Resource is a resource of a template, with the properties the tests read
// of a function, a queue, a table and a parameter.
type Resource struct {
	Type     string `yaml:"Type"`
	Metadata struct {
		BuildMethod string `yaml:"BuildMethod"`
	} `yaml:"Metadata"`
	Properties Properties `yaml:"Properties"`
}

// Properties are what the tests read of a resource's properties.
type Properties struct {
	// a function's
	Runtime       string   `yaml:"Runtime"`
	Architectures []string `yaml:"Architectures"`
	Handler       string   `yaml:"Handler"`
	Environment   struct {
		Variables map[string]string `yaml:"Variables"`
	} `yaml:"Environment"`
	Events   map[string]Event `yaml:"Events"`
	Policies []struct {
		Statement []struct {
			Action   any `yaml:"Action"`
			Resource any `yaml:"Resource"`
		} `yaml:"Statement"`
	} `yaml:"Policies"`
	// a queue's
	RedrivePolicy struct {
		DeadLetterTargetArn string `yaml:"deadLetterTargetArn"`
		MaxReceiveCount     int    `yaml:"maxReceiveCount"`
	} `yaml:"RedrivePolicy"`
	// a table's
	StreamSpecification struct {
		StreamViewType string `yaml:"StreamViewType"`
	} `yaml:"StreamSpecification"`
	KeySchema []struct {
		AttributeName string `yaml:"AttributeName"`
		KeyType       string `yaml:"KeyType"`
	} `yaml:"KeySchema"`
	TimeToLiveSpecification struct {
		AttributeName string `yaml:"AttributeName"`
		Enabled       bool   `yaml:"Enabled"`
	} `yaml:"TimeToLiveSpecification"`
	// a parameter's
	Name string `yaml:"Name"`
	// an HTTP API's
	Auth struct {
		EnableIamAuthorizer bool   `yaml:"EnableIamAuthorizer"`
		DefaultAuthorizer   string `yaml:"DefaultAuthorizer"`
	} `yaml:"Auth"`
}

// Event is an event source of a function.
type Event struct {
	Type       string `yaml:"Type"`
	Properties struct {
		// an SQS queue's
		Queue string `yaml:"Queue"`
		// a stream's (Kinesis, DynamoDB)
		Stream            string `yaml:"Stream"`
		StartingPosition  string `yaml:"StartingPosition"`
		DestinationConfig struct {
			OnFailure struct {
				Type        string `yaml:"Type"`
				Destination string `yaml:"Destination"`
			} `yaml:"OnFailure"`
		} `yaml:"DestinationConfig"`
		// an SQS queue's and a stream's
		FunctionResponseTypes []string `yaml:"FunctionResponseTypes"`
		// an HTTP API's
		APIID                string `yaml:"ApiId"`
		Method               string `yaml:"Method"`
		Path                 string `yaml:"Path"`
		PayloadFormatVersion string `yaml:"PayloadFormatVersion"`
		Auth                 struct {
			Authorizer string `yaml:"Authorizer"`
		} `yaml:"Auth"`
	} `yaml:"Properties"`
}

// Read reads the template at path.
func Read(t testing.TB, path string) Template {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var tpl Template
	if err := yaml.Unmarshal(b, &tpl); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return tpl
}

// Grants returns what the role of function id allows: the resources of
// each action.
func (tpl Template) Grants(id string) map[string][]string {
	granted := map[string][]string{}
	for _, pol := range tpl.Resources[id].Properties.Policies {
		for _, st := range pol.Statement {
			for _, a := range list(st.Action) {
				granted[a] = append(granted[a], list(st.Resource)...)
			}
		}
	}
	return granted
}

// CheckWorker checks that function id is a Go function on the engine fed
// by one SQS queue: built with go1.x on provided.al2023 for arm64, given
// every variable of env, fed by the queue QUEUE_URL names with
// ReportBatchItemFailures (the engine answers with the failed records
// only), that queue redriving to the queue DLQ_URL names, its markers in
// the table MARKERS_TABLE names, laid out as dynamostore writes them with
// TTL on their expiry, and a role that makes the store's calls, sends dead
// letters and postpones retries. It returns the function's variables.
func CheckWorker(t testing.TB, tpl Template, id string, env []string) map[string]string {
	t.Helper()
	vars := CheckFunction(t, tpl, id, env)
	queue, dlq := vars["QUEUE_URL"], vars["DLQ_URL"]
	p := tpl.Resources[id].Properties
	if len(p.Events) != 1 {
		t.Errorf("%s has events %v; want its queue", id, p.Events)
	}
	for _, ev := range p.Events {
		if ev.Type != "SQS" || ev.Properties.Queue != queue+".Arn" || !slices.Contains(ev.Properties.FunctionResponseTypes, "ReportBatchItemFailures") {
			t.Errorf("%s's event is %s from %q with %v; want SQS from %s with ReportBatchItemFailures",
				id, ev.Type, ev.Properties.Queue, ev.Properties.FunctionResponseTypes, queue)
		}
	}
	if rp := tpl.Resources[queue].Properties.RedrivePolicy; rp.DeadLetterTargetArn != dlq+".Arn" || rp.MaxReceiveCount < 1 {
		t.Errorf("queue %s redrives %+v; want to %s", queue, rp, dlq)
	}
	CheckMarkers(t, tpl, id, vars["MARKERS_TABLE"])
	CheckGrants(t, tpl, id, map[string]string{
		"sqs:SendMessage":             dlq + ".Arn",
		"sqs:ChangeMessageVisibility": queue + ".Arn",
	})
	return vars
}

// CheckStreamWorker checks that function id is a Go function on the
// engine fed by one stream (typ "Kinesis" or "DynamoDB") from stream (a
// resource's attribute, as the template writes it: "Clicks.Arn",
// "Orders.StreamArn"): built as CheckFunction says, given every variable
// of env, its event with ReportBatchItemFailures (the engine names the
// failed record of a shard, where Lambda retries from), a starting
// position, and an on-failure destination, the queue DLQ_URL names (where
// the engine's dead letters go too); its markers as CheckMarkers says; and
// a role that sends to that queue. It returns the function's variables.
func CheckStreamWorker(t testing.TB, tpl Template, id, typ, stream string, env []string) map[string]string {
	t.Helper()
	vars := CheckFunction(t, tpl, id, env)
	dlq := vars["DLQ_URL"]
	p := tpl.Resources[id].Properties
	if len(p.Events) != 1 {
		t.Errorf("%s has events %v; want its stream", id, p.Events)
	}
	for name, ev := range p.Events {
		e := ev.Properties
		if ev.Type != typ || e.Stream != stream || !slices.Contains(e.FunctionResponseTypes, "ReportBatchItemFailures") {
			t.Errorf("%s's event %s is %s from %q with %v; want %s from %s with ReportBatchItemFailures",
				id, name, ev.Type, e.Stream, e.FunctionResponseTypes, typ, stream)
		}
		if e.StartingPosition == "" {
			t.Errorf("%s's event %s has no StartingPosition", id, name)
		}
		if f := e.DestinationConfig.OnFailure; f.Type != "SQS" || f.Destination != dlq+".Arn" {
			t.Errorf("%s's event %s sends its given-up batches to %+v; want the queue %s", id, name, f, dlq)
		}
	}
	CheckMarkers(t, tpl, id, vars["MARKERS_TABLE"])
	CheckGrants(t, tpl, id, map[string]string{"sqs:SendMessage": dlq + ".Arn"})
	return vars
}

// CheckFunction checks that function id is a Go function built with go1.x
// on provided.al2023 for arm64, given every variable of env. It returns
// the function's variables.
func CheckFunction(t testing.TB, tpl Template, id string, env []string) map[string]string {
	t.Helper()
	fn, ok := tpl.Resources[id]
	if !ok || fn.Type != "AWS::Serverless::Function" {
		t.Fatalf("no function %s in the template", id)
	}
	p := fn.Properties
	if fn.Metadata.BuildMethod != "go1.x" || p.Runtime != "provided.al2023" || p.Handler != "bootstrap" || !slices.Equal(p.Architectures, []string{"arm64"}) {
		t.Errorf("%s is built %q on %q %v with handler %q; want go1.x, provided.al2023, arm64, bootstrap",
			id, fn.Metadata.BuildMethod, p.Runtime, p.Architectures, p.Handler)
	}
	vars := p.Environment.Variables
	for _, name := range env {
		if vars[name] == "" {
			t.Errorf("%s's environment has no %s", id, name)
		}
	}
	return vars
}

// CheckMarkers checks that the table (a resource's logical id) keeps
// markers as dynamostore writes them, with TTL on their expiry, and that
// the role of function id makes the store's calls on it.
func CheckMarkers(t testing.TB, tpl Template, id, table string) {
	t.Helper()
	markers := tpl.Resources[table].Properties
	keys := map[string]string{}
	for _, k := range markers.KeySchema {
		keys[k.AttributeName] = k.KeyType
	}
	if keys[dynamostore.AttrHandler] != "HASH" || keys[dynamostore.AttrMessageKey] != "RANGE" || len(keys) != 2 {
		t.Errorf("the markers table %s has keys %v; want %s HASH and %s RANGE", table, keys, dynamostore.AttrHandler, dynamostore.AttrMessageKey)
	}
	if ttl := markers.TimeToLiveSpecification; ttl.AttributeName != dynamostore.AttrExpiresAt || !ttl.Enabled {
		t.Errorf("the markers table %s has TTL %+v; want it on %s", table, ttl, dynamostore.AttrExpiresAt)
	}
	CheckGrants(t, tpl, id, map[string]string{
		"dynamodb:GetItem": table + ".Arn", "dynamodb:BatchGetItem": table + ".Arn",
		"dynamodb:PutItem": table + ".Arn", "dynamodb:DeleteItem": table + ".Arn",
	})
}

// CheckGrants checks that the role of function id allows each action of
// need on its resource.
func CheckGrants(t testing.TB, tpl Template, id string, need map[string]string) {
	t.Helper()
	granted := tpl.Grants(id)
	for action, on := range need {
		if !slices.Contains(granted[action], on) {
			t.Errorf("%s's role grants %s on %v; want %s", id, action, granted[action], on)
		}
	}
}

// list is a statement's Action or Resource: one string or a list.
func list(v any) []string {
	switch x := v.(type) {
	case string:
		return []string{x}
	case []any:
		out := make([]string, 0, len(x))
		for _, e := range x {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}
