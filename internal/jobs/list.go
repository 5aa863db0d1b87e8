package jobs

import "errors"

// The limits of a page of GET /v1/jobs.
const (
	DefaultListLimit = 25
	MaxListLimit     = 100
)

// ListQuery selects a page of one caller's jobs. Type and State filter (zero:
// all); Limit is the page's size (DefaultListLimit if 0); Cursor is the Next of
// the page before ("" for the first).
type ListQuery struct {
	Caller string
	Type   string
	State  State
	Limit  int
	Cursor string
}

// ListPage is one page of jobs, newest first; Next is "" on the last page.
type ListPage struct {
	Jobs []Job
	Next string
}

// ErrBadCursor is returned for a cursor this lister did not hand to this
// caller.
var ErrBadCursor = errors.New("jobs: not a cursor of this list")
