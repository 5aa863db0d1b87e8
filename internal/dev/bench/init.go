package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"time"

	"github.com/runstwice/runstwice/internal/dev/lambdarie"
	"github.com/runstwice/runstwice/internal/testkit"
)

// functionEnv is what each function needs to start (its build refuses to
// start without it); nothing is called at start, so no endpoint answers.
var functionEnv = map[string]map[string]string{
	"enqueue": {"IDEMPOTENCY_TABLE": "i", "JOBS_TABLE": "j", "MARKERS_TABLE": "m", "SCHEDULE_GROUP": "g", "SCHEDULER_ROLE_ARN": "arn:aws:iam::1:role/s",
		"QUEUE_ARN_CRITICAL": "arn:c", "QUEUE_ARN_DEFAULT": "arn:d", "QUEUE_ARN_BULK": "arn:b", "DLQ_ARN": "arn:dlq"},
	"email": {"MARKERS_TABLE": "m", "USERS_TABLE": "u", "JOBS_TABLE": "j", "DLQ_URL": "http://127.0.0.1:1/dlq", "MAIL_FROM": "no-reply@example.test", "APP_BASE_URL": "https://app.example.test"},
	"dlq":   {"DEAD_LETTERS_TABLE": "d", "JOBS_TABLE": "j", "MARKERS_TABLE": "m"},
	"outbox": {"DEAD_LETTERS_TABLE": "d", "JOBS_TABLE": "j", "MARKERS_TABLE": "m", "SCHEDULE_GROUP": "g", "SCHEDULER_ROLE_ARN": "arn:aws:iam::1:role/s",
		"QUEUE_ARN_CRITICAL": "arn:c", "QUEUE_ARN_DEFAULT": "arn:d", "QUEUE_ARN_BULK": "arn:b", "DLQ_ARN": "arn:dlq"},
}

// firstEvent is an event each function answers without calling AWS.
var firstEvent = map[string]string{
	"enqueue": `{"version":"2.0","rawPath":"/nowhere","requestContext":{"http":{"method":"GET","path":"/nowhere"}}}`,
	"email":   `{"Records":[]}`,
	"dlq":     `{"Records":[]}`,
	"outbox":  `{"Records":[]}`,
}

// initReport is the emulator's line about a function's init phase.
var initReport = regexp.MustCompile(`INIT REPORT\(durationMs: ([0-9.]+)\)`)

// Init measures each function's init time under the runtime emulator (the
// time from the runtime's start to its first request, as the emulator
// reports it), the median of starts cold starts each.
func Init(ctx context.Context, root string, starts int) ([]Row, error) {
	rie, err := lambdarie.Binary(root)
	if err != nil {
		return nil, err
	}
	dir, err := tempDir()
	if err != nil {
		return nil, err
	}
	var rows []Row
	for _, fn := range []string{"enqueue", "email", "dlq", "outbox"} {
		bin, err := lambdarie.Build(ctx, root, "functions/"+fn, filepath.Join(dir, fn, "bootstrap"))
		if err != nil {
			return nil, err
		}
		env := map[string]string{"STAGE": "bench", "AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
			"QUEUE_URL_CRITICAL": "http://127.0.0.1:1/c", "QUEUE_URL_DEFAULT": "http://127.0.0.1:1/d", "QUEUE_URL_BULK": "http://127.0.0.1:1/b"}
		for k, v := range functionEnv[fn] {
			env[k] = v
		}
		var inits []time.Duration
		for range starts {
			d, err := coldStart(ctx, lambdarie.Config{RIE: rie, Bootstrap: bin, FunctionName: fn, Env: env, Timeout: 10 * time.Second}, firstEvent[fn])
			if err != nil {
				return nil, fmt.Errorf("bench: %s: %w", fn, err)
			}
			inits = append(inits, d)
		}
		m := median(inits)
		rows = append(rows, Row{"init", fn + " function: init under the emulator (median of " + strconv.Itoa(starts) + " cold starts)", ms(m), "≤ 50 ms", m <= 50*time.Millisecond})
	}
	return rows, nil
}

// coldStart starts a fresh emulator, invokes it once and reads the init
// duration it reports.
func coldStart(ctx context.Context, cfg lambdarie.Config, event string) (time.Duration, error) {
	var out testkit.Buffer
	cfg.Output = &out
	em, err := lambdarie.Start(ctx, cfg)
	if err != nil {
		return 0, err
	}
	defer em.Stop()
	if _, err := em.Invoke(ctx, []byte(event)); err != nil {
		return 0, err
	}
	for range 50 { // the report line may follow the answer
		if m := initReport.FindStringSubmatch(out.String()); m != nil {
			f, _ := strconv.ParseFloat(m[1], 64)
			return time.Duration(f * float64(time.Millisecond)), nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return 0, fmt.Errorf("the emulator reported no INIT REPORT line:\n%s", out.String())
}
