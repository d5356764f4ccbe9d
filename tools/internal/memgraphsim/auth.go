package memgraphsim

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"

	"github.com/opsuite/suite/tools/internal/bolt"
)

// Memgraph's texts for its auth queries (src/query/interpreter.cpp, src/auth).
const (
	ErrAuthOnReplica = "Query forbidden on the replica! Update on MAIN, as it is the only source of truth for " +
		"authentication data. MAIN will then replicate the update to connected REPLICAs"
	ErrNotAuthorized = "You are not authorized to execute this query! Please contact your database administrator."
	ErrAuthInTx      = "Authentication queries are not allowed in multicommand transactions."
	errUserExists    = "User or role with name '%s' already exists. Use the SHOW USERS or SHOW ROLES query to list " +
		"all users and roles. In addition you can rerun the current query with IF NOT EXISTS."
	errDropMissing = "User with username '%s' doesn't exist. A new user can be created via the CREATE USER query."
	errUserMissing = "User '%s' doesn't exist."
	errInvalidName = "Invalid user name."
)

// userNameRegex is Memgraph's default --auth-user-or-role-name-regex.
var userNameRegex = regexp.MustCompile(`^[a-zA-Z0-9_.+\-@]+$`)

const authFile = "sim-auth.json"

// simUser is one stored user: a password hash (never the password) and whether it holds
// every privilege (the simulator's stand-in for Memgraph's privilege set: only AUTH is
// ever checked).
type simUser struct {
	Hash  string `json:"hash"`
	Admin bool   `json:"admin"`
}

// authData is a data instance's user store as persisted and as a MAIN replicates it.
// Version rises with every change, so the MAIN knows which replicas are behind.
type authData struct {
	Version uint64             `json:"version"`
	Users   map[string]simUser `json:"users"`
}

// AuthStore is a data instance's users, persisted in the data directory like Memgraph's
// auth store: MEMGRAPH_USER/MEMGRAPH_PASSWORD create the first user only when the store
// has none, so a changed environment does not change a running cluster's credentials.
type AuthStore struct {
	mu   sync.Mutex
	path string
	a    authData
}

// OpenAuthStore opens dir's user store and creates user (an admin) when it holds none.
func OpenAuthStore(dir, user, password string) (*AuthStore, error) {
	s := &AuthStore{path: filepath.Join(dir, authFile)}
	if err := readJSON(s.path, &s.a); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	if s.a.Users == nil {
		s.a.Users = map[string]simUser{}
	}
	if user != "" && len(s.a.Users) == 0 {
		s.a.Users[strings.ToLower(user)] = simUser{Hash: hashPassword(password), Admin: true}
		s.a.Version++
		if err := writeJSON(s.path, s.a); err != nil {
			return nil, err
		}
	}
	return s, nil
}

func hashPassword(p string) string {
	h := sha256.Sum256([]byte("memgraph-sim:" + p))
	return hex.EncodeToString(h[:])
}

// Authenticate checks a login: with no users any credentials pass (as in Memgraph), else
// the user must exist with that password. It returns the session's user ("" = anonymous).
func (s *AuthStore) Authenticate(a bolt.Auth) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.a.Users) == 0 {
		return "", nil
	}
	name := strings.ToLower(a.Principal)
	u, ok := s.a.Users[name]
	if !ok || u.Hash != hashPassword(a.Credentials) {
		return "", &bolt.Failure{Code: bolt.CodeUnauthenticated, Message: "Authentication failure"}
	}
	return name, nil
}

// Version is the store's change counter.
func (s *AuthStore) Version() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.a.Version
}

// Snapshot is a copy of the store for replication.
func (s *AuthStore) Snapshot() authData {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := authData{Version: s.a.Version, Users: make(map[string]simUser, len(s.a.Users))}
	for k, v := range s.a.Users {
		out.Users[k] = v
	}
	return out
}

// Replace takes a MAIN's store (replica side of system replication).
func (s *AuthStore) Replace(a authData) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if a.Users == nil {
		a.Users = map[string]simUser{}
	}
	s.a = a
	return writeJSON(s.path, s.a)
}

