package enginetest

import (
	"bufio"
	"encoding/json"
	"strings"
)

// MetricCounts reads the CloudWatch EMF documents among out's lines (what
// engine.Metrics writes) and sums each metric by its type dimension:
// counts[type][metric]. Lines that are not EMF documents are passed over.
func MetricCounts(out string) map[string]map[string]int {
	got := map[string]map[string]int{}
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for sc.Scan() {
		var doc map[string]any
		if json.Unmarshal(sc.Bytes(), &doc) != nil {
			continue
		}
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

// MetricCount is MetricCounts(out)[kind][metric].
func MetricCount(out, kind, metric string) int { return MetricCounts(out)[kind][metric] }
