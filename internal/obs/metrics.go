package obs

// Namespace is the CloudWatch namespace of every runstwice metric (the
// engine's Metrics writes under the namespace it is given).
const Namespace = "runstwice"

// The metric names of the bundle's own use cases, beside the engine's
// (engine.JobsSucceeded, …), with the dimensions stage and type.
const (
	// ScheduleQuotaExceeded counts the enqueues refused because the
	// account's EventBridge Scheduler schedule quota is reached (a job due
	// later than 15 minutes could not get its schedule), with the
	// dimensions stage and type: any is worth an alarm, since every such
	// job is refused until an operator acts.
	ScheduleQuotaExceeded = "ScheduleQuotaExceeded"
	// SesDailyQuota counts the mails SES refused because the account's
	// daily sending quota is used up (their jobs park until it resets), and
	// SesSendingPaused those refused because SES paused the account's (or
	// the configuration set's) sending; their type dimension is "ses".
	SesDailyQuota    = "SesDailyQuota"
	SesSendingPaused = "SesSendingPaused"
)
