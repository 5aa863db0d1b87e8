// The job contract is shared by every part of runstwice: the
// SQS message envelope, the registry of versioned job types and the rules for
// their arguments.
//
// The rules it enforces, at enqueue and again at execution:
//
//   - A message carries primitive IDs only. Each job type declares its args;
//     unknown args, nested objects, arrays, numbers, e-mail addresses, URLs,
//     whitespace-bearing text and values over the declared size are rejected.
//   - A job type name is versioned (".v1", ".v2") and never renamed or removed
//     while messages may exist; a payload change is a new version registered
//     beside the old one.
//   - The message id is the job id. When the enqueue request carries an
//     Idempotency-Key it is derived deterministically from (caller, key).
package message
