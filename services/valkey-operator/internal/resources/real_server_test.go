package resources

import (
	"errors"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	valkeyv1 "github.com/opsuite/suite/api/valkey/v1alpha1"
	"github.com/opsuite/suite/services/valkey-operator/internal/valkeytest"
	"github.com/opsuite/suite/shared/testenv"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

var testInternal = InternalPasswords{Operator: "op-secret-1", Replication: "repl-secret-1", Exporter: "exp-secret-1"}

// render renders the config and ACL of c for a server under dir.
func render(t *testing.T, c *valkeyv1.ValkeyCluster, dir string, passwords map[string][]string) serverFiles {
	t.Helper()
	acl, err := RenderACL(c, passwords, testInternal)
	if err != nil {
		t.Fatalf("RenderACL: %v", err)
	}
	return serverFiles{config: renderConfig(c, layoutFor(dir)), acl: acl}
}

// mustErr runs a command that must fail with an error reply starting with prefix.
func mustErr(t *testing.T, c *respConn, prefix string, args ...string) {
	t.Helper()
	v, err := c.do(args...)
	var re respError
	if !errors.As(err, &re) || !strings.HasPrefix(string(re), prefix) {
		t.Fatalf("%v = %#v, %v; want an error reply starting with %s", redact(args), v, err, prefix)
	}
}

func configGet(t *testing.T, c *respConn, key string) (string, bool) {
	t.Helper()
	v, err := c.do("CONFIG", "GET", key)
	if err != nil {
		t.Fatalf("CONFIG GET %s: %v", key, err)
	}
	a, _ := v.([]any)
	if len(a) != 2 {
		return "", false
	}
	s, _ := a[1].(string)
	return s, true
}

// TestRenderedServerWithUsers starts the test server from a rendered valkey.conf,
// users.acl and auth.conf with users declared: it runs in cluster mode, the operator logs
// in and administers it, the default user is off, a read-only user cannot write, rotated
// passwords both work, a disabled user cannot log in, and hostile config values stay
// values.
func TestRenderedServerWithUsers(t *testing.T) {
	c := &valkeyv1.ValkeyCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns"},
		Spec: valkeyv1.ValkeyClusterSpec{
			Shards: 3,
			Users: []valkeyv1.UserACLSpec{
				{Name: "reader", Keys: valkeyv1.KeysACLSpec{ReadOnly: []string{"*"}}, Commands: valkeyv1.CommandsACLSpec{Allow: []string{"@all"}}},
				{Name: "app", PasswordSecret: valkeyv1.PasswordSecretSpec{Name: "app-pw", Keys: []string{"new", "old"}},
					Keys: valkeyv1.KeysACLSpec{ReadWrite: []string{"app:*"}}, Commands: valkeyv1.CommandsACLSpec{Allow: []string{"@all"}, Deny: []string{"flushall", "config"}}},
				{Name: "gone", Enabled: ptr.To(false), Commands: valkeyv1.CommandsACLSpec{Allow: []string{"@all"}}},
				// Every construct the renderer writes, so the server proves it loads them.
				{Name: "full", NoPassword: true,
					Keys:     valkeyv1.KeysACLSpec{ReadWrite: []string{"rw:*"}, ReadOnly: []string{"ro:*"}, WriteOnly: []string{"wo:*"}},
					Channels: valkeyv1.ChannelsACLSpec{Patterns: []string{"news.*"}},
					Commands: valkeyv1.CommandsACLSpec{Allow: []string{"@read", "@write", "client|setname", "publish"}, Deny: []string{"@dangerous"}},
					RawACL:   "+ping -keys"},
				{Name: "locked", ResetPassword: true, Commands: valkeyv1.CommandsACLSpec{Allow: []string{"ping"}}},
			},
			Config: map[string]valkeyv1.ConfigValue{
				"maxmemory":                         "64mb",
				"maxmemory-policy":                  "allkeys-lru",
				"save":                              "3600 1 300 100",
				"client-output-buffer-limit":        "pubsub 32mb 8mb 60",
				"tcp-backlog":                       "256", // restart-requiring; not databases, which Valkey 8 resets to 1 in cluster mode
				"latency-tracking-info-percentiles": "50 99 99.9",
				// A value that tries to end its line and set a password: it must stay
				// the value of its own directive.
				"ignore-warnings": "x\" \nrequirepass owned \\",
			},
		},
	}
	dir := t.TempDir()
	f := render(t, c, dir, map[string][]string{
		"reader": {"reader-pw"},
		"app":    {"app-new", "app-old"},
	})
	s := startServer(t, dir, f)

	op := s.login(t, OperatorUser, testInternal.Operator)
	if got := infoField(op.str(t, "INFO", "cluster"), "cluster_enabled"); got != "1" {
		t.Fatalf("cluster_enabled = %q, want 1", got)
	}
	if got := op.str(t, "CLUSTER", "ADDSLOTSRANGE", "0", "16383"); got != "OK" {
		t.Fatalf("CLUSTER ADDSLOTSRANGE as the operator = %q", got)
	}
	testenv.Eventually(t, 10*time.Second, "CLUSTER INFO says ok", func() (bool, string) {
		info := op.str(t, "CLUSTER", "INFO")
		return infoField(info, "cluster_state") == "ok", info
	})
	for key, want := range map[string]string{
		"maxmemory":                         "67108864",
		"maxmemory-policy":                  "allkeys-lru",
		"save":                              "3600 1 300 100",
		"appendonly":                        "yes",
		"tcp-backlog":                       "256",
		"protected-mode":                    "no",
		"cluster-config-file":               layoutFor(dir).data + "/nodes.conf",
		"aclfile":                           layoutFor(dir).acl + "/users.acl",
		"masteruser":                        ReplicationUser,
		"requirepass":                       "",
		"ignore-warnings":                   "x\" \nrequirepass owned \\",
		"latency-tracking-info-percentiles": "50 99 99.9",
		"client-output-buffer-limit":        "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60",
	} {
		if got, _ := configGet(t, op, key); got != want {
			t.Errorf("CONFIG GET %s = %q, want %q", key, got, want)
		}
	}
	// The operator applies live.conf with CONFIG SET, line by line.
	live := ParseLiveConfig(f.config.Live)
	if len(live) != 5 {
		t.Fatalf("live.conf %q parsed to %v, want the 5 live keys", f.config.Live, live)
	}
	for _, l := range live {
		if got := op.str(t, "CONFIG", "SET", l.Key, l.Value); got != "OK" {
			t.Fatalf("CONFIG SET %s %q = %q", l.Key, l.Value, got)
		}
	}

	// Default user off: an unauthenticated connection can do nothing.
	anon := s.login(t, "", "")
	mustErr(t, anon, "NOAUTH", "GET", "k")
	mustErr(t, anon, "WRONGPASS", "AUTH", "default", "")

	reader := s.login(t, "reader", "reader-pw")
	if _, err := reader.do("GET", "app:1"); err != nil {
		t.Fatalf("GET as a read-only user: %v", err)
	}
	mustErr(t, reader, "NOPERM", "SET", "app:1", "v")

	for _, pw := range []string{"app-new", "app-old"} {
		app := s.login(t, "app", pw)
		if got := app.str(t, "SET", "app:1", "v"); got != "OK" {
			t.Fatalf("SET as app = %q", got)
		}
		mustErr(t, app, "NOPERM", "SET", "other", "v")
		mustErr(t, app, "NOPERM", "FLUSHALL")
	}
	mustErr(t, s.login(t, "", ""), "WRONGPASS", "AUTH", "app", "wrong")
	mustErr(t, s.login(t, "", ""), "WRONGPASS", "AUTH", "gone", "")
	full := s.login(t, "full", "anything")
	for _, cmd := range [][]string{{"SET", "rw:1", "v"}, {"GET", "ro:1"}, {"SET", "wo:1", "v"}, {"CLIENT", "SETNAME", "me"}, {"PING"}, {"PUBLISH", "news.today", "hi"}} {
		if _, err := full.do(cmd...); err != nil {
			t.Errorf("%v as full: %v", cmd, err)
		}
	}
	for _, cmd := range [][]string{{"SET", "ro:1", "v"}, {"GET", "wo:1"}, {"GET", "other"}, {"KEYS", "*"}, {"PUBLISH", "sports", "hi"}, {"CLIENT", "KILL", "ID", "1"}} {
		mustErr(t, full, "NOPERM", cmd...)
	}
	mustErr(t, s.login(t, "", ""), "WRONGPASS", "AUTH", "locked", "")
	// The node controller applies users.acl live, line by line, as the operator: the same
	// rules must load through ACL SETUSER ... reset, and the operator's own connection
	// must survive resetting its own user.
	users := ParseUsersACL(f.acl.Users)
	if len(users) != 9 {
		t.Fatalf("ParseUsersACL found %d users, want 9: %+v", len(users), users)
	}
	for _, u := range users {
		args := append([]string{"ACL", "SETUSER", u.Name, "reset"}, u.Rules...)
		if got := op.str(t, args...); got != "OK" {
			t.Fatalf("ACL SETUSER %s = %q", u.Name, got)
		}
	}
	if got := op.str(t, "ACL", "WHOAMI"); got != OperatorUser {
		t.Fatalf("after re-applying, the operator's connection is %q", got)
	}
	mustErr(t, s.login(t, "reader", "reader-pw"), "NOPERM", "SET", "app:1", "v")
	mustErr(t, s.login(t, "", ""), "NOAUTH", "GET", "k")
	// The replication user can sync and nothing else.
	repl := s.login(t, ReplicationUser, testInternal.Replication)
	mustErr(t, repl, "NOPERM", "GET", "app:1")
	if got := repl.str(t, "PING"); got != "PONG" {
		t.Fatalf("PING as the replication user = %q", got)
	}
}

