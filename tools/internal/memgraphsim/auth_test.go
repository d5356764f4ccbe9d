package memgraphsim

import (
	"strings"
	"testing"

	"github.com/opsuite/suite/tools/internal/bolt"
)

func TestParseAuthQuery(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want AuthQuery
	}{
		{"SHOW USERS", AuthQuery{Verb: "SHOW USERS"}},
		{"create user IF NOT EXISTS `o``ps` IDENTIFIED BY 'p\\'w'", AuthQuery{Verb: "CREATE USER", User: "o`ps", Password: "p'w", HasPassword: true, IfNotExists: true}},
		{"CREATE USER ops", AuthQuery{Verb: "CREATE USER", User: "ops"}},
		{"SET PASSWORD FOR admin TO 'x\\\\y';", AuthQuery{Verb: "SET PASSWORD", User: "admin", Password: `x\y`, HasPassword: true}},
		{"DROP USER `admin`", AuthQuery{Verb: "DROP USER", User: "admin"}},
		{"GRANT ALL PRIVILEGES TO ops", AuthQuery{Verb: "GRANT", User: "ops"}},
	} {
		got, ok, err := ParseAuthQuery(tc.in)
		if !ok || err != nil || got != tc.want {
			t.Errorf("%q: %+v ok=%v err=%v, want %+v", tc.in, got, ok, err, tc.want)
		}
	}
	if _, ok, _ := ParseAuthQuery("SHOW INSTANCES"); ok {
		t.Error("SHOW INSTANCES taken for an auth query")
	}
	if _, ok, err := ParseAuthQuery("SET PASSWORD FOR admin 'x'"); !ok || err == nil {
		t.Errorf("a malformed SET PASSWORD: ok=%v err=%v", ok, err)
	}
}

// TestAuthStore: the environment's user is created only into an empty store, persisted in
// the data directory; only an admin changes users; the first user created is an admin,
// later ones are not until granted.
func TestAuthStore(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenAuthStore(dir, "Admin", "one")
	if err != nil {
		t.Fatal(err)
	}
	login := func(s *AuthStore, u, p string) (string, error) {
		return s.Authenticate(bolt.Auth{Scheme: "basic", Principal: u, Credentials: p})
	}
	if who, err := login(s, "admin", "one"); err != nil || who != "admin" {
		t.Fatalf("env user login: %q %v", who, err)
	}
	if _, err := s.apply(AuthQuery{Verb: "SET PASSWORD", User: "admin", Password: "two"}, "admin"); err != nil {
		t.Fatal(err)
	}
	// A restart with the old environment keeps the changed password.
	s, err = OpenAuthStore(dir, "admin", "one")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := login(s, "admin", "one"); err == nil {
		t.Fatal("the environment's password was applied to a store that has users")
	}
	if _, err := login(s, "admin", "two"); err != nil {
		t.Fatalf("changed password lost on restart: %v", err)
	}
	if _, err := s.apply(AuthQuery{Verb: "CREATE USER", User: "ops", Password: "p"}, "admin"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.apply(AuthQuery{Verb: "DROP USER", User: "admin"}, "ops"); err == nil || !strings.Contains(err.Error(), "not authorized") {
		t.Fatalf("a user without privileges dropped the admin: %v", err)
	}
	if _, err := s.apply(AuthQuery{Verb: "CREATE USER", User: "ops"}, "admin"); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("duplicate CREATE USER: %v", err)
	}
	if _, err := s.apply(AuthQuery{Verb: "CREATE USER", User: "ops", IfNotExists: true}, "admin"); err != nil {
		t.Fatalf("CREATE USER IF NOT EXISTS of an existing user: %v", err)
	}
	if _, err := s.apply(AuthQuery{Verb: "GRANT", User: "ops"}, "admin"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.apply(AuthQuery{Verb: "DROP USER", User: "admin"}, "ops"); err != nil {
		t.Fatalf("granted user could not drop: %v", err)
	}
	if _, err := s.apply(AuthQuery{Verb: "DROP USER", User: "admin"}, "ops"); err == nil || !strings.Contains(err.Error(), "doesn't exist") {
		t.Fatalf("DROP of a missing user: %v", err)
	}
	// No users at all: any login passes.
	empty, err := OpenAuthStore(t.TempDir(), "", "")
	if err != nil {
		t.Fatal(err)
	}
	if who, err := login(empty, "x", "y"); err != nil || who != "" {
		t.Fatalf("login to a store without users: %q %v", who, err)
	}
}
