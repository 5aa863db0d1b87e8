package scalemodel_test

import (
	"flag"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/runstwice/runstwice/internal/dev/scalemodel"
)

// full runs an hour of 1,000 continuations a second with 100,000 parents
// waiting (make scale-model); make test runs a short version.
var full = flag.Bool("full", false, "an hour of 1,000 continuations a second, 100,000 parents waiting")

// load shortens or lengthens the load, e.g. to profile a few minutes of
// the full rate: -full -load 5m.
var load = flag.Duration("load", 0, "the load's length, when not the default (e.g. -full -load 5m)")

// Continuations at scale: every continuation is decided once (sent once
// or cancelled), none waits past its parent's end plus one sweep period
// and that sweep's own run, no item grows past 400 KB and no item or
// partition key of the index takes more than 1,000 writes in a second;
// nothing is refused, and the model holds no pair's items past its check.
func TestContinuationsAtScale(t *testing.T) {
	cfg := scalemodel.Config{Rate: 100, Load: 5 * time.Minute, Wait: 100 * time.Second, Unseen: 0.01, Expired: 0.01,
		SweepPeriod: 5 * time.Minute, SweepTimeout: 30 * time.Second, Latency: 5 * time.Millisecond, Seed: 1}
	if *full {
		cfg.Rate, cfg.Load = 1000, time.Hour
	}
	if *load > 0 {
		cfg.Load = *load
	}
	cfg.Logf = t.Logf
	var res scalemodel.Result
	var err error
	began := time.Now()
	synctest.Test(t, func(*testing.T) { res, err = scalemodel.Run(cfg) })
	if err != nil {
		t.Fatal(err)
	}
	report(t, cfg, res, time.Since(began))
	switch {
	case res.Refused != 0:
		t.Errorf("%d reservations or releases refused (%s); want none", res.Refused, res.Error)
	case res.Undecided != 0 || res.Sent+res.Cancelled != res.Continuations:
		t.Errorf("%d of %d continuations undecided (%d sent, %d cancelled); want every one decided", res.Undecided, res.Continuations, res.Sent, res.Cancelled)
	case res.Duplicates != 0:
		t.Errorf("%d continuations sent more than once", res.Duplicates)
	case res.LongestWait > cfg.SweepPeriod+cfg.SweepTimeout:
		t.Errorf("a continuation waited %v past its parent's end; want at most a sweep period and its run, %v", res.LongestWait, cfg.SweepPeriod+cfg.SweepTimeout)
	case res.DB.LargestItem > scalemodel.MaxItemSize || res.DB.TooLarge != 0:
		t.Errorf("an item of %d bytes (%s), %d writes refused for size; want none over %d", res.DB.LargestItem, res.DB.LargestKey, res.DB.TooLarge, scalemodel.MaxItemSize)
	case res.DB.MostItemWrites > scalemodel.MaxWritesPerSecond || res.DB.MostIndexWrites > scalemodel.MaxWritesPerSecond || res.DB.Throttled != 0:
		t.Errorf("%d writes in a second to %s, %d to a key of the index, %d throttled; want at most %d", res.DB.MostItemWrites, res.DB.MostItemKey,
			res.DB.MostIndexWrites, res.DB.Throttled, scalemodel.MaxWritesPerSecond)
	case res.Held != 0:
		t.Errorf("%d items and markers of decided pairs held at the end; want each dropped once checked", res.Held)
	case res.MostWaiting < cfg.Rate*int(cfg.Wait/time.Second)*9/10:
		t.Errorf("at most %d parents waited at once; want about %d", res.MostWaiting, cfg.Rate*int(cfg.Wait/time.Second))
	}
}

// report logs the figures docs/scale.md gives of a run, and all of res.
func report(t *testing.T, cfg scalemodel.Config, res scalemodel.Result, wall time.Duration) {
	t.Helper()
	t.Logf("%+v", res)
	lines := []string{
		fmt.Sprintf("load: %d continuations a second for %v, parents running %v on average", cfg.Rate, cfg.Load, cfg.Wait),
		fmt.Sprintf("continuations made: %d; sent %d, cancelled %d, sent twice %d, undecided %d", res.Continuations, res.Sent, res.Cancelled, res.Duplicates, res.Undecided),
		fmt.Sprintf("most parents waiting at once: %d", res.MostWaiting),
		fmt.Sprintf("longest from a parent's end to its continuation's decision: %v (of the ends only the sweep saw: %v)", res.LongestWait, res.LongestSweepWait),
		fmt.Sprintf("sweep runs: %d (%d stopped for time), the longest %v, the most parents in one run %d", res.Sweeps, res.UnfinishedSweeps, res.LongestSweep, res.MostSwept),
		fmt.Sprintf("most writes of one item in a second: %d (%s); of one key of the index: %d", res.DB.MostItemWrites, res.DB.MostItemKey, res.DB.MostIndexWrites),
		fmt.Sprintf("largest item: %d bytes (%s)", res.DB.LargestItem, res.DB.LargestKey),
		fmt.Sprintf("refused: %d; throttled %d, too large %d; held at the end %d", res.Refused, res.DB.Throttled, res.DB.TooLarge, res.Held),
		fmt.Sprintf("wall time: %v; peak memory held: %d MB", wall.Round(time.Second), res.PeakMemory>>20),
	}
	for _, l := range lines {
		t.Log(l)
	}
}
