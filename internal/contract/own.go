package contract

import "strings"

// OwnPrefix begins the name of every job type runstwice makes for itself
// (ScheduleSweep, BatchFinish, ContinuationSweep): its own namespace.
const OwnPrefix = "runstwice."

// Own reports whether type name is one of runstwice's own job types (named
// under OwnPrefix): the sweeps' ticks and a batch's finisher, which no user
// asks for. The user's views of jobs (`make run`'s lines, `jobctl jobs
// list`, the local web view) leave them out unless asked, and mark their
// switches as runstwice's.
func Own(name string) bool { return strings.HasPrefix(name, OwnPrefix) }
