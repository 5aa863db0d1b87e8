package contract

// Fixture job types for the contract's own tests, shaped like the shipped
// e-mail types (internal/email declares those; internal/jobtypes tests them).
const (
	typeVerify  = "test.verify.v1"
	typeReset   = "test.reset.v1"
	typeWelcome = "test.welcome.v1"
	typeDigest  = "test.digest.v1"
)

func testTypes() []JobType {
	userID := ArgSpec{Name: "userId", Format: FormatID, Required: true}
	country := ArgSpec{Name: "countryCode", Format: FormatCountry, Required: true}
	return []JobType{
		{Name: typeVerify, Args: []ArgSpec{userID, {Name: "roleCode", Format: FormatID, Required: true, MaxLen: 32}, country},
			Queue: QueueCritical, EnabledByDefault: true, Lease: true, KeyPrefix: "verify", KeyArgs: []string{"userId"}},
		{Name: typeReset, Args: []ArgSpec{userID, country},
			Queue: QueueCritical, EnabledByDefault: true, Lease: true, KeyPrefix: "reset", KeyArgs: []string{"userId"}},
		{Name: typeWelcome, Args: []ArgSpec{userID},
			Queue: QueueDefault, EnabledByDefault: true, Lease: true, KeyPrefix: "welcome", KeyArgs: []string{"userId"}},
		{Name: typeDigest, Args: []ArgSpec{userID, {Name: "digestId", Format: FormatISOWeek, Required: true, MaxLen: 8}},
			Queue: QueueBulk, KeyPrefix: "digest", KeyArgs: []string{"userId", "digestId"}},
	}
}

func testRegistry() *Registry {
	r, err := NewRegistry(testTypes()...)
	if err != nil {
		panic(err)
	}
	return r
}
