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
