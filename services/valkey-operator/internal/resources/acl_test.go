package resources

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	valkeyv1 "github.com/opsuite/suite/api/valkey/v1alpha1"
	"k8s.io/utils/ptr"
)

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "#" + hex.EncodeToString(sum[:])
}

func TestRenderACL(t *testing.T) {
	internalLines := "user valkey-operator on " + sha("op-secret-1") + " ~* &* +@all\n" +
		"user valkey-replication on " + sha("repl-secret-1") + " +psync +sync +replconf +ping +info +cluster|nodes +cluster|failover\n" +
		"user valkey-exporter on " + sha("exp-secret-1") + " " + exporterRules + "\n"
	hashed := "#" + strings.Repeat("ab", 32)
	// Every enabled spec user can run a cluster client's topology commands.
	const topo = " +cluster|slots +cluster|shards +cluster|nodes +cluster|info +cluster|myid +readonly +readwrite +asking"
	cases := []struct {
		name      string
		users     []valkeyv1.UserACLSpec
		passwords map[string][]string
		want      string // users.acl
	}{
		{
			name: "no users: default open",
			want: "user default on nopass ~* &* +@all\n" + internalLines,
		},
		{
			name:      "users declared without default: default off",
			users:     []valkeyv1.UserACLSpec{{Name: "app"}},
			passwords: map[string][]string{"app": {"pw"}},
			want:      "user default off\nuser app on " + sha("pw") + topo + "\n" + internalLines,
		},
		{
			name:  "default declared: as written",
			users: []valkeyv1.UserACLSpec{{Name: "default", NoPassword: true, Commands: valkeyv1.CommandsACLSpec{Allow: []string{"@read"}}, Keys: valkeyv1.KeysACLSpec{ReadOnly: []string{"*"}}}},
			want:  "user default on nopass %R~* +@read" + topo + "\n" + internalLines,
		},
		{
			name: "every field, in upstream's order, users sorted by name",
			users: []valkeyv1.UserACLSpec{
				{
					Name:           "zed",
					PasswordSecret: valkeyv1.PasswordSecretSpec{Name: "s", Keys: []string{"new", "old"}},
					Keys:           valkeyv1.KeysACLSpec{ReadWrite: []string{"rw:*"}, ReadOnly: []string{"ro:*", "shared:*"}, WriteOnly: []string{"wo:*"}},
					Channels:       valkeyv1.ChannelsACLSpec{Patterns: []string{"news.*"}},
					Commands:       valkeyv1.CommandsACLSpec{Allow: []string{"@all", "client|setname"}, Deny: []string{"@admin", "flushall"}},
					RawACL:         "  +debug   -keys ",
				},
				{Name: "amy", NoPassword: true, Enabled: ptr.To(false)},
			},
			passwords: map[string][]string{"zed": {"n", hashed}},
			want: "user default off\n" +
				"user amy off nopass\n" +
				"user zed on " + sha("n") + " " + hashed + " ~rw:* %R~ro:* %R~shared:* %W~wo:* resetchannels &news.* +@all +client|setname -@admin -flushall +debug -keys" + topo + "\n" +
				internalLines,
		},
		{
			name:  "resetpass: no password at all, none needed",
			users: []valkeyv1.UserACLSpec{{Name: "locked", ResetPassword: true, Commands: valkeyv1.CommandsACLSpec{Allow: []string{"ping"}}}},
			want:  "user default off\nuser locked on resetpass +ping" + topo + "\n" + internalLines,
		},
		{
			name:  "a disabled user needs no Secret",
			users: []valkeyv1.UserACLSpec{{Name: "old", Enabled: ptr.To(false)}},
			want:  "user default off\nuser old off\n" + internalLines,
		},
		{
			name:      "a disabled user keeps the passwords it has",
			users:     []valkeyv1.UserACLSpec{{Name: "old", Enabled: ptr.To(false), PasswordSecret: valkeyv1.PasswordSecretSpec{Keys: []string{"a", "b"}}}},
			passwords: map[string][]string{"old": {"", "pw"}},
			want:      "user default off\nuser old off " + sha("pw") + "\n" + internalLines,
		},
		{
			name:      "upper-case hashed password kept, lower-cased",
			users:     []valkeyv1.UserACLSpec{{Name: "app"}},
			passwords: map[string][]string{"app": {"#" + strings.Repeat("AB", 32)}},
			want:      "user default off\nuser app on " + hashed + topo + "\n" + internalLines,
		},
		{
			name:      "'#' plus something that is not a hash is a plaintext password",
			users:     []valkeyv1.UserACLSpec{{Name: "app"}},
			passwords: map[string][]string{"app": {"#not-a-hash"}},
			want:      "user default off\nuser app on " + sha("#not-a-hash") + topo + "\n" + internalLines,
		},
		{
			// Upstream's alice: categories that leave out @slow, where CLUSTER SLOTS is.
			name: "upstream's alice sample can run a cluster client",
			users: []valkeyv1.UserACLSpec{{Name: "alice", PasswordSecret: valkeyv1.PasswordSecretSpec{Name: "pw", Keys: []string{"alicepw"}},
				Commands: valkeyv1.CommandsACLSpec{Allow: []string{"@read", "@write", "@connection"}, Deny: []string{"@admin", "@dangerous"}},
				Keys:     valkeyv1.KeysACLSpec{ReadWrite: []string{"app:*"}}, RawACL: "+client|setname"}},
			passwords: map[string][]string{"alice": {"pw"}},
			want: "user default off\nuser alice on " + sha("pw") + " ~app:* +@read +@write +@connection -@admin -@dangerous +client|setname" +
				topo + "\n" + internalLines,
		},
		{
			name: "a topology command denied by name stays denied; a denied category does not withhold them",
			users: []valkeyv1.UserACLSpec{
				{Name: "a", NoPassword: true, Commands: valkeyv1.CommandsACLSpec{Allow: []string{"get"}, Deny: []string{"CLUSTER"}}},
				{Name: "b", NoPassword: true, Commands: valkeyv1.CommandsACLSpec{Deny: []string{"cluster|nodes", "@slow"}}, RawACL: "-readonly"},
			},
			want: "user default off\n" +
				"user a on nopass +get -CLUSTER +readonly +readwrite +asking\n" +
				"user b on nopass -cluster|nodes -@slow -readonly +cluster|slots +cluster|shards +cluster|info +cluster|myid +readwrite +asking\n" +
				internalLines,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := clusterWith(func(s *valkeyv1.ValkeyClusterSpec) { s.Users = tc.users })
			got, err := RenderACL(c, tc.passwords, testInternal)
			if err != nil {
				t.Fatalf("RenderACL: %v", err)
			}
			if got.Users != tc.want {
				t.Errorf("users.acl:\n%s\nwant:\n%s", got.Users, tc.want)
			}
			if want := "masteruser valkey-replication\nmasterauth \"repl-secret-1\"\n"; got.Auth != want {
				t.Errorf("auth.conf = %q, want %q", got.Auth, want)
			}
			if strings.Contains(got.Users, "pw\n") || strings.Contains(got.Users, "op-secret-1") || strings.Contains(got.Users, "repl-secret-1") {
				t.Errorf("a plaintext password in users.acl:\n%s", got.Users)
			}
			again, _ := RenderACL(c, tc.passwords, testInternal)
			if again != got || len(got.Hash) != 64 {
				t.Errorf("not deterministic or no hash: %+v vs %+v", again, got)
			}
		})
	}
}

