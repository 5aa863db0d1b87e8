package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"

	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/envvar"
	"github.com/runstwice/runstwice/message"
)

// resources names the tables and queues jobctl works on.
type resources struct {
	JobsTable        string
	MarkersTable     string
	DeadLettersTable string
	UsersTable       string
	OutboxTable      string
	Queues           map[message.Queue]string
}

// resolveResources finds the resources of a stage: the functions' environment
// variables first, then the local stack's resources.json in stateDir (the
// local stack writes what it created there: logical id → physical name or
// URL; stage local only), then the template's naming convention.
func resolveResources(stage, stateDir string, getenv func(string) string) resources {
	physical := conventionalNames(stage)
	if stage == "local" && stateDir != "" {
		if b, err := os.ReadFile(filepath.Join(stateDir, "resources.json")); err == nil {
			var created map[string]string
			if json.Unmarshal(b, &created) == nil {
				for id, v := range created {
					if v != "" {
						physical[id] = v
					}
				}
			}
		}
	}
	pick := func(env, logicalID string) string {
		if v := getenv(env); v != "" {
			return v
		}
		return physical[logicalID]
	}
	queues := make(map[message.Queue]string, len(contract.Queues))
	for _, q := range contract.Queues {
		queues[q] = pick(envvar.QueueURLEnv(q), QueueLogicalID(q))
	}
	return resources{
		JobsTable:        pick("JOBS_TABLE", "JobsTable"),
		MarkersTable:     pick("MARKERS_TABLE", "MarkersTable"),
		DeadLettersTable: pick("DEAD_LETTERS_TABLE", "DeadLettersTable"),
		UsersTable:       pick("USERS_TABLE", "UsersTable"),
		OutboxTable:      pick("OUTBOX_TABLE", "OutboxTable"),
		Queues:           queues,
	}
}

// QueueLogicalID is a work queue's logical id in template.yaml: its name,
// capitalised, and "Queue" (CriticalQueue, …, WebhooksQueue).
func QueueLogicalID(q message.Queue) string {
	return strings.ToUpper(string(q[:1])) + string(q[1:]) + "Queue"
}

// conventionalNames are the physical names template.yaml gives a stage's
// tables. Queue URLs depend on the account and region, so they come from the
// environment or the resources file.
func conventionalNames(stage string) map[string]string {
	return map[string]string{
		"JobsTable":        "runstwice-" + stage + "-jobs",
		"MarkersTable":     "runstwice-" + stage + "-markers",
		"DeadLettersTable": "runstwice-" + stage + "-dead-letters",
		"UsersTable":       "runstwice-" + stage + "-users",
		"OutboxTable":      "runstwice-" + stage + "-outbox",
	}
}
