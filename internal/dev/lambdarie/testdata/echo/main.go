// Command echo is the test function of package lambdarie: it answers with
// the event, the value of $ECHO_VAR and the function name, or fails when the
// event asks it to, or answers late (slowMs), or outlives its deadline.
package main

import (
	"context"
	"errors"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdacontext"
)

type event struct {
	Say   string `json:"say"`
	Fail  bool   `json:"fail"`
	Sleep bool   `json:"sleep"`
	// SlowMs delays the answer by that many milliseconds.
	SlowMs int `json:"slowMs"`
}

type reply struct {
	Said     string `json:"said"`
	Var      string `json:"var"`
	Function string `json:"function"`
}

func main() {
	lambda.Start(func(ctx context.Context, e event) (reply, error) {
		if e.Fail {
			return reply{}, errors.New("asked to fail")
		}
		time.Sleep(time.Duration(e.SlowMs) * time.Millisecond)
		if e.Sleep {
			// Outlive the deadline: the emulator must report the timeout.
			// (Returning at the deadline would race with it.)
			time.Sleep(time.Hour)
		}
		return reply{Said: e.Say, Var: os.Getenv("ECHO_VAR"), Function: lambdacontext.FunctionName}, nil
	})
}