func TestRenderACLHash(t *testing.T) {
	render := func(users []valkeyv1.UserACLSpec, pw map[string][]string, internal InternalPasswords) string {
		got, err := RenderACL(clusterWith(func(s *valkeyv1.ValkeyClusterSpec) { s.Users = users }), pw, internal)
		if err != nil {
			t.Fatal(err)
		}
		return got.Hash
	}
	app := []valkeyv1.UserACLSpec{{Name: "app"}}
	ref := render(app, map[string][]string{"app": {"a"}}, testInternal)
	for name, h := range map[string]string{
		"password rotated":         render(app, map[string][]string{"app": {"b"}}, testInternal),
		"rule added":               render([]valkeyv1.UserACLSpec{{Name: "app", RawACL: "+get"}}, map[string][]string{"app": {"a"}}, testInternal),
		"replication password new": render(app, map[string][]string{"app": {"a"}}, InternalPasswords{Operator: "op-secret-1", Replication: "other"}),
	} {
		if h == ref {
			t.Errorf("%s: hash unchanged", name)
		}
	}
	reordered := render([]valkeyv1.UserACLSpec{{Name: "b", NoPassword: true}, {Name: "a", NoPassword: true}}, nil, testInternal)
	if reordered != render([]valkeyv1.UserACLSpec{{Name: "a", NoPassword: true}, {Name: "b", NoPassword: true}}, nil, testInternal) {
		t.Error("the order of spec.users changes the hash")
	}
}

