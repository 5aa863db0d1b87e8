package webhook

import "github.com/runstwice/runstwice/internal/contract"

// Deliver is webhook.deliver.v1: one event POSTed to the stack's webhook
// receiver (WebhookUrl), by its id. The receiver dedups by the
// Idempotency-Key, which is the job id, so effect then claim (a crash
// between the POST and the claim repeats the POST under the same key) is
// right, and a lease keeps a concurrent twin from posting at the same time.
// It runs on its own queue and its own function (functions/webhook).
//
// The declaration is the type's whole contract and stays in this file on
// its own, so it can move with the other declarations.
var Deliver = contract.JobType{
	Name:             "webhook.deliver.v1",
	Args:             []contract.ArgSpec{{Name: "eventId", Format: contract.FormatID, Required: true}},
	Queue:            contract.QueueWebhooks,
	EnabledByDefault: true,
	Bias:             contract.EffectThenClaim,
	Lease:            true,
	KeyPrefix:        "webhook",
	KeyArgs:          []string{"eventId"},
}

// Types returns the webhook declarations, for the registry
// (internal/jobtypes).
func Types() []contract.JobType { return []contract.JobType{Deliver} }
