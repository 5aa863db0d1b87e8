package digest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"

	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/runner"
	"github.com/runstwice/runstwice/message"
)

// MetricUsersRefused counts, under the fan-out's type, the users of the
// weekly digest whose id the digest's args refuse (an '@', a ':', a '|', a
// space, longer than 64 bytes…): each gets no digest, and every other user
// does. It is counted each time a page reads such a user, so a page run
// again counts its users again.
const MetricUsersRefused = "DigestUsersRefused"

// Handle reads the job's page, enqueues each user's digest, then the next
// page of the job's run. Any failure returns an error and the whole page
// runs again: every enqueue is idempotent. A user id the digest's args
// refuse is counted and logged, never the end of the page.
//
// The next page starts after the last id the page read when the next
// page's args accept it as after; else after the last one of the page they
// accept, and the users read beyond it are left to the next page, which
// reads them again. When none of the ids read can be a cursor, the job
// reads on itself, page after page, until one can or the directory ends:
// no after is ever an id the next page would refuse.
func (h *Handler) Handle(ctx context.Context, job runner.Job) error {
	log := job.Logger
	if log == nil {
		log = slog.Default()
	}
	digestID, after := job.Envelope.Args["digestId"], job.Envelope.Args["after"]
	run, corr := RunOf(job.Envelope), job.Envelope.CorrelationID
	from, users, refused := after, 0, 0
	for {
		ids, next, err := h.cfg.Directory.WeeklyDigestPage(ctx, from, PageSize)
		if err != nil {
			return fmt.Errorf("digest: page after %q: %w", after, err)
		}
		cursor := ""
		if next != "" {
			cursor = h.cursor(digestID, ids, next)
			ids = upTo(ids, cursor)
		}
		for _, id := range ids {
			args := map[string]string{"userId": id, "digestId": digestID}
			if verr := contract.PartnerDigest.ValidateArgs(args); verr != nil {
				refused++
				h.refuse(ctx, log, digestID, after, users+refused, id, verr)
				continue
			}
			if err := h.enqueue(ctx, contract.PartnerDigest, args, DigestKey(id, digestID), corr); err != nil {
				return err
			}
			users++
		}
		switch {
		case next == "":
			log.Info("digest: last page fanned out", "digestId", digestID, "after", after, "run", run, "users", users, "refused", refused)
			return nil
		case cursor != "":
			args := map[string]string{"digestId": digestID, "after": cursor}
			if err := h.enqueue(ctx, contract.Fanout, args, PageKey(digestID, run, cursor), corr); err != nil {
				return err
			}
			log.Info("digest: page fanned out", "digestId", digestID, "after", after, "run", run, "users", users, "refused", refused, "next", cursor)
			return nil
		}
		// No id read is a cursor the next page accepts: read on here,
		// from the last one read (a value of this process, never an arg).
		log.Warn("digest: no user id of the page can start the next page; reading on in this job",
			"digestId", digestID, "after", after, "run", run, "read", len(ids))
		from = next
	}
}

// cursor returns the after of the next page: next (the last id the page
// read) when the fan-out's args accept it, else the last of ids that they
// accept, else "".
func (h *Handler) cursor(digestID string, ids []string, next string) string {
	ok := func(id string) bool {
		return contract.Fanout.ValidateArgs(map[string]string{"digestId": digestID, "after": id}) == nil
	}
	if ok(next) {
		return next
	}
	for i := len(ids) - 1; i >= 0; i-- {
		if ok(ids[i]) {
			return ids[i]
		}
	}
	return ""
}

// upTo returns the ids (in order) up to and including cursor; all of them
// when cursor is "" or beyond the last.
func upTo(ids []string, cursor string) []string {
	if cursor == "" {
		return ids
	}
	for i, id := range ids {
		if id > cursor {
			return ids[:i]
		}
	}
	return ids
}

// refuse counts and logs a user whose id the digest's args refuse. The id
// itself is not logged: it may be an address or other personal data
// (which is why the args refuse it). Its place (the position-th user of
// the weekly digest after the page's after), its length and the start of
// its SHA-256 find it in the users table.
func (h *Handler) refuse(ctx context.Context, log *slog.Logger, digestID, after string, position int, id string, verr error) {
	h.cfg.Metrics.Count(MetricUsersRefused, contract.Fanout.Name, 1)
	sum := sha256.Sum256([]byte(id))
	reason := verr.Error()
	var v *message.ValidationError
	if errors.As(verr, &v) {
		reason = v.Detail()
	}
	log.Log(ctx, slog.LevelWarn, "digest: a user id the digest's args refuse; no digest for this user, the page goes on",
		"digestId", digestID, "after", after, "position", position, "userIdBytes", len(id),
		"userIdSha256", hex.EncodeToString(sum[:6]), "reason", reason)
}
