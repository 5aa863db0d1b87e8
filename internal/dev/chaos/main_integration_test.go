//go:build integration

package chaos_test

import (
	"flag"
	"os"
	"strconv"
	"testing"
)

// campaignsAtOnce is how many campaigns the package's tests run at a time
// unless -parallel says otherwise: each has its own stack and spends most
// of its time waiting (for deliveries, visibility timeouts, the clock), so
// three share two cores without slowing each other much, and make test is
// minutes shorter than with go test's default of one per core.
const campaignsAtOnce = 3

func TestMain(m *testing.M) {
	flag.Parse()
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		_ = flag.Set("test.parallel", strconv.Itoa(campaignsAtOnce))
	}
	os.Exit(m.Run())
}
