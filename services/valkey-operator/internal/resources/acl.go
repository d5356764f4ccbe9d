package resources

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"

	valkeyv1 "github.com/opsuite/suite/api/valkey/v1alpha1"
)

// DefaultUser is the server's built-in user, the one unauthenticated connections act as.
const DefaultUser = "default"

// Rules of the operator's own users. The operator administers the cluster, so it may do
// everything. A replica needs no keys and only what the replication handshake sends on
// the client port: PING, AUTH (allowed to everyone), REPLCONF (listening-port, capa, ack,
// and Valkey's rdb-channel options) and PSYNC, or SYNC from an older replica. The
// failover handshake itself runs on the cluster bus, where no ACL applies. The preStop
// hand-over (handover.go) logs in as this user too, with the credentials the pod already
// has: it reads CLUSTER NODES and INFO (replication) of the member and its replicas and
// sends CLUSTER FAILOVER to one; no key, no CONFIG, no ACL.
//
// The metrics exporter (oliver006/redis_exporter, default flags) reads, per scrape: CONFIG
// GET *, INFO ALL, CLUSTER INFO, LATENCY LATEST and HISTOGRAM, SLOWLOG LEN and GET; it
// names its connection (CLIENT SETNAME) and may PING. CLUSTER NODES and SLOTS are
// allowed for its cluster mode (--is-cluster: discovery and the cluster client). No key, no channel, nothing that writes or administers. Only
// commands Redis 7.0 and every Valkey know: an unknown one in users.acl stops the server
// from starting (so no COMMANDLOG, which Valkey 8.1 added; the exporter then skips those
// metrics).
const (
	operatorRules    = "~* &* +@all"
	replicationRules = "+psync +sync +replconf +ping +info +cluster|nodes +cluster|failover"
	exporterRules    = "resetkeys resetchannels -@all +info +ping +client|setname +config|get +cluster|info +cluster|nodes +cluster|slots +latency|latest +latency|histogram +slowlog|get +slowlog|len"
)

// InternalPasswords are the plaintext passwords of the operator's users, from the Secret
// C-internal, and of the exporter's, from the Secret C-exporter.
type InternalPasswords struct {
	Operator    string
	Replication string
	// Exporter is the metrics exporter user's; empty renders no exporter user.
	Exporter string
}

// ACLFiles is what the Secret C-acl holds.
type ACLFiles struct {
	// Users is users.acl: one "user <name> <rules>" line per user, default included,
	// passwords only as #<sha256>.
	Users string
	// Auth is auth.conf: the replication credentials, included from valkey.conf.
	Auth string
	// Hash covers both files; the node controller records it as status.appliedACLHash.
	Hash string
}

// ErrInternalPasswords is returned (wrapped) when InternalPasswords lacks a password:
// the controller's SystemUsersACLError, not the user's UsersACLError.
var ErrInternalPasswords = errors.New("the operator's internal passwords are empty")

// PasswordError says why a user's password could not be found. The controller puts
// Error() in the UsersACLError condition; it names the user, the Secret and the key, and
// what to do, nothing volatile.
type PasswordError struct {
	User   string
	Secret string
	// Key is the missing key; empty when the whole Secret is missing.
	Key string
}

func (e *PasswordError) Error() string {
	if e.Key == "" {
		return fmt.Sprintf("user %q: Secret %q with its password was not found: create it, or set nopass: true on the user", e.User, e.Secret)
	}
	return fmt.Sprintf("user %q: Secret %q has no key %q (or it is empty): add the password under that key, or remove the key from passwordSecret.keys", e.User, e.Secret, e.Key)
}

// InvalidUserError is a user spec that cannot be written as an ACL rule. Admission
// refuses all of these; the renderer checks again because a rule with a space or a line
// break would grant more than was written.
type InvalidUserError struct {
	User   string
	Reason string
}

func (e *InvalidUserError) Error() string {
	return fmt.Sprintf("user %q: %s", e.User, e.Reason)
}