func TestRenderACLErrors(t *testing.T) {
	cases := []struct {
		name      string
		users     []valkeyv1.UserACLSpec
		passwords map[string][]string
		internal  *InternalPasswords
		want      []string // messages, in order, joined
		pwErr     *PasswordError
		userErr   *InvalidUserError
	}{
		{
			name:  "Secret missing",
			users: []valkeyv1.UserACLSpec{{Name: "app"}},
			want:  []string{`user "app": Secret "c-users" with its password was not found: create it, or set nopass: true on the user`},
			pwErr: &PasswordError{User: "app", Secret: "c-users"},
		},
		{
			name:      "key missing",
			users:     []valkeyv1.UserACLSpec{{Name: "app", PasswordSecret: valkeyv1.PasswordSecretSpec{Name: "pw", Keys: []string{"k1", "k2"}}}},
			passwords: map[string][]string{"app": {"x", ""}},
			want:      []string{`user "app": Secret "pw" has no key "k2" (or it is empty): add the password under that key, or remove the key from passwordSecret.keys`},
			pwErr:     &PasswordError{User: "app", Secret: "pw", Key: "k2"},
		},
		{
			name:      "fewer values than keys",
			users:     []valkeyv1.UserACLSpec{{Name: "app", PasswordSecret: valkeyv1.PasswordSecretSpec{Keys: []string{"k1", "k2"}}}},
			passwords: map[string][]string{"app": {"x"}},
			pwErr:     &PasswordError{User: "app", Secret: "c-users", Key: "k2"},
		},
		{
			name:  "every failing user named, in name order",
			users: []valkeyv1.UserACLSpec{{Name: "zoe"}, {Name: "ann"}, {Name: "ok", NoPassword: true}},
			want: []string{
				`user "ann": Secret "c-users" with its password was not found: create it, or set nopass: true on the user`,
				`user "zoe": Secret "c-users" with its password was not found: create it, or set nopass: true on the user`,
			},
		},
		{
			name:    "reserved name",
			users:   []valkeyv1.UserACLSpec{{Name: OperatorUser, NoPassword: true}},
			want:    []string{`user "valkey-operator": the name is reserved for the operator's own user: rename the user`},
			userErr: &InvalidUserError{User: OperatorUser, Reason: "the name is reserved for the operator's own user: rename the user"},
		},
		{
			name:    "the exporter's name is reserved too",
			users:   []valkeyv1.UserACLSpec{{Name: ExporterUser, NoPassword: true}},
			want:    []string{`user "valkey-exporter": the name is reserved for the operator's own user: rename the user`},
			userErr: &InvalidUserError{User: ExporterUser, Reason: "the name is reserved for the operator's own user: rename the user"},
		},
		{
			name:  "a key pattern with a space",
			users: []valkeyv1.UserACLSpec{{Name: "app", NoPassword: true, Keys: valkeyv1.KeysACLSpec{ReadOnly: []string{"a +@all"}}}},
			want:  []string{`user "app": keys.readOnly entry "a +@all" is empty or contains whitespace: write one pattern or command per entry`},
		},
		{
			name:  "a command that is empty",
			users: []valkeyv1.UserACLSpec{{Name: "app", NoPassword: true, Commands: valkeyv1.CommandsACLSpec{Deny: []string{""}}}},
			want:  []string{`user "app": commands.deny entry "" is empty or contains whitespace: write one pattern or command per entry`},
		},
		{
			name:  "permissions over two lines",
			users: []valkeyv1.UserACLSpec{{Name: "app", NoPassword: true, RawACL: "+get\nuser evil on nopass +@all"}},
			want:  []string{`user "app": permissions contains a line break: keep it on one line`},
		},
		{
			name:  "a name with a space",
			users: []valkeyv1.UserACLSpec{{Name: "a b", NoPassword: true}},
			want:  []string{`user "a b": the name is empty or contains whitespace: rename the user`},
		},
		{
			name:     "internal passwords missing",
			internal: &InternalPasswords{Operator: "x"},
			want:     []string{"the operator's internal passwords are empty: the Secret c-internal must hold operator-password and replication-password"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			internal := testInternal
			if tc.internal != nil {
				internal = *tc.internal
			}
			got, err := RenderACL(clusterWith(func(s *valkeyv1.ValkeyClusterSpec) { s.Users = tc.users }), tc.passwords, internal)
			if err == nil {
				t.Fatalf("no error; users.acl:\n%s", got.Users)
			}
			if got != (ACLFiles{}) {
				t.Errorf("files rendered despite the error: %+v", got)
			}
			if tc.want != nil && err.Error() != strings.Join(tc.want, "\n") {
				t.Errorf("error:\n%v\nwant:\n%s", err, strings.Join(tc.want, "\n"))
			}
			if tc.pwErr != nil {
				var pe *PasswordError
				if !errors.As(err, &pe) || *pe != *tc.pwErr {
					t.Errorf("errors.As PasswordError = %+v, want %+v", pe, tc.pwErr)
				}
			}
			if tc.userErr != nil {
				var ue *InvalidUserError
				if !errors.As(err, &ue) || *ue != *tc.userErr {
					t.Errorf("errors.As InvalidUserError = %+v, want %+v", ue, tc.userErr)
				}
			}
			if tc.internal != nil && !errors.Is(err, ErrInternalPasswords) {
				t.Errorf("errors.Is(ErrInternalPasswords) false for %v", err)
			}
		})
	}
}

