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
	_, userID, address, err := userAndAddress(args, nil, "users set-email")
	if err != nil {
		return err
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

// userAndAddress parses the arguments of a command (cmd, with the flags of
// spec) that takes a user id and one plain e-mail address.
func userAndAddress(args []string, spec map[string]bool, cmd string) (p cmdArgs, userID, address string, err error) {
	if p, err = parseN(args, spec, 2, cmd, "a user id and an address"); err != nil {
		return p, "", "", err
	}
	address, ok := email.PlainAddress(p.pos[1])
	if !ok {
		return p, "", "", usagef("%s: %q is not a plain address (one address, no display name, e.g. ada@example.com)", cmd, p.pos[1])
	}
	return p, p.pos[0], address, nil
}