// UserPasswordSecret is where user u's passwords are: the Secret named in
// passwordSecret.name (default <cluster>-users) under passwordSecret.keys (default the
// user's name).
func UserPasswordSecret(cluster string, u *valkeyv1.UserACLSpec) (secret string, keys []string) {
	secret = u.PasswordSecret.Name
	if secret == "" {
		secret = cluster + "-users"
	}
	keys = slices.Clone(u.PasswordSecret.Keys)
	if len(keys) == 0 {
		keys = []string{u.Name}
	}
	return secret, keys
}

// NeedsPasswords reports whether RenderACL requires u's passwords. A nopass user logs in
// with anything, a resetpass user with nothing, and a disabled user not at all, so none
// of them needs its Secret (as upstream: their Secret may be absent).
func NeedsPasswords(u *valkeyv1.UserACLSpec) bool {
	return !u.NoPassword && !u.ResetPassword && u.IsEnabled()
}

// SecretPasswords lines the Secret's values up with keys, "" for a key it lacks; the
// result is what RenderACL takes for one user.
func SecretPasswords(keys []string, data map[string][]byte) []string {
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = string(data[k])
	}
	return out
}

// PasswordSecretNames are the Secrets RenderACL needs read, each once, sorted: those of
// the users that NeedsPasswords, by UserPasswordSecret's defaults.
func PasswordSecretNames(c *valkeyv1.ValkeyCluster) []string {
	var names []string
	for i := range c.Spec.Users {
		if u := &c.Spec.Users[i]; NeedsPasswords(u) {
			name, _ := UserPasswordSecret(c.Name, u)
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// UserPasswords builds RenderACL's passwords argument from the data of the Secrets read
// (by name; a Secret that does not exist is simply absent), so a missing Secret or key
// comes back from RenderACL as a *PasswordError naming it.
func UserPasswords(c *valkeyv1.ValkeyCluster, secrets map[string]map[string][]byte) map[string][]string {
	out := map[string][]string{}
	for i := range c.Spec.Users {
		u := &c.Spec.Users[i]
		name, keys := UserPasswordSecret(c.Name, u)
		if data, ok := secrets[name]; ok {
			out[u.Name] = SecretPasswords(keys, data)
		}
	}
	return out
}

// RenderACL renders users.acl and auth.conf of cluster c. passwords maps a user's name to
// the plaintext values of its passwordSecret keys, in the order UserPasswordSecret gives
// them ("" for a missing key; no entry when the Secret does not exist). A value of the
// form #<64 hex digits> is taken as an already hashed password, as upstream does.
//
// The default user: as written in spec.users when listed there; otherwise open
// (on nopass, everything) when spec.users is empty, so a cluster without users works like
// a fresh server; and off when other users are declared, because a cluster that has users
// is meant to need a login, and an open default user would make them moot.
//
// Errors (*PasswordError, *InvalidUserError, joined) name every failing user, in name
// order; the files are then empty, since a partial file would lock users out.
func RenderACL(c *valkeyv1.ValkeyCluster, passwords map[string][]string, internal InternalPasswords) (ACLFiles, error) {
	users := slices.Clone(c.Spec.Users)
	slices.SortFunc(users, func(a, b valkeyv1.UserACLSpec) int { return strings.Compare(a.Name, b.Name) })

	var errs []error
	var lines []string
	hasDefault := false
	for i := range users {
		u := &users[i]
		if u.Name == DefaultUser {
			hasDefault = true
		}
		l, err := userLine(c.Name, u, passwords)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		lines = append(lines, l)
	}
	if internal.Operator == "" || internal.Replication == "" {
		errs = append(errs, fmt.Errorf("%w: the Secret %s must hold %s and %s", ErrInternalPasswords, InternalSecretName(c.Name), SecretKeyOperatorPassword, SecretKeyReplicationPassword))
	}
	if len(errs) > 0 {
		return ACLFiles{}, errors.Join(errs...)
	}
	if !hasDefault {
		rules := "on nopass ~* &* +@all"
		if len(users) > 0 {
			rules = "off"
		}
		lines = append([]string{"user " + DefaultUser + " " + rules}, lines...)
	}
	lines = append(lines,
		"user "+OperatorUser+" on "+passwordRule(internal.Operator)+" "+operatorRules,
		"user "+ReplicationUser+" on "+passwordRule(internal.Replication)+" "+replicationRules)
	if internal.Exporter != "" {
		lines = append(lines, "user "+ExporterUser+" on "+passwordRule(internal.Exporter)+" "+exporterRules)
	}
	usersACL := strings.Join(lines, "\n") + "\n"
	auth := "masteruser " + ReplicationUser + "\nmasterauth " + quoteConfig(internal.Replication) + "\n"
	return ACLFiles{Users: usersACL, Auth: auth, Hash: hashOf(usersACL + "\x00" + auth)}, nil
}

// ACLUser is one line of users.acl: what the node controller applies live as
// ACL SETUSER <Name> reset <Rules...>.
type ACLUser struct {
	Name  string
	Rules []string
}

// ParseUsersACL reads users.acl back into users, in file order. The renderer writes one
// rule per word (it refuses whitespace inside one), so splitting on spaces gives
// exactly the arguments ACL SETUSER takes.
func ParseUsersACL(users string) []ACLUser {
	var out []ACLUser
	for l := range strings.SplitSeq(users, "\n") {
		f := strings.Fields(l)
		if len(f) < 2 || f[0] != "user" {
			continue
		}
		out = append(out, ACLUser{Name: f[1], Rules: f[2:]})
	}
	return out
}

// userLine is one user's ACL line, in upstream's order: on/off, password, keys, channels,
// commands, then the raw permissions as written.
func userLine(cluster string, u *valkeyv1.UserACLSpec, passwords map[string][]string) (string, error) {
	if u.Name == OperatorUser || u.Name == ReplicationUser || u.Name == ExporterUser {
		return "", &InvalidUserError{User: u.Name, Reason: "the name is reserved for the operator's own user: rename the user"}
	}
	if err := checkWords(u); err != nil {
		return "", err
	}
	rules := []string{"user", u.Name}
	if u.IsEnabled() {
		rules = append(rules, "on")
	} else {
		rules = append(rules, "off")
	}
	switch {
	case u.ResetPassword:
		// As upstream: no password at all, so no one logs in as this user by password.
		rules = append(rules, "resetpass")
	case u.NoPassword:
		rules = append(rules, "nopass")
	default:
		secret, keys := UserPasswordSecret(cluster, u)
		values, found := passwords[u.Name]
		if !found && NeedsPasswords(u) {
			return "", &PasswordError{User: u.Name, Secret: secret}
		}
		for i, k := range keys {
			v := ""
			if i < len(values) {
				v = values[i]
			}
			if v == "" {
				if NeedsPasswords(u) {
					return "", &PasswordError{User: u.Name, Secret: secret, Key: k}
				}
				continue
			}
			rules = append(rules, passwordRule(v))
		}
	}
	for _, k := range u.Keys.ReadWrite {
		rules = append(rules, "~"+k)
	}
	for _, k := range u.Keys.ReadOnly {
		rules = append(rules, "%R~"+k)
	}
	for _, k := range u.Keys.WriteOnly {
		rules = append(rules, "%W~"+k)
	}
	if len(u.Channels.Patterns) > 0 {
		rules = append(rules, "resetchannels")
		for _, p := range u.Channels.Patterns {
			rules = append(rules, "&"+p)
		}
	}
	for _, cmd := range u.Commands.Allow {
		rules = append(rules, "+"+cmd)
	}
	for _, cmd := range u.Commands.Deny {
		rules = append(rules, "-"+cmd)
	}
	if raw := strings.Join(strings.Fields(u.RawACL), " "); raw != "" {
		rules = append(rules, raw)
	}
	if u.IsEnabled() {
		rules = append(rules, topologyRules(u)...)
	}
	return strings.Join(rules, " "), nil
}

// ClusterClientCommands are what a cluster-aware client (valkey-go, redis-cli -c, Lettuce,
// redis-py) runs to find the slot owners, route to replicas and follow an ASK redirect
// while a slot moves: all read-only, none touches a key (ASKING only lets the next command
// reach a slot being imported; the key patterns still apply). Every enabled spec user is granted them after its own rules, because
// CLUSTER SLOTS, SHARDS, NODES, INFO and MYID are in no category but @slow, so a user
// allowed "@read @write @connection", as upstream's samples write them, could not start a
// cluster client. All exist on Redis 7.0 and every Valkey (an unknown command in
// users.acl stops the server).
var ClusterClientCommands = []string{"cluster|slots", "cluster|shards", "cluster|nodes", "cluster|info", "cluster|myid", "readonly", "readwrite", "asking"}

// topologyRules grants u the ClusterClientCommands it does not deny by name: a command or
// subcommand in commands.deny, or written as -<name> in permissions, stays denied (deny
// "cluster" withholds every CLUSTER subcommand). A denied category does not withhold them:
// they are granted by name after it.
func topologyRules(u *valkeyv1.UserACLSpec) []string {
	denied := map[string]bool{}
	for _, d := range u.Commands.Deny {
		denied[strings.ToLower(d)] = true
	}
	for _, w := range strings.Fields(u.RawACL) {
		if name, ok := strings.CutPrefix(w, "-"); ok {
			denied[strings.ToLower(name)] = true
		}
	}
	var out []string
	for _, c := range ClusterClientCommands {
		parent, _, _ := strings.Cut(c, "|")
		if denied[c] || denied[parent] {
			continue
		}
		out = append(out, "+"+c)
	}
	return out
}

// checkWords refuses what would split a rule or a line: whitespace inside a name,
// pattern or command, a line break anywhere.
func checkWords(u *valkeyv1.UserACLSpec) error {
	if u.Name == "" || strings.ContainsFunc(u.Name, isSpace) {
		return &InvalidUserError{User: u.Name, Reason: "the name is empty or contains whitespace: rename the user"}
	}
	fields := []struct {
		name  string
		words []string
	}{
		{"keys.readWrite", u.Keys.ReadWrite},
		{"keys.readOnly", u.Keys.ReadOnly},
		{"keys.writeOnly", u.Keys.WriteOnly},
		{"channels.patterns", u.Channels.Patterns},
		{"commands.allow", u.Commands.Allow},
		{"commands.deny", u.Commands.Deny},
	}
	for _, f := range fields {
		for _, w := range f.words {
			if w == "" || strings.ContainsFunc(w, isSpace) {
				return &InvalidUserError{User: u.Name, Reason: fmt.Sprintf("%s entry %q is empty or contains whitespace: write one pattern or command per entry", f.name, w)}
			}
		}
	}
	if strings.ContainsAny(u.RawACL, "\r\n") {
		return &InvalidUserError{User: u.Name, Reason: "permissions contains a line break: keep it on one line"}
	}
	return nil
}

func isSpace(r rune) bool {
	return r == ' ' || r == '\t' || r == '\n' || r == '\r' || r == '\v' || r == '\f'
}

// passwordRule is the ACL rule for one plaintext password: #<sha256 hex>, so the file
// never holds the password itself. A value already in that form is kept.
func passwordRule(password string) string {
	if isHashedPassword(password) {
		return strings.ToLower(password)
	}
	sum := sha256.Sum256([]byte(password))
	return "#" + hex.EncodeToString(sum[:])
}

func isHashedPassword(p string) bool {
	if len(p) != 65 || p[0] != '#' {
		return false
	}
	_, err := hex.DecodeString(p[1:])
	return err == nil
}

// GeneratePassword returns 32 random bytes from crypto/rand, URL-safe base64 without
// padding (43 characters): nothing to quote in a config file or a URL.
func GeneratePassword() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generating a password: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}
