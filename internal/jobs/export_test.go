package jobs

// SweepShardOf is sweepShard for the tests: the shard of the index sweep
// that lists id on list ("continuations", "schedules").
func SweepShardOf(list, id string) string { return sweepShard(list, id) }