func TestUserPasswordSecret(t *testing.T) {
	cases := []struct {
		user   valkeyv1.UserACLSpec
		secret string
		keys   []string
		needs  bool
	}{
		{valkeyv1.UserACLSpec{Name: "app"}, "c-users", []string{"app"}, true},
		{valkeyv1.UserACLSpec{Name: "app", PasswordSecret: valkeyv1.PasswordSecretSpec{Name: "s", Keys: []string{"b", "a"}}}, "s", []string{"b", "a"}, true},
		{valkeyv1.UserACLSpec{Name: "app", NoPassword: true}, "c-users", []string{"app"}, false},
		{valkeyv1.UserACLSpec{Name: "app", ResetPassword: true}, "c-users", []string{"app"}, false},
		{valkeyv1.UserACLSpec{Name: "app", Enabled: ptr.To(false)}, "c-users", []string{"app"}, false},
		{valkeyv1.UserACLSpec{Name: "app", Enabled: ptr.To(true)}, "c-users", []string{"app"}, true},
	}
	for _, tc := range cases {
		secret, keys := UserPasswordSecret("c", &tc.user)
		if secret != tc.secret || strings.Join(keys, ",") != strings.Join(tc.keys, ",") {
			t.Errorf("UserPasswordSecret(%+v) = %s %v, want %s %v", tc.user, secret, keys, tc.secret, tc.keys)
		}
		if got := NeedsPasswords(&tc.user); got != tc.needs {
			t.Errorf("NeedsPasswords(%+v) = %v, want %v", tc.user, got, tc.needs)
		}
	}
	got := SecretPasswords([]string{"a", "missing", "b"}, map[string][]byte{"a": []byte("1"), "b": []byte("2"), "c": []byte("3")})
	if strings.Join(got, ",") != "1,,2" {
		t.Errorf("SecretPasswords = %q", got)
	}
}

func TestGeneratePassword(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		p, err := GeneratePassword()
		if err != nil {
			t.Fatal(err)
		}
		raw, err := base64.RawURLEncoding.DecodeString(p)
		if err != nil || len(raw) != 32 || len(p) != 43 {
			t.Fatalf("password %q: %d bytes, %v; want 32 random bytes as 43 URL-safe characters", p, len(raw), err)
		}
		if seen[p] {
			t.Fatalf("password %q generated twice", p)
		}
		seen[p] = true
	}
}

