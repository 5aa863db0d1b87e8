package client

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"net/http"
	"net/url"
	"strconv"
)

// ListOptions filter GET /v1/jobs; the zero value lists every job of the
// caller, newest first, 25 a page.
type ListOptions struct {
	// State keeps jobs in this derived state only ("" all).
	State State
	// Type keeps jobs of this type only ("" all).
	Type string
	// Limit is the page's size, 1-100 (0: the API's 25).
	Limit int
	// Cursor is the Next of the page before ("" for the first page).
	Cursor string
}

// JobPage is one page of the caller's jobs, newest first. Next is the
// cursor of the page after it, "" on the last page.
type JobPage struct {
	Jobs []Job  `json:"jobs"`
	Next string `json:"next,omitempty"`
}

// ListJobs reads one page of this caller's jobs (GET /v1/jobs). Another
// caller's jobs never appear. A bad filter is a *Problem with status 400.
func (c *Client) ListJobs(ctx context.Context, opts ListOptions) (*JobPage, error) {
	q := url.Values{}
	if opts.State != "" {
		q.Set("state", string(opts.State))
	}
	if opts.Type != "" {
		q.Set("type", opts.Type)
	}
	if opts.Limit != 0 {
		q.Set("limit", strconv.Itoa(opts.Limit))
	}
	if opts.Cursor != "" {
		q.Set("cursor", opts.Cursor)
	}
	const path = "/v1/jobs"
	r, err := c.do(ctx, call{method: http.MethodGet, path: path, query: q.Encode()})
	if err != nil {
		return nil, err
	}
	page := &JobPage{}
	if err := json.Unmarshal(r.body, page); err != nil {
		return nil, fmt.Errorf("client: GET %s: %d answer is not a page of jobs: %w", path, r.resp.StatusCode, err)
	}
	return page, nil
}

// Jobs iterates over every job of this caller that opts selects, newest
// first, reading a page at a time (opts.Limit jobs each). It stops at the
// first error, which it yields with a zero Job.
func (c *Client) Jobs(ctx context.Context, opts ListOptions) iter.Seq2[Job, error] {
	return func(yield func(Job, error) bool) {
		for {
			page, err := c.ListJobs(ctx, opts)
			if err != nil {
				yield(Job{}, err)
				return
			}
			for _, j := range page.Jobs {
				if !yield(j, nil) {
					return
				}
			}
			if page.Next == "" {
				return
			}
			opts.Cursor = page.Next
		}
	}
}
