package message_test

import (
	"fmt"

	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/message"
)

// A job type is declared once, with its args, queue, kill-switch default,
// bias, lease and key derivation. The registry refuses a declaration that
// cannot work, and says why. (The runner's examples declare the same invoice
// type again, on purpose: the docs show every example whole.)
func ExampleNewRegistry() {
	invoice := message.JobType{
		Name:             "billing.invoice-ready.v1",
		Args:             []message.ArgSpec{{Name: "invoiceId", Format: message.FormatID, Required: true}},
		Queue:            "default",
		EnabledByDefault: true,
		Bias:             engine.EffectThenClaim,
		Lease:            true,
		KeyPrefix:        "invoice-ready",
		KeyArgs:          []string{"invoiceId"},
	}
	reg, err := message.NewRegistry(invoice)
	fmt.Println(reg.Names(), err)

	unversioned := invoice
	unversioned.Name = "billing.invoice-ready"
	_, err = message.NewRegistry(unversioned)
	fmt.Println(err)

	badKey := invoice
	badKey.KeyArgs = []string{"customerEmail"}
	_, err = message.NewRegistry(badKey)
	fmt.Println(err)

	// Output:
	// [billing.invoice-ready.v1] <nil>
	// message: type name "billing.invoice-ready" is not of the form name.vN
	// message: type "billing.invoice-ready.v1": key arg "customerEmail" is not a required arg
}

// Args carry IDs only: an e-mail address is refused at enqueue and again at
// execution, with the rule it broke.
func ExampleJobType_ValidateArgs() {
	welcome := message.JobType{Args: []message.ArgSpec{{Name: "userId", Format: message.FormatID, Required: true}}}
	fmt.Println(welcome.ValidateArgs(map[string]string{"userId": "u-123"}))
	fmt.Println(welcome.ValidateArgs(map[string]string{"userId": "ana@example.com"}))
	// Output:
	// <nil>
	// invalid: args.userId: looks like an e-mail address; args carry IDs only, never personal data
}
