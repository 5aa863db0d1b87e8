package client_test

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/runstwice/runstwice/client"
	"github.com/runstwice/runstwice/internal/jobs"
)

// TestWireFormatMatchesTheServer: the client repeats the API's wire format
// instead of importing the server's types, so this test holds the two
// together: the same job states, and the same JSON fields of a job record.
// A state or a field added on one side only fails here, not at a caller.
func TestWireFormatMatchesTheServer(t *testing.T) {
	var server, mine []string
	for _, s := range jobs.States {
		server = append(server, string(s))
	}
	for _, s := range client.States {
		mine = append(mine, string(s))
	}
	if !slices.Equal(server, mine) {
		t.Errorf("client.States = %v; the server's states are %v", mine, server)
	}
	serverFields, clientFields := jsonFields(reflect.TypeFor[jobs.Job]()), jsonFields(reflect.TypeFor[client.Job]())
	if !slices.Equal(serverFields, clientFields) {
		t.Errorf("client.Job has the JSON fields %v; the server's job record has %v", clientFields, serverFields)
	}
}

// jsonFields lists the JSON names of t's encoded fields, sorted.
func jsonFields(t reflect.Type) []string {
	var names []string
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if !f.IsExported() || name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}
