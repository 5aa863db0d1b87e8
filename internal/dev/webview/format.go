package webview

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// readable is a duration as a person reads it: "850 µs", "54 ms", "5.1 s",
// "42 s", "3 min 5 s" (Go's own form, "53.866384ms", says too much).
func readable(d time.Duration) string {
	switch {
	case d < 0:
		return "-" + readable(-d)
	case d < time.Millisecond:
		return fmt.Sprintf("%d µs", int64(math.Round(float64(d)/float64(time.Microsecond))))
	case d < 999500*time.Microsecond:
		return fmt.Sprintf("%d ms", int64(math.Round(float64(d)/float64(time.Millisecond))))
	case d < 9950*time.Millisecond:
		return fmt.Sprintf("%.1f s", d.Seconds())
	case d < time.Minute-500*time.Millisecond:
		return fmt.Sprintf("%d s", int64(math.Round(d.Seconds())))
	}
	s := int64(math.Round(d.Seconds()))
	if s%60 == 0 {
		return fmt.Sprintf("%d min", s/60)
	}
	return fmt.Sprintf("%d min %d s", s/60, s%60)
}

// An X-Ray trace id is "1-<8 hex: epoch seconds>-<24 hex: random>"; its
// W3C form is the 32 hex digits of both parts.
const (
	xrayLen = 1 + 1 + 8 + 1 + 24
	w3cLen  = 32
)

// xrayForm is a trace id in X-Ray's form, the one the API and every view
// of a job show ("1-6b0e0b18-3fdcb17101def90e9ffe5564"); an id in neither
// form is returned as it is.
func xrayForm(id string) string {
	if len(id) == w3cLen && isHex(id) {
		return "1-" + id[:8] + "-" + id[8:]
	}
	return id
}

// w3cForm is a trace id in W3C's form, the one OpenTelemetry and its
// collectors show ("6b0e0b183fdcb17101def90e9ffe5564").
func w3cForm(id string) string {
	if len(id) == xrayLen && strings.HasPrefix(id, "1-") && id[10] == '-' && isHex(id[2:10]+id[11:]) {
		return id[2:10] + id[11:]
	}
	return id
}

// traceLabel is a trace link's text: the last eight hex digits of the
// trace id, its random part. An X-Ray id begins with the epoch second, so
// its first characters are the same for every job of a minute.
func traceLabel(id string) string {
	hex := w3cForm(id)
	if len(hex) == w3cLen {
		return "…" + hex[w3cLen-8:]
	}
	return shortID(id)
}

func isHex(s string) bool {
	for _, r := range s {
		if !('0' <= r && r <= '9' || 'a' <= r && r <= 'f') {
			return false
		}
	}
	return s != ""
}
