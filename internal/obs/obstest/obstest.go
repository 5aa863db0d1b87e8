// Package obstest reads what the obs package wrote, for tests: the counts in
// EMF documents and the fields of JSON log lines.
package obstest

import (
	"bufio"
	"encoding/json"
	"strings"
)

// Counts sums every job metric in the EMF documents of out: type → metric →
// count. Lines that are not EMF documents are ignored.
func Counts(out string) map[string]map[string]int {
	got := map[string]map[string]int{}
	for _, doc := range Lines(out) {
		meta, ok := doc["_aws"].(map[string]any)
		if !ok {
			continue
		}
		typ, _ := doc["type"].(string)
		dirs, _ := meta["CloudWatchMetrics"].([]any)
		for _, d := range dirs {
			dm, _ := d.(map[string]any)
			ms, _ := dm["Metrics"].([]any)
			for _, m := range ms {
				name, _ := m.(map[string]any)["Name"].(string)
				v, _ := doc[name].(float64)
				if got[typ] == nil {
					got[typ] = map[string]int{}
				}
				got[typ][name] += int(v)
			}
		}
	}
	return got
}

// Count is Counts(out)[jobType][metric].
func Count(out, jobType, metric string) int { return Counts(out)[jobType][metric] }

// Lines parses every line of out that is a JSON object.
func Lines(out string) []map[string]any {
	var all []map[string]any
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil {
			all = append(all, m)
		}
	}
	return all
}
