package contract

// The registered e-mail job types (DESIGN §2). Names are never renamed or
// removed while messages may exist; a payload change is a new version
// registered beside the old one.
const (
	TypePartnerVerification = "email.partner-verification.v1"
	TypePasswordReset       = "email.password-reset.v1"
	TypeWelcome             = "email.welcome.v1"
	TypePartnerDigest       = "email.partner-digest.v1"
)

// EmailTypes returns the declarations of the e-mail job types.
func EmailTypes() []JobType {
	userID := ArgSpec{Name: "userId", Format: FormatID, Required: true}
	country := ArgSpec{Name: "countryCode", Format: FormatCountry, Required: true}
	return []JobType{
		{
			Name:             TypePartnerVerification,
			Args:             []ArgSpec{userID, {Name: "roleCode", Format: FormatID, Required: true, MaxLen: 32}, country},
			Queue:            QueueCritical,
			EnabledByDefault: true,
			Bias:             EffectThenClaim,
			Lease:            true,
			KeyPrefix:        "partner-verification",
			KeyArgs:          []string{"userId"},
		},
		{
			Name:             TypePasswordReset,
			Args:             []ArgSpec{userID, country},
			Queue:            QueueCritical,
			EnabledByDefault: true,
			Bias:             EffectThenClaim,
			Lease:            true,
			KeyPrefix:        "password-reset",
			KeyArgs:          []string{"userId"},
		},
		{
			Name:             TypeWelcome,
			Args:             []ArgSpec{userID},
			Queue:            QueueDefault,
			EnabledByDefault: true,
			Bias:             EffectThenClaim,
			Lease:            true,
			KeyPrefix:        "welcome",
			KeyArgs:          []string{"userId"},
		},
		{
			Name:             TypePartnerDigest,
			Args:             []ArgSpec{userID, {Name: "digestId", Format: FormatISOWeek, Required: true, MaxLen: 8}},
			Queue:            QueueBulk,
			EnabledByDefault: false,
			Bias:             EffectThenClaim,
			Lease:            true,
			KeyPrefix:        "partner-digest",
			KeyArgs:          []string{"userId", "digestId"},
		},
	}
}

// DefaultRegistry returns a registry of every job type runstwice ships.
func DefaultRegistry() *Registry {
	r, err := NewRegistry(EmailTypes()...)
	if err != nil {
		panic(err) // the declarations above are fixed; a test proves they load
	}
	return r
}
