package ssmswitch_test

import (
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ssm"

	"github.com/runstwice/runstwice/aws/ssmswitch"
	"github.com/runstwice/runstwice/engine"
)

// The kill switches of a function are the parameters under one path, one
// per kind of job; a parameter that names no kind the function knows is
// logged as a likely typo. Flip one with
//
//	aws ssm put-parameter --overwrite --name /my-function/toggles/orders.ship --value off
//
// and the handler sees it within the source's TTL.
func ExampleNew() {
	// In a function: cfg, err := config.LoadDefaultConfig(ctx).
	cfg := aws.Config{Region: "eu-west-1"}
	kinds := []string{"orders.ship"}
	known := func(name string) bool { return slices.Contains(kinds, name) }
	switches := ssmswitch.New(ssm.NewFromConfig(cfg), "/my-function/toggles", known)
	switches.TTL = 30 * time.Second
	_ = engine.Options{Switch: switches}
}
