package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/runstwice/runstwice/internal/email"
	"github.com/runstwice/runstwice/internal/email/users"
)

// usersSetEmail is `jobctl users set-email USER_ID ADDRESS`: it mends a
// user's stored address, the cause of a dead letter "stored e-mail address
// is not a plain address", so that a redrive of the letter can succeed.
func (a *app) usersSetEmail(ctx context.Context, args []string) error {
	p, err := parseN(args, nil, 2, "users set-email", "a user id and an address")
	if err != nil {
		return err
	}
	userID, given := p.pos[0], p.pos[1]
	address, ok := email.PlainAddress(given)
	if !ok {
		return usagef("users set-email: %q is not a plain address (one address, no display name, e.g. ada@example.com)", given)
	}
	if err := a.connect(ctx); err != nil {
		return err
	}
	previous, err := users.New(dynamodb.NewFromConfig(a.cfg), a.res.UsersTable).SetEmail(ctx, userID, address)
	if errors.Is(err, users.ErrNoUser) {
		return &notFoundError{fmt.Sprintf("user %s not found in %s", userID, a.res.UsersTable)}
	}
	if err != nil {
		return err
	}
	if a.json {
		return a.printJSON(map[string]string{"userId": userID, "email": address, "previous": previous})
	}
	fmt.Fprintf(a.stdout, "user %s: e-mail address set to %s (was %q)\n", userID, address, previous)
	return nil
}
