package devstack

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/runstwice/runstwice/internal/dev/awsproxy"
	"github.com/runstwice/runstwice/internal/dev/lambdarie"
	"github.com/runstwice/runstwice/internal/vclock"
)

// Chaos adapts the local stack to a run under faults (make run ARGS="--faults
// …") or a chaos campaign (make chaos). Its zero value changes nothing.
type Chaos struct {
	// ProxyHooks see every AWS call of the functions before the stack's own
	// hooks (fault injection goes first, so that the mail a lost response
	// carried is still recorded).
	ProxyHooks []awsproxy.Hook
	// BuildTags are added to the functions' build tags ("chaos" builds
	// the kill and mutation hooks in).
	BuildTags []string
	// Env is added to every function's environment (RUNSTWICE_KILL_AT,
	// RUNSTWICE_MUTATE).
	Env map[string]string
	// FunctionTimeout, when positive, replaces every function's timeout
	// (a worker's lease lasts until its invocation's deadline).
	FunctionTimeout time.Duration
	// VisibilityTimeout, when positive, replaces the template's visibility
	// timeout of every queue a function polls, so that the batch of an
	// invocation that died comes back soon. Each queue gets it plus its
	// event source's batching window, so a record received at the start of
	// a window stays hidden until its batch has run.
	VisibilityTimeout time.Duration
	// WrapFunction, when set, wraps the function each poller invokes: the
	// campaign sees every batch and how its invocation ended.
	WrapFunction func(function string, inv Invoker) Invoker
	// AppLog, when set, also receives every application log line of the
	// functions (one line per Write): job outcomes and kill lines.
	AppLog io.Writer
	// KillDuring, when set, is asked before every invocation of a function
	// (by its directory under functions/, with the event) how long into the
	// invocation to kill its process: a positive duration sends SIGKILL to
	// the instance's process group then, unless the invocation ended first,
	// and writes a kill line (KillLineMsg, StepMidInvocation) to AppLog. It
	// kills a function at any moment of its work, where a chaos build's
	// kill points only stop it at step boundaries (the outbox relay has
	// none).
	KillDuring func(function string, event []byte) time.Duration
	// Clock, when set, is the virtual clock of a campaign that moves time
	// forward (internal/vclock): the path of its offset file, given to
	// every function as RUNSTWICE_VCLOCK, and the scheduler emulator fires
	// what is due at that clock's time. Clock.Poll, when positive, replaces
	// the emulator's poll.
	Clock *ChaosClock
}

// ChaosClock is the virtual clock of a chaos campaign (Chaos.Clock).
type ChaosClock struct {
	// Path is the offset file (vclock.Write).
	Path string
	// Poll is how often the scheduler emulator looks (0: its default).
	Poll time.Duration
}

// hooks returns the proxy's hooks: ProxyHooks first, then the stack's own.
func (c Chaos) hooks(own ...awsproxy.Hook) []awsproxy.Hook {
	return append(slices.Clone(c.ProxyHooks), own...)
}

// env adds the chaos environment to a function's.
func (c Chaos) env(env map[string]string) {
	maps.Copy(env, c.Env)
	if c.Clock != nil {
		env[vclock.EnvVar] = c.Clock.Path
	}
}

// scheduler puts the emulator on the campaign's clock.
func (c Chaos) scheduler(s *Scheduler) {
	if c.Clock == nil {
		return
	}
	s.Now = (&vclock.Reader{Path: c.Clock.Path}).Now
	if c.Clock.Poll > 0 {
		s.Poll = c.Clock.Poll
	}
}

// appLog tees the application log sink into AppLog.
func (c Chaos) appLog(sinks lambdarie.Sinks) lambdarie.Sinks {
	if c.AppLog != nil {
		sinks.App = io.MultiWriter(sinks.App, c.AppLog)
	}
	return sinks
}

// wrap returns the function a poller invokes.
func (c Chaos) wrap(function string, inv Invoker) Invoker {
	if c.WrapFunction == nil {
		return inv
	}
	return c.WrapFunction(function, inv)
}

// timeout returns the function timeout to use instead of the template's.
func (c Chaos) timeout(template time.Duration) time.Duration {
	if c.FunctionTimeout > 0 {
		return c.FunctionTimeout
	}
	return template
}

// QueueAttributesAPI is the part of the SQS client that sets queue
// attributes.
type QueueAttributesAPI interface {
	SetQueueAttributes(ctx context.Context, in *sqs.SetQueueAttributesInput, optFns ...func(*sqs.Options)) (*sqs.SetQueueAttributesOutput, error)
}

// shortenVisibility sets the visibility timeout of every polled queue.
func (c Chaos) shortenVisibility(ctx context.Context, client QueueAttributesAPI, sources []EventSource) error {
	if c.VisibilityTimeout <= 0 {
		return nil
	}
	for _, src := range sources {
		seconds := strconv.Itoa(max(int((c.VisibilityTimeout+src.Window)/time.Second), 1))
		_, err := client.SetQueueAttributes(ctx, &sqs.SetQueueAttributesInput{QueueUrl: aws.String(src.QueueURL),
			Attributes: map[string]string{string(sqstypes.QueueAttributeNameVisibilityTimeout): seconds}})
		if err != nil {
			return fmt.Errorf("devstack: visibility timeout of %s: %w", src.QueueURL, err)
		}
	}
	return nil
}

// KillLineMsg is the msg of the line a kill from outside writes to AppLog,
// the one a chaos build's own kill point writes ({"msg":"killpoint",
// "step":…}), with the function it killed.
const KillLineMsg = "killpoint"

// StepMidInvocation is the step of a kill from outside (Chaos.KillDuring):
// somewhere in the middle of an invocation's work.
const StepMidInvocation = "mid-invocation"

// killable is an instance that Chaos.KillDuring may kill in the middle of an
// invocation: the whole process group gets SIGKILL, as when Lambda's
// execution environment dies, and the invocation ends with the emulator
// gone.
type killable struct {
	Instance
	function string
	kill     func(function string, event []byte) time.Duration
	log      io.Writer // AppLog, or nil
}

// pid is the part of an instance a kill needs (*lambdarie.Emulator).
type pid interface{ Pid() int }

// Invoke implements Instance.
func (k *killable) Invoke(ctx context.Context, payload []byte) ([]byte, error) {
	p, ok := k.Instance.(pid)
	after := k.kill(k.function, payload)
	if !ok || after <= 0 {
		return k.Instance.Invoke(ctx, payload)
	}
	killed := make(chan struct{})
	t := time.AfterFunc(after, func() {
		defer close(killed)
		if k.log != nil {
			fmt.Fprintf(k.log, "{\"msg\":%q,\"step\":%q,\"function\":%q,\"pid\":%d}\n", KillLineMsg, StepMidInvocation, k.function, p.Pid())
		}
		_ = syscall.Kill(-p.Pid(), syscall.SIGKILL)
	})
	out, err := k.Instance.Invoke(ctx, payload)
	if !t.Stop() {
		<-killed // the kill fired: its line is written before the invocation's end is told
	}
	return out, err
}

// killing wraps the instances start makes so that KillDuring may kill them
// (start unchanged without it).
func (c Chaos) killing(function string, start func(ctx context.Context) (Instance, error)) func(ctx context.Context) (Instance, error) {
	if c.KillDuring == nil {
		return start
	}
	return func(ctx context.Context) (Instance, error) {
		in, err := start(ctx)
		if err != nil {
			return nil, err
		}
		return &killable{Instance: in, function: function, kill: c.KillDuring, log: c.AppLog}, nil
	}
}
