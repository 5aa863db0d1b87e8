package devstack

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
)

// StreamFilter is one filter of an event source's FilterCriteria, in the
// forms the template uses: the records' eventName values it lets through
// (nil: any), and for attributes of the record's NewImage the string
// values each may hold (nil: any), as
//
//	{"eventName":["INSERT","MODIFY"],"dynamodb":{"NewImage":{"state":{"S":["DONE"]}}}}
type StreamFilter struct {
	EventNames []string
	NewImage   map[string][]string
}

// streamFilters reads an event source's FilterCriteria (nil when it has
// none). A pattern of any other form is an error, so a template filter the
// local stack would not apply never goes unnoticed.
func streamFilters(v any) ([]StreamFilter, error) {
	fc, _ := v.(map[string]any)
	if fc == nil {
		return nil, nil
	}
	filters, _ := fc["Filters"].([]any)
	var out []StreamFilter
	for _, f := range filters {
		raw := fmt.Sprint(asMapAny(f)["Pattern"])
		sf, err := parseStreamFilter(raw)
		if err != nil {
			return nil, fmt.Errorf("FilterCriteria pattern %s: %w; the local stack applies {\"eventName\":[…]} and {\"dynamodb\":{\"NewImage\":{\"<attr>\":{\"S\":[…]}}}}", raw, err)
		}
		out = append(out, sf)
	}
	if len(filters) > 0 && len(out) == 0 {
		return nil, errors.New("FilterCriteria with no pattern")
	}
	return out, nil
}

// parseStreamFilter reads one pattern.
func parseStreamFilter(raw string) (StreamFilter, error) {
	var pattern struct {
		EventName []string `json:"eventName"`
		DynamoDB  *struct {
			NewImage map[string]map[string][]string `json:"NewImage"`
		} `json:"dynamodb"`
	}
	dec := json.NewDecoder(strings.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&pattern); err != nil {
		return StreamFilter{}, err
	}
	sf := StreamFilter{EventNames: pattern.EventName}
	if pattern.DynamoDB != nil {
		sf.NewImage = map[string][]string{}
		for attr, types := range pattern.DynamoDB.NewImage {
			vals, ok := types["S"]
			if !ok || len(types) != 1 || len(vals) == 0 {
				return StreamFilter{}, fmt.Errorf("NewImage.%s must be {\"S\":[…]}", attr)
			}
			sf.NewImage[attr] = vals
		}
	}
	if sf.EventNames == nil && len(sf.NewImage) == 0 {
		return StreamFilter{}, errors.New("an empty pattern")
	}
	return sf, nil
}

func asMapAny(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

// passes reports whether r gets through the source's filters: any of them
// (every record when there are none).
func (s StreamSource) passes(r streamtypes.Record) bool {
	if len(s.Filters) == 0 {
		return true
	}
	for _, f := range s.Filters {
		if f.matches(r) {
			return true
		}
	}
	return false
}

func (f StreamFilter) matches(r streamtypes.Record) bool {
	if f.EventNames != nil && !slices.Contains(f.EventNames, string(r.EventName)) {
		return false
	}
	for attr, vals := range f.NewImage {
		if r.Dynamodb == nil {
			return false
		}
		s, ok := r.Dynamodb.NewImage[attr].(*streamtypes.AttributeValueMemberS)
		if !ok || !slices.Contains(vals, s.Value) {
			return false
		}
	}
	return true
}
