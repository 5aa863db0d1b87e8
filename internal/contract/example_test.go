package contract_test

import (
	"fmt"

	"github.com/runstwice/runstwice/internal/contract"
)

// A job type is declared once, with its args, queue, kill-switch default,
// bias, lease and key derivation. The registry refuses a declaration that
// cannot work, and says why. (The runner's examples declare the same invoice
// type again, on purpose: the docs show every example whole.)
func ExampleNewRegistry() {
	invoice := contract.JobType{
		Name:             "billing.invoice-ready.v1",
		Args:             []contract.ArgSpec{{Name: "invoiceId", Format: contract.FormatID, Required: true}},
		Queue:            contract.QueueDefault,
		EnabledByDefault: true,
		Bias:             contract.EffectThenClaim,
		Lease:            true,
		KeyPrefix:        "invoice-ready",
		KeyArgs:          []string{"invoiceId"},
	}
	reg, err := contract.NewRegistry(invoice)
	fmt.Println(reg.Names(), err)

	unversioned := invoice
	unversioned.Name = "billing.invoice-ready"
	_, err = contract.NewRegistry(unversioned)
	fmt.Println(err)

	badKey := invoice
	badKey.KeyArgs = []string{"customerEmail"}
	_, err = contract.NewRegistry(badKey)
	fmt.Println(err)

	// Output:
	// [billing.invoice-ready.v1] <nil>
	// contract: type name "billing.invoice-ready" is not of the form name.vN
	// contract: type "billing.invoice-ready.v1": key arg "customerEmail" is not a required arg
}

// Args carry IDs only: an e-mail address is refused at enqueue and again at
// execution, with the rule it broke.
func ExampleJobType_ValidateArgs() {
	welcome := contract.JobType{Args: []contract.ArgSpec{{Name: "userId", Format: contract.FormatID, Required: true}}}
	fmt.Println(welcome.ValidateArgs(map[string]string{"userId": "u-123"}))
	fmt.Println(welcome.ValidateArgs(map[string]string{"userId": "ana@example.com"}))
	// Output:
	// <nil>
	// invalid: args.userId: looks like an e-mail address; args carry IDs only, never personal data
}
