package engine

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

type emfDoc struct {
	AWS struct {
		Timestamp         int64
		CloudWatchMetrics []struct {
			Namespace  string
			Dimensions [][]string
			Metrics    []struct{ Name, Unit string }
		}
	} `json:"_aws"`
	Stage    string `json:"stage"`
	Type     string `json:"type"`
	Function string `json:"function"`
}

func docs(t *testing.T, out string) []map[string]any {
	t.Helper()
	var all []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("not JSON: %v: %s", err, line)
		}
		all = append(all, m)
	}
	return all
}

// Counts aggregate until Flush, which writes one EMF document per type with
// the dimensions stage and type.
func TestFlushWritesOneDocumentPerType(t *testing.T) {
	coldStart.Store(false)
	var buf bytes.Buffer
	m := NewMetrics(&buf, "runstwice")
	m.Stage = "prod"
	m.now = func() time.Time { return time.UnixMilli(1700000000000) }
	m.Count(JobsSucceeded, "email.welcome.v1", 2)
	m.Count(JobsSucceeded, "email.welcome.v1", 1)
	m.Count(JobsDuplicate, "email.welcome.v1", 1)
	m.Count(JobsFailed, "email.partner-digest.v1", 1)
	if buf.Len() != 0 {
		t.Fatal("Count wrote before Flush")
	}
	m.Flush()
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d documents; want 2 (one per type): %s", len(lines), buf.String())
	}
	var got emfDoc
	if err := json.Unmarshal([]byte(lines[1]), &got); err != nil {
		t.Fatal(err)
	}
	d := got.AWS.CloudWatchMetrics
	if got.AWS.Timestamp != 1700000000000 || len(d) != 1 || d[0].Namespace != "runstwice" ||
		strings.Join(d[0].Dimensions[0], ",") != "stage,type" || len(d[0].Metrics) != 2 ||
		got.Type != "email.welcome.v1" || got.Stage != "prod" {
		t.Fatalf("EMF document = %s", lines[1])
	}
	all := docs(t, buf.String())
	if all[1][JobsSucceeded] != float64(3) || all[1][JobsDuplicate] != float64(1) {
		t.Fatalf("counts not aggregated: %v", all[1])
	}
	buf.Reset()
	m.Flush()
	if buf.Len() != 0 {
		t.Fatalf("a second flush repeated the counts: %s", buf.String())
	}
}

func TestColdStartOncePerProcess(t *testing.T) {
	coldStart.Store(true)
	var buf bytes.Buffer
	m := NewMetrics(&buf, "runstwice")
	m.Stage, m.Function = "dev", "runstwice-dev-email"
	m.Flush()
	m.Flush()
	all := docs(t, buf.String())
	if len(all) != 1 || all[0][ColdStart] != float64(1) || all[0]["function"] != "runstwice-dev-email" {
		t.Fatalf("cold start documents = %s", buf.String())
	}
}

func TestNilMetricsDiscards(t *testing.T) {
	var m *Metrics
	m.Count(JobsFailed, "x", 1) // must not panic
	m.Flush()
}

func TestFlushQuotesOddNames(t *testing.T) {
	coldStart.Store(false)
	var buf bytes.Buffer
	m := NewMetrics(&buf, "runstwice")
	m.Count(UnknownToggle, "we\"ird\x00é", 1)
	m.Flush()
	if all := docs(t, buf.String()); all[0]["type"] != "we\"ird\x00é" {
		t.Fatalf("line %s", buf.String())
	}
}

// A metric counted by reason is written with the dimensions stage, type and
// reason, one document per (type, reason), aggregated, and reset on flush.
func TestCountReasonAddsTheReasonDimension(t *testing.T) {
	coldStart.Store(false)
	var buf bytes.Buffer
	m := NewMetrics(&buf, "runstwice")
	m.Stage = "prod"
	m.CountReason(JobsNoop, "email.welcome.v1", "user-not-found", 1)
	m.CountReason(JobsNoop, "email.welcome.v1", "user-not-found", 2)
	m.CountReason(JobsNoop, "email.welcome.v1", "other", 1)
	m.Flush()
	all := docs(t, buf.String())
	if len(all) != 2 {
		t.Fatalf("%d documents; want one per reason: %s", len(all), buf.String())
	}
	var got emfDoc
	if err := json.Unmarshal([]byte(strings.Split(strings.TrimSpace(buf.String()), "\n")[1]), &got); err != nil {
		t.Fatal(err)
	}
	if dims := strings.Join(got.AWS.CloudWatchMetrics[0].Dimensions[0], ","); dims != "stage,type,reason" {
		t.Fatalf("dimensions %s; want stage,type,reason", dims)
	}
	if all[1][keyReason] != "user-not-found" || all[1][JobsNoop] != float64(3) || all[0][keyReason] != "other" {
		t.Fatalf("documents %v", all)
	}
	buf.Reset()
	m.Flush()
	if buf.Len() != 0 {
		t.Fatalf("a second flush repeated the counts: %s", buf.String())
	}
}
