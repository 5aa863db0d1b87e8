package obs

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"
)

func TestCountWritesEMF(t *testing.T) {
	var buf bytes.Buffer
	m := NewMetrics(&buf)
	m.now = func() time.Time { return time.UnixMilli(1700000000000) }
	m.Count(JobsSucceeded, "email.welcome.v1", 2)
	var got struct {
		AWS struct {
			Timestamp         int64
			CloudWatchMetrics []struct {
				Namespace  string
				Dimensions [][]string
				Metrics    []struct{ Name, Unit string }
			}
		} `json:"_aws"`
		Type  string `json:"type"`
		Value int    `json:"JobsSucceeded"`
	}
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatalf("not JSON: %v: %s", err, buf.String())
	}
	d := got.AWS.CloudWatchMetrics
	if got.AWS.Timestamp != 1700000000000 || len(d) != 1 || d[0].Namespace != Namespace ||
		len(d[0].Dimensions) != 1 || d[0].Dimensions[0][0] != "type" || d[0].Metrics[0].Name != JobsSucceeded ||
		got.Type != "email.welcome.v1" || got.Value != 2 {
		t.Fatalf("EMF line = %s", buf.String())
	}
}

func TestNilMetricsDiscards(t *testing.T) {
	var m *Metrics
	m.Count(JobsFailed, "x", 1) // must not panic
}

func TestCountQuotesOddNames(t *testing.T) {
	var buf bytes.Buffer
	NewMetrics(&buf).Count(UnknownToggle, "we\"ird\x00é", 1)
	var got map[string]any
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil || got["type"] != "we\"ird\x00é" {
		t.Fatalf("line %s: %v", buf.String(), err)
	}
}