// AuthQuery is one parsed auth query.
type AuthQuery struct {
	Verb        string // CREATE USER, SET PASSWORD, DROP USER, GRANT, SHOW USERS
	User        string
	Password    string
	HasPassword bool
	IfNotExists bool
}

// apply runs q for the session user by ("" = anonymous, allowed only while no user
// exists) and persists the change.
func (s *AuthStore) apply(q AuthQuery, by string) ([][]any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.a.Users) > 0 && !s.a.Users[by].Admin {
		return nil, failure(ErrNotAuthorized)
	}
	name := strings.ToLower(q.User)
	u, exists := s.a.Users[name]
	switch q.Verb {
	case "SHOW USERS":
		names := make([]string, 0, len(s.a.Users))
		for n := range s.a.Users {
			names = append(names, n)
		}
		sort.Strings(names)
		rows := make([][]any, 0, len(names))
		for _, n := range names {
			rows = append(rows, []any{n})
		}
		return rows, nil
	case "CREATE USER":
		if !userNameRegex.MatchString(q.User) {
			return nil, failure(errInvalidName)
		}
		if exists {
			if q.IfNotExists {
				return nil, nil
			}
			return nil, failure(errUserExists, q.User)
		}
		// The first user holds every privilege, as in Memgraph.
		s.a.Users[name] = simUser{Hash: hashPassword(q.Password), Admin: len(s.a.Users) == 0}
	case "SET PASSWORD":
		if !exists {
			return nil, failure(errUserMissing, q.User)
		}
		u.Hash = hashPassword(q.Password)
		s.a.Users[name] = u
	case "DROP USER":
		if !exists {
			return nil, failure(errDropMissing, q.User)
		}
		delete(s.a.Users, name)
	case "GRANT":
		if !exists {
			return nil, failure(errUserMissing, q.User)
		}
		u.Admin = true
		s.a.Users[name] = u
	}
	s.a.Version++
	if err := writeJSON(s.path, s.a); err != nil {
		return nil, failure("Couldn't save user '%s'!", q.User)
	}
	return nil, nil
}

// ParseAuthQuery recognises the auth queries the simulator serves: CREATE USER [IF NOT
// EXISTS] u [IDENTIFIED BY 'p'], SET PASSWORD FOR u TO 'p', DROP USER u, GRANT ALL
// PRIVILEGES TO u, SHOW USERS. ok is false for any other query; err is a syntax error in
// one of these.
func ParseAuthQuery(text string) (q AuthQuery, ok bool, err error) {
	t := &authLexer{s: strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(text), ";"))}
	switch {
	case t.keywords("SHOW", "USERS"):
		q.Verb = "SHOW USERS"
	case t.keywords("CREATE", "USER"):
		q.Verb = "CREATE USER"
		q.IfNotExists = t.keywords("IF", "NOT", "EXISTS")
		if q.User, err = t.name(); err != nil {
			return q, true, err
		}
		if t.keywords("IDENTIFIED", "BY") {
			if q.Password, err = t.str(); err != nil {
				return q, true, err
			}
			q.HasPassword = true
		}
	case t.keywords("SET", "PASSWORD", "FOR"):
		q.Verb = "SET PASSWORD"
		if q.User, err = t.name(); err != nil {
			return q, true, err
		}
		if !t.keywords("TO") {
			return q, true, errors.New("SET PASSWORD FOR <user> TO '<password>' expected")
		}
		if q.Password, err = t.str(); err != nil {
			return q, true, err
		}
		q.HasPassword = true
	case t.keywords("DROP", "USER"):
		q.Verb = "DROP USER"
		if q.User, err = t.name(); err != nil {
			return q, true, err
		}
	case t.keywords("GRANT", "ALL", "PRIVILEGES", "TO"):
		q.Verb = "GRANT"
		if q.User, err = t.name(); err != nil {
			return q, true, err
		}
	default:
		return q, false, nil
	}
	if rest := strings.TrimSpace(t.s); rest != "" {
		return q, true, fmt.Errorf("unexpected %q after %s", rest, q.Verb)
	}
	return q, true, nil
}

