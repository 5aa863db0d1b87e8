package devstack

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
)

// eventNameFilter reads an event source's FilterCriteria: the eventName
// values its filters let through (nil when it has none). The local stack
// applies the one form the template uses, {"eventName":[...]} (several
// filters: any of them); any other pattern is an error, so a template
// filter it would not apply never goes unnoticed.
func eventNameFilter(v any) ([]string, error) {
	fc, _ := v.(map[string]any)
	if fc == nil {
		return nil, nil
	}
	filters, _ := fc["Filters"].([]any)
	var names []string
	for _, f := range filters {
		raw := fmt.Sprint(asMapAny(f)["Pattern"])
		var pattern map[string][]string
		if err := json.Unmarshal([]byte(raw), &pattern); err != nil || len(pattern) != 1 || len(pattern["eventName"]) == 0 {
			return nil, fmt.Errorf("FilterCriteria pattern %s: the local stack applies only {\"eventName\":[\"INSERT\",...]}", raw)
		}
		names = append(names, pattern["eventName"]...)
	}
	if len(filters) > 0 && len(names) == 0 {
		return nil, errors.New("FilterCriteria with no pattern")
	}
	return names, nil
}

func asMapAny(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

// passes reports whether r gets through the source's filter.
func (s StreamSource) passes(r streamtypes.Record) bool {
	return s.EventNames == nil || slices.Contains(s.EventNames, string(r.EventName))
}