// TestRenderedServerWithoutUsers: with no users declared, the default user is open, as
// on a fresh server, and the operator's user still works; hostname endpoints and the
// user's appendonly reach the server.
func TestRenderedServerWithoutUsers(t *testing.T) {
	c := &valkeyv1.ValkeyCluster{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns"},
		Spec: valkeyv1.ValkeyClusterSpec{Shards: 3, Config: map[string]valkeyv1.ConfigValue{"appendonly": "no"},
			Networking: &valkeyv1.NetworkingSpec{Discovery: &valkeyv1.DiscoverySpec{PreferredEndpointType: valkeyv1.PreferredEndpointTypeHostname}}}}
	dir := t.TempDir()
	s := startServer(t, dir, render(t, c, dir, nil))
	anon := s.login(t, "", "")
	if got := anon.str(t, "PING"); got != "PONG" {
		t.Fatalf("PING as default = %q", got)
	}
	if got, _ := configGet(t, anon, "appendonly"); got != "no" {
		t.Fatalf("appendonly = %q, the spec's no", got)
	}
	if got, _ := configGet(t, anon, "cluster-preferred-endpoint-type"); got != "hostname" {
		t.Fatalf("cluster-preferred-endpoint-type = %q, want hostname", got)
	}
	op := s.login(t, OperatorUser, testInternal.Operator)
	if got := op.str(t, "ACL", "WHOAMI"); got != OperatorUser {
		t.Fatalf("ACL WHOAMI = %q", got)
	}
	mustErr(t, s.login(t, "", ""), "WRONGPASS", "AUTH", OperatorUser, "guess")
}

