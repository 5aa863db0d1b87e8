package ssmswitch_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/ssm"

	"github.com/runstwice/runstwice/aws/ssmswitch"
	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/runner"
	"github.com/runstwice/runstwice/message"
)

// The kill switches of a function are the parameters under one path, one
// per job type; a parameter that names no type the registry knows is logged
// as a likely typo. Flip one with
//
//	aws ssm put-parameter --overwrite --name /my-function/toggles/webhook.deliver.v1 --value off
//
// and the runner sees it within the source's TTL.
func ExampleNew() {
	cfg, err := config.LoadDefaultConfig(context.Background(), config.WithRegion("eu-west-1"))
	if err != nil {
		log.Fatal(err)
	}
	reg, err := message.NewRegistry(message.JobType{
		Name: "webhook.deliver.v1", Queue: contract.QueueDefault, EnabledByDefault: true,
		Args:      []message.ArgSpec{{Name: "eventId", Format: message.FormatID, Required: true}},
		KeyPrefix: "webhook", KeyArgs: []string{"eventId"},
	})
	if err != nil {
		log.Fatal(err)
	}
	known := func(name string) bool { _, err := reg.Lookup(name); return err == nil }
	switches := ssmswitch.New(ssm.NewFromConfig(cfg), "/my-function/toggles", known)
	switches.TTL = 30 * time.Second
	_ = runner.Config{Registry: reg, Switch: switches}
	fmt.Println("the bundle's own functions read", contract.SwitchPath("prod"))
	// Output: the bundle's own functions read /runstwice/prod/toggles
}
