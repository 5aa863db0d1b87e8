package engine

import (
	"runtime/debug"
	"slices"
	"sync"
	"time"
)

// runAll runs do for every pending record, at most limit at once, and sets
// each record's outcome. Records run in lanes: a FIFO group's records in
// one lane, in order, and a standard queue's records in one lane per key,
// so two records of one key never run at once; in a lane, a record after
// one that settled its key is a duplicate, and in a FIFO group the records
// after one that is retried are held (retried with it, never run). A
// record whose goroutine panics ends as a retry (kindPending) with the
// panic logged; its neighbours are untouched. When stop is set, runAll
// returns by then even if a record is still running (work that ignores its
// context): such a record is retried, and what its goroutine decides later
// is dropped.
func (m *runner) runAll(items []item, limit int, stop time.Time, do func(int, *item) outcome) {
	sem := make(chan struct{}, max(limit, 1))
	var (
		wg        sync.WaitGroup
		mu        sync.Mutex // guards every it.out below, and abandoned
		abandoned bool
	)
	set := func(it *item, o outcome) {
		mu.Lock()
		defer mu.Unlock()
		if !abandoned {
			it.out = o
		}
	}
	runOne := func(i int, it *item) {
		sem <- struct{}{}
		defer func() { <-sem }()
		defer func() {
			if v := recover(); v != nil {
				it.log.Error("the runner panicked on this record; it is retried", "panic", panicText(v), "stack", string(debug.Stack()))
				set(it, outcome{kind: kindPending, reason: "the runner panicked on it; SQS retries it", err: &PanicError{Value: panicText(v)}})
			}
		}()
		set(it, do(i, it))
	}
	first, next := lanes(items)
	// settled holds the keys settled earlier in the batch, each with the
	// fingerprint of what settled it (guarded by mu); a key met in two
	// lanes (two FIFO groups, two shards) runs under its lock, one record
	// at a time.
	var settled map[Key]string // made by the first record that settles a key
	locks := sharedKeys(items, first, next)
	// runKey runs a pending record of its lane: a duplicate of what settled
	// its key earlier in the batch, or judged against it, or run.
	runKey := func(i int, it *item) {
		if l := locks[it.key]; l != nil {
			l.Lock()
			defer l.Unlock()
		}
		mu.Lock()
		fp, done := settled[it.key]
		mu.Unlock()
		switch {
		case done && (fp == "" || it.fp == "" || fp == it.fp):
			set(it, outcome{kind: kindDuplicate, reason: "a record of the same key settled it earlier in this batch"})
		case done:
			// Done here with other content: what the peek read before is
			// stale; the runner judges it as done.
			it.seen, it.hasSeen, it.peeked = Record{Key: it.key, State: StateDone, Fingerprint: fp}, true, true
			runOne(i, it)
		default:
			runOne(i, it)
		}
		mu.Lock()
		defer mu.Unlock()
		if _, done := settled[it.key]; !done && settles(it.out.kind) {
			if settled == nil {
				settled = map[Key]string{}
			}
			settled[it.key] = it.fp
		}
	}
	for _, head := range first {
		wg.Add(1)
		m.goRecord(func() {
			defer wg.Done()
			if it := &items[head]; next[head] < 0 && it.out.kind == kindPending && locks[it.key] == nil {
				runOne(head, it)
				return
			}
			var held *item // the FIFO record whose retry holds the rest of its group
			for i := head; i >= 0; i = next[i] {
				it := &items[i]
				mu.Lock()
				gone, decided := abandoned, it.out.kind != kindPending
				mu.Unlock()
				switch {
				case gone:
					return
				case held != nil && !decided:
					set(it, outcome{kind: kindHeld, reason: "an earlier record of its group or shard (" + held.msg.MessageId + ") is retried; it keeps its place behind it"})
					continue
				case !decided:
					runKey(i, it)
				}
				mu.Lock()
				o := it.out
				mu.Unlock()
				if it.group != "" && held == nil && outcomes[o.kind].retry {
					held = it
				}
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	if stop.IsZero() {
		<-done
		return
	}
	timer := time.NewTimer(time.Until(stop))
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
		mu.Lock()
		abandoned = true
		mu.Unlock()
		for i := range items {
			if it := &items[i]; it.out.kind == kindPending && it.rec != nil {
				it.rec.Error("record still running at the deadline; it is retried")
			}
		}
	}
}

// lanes groups the records that must run one after another: a FIFO
// group's records (decided ones too, since a retried one holds the rest),
// and a standard queue's pending records of one key. It returns each
// lane's first record, in the order of the batch; next[i] is the record
// after i in its lane (-1 for none).
func lanes(items []item) (first, next []int) {
	next = make([]int, len(items))
	last := make([]int, 0, len(items)) // the last record of each lane so far
	// byKey finds a long batch's lane of a key (a short one's lanes are
	// searched: SQS batches are short).
	var byKey map[Key]int
	if len(items) > shortBatch {
		byKey = make(map[Key]int, len(items))
	}
	var byGroup map[string]int
	for i := range items {
		next[i] = -1
		it := &items[i]
		var n int
		var ok bool
		switch {
		case it.group != "":
			if byGroup == nil {
				byGroup = map[string]int{}
			}
			if n, ok = byGroup[it.group]; !ok {
				n = len(first)
				byGroup[it.group] = n
			}
		case it.out.kind != kindPending:
			continue
		case byKey == nil:
			n = slices.IndexFunc(first, func(h int) bool { return items[h].group == "" && items[h].key == it.key })
			if ok = n >= 0; !ok {
				n = len(first)
			}
		default:
			if n, ok = byKey[it.key]; !ok {
				n = len(first)
				byKey[it.key] = n
			}
		}
		if !ok {
			first, last = append(first, i), append(last, i)
			continue
		}
		next[last[n]], last[n] = i, i
	}
	return first, next
}

// shortBatch is the most records a batch may have for its keys to be
// searched rather than indexed by a map (an SQS batch has at most 10).
const shortBatch = 16

// sharedKeys returns a lock for each key whose records are in more than one
// lane (one key in two FIFO groups, or two shards), none for the others.
func sharedKeys(items []item, first, next []int) map[Key]*sync.Mutex {
	var locks map[Key]*sync.Mutex
	if !slices.ContainsFunc(first, func(h int) bool { return items[h].group != "" }) {
		return nil // a standard queue's lanes are one per key
	}
	laneOf := map[Key]int{}
	for lane, head := range first {
		for i := head; i >= 0; i = next[i] {
			it := &items[i]
			if it.out.kind != kindPending {
				continue
			}
			if l, ok := laneOf[it.key]; !ok {
				laneOf[it.key] = lane
			} else if l != lane {
				if locks == nil {
					locks = map[Key]*sync.Mutex{}
				}
				if locks[it.key] == nil {
					locks[it.key] = &sync.Mutex{}
				}
			}
		}
	}
	return locks
}
