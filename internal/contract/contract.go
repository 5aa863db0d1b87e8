// Package contract is the bundle's job contract: the declarations of
// runstwice's own job types (types.go), its work queues and the argument
// formats its types use beyond the engine's FormatID. The enqueue API, the
// producer's client, the outbox relay and every worker build their registry
// here, so they agree on every type, arg and key; it imports the engine,
// never the other way round, and no handler, so a producer links no worker.
package contract

import (
	"time"

	"github.com/runstwice/runstwice/message"
)

// The bundle's work queues. Each has its own redrive policy to the
// dead-letter queue and its own event source on a worker: the e-mail
// function consumes critical, default and bulk; the webhook function
// consumes webhooks; the chain function consumes chain (runstwice's own
// jobs that finish batches and sweep continuations).
const (
	QueueCritical message.Queue = "critical"
	QueueDefault  message.Queue = "default"
	QueueBulk     message.Queue = "bulk"
	QueueWebhooks message.Queue = "webhooks"
	QueueChain    message.Queue = "chain"
)

// Queues lists the bundle's work queues: the e-mail function's in priority
// order, then the webhook function's, then the chain function's. Whatever needs every queue (the
// enqueue API, the outbox relay, the dead-letter recorder, jobctl, the
// local stack) ranges over this list.
var Queues = []message.Queue{QueueCritical, QueueDefault, QueueBulk, QueueWebhooks, QueueChain}

// The argument formats of the bundle's types beside message.FormatID.
var (
	// FormatCountry is an ISO 3166-1 alpha-2 code such as "BD".
	FormatCountry = message.NewFormat("ISO 3166-1 alpha-2 country code", "BD", validCountry)
	// FormatISOWeek is an ISO 8601 week such as "2026-W48".
	FormatISOWeek = message.NewFormat("ISO week (YYYY-Www)", "2026-W48", validISOWeek)
)

// ISOWeek returns the ISO 8601 week of t in UTC (FormatISOWeek), e.g.
// "2026-W49": the digestId of a weekly job (WeekOf in another zone).
func ISOWeek(t time.Time) string { return WeekOf(t, time.UTC) }

// validCountry: two upper-case letters.
func validCountry(s string) bool {
	return len(s) == 2 && isUpper(s[0]) && isUpper(s[1])
}

// validISOWeek: YYYY-Www with a week from 01 to 53.
func validISOWeek(s string) bool {
	if len(s) != 8 || s[4] != '-' || s[5] != 'W' {
		return false
	}
	for _, c := range []byte{s[0], s[1], s[2], s[3], s[6], s[7]} {
		if !isDigit(c) {
			return false
		}
	}
	week := int(s[6]-'0')*10 + int(s[7]-'0')
	return week >= 1 && week <= 53
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }
func isUpper(c byte) bool { return c >= 'A' && c <= 'Z' }
