package contract

// DuplicatePolicy decides whether a new job may be created under a key whose
// last job is terminal. While that job is active no policy creates a second
// one.
type DuplicatePolicy string

// The duplicate policies.
const (
	// AllowAfterFailed (the default) allows a new job after any terminal
	// state: Succeeded, Failed, Cancelled or Expired.
	AllowAfterFailed DuplicatePolicy = "AllowAfterFailed"
	// RejectIfFailed rejects a new job after Failed, allows it after the
	// other terminal states.
	RejectIfFailed DuplicatePolicy = "RejectIfFailed"
	// RejectAlways rejects a new job after any terminal state.
	RejectAlways DuplicatePolicy = "RejectAlways"
)

// Policies lists the duplicate policies.
var Policies = []DuplicatePolicy{AllowAfterFailed, RejectIfFailed, RejectAlways}

// ParsePolicy returns the policy named s; "" is AllowAfterFailed. ok is false
// for any other name.
func ParsePolicy(s string) (DuplicatePolicy, bool) {
	switch p := DuplicatePolicy(s); p {
	case "":
		return AllowAfterFailed, true
	case AllowAfterFailed, RejectIfFailed, RejectAlways:
		return p, true
	}
	return "", false
}

// AfterPolicy decides which ends of its parent run a continuation (a job
// enqueued with "after"): the others cancel it.
type AfterPolicy string

// The after policies.
const (
	// OnSucceeded (the default) runs the continuation once its parent
	// succeeded. A parent that is Cancelled or Expired, or Failed with its
	// dead letter dropped (or too old to redrive), cancels it; a parent that
	// Failed and may still be redriven keeps it waiting.
	OnSucceeded AfterPolicy = "OnSucceeded"
	// OnAnyEnd runs the continuation once its parent ended in any way:
	// Succeeded, Failed, Cancelled or Expired.
	OnAnyEnd AfterPolicy = "OnAnyEnd"
)

// AfterPolicies lists the after policies.
var AfterPolicies = []AfterPolicy{OnSucceeded, OnAnyEnd}

// ParseAfterPolicy returns the after policy named s; "" is OnSucceeded. ok
// is false for any other name.
func ParseAfterPolicy(s string) (AfterPolicy, bool) {
	switch p := AfterPolicy(s); p {
	case "":
		return OnSucceeded, true
	case OnSucceeded, OnAnyEnd:
		return p, true
	}
	return "", false
}
