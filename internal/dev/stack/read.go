package stack

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	"github.com/awslabs/goformation/v7/intrinsics"
	"gopkg.in/yaml.v3"
)

// The template is read by goformation (github.com/awslabs/goformation/v7):
// its intrinsics package turns YAML (or JSON) into JSON with every
// short-form tag it knows (!Ref, !GetAtt, !Sub, !If, !Equals...) in its
// long form. Only its reader is used, not its typed model: the typed
// resources cannot hold an unresolved intrinsic in a typed field (a !Sub
// in a QueueName), so they refuse this template; and its resolver gives a
// Ref the parameter's default and a GetAtt nothing, where the local stack
// needs the resources it provisioned (see resolve.go). What this file adds
// is what goformation's reader lacks.

// goformationTags are the short forms goformation's reader turns into
// their long form (its intrinsics.allTags, unexported).
var goformationTags = map[string]bool{
	"!Ref": true, "!GetAtt": true, "!Base64": true, "!FindInMap": true, "!GetAZs": true, "!ImportValue": true,
	"!Join": true, "!Select": true, "!Split": true, "!Sub": true, "!Equals": true, "!Cidr": true,
	"!And": true, "!If": true, "!Not": true, "!Or": true,
}

var (
	// readMu serializes goformation's reader, whose every call registers
	// its tag handlers again in a package-level map, which two goroutines
	// must not write at once; it also guards read.
	readMu sync.Mutex
	// read memoizes the reader's JSON by the template's SHA-256: a test
	// suite reads template.yaml many times, and reading it (two YAML passes
	// and goformation's JSON) costs tens of milliseconds, decoding the JSON
	// a few. Each caller still gets values of its own. At most readCached
	// templates are kept.
	read = map[[sha256.Size]byte][]byte{}
)

const readCached = 32

// readTemplate returns the template in data as plain values: what JSON
// decodes to, but whole numbers as int (as YAML decodes them), with every
// intrinsic function in its long form.
func readTemplate(data []byte) (map[string]any, error) {
	js, err := longFormJSON(data)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.UseNumber()
	var raw any
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("parse yaml: %w", err)
	}
	if raw == nil {
		return nil, fmt.Errorf("empty template")
	}
	v, err := plain(raw)
	if err != nil {
		return nil, err
	}
	top, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("template is not a mapping")
	}
	return top, nil
}

// longFormJSON is goformation's reading of data as JSON.
func longFormJSON(data []byte) ([]byte, error) {
	key := sha256.Sum256(data)
	readMu.Lock()
	defer readMu.Unlock()
	if js, ok := read[key]; ok {
		return js, nil
	}
	longForm, err := expandOtherTags(data)
	if err != nil {
		return nil, err
	}
	js, err := intrinsics.ProcessYAML(longForm, &intrinsics.ProcessorOptions{NoProcess: true})
	if err != nil {
		return nil, fmt.Errorf("parse yaml: %w", err)
	}
	if len(read) >= readCached {
		clear(read)
	}
	read[key] = js
	return js, nil
}

// expandOtherTags rewrites what goformation's reader would drop or refuse:
// a mapping key that is not a string, and the short forms it does not
// know, into their long form: !Condition, and the rule functions (!Contains,
// !EachMemberEquals, !EachMemberIn, !RefAll, !ValueOf, !ValueOfAll) the
// template's Rules use. goformation would decode such a node as its bare
// value, dropping the function without a word. Any other unknown tag !X
// becomes Fn::X, which resolving then refuses by name.
func expandOtherTags(data []byte) ([]byte, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("parse yaml: %w", err)
	}
	if len(doc.Content) == 0 {
		return nil, fmt.Errorf("empty template")
	}
	if !expandTags(&doc) {
		return data, nil
	}
	return yaml.Marshal(&doc)
}

// plainKeys are the scalar tags a mapping key may resolve to that
// goformation's JSON cannot hold as a key (an account id in a Mapping).
var plainKeys = map[string]bool{"!!int": true, "!!float": true, "!!bool": true, "!!null": true, "!!timestamp": true}

// expandTags rewrites n and its children in place; it reports whether it
// rewrote any. Mapping keys become strings, as CloudFormation reads them.
func expandTags(n *yaml.Node) bool {
	changed := false
	for i, c := range n.Content {
		if n.Kind == yaml.MappingNode && i%2 == 0 && plainKeys[c.Tag] {
			c.Tag, changed = "!!str", true
		}
		if expandTags(c) {
			changed = true
		}
	}
	tag := n.Tag
	if !strings.HasPrefix(tag, "!") || strings.HasPrefix(tag, "!!") || goformationTags[tag] {
		return changed
	}
	name := "Fn::" + tag[1:]
	if tag == "!Condition" {
		name = "Condition"
	}
	arg := *n
	arg.Tag = ""
	if n.Kind == yaml.ScalarNode {
		arg.Tag = "!!str"
	}
	*n = yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: n.Line, Column: n.Column, Content: []*yaml.Node{
		{Kind: yaml.ScalarNode, Tag: "!!str", Value: name}, &arg,
	}}
	return true
}

// plain turns JSON numbers into int (whole) or float64, and the string
// form of Fn::GetAtt that goformation leaves ("Res.Attr", from !GetAtt
// Res.Attr) into the list form CloudFormation's long form has.
func plain(v any) (any, error) {
	switch x := v.(type) {
	case json.Number:
		if n, err := x.Int64(); err == nil {
			return int(n), nil
		}
		return x.Float64()
	case []any:
		for i, e := range x {
			p, err := plain(e)
			if err != nil {
				return nil, err
			}
			x[i] = p
		}
		return x, nil
	case map[string]any:
		if ga, ok := x["Fn::GetAtt"].(string); ok && len(x) == 1 {
			res, attr, found := strings.Cut(ga, ".")
			if !found {
				return nil, fmt.Errorf("!GetAtt %q has no attribute", ga)
			}
			return map[string]any{"Fn::GetAtt": []any{res, attr}}, nil
		}
		for k, e := range x {
			p, err := plain(e)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", k, err)
			}
			x[k] = p
		}
		return x, nil
	}
	return v, nil
}
