package executor

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/opsuite/suite/services/memgraph-operator/internal/memgraph"
)

// Credentials are a Memgraph user and its password.
type Credentials struct{ Username, Password string }

// Zero says no credentials are set.
func (c Credentials) Zero() bool { return c.Username == "" }

// sameUser compares user names as Memgraph does (case-insensitively).
func sameUser(a, b string) bool { return strings.EqualFold(a, b) }

// UserNamePattern is Memgraph's default --auth-user-or-role-name-regex: a user name
// outside it is refused by CREATE USER.
var UserNamePattern = regexp.MustCompile(`^[a-zA-Z0-9_.+\-@]+$`)

// CredentialState is what SyncCredentials found and did.
type CredentialState int

const (
	// CredentialsCurrent: the wanted credentials log in to the MAIN; nothing changed
	// (except, after a rename, dropping the previous user).
	CredentialsCurrent CredentialState = iota + 1
	// CredentialsRotated: the MAIN held the last-good credentials; the change was applied
	// through them this pass and the wanted credentials now log in.
	CredentialsRotated
	// CredentialsRejected: neither the wanted nor the last-good credentials log in.
	CredentialsRejected
	// CredentialsUnreachable: the MAIN did not answer; nothing is known.
	CredentialsUnreachable
	// CredentialsRefused: the MAIN refused a change (or the new login failed after it);
	// the next pass tries again.
	CredentialsRefused
)

// CredentialOutcome is one SyncCredentials call's result. Nothing in it carries a password.
type CredentialOutcome struct {
	State CredentialState
	// Working are the credentials that log in to the MAIN after the call (zero when none
	// do): the ones to record as last-good.
	Working Credentials
	// Executed are the commands run, with their passwords left out.
	Executed []string
	// KeptUser names a renamed-away user that could not be dropped (KeptReason says why).
	KeptUser, KeptReason string
	// Err is the failure behind Rejected, Unreachable or Refused, without any password.
	Err error
}

// SyncCredentials makes the MAIN at mainBolt accept want. Memgraph applies
// MEMGRAPH_USER/MEMGRAPH_PASSWORD only to a data directory with no users, so a changed
// Secret is applied here with Memgraph's own commands, through the credentials that last
// worked: SET PASSWORD FOR for a new password; CREATE USER, SET PASSWORD and GRANT ALL
// PRIVILEGES for a new user name, and DROP USER of the previous name once the new one logs
// in (run as the new user, so a user without the privilege to do so never loses the old
// one). Auth changes are made on the MAIN only: Memgraph Enterprise replicates users to
// the replicas, and refuses auth changes on a replica. Coordinators store no users.
//
// dial returns a Dialer logging in with the given credentials.
func SyncCredentials(ctx context.Context, dial func(Credentials) memgraph.Dialer, mainBolt string, want, lastGood Credentials) CredentialOutcome {
	s, err := dial(want).Dial(ctx, mainBolt)
	if err == nil {
		defer closeSession(ctx, s)
		out := CredentialOutcome{State: CredentialsCurrent, Working: want}
		if !lastGood.Zero() && !sameUser(lastGood.Username, want.Username) {
			dropPrevious(ctx, s, lastGood.Username, &out)
		}
		return out
	}
	if !memgraph.IsUnauthenticated(err) {
		return failed(err)
	}
	if lastGood.Zero() || lastGood == want {
		return CredentialOutcome{State: CredentialsRejected, Err: err}
	}
	old, err := dial(lastGood).Dial(ctx, mainBolt)
	if err != nil {
		if memgraph.IsUnauthenticated(err) {
			return CredentialOutcome{State: CredentialsRejected, Err: err}
		}
		return failed(err)
	}
	defer closeSession(ctx, old)
	out := CredentialOutcome{Working: lastGood}
	for _, c := range changeCommands(lastGood, want) {
		if err := old.Exec(ctx, c.cypher); err != nil {
			o := failed(redact(err, c.shown))
			o.Working, o.Executed = lastGood, out.Executed
			return o
		}
		out.Executed = append(out.Executed, c.shown)
	}
	s, err = dial(want).Dial(ctx, mainBolt)
	if err != nil {
		// The MAIN took the change but refuses the new login (a failover in between):
		// the next pass looks again with both.
		return CredentialOutcome{State: CredentialsRefused, Working: lastGood, Executed: out.Executed, Err: err}
	}
	defer closeSession(ctx, s)
	out.State, out.Working = CredentialsRotated, want
	if !sameUser(lastGood.Username, want.Username) {
		dropPrevious(ctx, s, lastGood.Username, &out)
	}
	return out
}

// dropPrevious drops a renamed-away user as the new one; a user already gone is fine.
func dropPrevious(ctx context.Context, s memgraph.Session, user string, out *CredentialOutcome) {
	shown := "DROP USER " + QuoteName(user)
	err := s.Exec(ctx, shown)
	switch {
	case err == nil:
		out.Executed = append(out.Executed, shown)
	case memgraph.IsRefused(err) && strings.Contains(strings.ToLower(refusalMessage(err)), "doesn't exist"):
	default:
		out.KeptUser, out.KeptReason = user, refusalMessage(redact(err, shown))
	}
}

func failed(err error) CredentialOutcome {
	if memgraph.IsUnreachable(err) {
		return CredentialOutcome{State: CredentialsUnreachable, Err: err}
	}
	return CredentialOutcome{State: CredentialsRefused, Err: err}
}

type authCommand struct{ cypher, shown string }

// changeCommands turn the last-good credentials into want, run as the last-good user.
func changeCommands(from, to Credentials) []authCommand {
	u := QuoteName(to.Username)
	setPassword := authCommand{"SET PASSWORD FOR " + u + " TO " + QuoteString(to.Password), "SET PASSWORD FOR " + u}
	if sameUser(from.Username, to.Username) {
		return []authCommand{setPassword}
	}
	// IF NOT EXISTS and the SET PASSWORD after it make a repeated pass (or a user created
	// by hand) converge; a new user holds no privilege until granted.
	return []authCommand{
		{"CREATE USER IF NOT EXISTS " + u + " IDENTIFIED BY " + QuoteString(to.Password), "CREATE USER IF NOT EXISTS " + u},
		setPassword,
		{"GRANT ALL PRIVILEGES TO " + u, "GRANT ALL PRIVILEGES TO " + u},
	}
}

// QuoteName quotes a user name for Cypher (backticks, doubled inside).
func QuoteName(n string) string { return "`" + strings.ReplaceAll(n, "`", "``") + "`" }

// QuoteString quotes a string literal for Cypher (single quotes, backslash escapes).
func QuoteString(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}

// redact replaces the query an error names (it may hold a password) with shown.
func redact(err error, shown string) error {
	var e *memgraph.Error
	if !errors.As(err, &e) {
		return fmt.Errorf("%s failed", shown)
	}
	c := *e
	c.Query = shown
	return &c
}

func refusalMessage(err error) string {
	var e *memgraph.Error
	if errors.As(err, &e) && e.Message != "" {
		return e.Message
	}
	return err.Error()
}

func closeSession(ctx context.Context, s memgraph.Session) {
	_ = s.Close(context.WithoutCancel(ctx))
}