type authLexer struct{ s string }

// keywords consumes the words in order (case-insensitive) or nothing.
func (l *authLexer) keywords(words ...string) bool {
	s := l.s
	for _, w := range words {
		s = strings.TrimLeft(s, " \t\r\n")
		if len(s) < len(w) || !strings.EqualFold(s[:len(w)], w) || (len(s) > len(w) && isNameByte(s[len(w)])) {
			return false
		}
		s = s[len(w):]
	}
	l.s = s
	return true
}

func isNameByte(b byte) bool {
	return b == '_' || b == '.' || b == '+' || b == '-' || b == '@' ||
		(b >= 'a' && b <= 'z') || (b >= 'A' && b <= 'Z') || (b >= '0' && b <= '9')
}

// name reads a bare or `backtick-quoted` name.
func (l *authLexer) name() (string, error) {
	s := strings.TrimLeft(l.s, " \t\r\n")
	if strings.HasPrefix(s, "`") {
		var b strings.Builder
		for i := 1; i < len(s); i++ {
			if s[i] == '`' {
				if i+1 < len(s) && s[i+1] == '`' {
					b.WriteByte('`')
					i++
					continue
				}
				l.s = s[i+1:]
				return b.String(), nil
			}
			b.WriteByte(s[i])
		}
		return "", errors.New("unterminated `name`")
	}
	i := 0
	for i < len(s) && isNameByte(s[i]) {
		i++
	}
	if i == 0 {
		return "", errors.New("user name expected")
	}
	l.s = s[i:]
	return s[:i], nil
}

// str reads a 'single-quoted' or "double-quoted" string with backslash escapes.
func (l *authLexer) str() (string, error) {
	s := strings.TrimLeft(l.s, " \t\r\n")
	if s == "" || (s[0] != '\'' && s[0] != '"') {
		return "", errors.New("string literal expected")
	}
	quote := s[0]
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		switch s[i] {
		case '\\':
			if i+1 < len(s) {
				i++
				b.WriteByte(s[i])
			}
		case quote:
			l.s = s[i+1:]
			return b.String(), nil
		default:
			b.WriteByte(s[i])
		}
	}
	return "", errors.New("unterminated string literal")
}

// runAuth serves an auth query on a data instance: on the MAIN it changes the store and
// replicates it to every replica before answering (Memgraph's system replication, SYNC);
// a replica refuses every change.
func (d *dataInstance) runAuth(q AuthQuery, by string) ([][]any, error) {
	d.mu.Lock()
	role, epoch, links := d.st.Role, d.st.Epoch, d.sortedLinksLocked()
	d.mu.Unlock()
	if q.Verb != "SHOW USERS" && role == RoleReplica {
		return nil, failure(ErrAuthOnReplica)
	}
	rows, err := d.auth.apply(q, by)
	if err != nil || q.Verb == "SHOW USERS" {
		return rows, err
	}
	d.replicateAuth(epoch, links)
	return nil, nil
}

// replicateAuth sends the user store to every replica that does not hold its version; a
// replica that does not answer gets it from the catch-up loop.
func (d *dataInstance) replicateAuth(epoch uint64, links []*replicaLink) {
	snap := d.auth.Snapshot()
	var wg sync.WaitGroup
	for _, l := range links {
		l.mu.Lock()
		current := l.authSent && l.authAcked == snap.Version
		l.mu.Unlock()
		if current {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := d.callReplica(l.spec, request{Op: "auth", Epoch: epoch, Auth: &snap})
			l.mu.Lock()
			defer l.mu.Unlock()
			if err != nil {
				d.log.Debug("Replica did not take the users", "replica", l.spec.Name, "error", err)
				return
			}
			l.authSent, l.authAcked = true, resp.Committed
		}()
	}
	wg.Wait()
}