// TestLiveConfigKeysAreSettable sets every live key on a running test server to
// its current value: CONFIG SET must accept each one without a restart. Keys the server
// does not know must be exactly those documented as newer.
func TestLiveConfigKeysAreSettable(t *testing.T) {
	c := &valkeyv1.ValkeyCluster{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns"}, Spec: valkeyv1.ValkeyClusterSpec{Shards: 3}}
	dir := t.TempDir()
	s := startServer(t, dir, render(t, c, dir, nil))
	op := s.login(t, OperatorUser, testInternal.Operator)
	var unknown []string
	for key := range LiveConfigKeys {
		v, ok := configGet(t, op, key)
		if !ok {
			unknown = append(unknown, key)
			continue
		}
		if got, err := op.do("CONFIG", "SET", key, v); err != nil || got != "OK" {
			t.Errorf("CONFIG SET %s %q = %v, %v: not live-settable on %s", key, v, got, err, valkeytest.Bins(t).Name)
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		t.Errorf("%s does not know the live keys %v", valkeytest.Bins(t).Name, unknown)
	}
	// And a key left out on purpose is refused by the server when it cannot change live.
	mustErr(t, op, "ERR", "CONFIG", "SET", "databases", "8")
}

// TestRenderedClusterReplicates forms a one-shard cluster of two servers from the same
// rendered files, default user off, and attaches the second as a replica: it syncs as
// valkey-replication through auth.conf, so the replication user's rules are enough. With
// TLS the bus and the replication link use it too, and a crypto/tls client gets PONG.
func TestRenderedClusterReplicates(t *testing.T) {
	for _, withTLS := range []bool{false, true} {
		name := "plain"
		if withTLS {
			name = "tls"
		}
		t.Run(name, func(t *testing.T) {
			c := &valkeyv1.ValkeyCluster{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns"},
				Spec: valkeyv1.ValkeyClusterSpec{Shards: 1, Replicas: 1,
					Users: []valkeyv1.UserACLSpec{{Name: "app", NoPassword: true, Keys: valkeyv1.KeysACLSpec{ReadWrite: []string{"*"}}, Commands: valkeyv1.CommandsACLSpec{Allow: []string{"@all"}}}}}}
			var ca, cert, key []byte
			if withTLS {
				c.Spec.TLS = &valkeyv1.TLSConfig{SelfSigned: true}
				var err error
				ca, cert, key, err = SelfSigned("c", "ns", nil, nil, time.Now())
				if err != nil {
					t.Fatal(err)
				}
			}
			var servers []*testServer
			for range 2 {
				dir := t.TempDir()
				f := render(t, c, dir, nil)
				f.ca, f.cert, f.key = ca, cert, key
				if withTLS != strings.Contains(f.config.Server, "tls-port") {
					t.Fatalf("TLS %v but valkey.conf:\n%s", withTLS, f.config.Server)
				}
				servers = append(servers, startServer(t, dir, f))
			}
			p, r := servers[0], servers[1]
			pc, rc := p.login(t, OperatorUser, testInternal.Operator), r.login(t, OperatorUser, testInternal.Operator)
			if got := pc.str(t, "PING"); got != "PONG" {
				t.Fatalf("PING = %q", got)
			}
			if withTLS {
				// The port speaks TLS only.
				plain, err := dialRESP(p.addr, nil)
				if err == nil {
					_, err = plain.do("PING")
					plain.Close()
				}
				if err == nil {
					t.Fatal("a plain-text PING on the TLS port was answered")
				}
			}
			host, port, _ := net.SplitHostPort(p.addr)
			if got := rc.str(t, "CLUSTER", "MEET", host, port, strconv.Itoa(p.bus)); got != "OK" {
				t.Fatalf("CLUSTER MEET = %q", got)
			}
			if got := pc.str(t, "CLUSTER", "ADDSLOTSRANGE", "0", "16383"); got != "OK" {
				t.Fatalf("ADDSLOTSRANGE = %q", got)
			}
			pid := pc.str(t, "CLUSTER", "MYID")
			testenv.Eventually(t, 20*time.Second, "the replica knows its primary", func() (bool, string) {
				v, err := rc.do("CLUSTER", "REPLICATE", pid)
				return err == nil && v == "OK", "CLUSTER REPLICATE: " + errString(v, err)
			})
			testenv.Eventually(t, 20*time.Second, "the replica in sync", func() (bool, string) {
				info := rc.str(t, "INFO", "replication")
				return infoField(info, "master_link_status") == "up", info
			})
			testenv.Eventually(t, 10*time.Second, "the cluster ok", func() (bool, string) {
				info := pc.str(t, "CLUSTER", "INFO")
				return infoField(info, "cluster_state") == "ok", info
			})
			app := p.login(t, "app", "any")
			if got := app.str(t, "SET", "k", "v"); got != "OK" {
				t.Fatalf("SET = %q", got)
			}
			testenv.Eventually(t, 10*time.Second, "the write replicated", func() (bool, string) {
				_, _ = rc.do("READONLY")
				v, err := rc.do("GET", "k")
				return v == "v", errString(v, err)
			})
			// Nothing the replica sent was refused (a refused REPLCONF ACK drops the link
			// and forces full syncs over and over), and it synced in full only once.
			if v, err := pc.do("ACL", "LOG"); err != nil || len(v.([]any)) != 0 {
				t.Fatalf("ACL LOG on the primary = %v, %v; want no denials", v, err)
			}
			if got := infoField(pc.str(t, "INFO", "stats"), "sync_full"); got != "1" {
				t.Fatalf("sync_full = %s, want 1", got)
			}
		})
	}
}

func errString(v any, err error) string {
	if err != nil {
		return err.Error()
	}
	s, _ := v.(string)
	return s
}

// TestExporterUser starts the test server from the rendered files and logs in as the
// metrics exporter's user: every command the exporter sends in a scrape works, and
// nothing that reads keys, writes or administers does. The same rules load through the
// node controller's live ACL SETUSER.
func TestExporterUser(t *testing.T) {
	c := &valkeyv1.ValkeyCluster{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns"}, Spec: valkeyv1.ValkeyClusterSpec{Shards: 3}}
	dir := t.TempDir()
	s := startServer(t, dir, render(t, c, dir, nil))
	check := func(t *testing.T) {
		t.Helper()
		exp := s.login(t, ExporterUser, testInternal.Exporter) // fails the test if AUTH does
		// What redis_exporter sends (exporter.go, latency.go, slowlog.go), cluster mode.
		for _, cmd := range [][]string{
			{"CLIENT", "SETNAME", "redis_exporter"}, {"PING"},
			{"CONFIG", "GET", "*"}, {"INFO", "ALL"}, {"INFO"}, {"CLUSTER", "INFO"}, {"CLUSTER", "NODES"}, {"CLUSTER", "SLOTS"},
			{"LATENCY", "LATEST"}, {"LATENCY", "HISTOGRAM"}, {"SLOWLOG", "LEN"}, {"SLOWLOG", "GET", "10"},
		} {
			if _, err := exp.do(cmd...); err != nil {
				t.Errorf("%v as %s: %v", cmd, ExporterUser, err)
			}
		}
		for _, cmd := range [][]string{
			{"SET", "k", "v"}, {"GET", "k"}, {"KEYS", "*"}, {"SCAN", "0"}, {"DEL", "k"}, {"FLUSHALL"}, {"FLUSHDB"},
			{"CONFIG", "SET", "maxmemory", "1mb"}, {"CONFIG", "REWRITE"}, {"CONFIG", "RESETSTAT"},
			{"ACL", "SETUSER", "evil", "on", "nopass", "+@all"}, {"ACL", "LIST"}, {"ACL", "GETUSER", OperatorUser},
			{"CLUSTER", "RESET"}, {"CLUSTER", "FORGET", "x"}, {"CLUSTER", "MEET", "127.0.0.1", "1"}, {"CLUSTER", "ADDSLOTS", "1"},
			{"SLOWLOG", "RESET"}, {"LATENCY", "RESET"}, {"CLIENT", "KILL", "ID", "1"}, {"CLIENT", "LIST"},
			{"SHUTDOWN", "NOSAVE"}, {"SAVE"}, {"BGSAVE"}, {"REPLICAOF", "NO", "ONE"},
			{"MONITOR"}, {"PUBLISH", "c", "m"}, {"EVAL", "return 1", "0"}, {"MODULE", "LIST"}, {"ACL", "WHOAMI"},
		} {
			mustErr(t, exp, "NOPERM", cmd...)
		}
		mustErr(t, s.login(t, "", ""), "WRONGPASS", "AUTH", ExporterUser, "guess")
	}
	t.Run("from users.acl", check)
	// The node controller applies users.acl live as the operator.
	op := s.login(t, OperatorUser, testInternal.Operator)
	for _, u := range ParseUsersACL(render(t, c, dir, nil).acl.Users) {
		if got := op.str(t, append([]string{"ACL", "SETUSER", u.Name, "reset"}, u.Rules...)...); got != "OK" {
			t.Fatalf("ACL SETUSER %s = %q", u.Name, got)
		}
	}
	t.Run("after ACL SETUSER", check)
}