// TestUserPasswordsFromSecrets: what the controller reads (PasswordSecretNames) and
// hands over (UserPasswords) leads RenderACL to the right passwords, or to an error
// naming the missing Secret or key.
func TestUserPasswordsFromSecrets(t *testing.T) {
	c := clusterWith(func(s *valkeyv1.ValkeyClusterSpec) {
		s.Users = []valkeyv1.UserACLSpec{
			{Name: "app"}, // c-users, key app
			{Name: "web", PasswordSecret: valkeyv1.PasswordSecretSpec{Name: "web-pw", Keys: []string{"new", "old"}}},
			{Name: "bot", PasswordSecret: valkeyv1.PasswordSecretSpec{Keys: []string{"bot-key"}}}, // c-users
			{Name: "anon", NoPassword: true, PasswordSecret: valkeyv1.PasswordSecretSpec{Name: "unused"}},
			{Name: "old", Enabled: ptr.To(false), PasswordSecret: valkeyv1.PasswordSecretSpec{Name: "gone"}},
		}
	})
	if got := PasswordSecretNames(c); strings.Join(got, ",") != "c-users,web-pw" {
		t.Fatalf("PasswordSecretNames = %v, want [c-users web-pw]", got)
	}
	secrets := map[string]map[string][]byte{
		"c-users": {"app": []byte("a"), "bot-key": []byte("b")},
		"web-pw":  {"new": []byte("n"), "old": []byte("o")},
	}
	files, err := RenderACL(c, UserPasswords(c, secrets), testInternal)
	if err != nil {
		t.Fatal(err)
	}
	topo := " " + strings.Join(topologyRules(&valkeyv1.UserACLSpec{}), " ")
	for _, want := range []string{
		"user app on " + sha("a") + topo + "\n",
		"user bot on " + sha("b") + topo + "\n",
		"user web on " + sha("n") + " " + sha("o") + topo + "\n",
		"user anon on nopass" + topo + "\n",
		"user old off\n",
		"user default off\n",
	} {
		if !strings.Contains(files.Users, want) {
			t.Errorf("users.acl lacks %q:\n%s", want, files.Users)
		}
	}

	delete(secrets["web-pw"], "old")
	_, err = RenderACL(c, UserPasswords(c, secrets), testInternal)
	var pe *PasswordError
	if !errors.As(err, &pe) || *pe != (PasswordError{User: "web", Secret: "web-pw", Key: "old"}) {
		t.Errorf("key removed: %v", err)
	}
	delete(secrets, "c-users")
	_, err = RenderACL(c, UserPasswords(c, secrets), testInternal)
	if err == nil || !strings.Contains(err.Error(), `user "app": Secret "c-users" with its password was not found`) ||
		!strings.Contains(err.Error(), `user "bot": Secret "c-users" with its password was not found`) {
		t.Errorf("Secret removed: %v", err)
	}
}

func TestParseUsersACL(t *testing.T) {
	files, err := RenderACL(clusterWith(func(s *valkeyv1.ValkeyClusterSpec) {
		s.Users = []valkeyv1.UserACLSpec{{Name: "app", NoPassword: true, Keys: valkeyv1.KeysACLSpec{ReadOnly: []string{"a:*"}}, RawACL: "+get   +set"}}
	}), nil, testInternal)
	if err != nil {
		t.Fatal(err)
	}
	got := ParseUsersACL(files.Users + "\n# a comment\n")
	want := []ACLUser{
		{Name: "default", Rules: []string{"off"}},
		{Name: "app", Rules: append([]string{"on", "nopass", "%R~a:*", "+get", "+set"}, topologyRules(&valkeyv1.UserACLSpec{})...)},
		{Name: OperatorUser, Rules: []string{"on", sha("op-secret-1"), "~*", "&*", "+@all"}},
		{Name: ReplicationUser, Rules: []string{"on", sha("repl-secret-1"), "+psync", "+sync", "+replconf", "+ping", "+info", "+cluster|nodes", "+cluster|failover"}},
		{Name: ExporterUser, Rules: append([]string{"on", sha("exp-secret-1")}, strings.Fields(exporterRules)...)},
	}
	if len(got) != len(want) {
		t.Fatalf("ParseUsersACL = %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i].Name != want[i].Name || strings.Join(got[i].Rules, " ") != strings.Join(want[i].Rules, " ") {
			t.Errorf("user %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}
