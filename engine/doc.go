// Package engine runs jobs safely under at-least-once delivery, whatever
// their payload: a Kind says how a record's body becomes a payload and
// which key it runs once under, and a Handler (or, for many kinds of one
// payload type, a Mux) runs every record of an SQS batch through one
// pipeline (docs/library.md, "The rules"):
//
//  1. decode the body and take its key; a body the kind refuses, or a
//     payload without a key, is a permanent failure, dead-lettered with
//     its reason, and its work never runs;
//  2. read the kill switch (Options.Switch); a switched-off record parks
//     (re-sent with a delay, its original message kept) or, for a Skip
//     kind, ends as a successful no-op;
//  3. peek the markers of the whole batch with one consistent read (a
//     cache of done keys may answer first); a key that is done or
//     cancelled succeeds without touching anything else, and one done or
//     leased under another fingerprint fails with ErrFingerprint;
//  4. take a lease (Kind.Lease) so a concurrent twin does not run too;
//  5. run the work, and 6. claim the marker, in the kind's order (Bias),
//     the claim under a context cancellation cannot stop, retried within
//     the invocation; "already done" is success;
//  7. failures: transient ones become batch item failures, backed off by
//     a growing, jittered visibility timeout (Options.Backoff); permanent
//     ones (Permanent) go to the dead-letter queue; the final attempt is
//     recorded first; a cancelled context is a retry, not a failure;
//  8. a work that completed is never re-run on purpose: when its claim
//     still fails, the record is reported done, logged and counted
//     (ClaimFailed).
//
// Records run concurrently (bounded by Options.Concurrency), except that
// records of one key run one at a time, and a FIFO group's records run in
// order and stop at the group's first retried record. Each record ends
// with exactly one outcome: one log line, its metrics and, for a retry, a
// batch item failure.
//
// The ports (Store, Switch, Parker, DeadLetterer, Backoff, JobRecorder)
// are small interfaces; the AWS adapters are modules of their own
// (aws/dynamostore, aws/ssmswitch, aws/sqsqueue), and engine/memstore and
// engine/enginetest serve tests.
package engine
