package resources

import (
	"strings"
	"testing"

	valkeyv1 "github.com/opsuite/suite/api/valkey/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func clusterWith(mutate func(*valkeyv1.ValkeyClusterSpec)) *valkeyv1.ValkeyCluster {
	c := &valkeyv1.ValkeyCluster{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns"},
		Spec: valkeyv1.ValkeyClusterSpec{Shards: 3, Replicas: 1}}
	if mutate != nil {
		mutate(&c.Spec)
	}
	return c
}

const header = "# Rendered by valkey-operator from the ValkeyCluster spec; edits are overwritten.\n"

const base = "bind * -::*\n" +
	"protected-mode no\n" +
	"cluster-enabled yes\n" +
	"cluster-config-file \"/data/nodes.conf\"\n" +
	"dir \"/data\"\n" +
	"aclfile \"/etc/valkey/acl/users.acl\"\n" +
	"include \"/etc/valkey/acl/auth.conf\"\n"

func TestRenderConfig(t *testing.T) {
	tlsLines := "port 0\n" +
		"tls-port 6379\n" +
		"tls-cluster yes\n" +
		"tls-replication yes\n" +
		"tls-cert-file \"/etc/valkey/tls/tls.crt\"\n" +
		"tls-key-file \"/etc/valkey/tls/tls.key\"\n" +
		"tls-ca-cert-file \"/etc/valkey/tls/ca.crt\"\n" +
		"tls-auth-clients optional\n"
	cases := []struct {
		name       string
		spec       func(*valkeyv1.ValkeyClusterSpec)
		server     string
		live       string
		noLiveHash bool // live.conf is empty
	}{
		{
			name:   "defaults",
			server: header + "port 6379\n" + base + "appendonly yes\nrepl-diskless-sync-delay 1\n",
		},
		{
			name: "spec.tls self-signed",
			spec: func(s *valkeyv1.ValkeyClusterSpec) {
				s.TLS = &valkeyv1.TLSConfig{SelfSigned: true}
			},
			server: header + tlsLines + base + "appendonly yes\nrepl-diskless-sync-delay 1\n",
		},
		{
			name: "networking.tls",
			spec: func(s *valkeyv1.ValkeyClusterSpec) {
				s.Networking = &valkeyv1.NetworkingSpec{TLS: &valkeyv1.TLSSpec{Certificates: valkeyv1.TLSCertificates{Server: valkeyv1.CertificateSource{SecretName: "mine"}}}}
			},
			server: header + tlsLines + base + "appendonly yes\nrepl-diskless-sync-delay 1\n",
		},
		{
			name: "hostname endpoints",
			spec: func(s *valkeyv1.ValkeyClusterSpec) {
				s.Networking = &valkeyv1.NetworkingSpec{Discovery: &valkeyv1.DiscoverySpec{PreferredEndpointType: valkeyv1.PreferredEndpointTypeHostname}}
			},
			server: header + "port 6379\n" + base + "cluster-preferred-endpoint-type hostname\nappendonly yes\nrepl-diskless-sync-delay 1\n",
		},
		{
			name: "IP endpoints are the server's default",
			spec: func(s *valkeyv1.ValkeyClusterSpec) {
				s.Networking = &valkeyv1.NetworkingSpec{Discovery: &valkeyv1.DiscoverySpec{PreferredEndpointType: valkeyv1.PreferredEndpointTypeIP}}
			},
			server: header + "port 6379\n" + base + "appendonly yes\nrepl-diskless-sync-delay 1\n",
		},
		{
			name: "spec.config sorted, live keys in live.conf too",
			spec: func(s *valkeyv1.ValkeyClusterSpec) {
				s.Config = map[string]valkeyv1.ConfigValue{
					"maxmemory-policy": "allkeys-lru",
					"databases":        "4",
					"maxmemory":        "100mb",
					"save":             "3600 1 300 100",
					"io-threads":       "2",
				}
			},
			server: header + "port 6379\n" + base + "appendonly yes\nrepl-diskless-sync-delay 1\n" +
				"databases \"4\"\n" +
				"io-threads \"2\"\n" +
				"maxmemory \"100mb\"\n" +
				"maxmemory-policy \"allkeys-lru\"\n" +
				"save \"3600 1 300 100\"\n",
			live: "maxmemory 100mb\nmaxmemory-policy allkeys-lru\nsave 3600 1 300 100\n",
		},
		{
			name: "the user's appendonly replaces the default, in any case",
			spec: func(s *valkeyv1.ValkeyClusterSpec) {
				s.Config = map[string]valkeyv1.ConfigValue{"AppendOnly": "no"}
			},
			server: header + "port 6379\n" + base + "repl-diskless-sync-delay 1\nAppendOnly \"no\"\n",
		},
		{
			name: "the user's repl-diskless-sync-delay replaces the default",
			spec: func(s *valkeyv1.ValkeyClusterSpec) {
				s.Config = map[string]valkeyv1.ConfigValue{"repl-diskless-sync-delay": "5"}
			},
			server: header + "port 6379\n" + base + "appendonly yes\nrepl-diskless-sync-delay \"5\"\n",
			live:   "repl-diskless-sync-delay 5\n",
		},
		{
			name: "live keys match in any case",
			spec: func(s *valkeyv1.ValkeyClusterSpec) {
				s.Config = map[string]valkeyv1.ConfigValue{"MaxMemory": "1gb"}
			},
			server: header + "port 6379\n" + base + "appendonly yes\nrepl-diskless-sync-delay 1\nMaxMemory \"1gb\"\n",
			live:   "MaxMemory 1gb\n",
		},
		{
			name: "operator-owned keys are dropped even past admission",
			spec: func(s *valkeyv1.ValkeyClusterSpec) {
				s.Config = map[string]valkeyv1.ConfigValue{"Port": "7000", "requirepass": "x", "include": "/etc/passwd", "tls-port": "1", "maxmemory": "1mb"}
			},
			server: header + "port 6379\n" + base + "appendonly yes\nrepl-diskless-sync-delay 1\nmaxmemory \"1mb\"\n",
			live:   "maxmemory 1mb\n",
		},
		{
			name: "values are quoted and escaped: no second directive",
			spec: func(s *valkeyv1.ValkeyClusterSpec) {
				s.Config = map[string]valkeyv1.ConfigValue{
					"ignore-warnings":        "a\"b\\c\nrequirepass x\r\x00é",
					"notify-keyspace-events": "",
				}
			},
			server: header + "port 6379\n" + base + "appendonly yes\nrepl-diskless-sync-delay 1\n" +
				"ignore-warnings \"a\\\"b\\\\c\\x0arequirepass x\\x0d\\x00\\xc3\\xa9\"\n" +
				"notify-keyspace-events \"\"\n",
			live: "notify-keyspace-events \n",
		},
		{
			name: "a live key whose value has a line break restarts instead",
			spec: func(s *valkeyv1.ValkeyClusterSpec) {
				s.Config = map[string]valkeyv1.ConfigValue{"maxmemory": "1mb\nport 1"}
			},
			server: header + "port 6379\n" + base + "appendonly yes\nrepl-diskless-sync-delay 1\nmaxmemory \"1mb\\x0aport 1\"\n",
		},
		{
			name: "a key that bypassed admission is quoted",
			spec: func(s *valkeyv1.ValkeyClusterSpec) {
				s.Config = map[string]valkeyv1.ConfigValue{"a b": "1"}
			},
			server: header + "port 6379\n" + base + "appendonly yes\nrepl-diskless-sync-delay 1\n\"a b\" \"1\"\n",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := RenderConfig(clusterWith(tc.spec))
			if got.Server != tc.server {
				t.Errorf("valkey.conf:\n%s\nwant:\n%s", got.Server, tc.server)
			}
			if got.Live != tc.live {
				t.Errorf("live.conf = %q, want %q", got.Live, tc.live)
			}
			if got.RestartHash == "" || len(got.RestartHash) != 64 || len(got.LiveHash) != 64 {
				t.Errorf("hashes %q / %q, want sha256 hex", got.RestartHash, got.LiveHash)
			}
			// Every line of valkey.conf is one directive: a line break in a value never
			// reaches the file.
			for l := range strings.SplitSeq(strings.TrimSuffix(got.Server, "\n"), "\n") {
				if strings.HasPrefix(l, "requirepass") || strings.HasPrefix(l, "port 1") {
					t.Errorf("injected directive %q", l)
				}
			}
			again := RenderConfig(clusterWith(tc.spec))
			if again != got {
				t.Error("rendering twice differs")
			}
		})
	}
}

// TestRenderConfigHashes: a live key changes only the live hash, anything else only the
// restart hash, so the controller rolls pods exactly when a restart is needed.
func TestRenderConfigHashes(t *testing.T) {
	with := func(cfg map[string]valkeyv1.ConfigValue, mutate ...func(*valkeyv1.ValkeyClusterSpec)) ServerConfig {
		return RenderConfig(clusterWith(func(s *valkeyv1.ValkeyClusterSpec) {
			s.Config = cfg
			for _, m := range mutate {
				m(s)
			}
		}))
	}
	ref := with(map[string]valkeyv1.ConfigValue{"maxmemory": "1gb", "databases": "4"})
	cases := []struct {
		name                 string
		got                  ServerConfig
		restartSame, liveSam bool
	}{
		{"same spec", with(map[string]valkeyv1.ConfigValue{"databases": "4", "maxmemory": "1gb"}), true, true},
		{"live value changed", with(map[string]valkeyv1.ConfigValue{"maxmemory": "2gb", "databases": "4"}), true, false},
		{"live key added", with(map[string]valkeyv1.ConfigValue{"maxmemory": "1gb", "databases": "4", "hz": "20"}), true, false},
		{"live key removed", with(map[string]valkeyv1.ConfigValue{"databases": "4"}), true, false},
		{"restart value changed", with(map[string]valkeyv1.ConfigValue{"maxmemory": "1gb", "databases": "8"}), false, true},
		{"TLS turned on", with(map[string]valkeyv1.ConfigValue{"maxmemory": "1gb", "databases": "4"},
			func(s *valkeyv1.ValkeyClusterSpec) { s.TLS = &valkeyv1.TLSConfig{SelfSigned: true} }), false, true},
		{"unrelated spec fields", with(map[string]valkeyv1.ConfigValue{"maxmemory": "1gb", "databases": "4"},
			func(s *valkeyv1.ValkeyClusterSpec) { s.Shards, s.Replicas, s.Image = 9, 2, "x" }), true, true},
	}
	for _, tc := range cases {
		if (tc.got.RestartHash == ref.RestartHash) != tc.restartSame {
			t.Errorf("%s: restart hash same = %v, want %v", tc.name, !tc.restartSame, tc.restartSame)
		}
		if (tc.got.LiveHash == ref.LiveHash) != tc.liveSam {
			t.Errorf("%s: live hash same = %v, want %v", tc.name, !tc.liveSam, tc.liveSam)
		}
	}
}

func TestParseLiveConfig(t *testing.T) {
	live := RenderConfig(clusterWith(func(s *valkeyv1.ValkeyClusterSpec) {
		s.Config = map[string]valkeyv1.ConfigValue{"save": "3600 1 300 100", "maxmemory": "1gb", "notify-keyspace-events": "", "databases": "2"}
	})).Live
	got := ParseLiveConfig(live)
	want := []LiveSetting{{"maxmemory", "1gb"}, {"notify-keyspace-events", ""}, {"save", "3600 1 300 100"}}
	if len(got) != len(want) {
		t.Fatalf("ParseLiveConfig(%q) = %v, want %v", live, got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("setting %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	if got := ParseLiveConfig(""); len(got) != 0 {
		t.Errorf("empty live.conf parsed to %v", got)
	}
}

func TestIsLiveConfigKey(t *testing.T) {
	for key, want := range map[string]bool{
		"maxmemory": true, "MAXMEMORY-POLICY": true, "cluster-node-timeout": true, "slave-priority": true,
		"appendonly": false, "databases": false, "cluster-manual-failover-timeout": false, "port": false,
		"dir": false, "replica-read-only": false, "": false,
	} {
		if got := IsLiveConfigKey(key); got != want {
			t.Errorf("IsLiveConfigKey(%q) = %v, want %v", key, got, want)
		}
	}
	for key := range LiveConfigKeys {
		if key != strings.ToLower(key) || operatorConfigKeys[key] {
			t.Errorf("live key %q must be lower case and not operator-owned", key)
		}
	}
}

func TestGracePeriod(t *testing.T) {
	cases := []struct {
		name      string
		grace     *int64
		config    map[string]valkeyv1.ConfigValue
		warn      bool
		minimum   int64
		effective int64
		message   string
	}{
		{name: "unset never warns", minimum: 15, effective: 30},
		{name: "unset with a long failover timeout derives more than 30", config: map[string]valkeyv1.ConfigValue{"cluster-manual-failover-timeout": "60000"},
			minimum: 70, effective: 70},
		{name: "exactly the minimum", grace: ptr.To[int64](15), minimum: 15, effective: 15},
		{name: "one second short", grace: ptr.To[int64](14), warn: true, minimum: 15, effective: 14,
			message: "terminationGracePeriodSeconds is 14, below the 15 seconds a primary needs to hand its shard to a replica on shutdown (cluster-manual-failover-timeout plus 10 s); it is applied, but a primary may be killed before its failover completes: raise terminationGracePeriodSeconds to at least 15 or leave it unset"},
		{name: "timeout from spec.config, rounded up", grace: ptr.To[int64](30), config: map[string]valkeyv1.ConfigValue{"Cluster-Manual-Failover-Timeout": "20500"},
			warn: true, minimum: 31, effective: 30},
		{name: "unparsable timeout counts as the default", grace: ptr.To[int64](15), config: map[string]valkeyv1.ConfigValue{"cluster-manual-failover-timeout": "soon"},
			minimum: 15, effective: 15},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := clusterWith(func(s *valkeyv1.ValkeyClusterSpec) { s.TerminationGracePeriodSeconds, s.Config = tc.grace, tc.config })
			if got := MinGracePeriodSeconds(c); got != tc.minimum {
				t.Errorf("MinGracePeriodSeconds = %d, want %d", got, tc.minimum)
			}
			if got := GracePeriodSeconds(c); got != tc.effective {
				t.Errorf("GracePeriodSeconds = %d, want %d", got, tc.effective)
			}
			warn, msg := GracePeriodWarning(c)
			if warn != tc.warn {
				t.Fatalf("warn = %v (%q), want %v", warn, msg, tc.warn)
			}
			if tc.message != "" && msg != tc.message {
				t.Errorf("message = %q\nwant      %q", msg, tc.message)
			}
			if !warn && msg != "" {
				t.Errorf("message without a warning: %q", msg)
			}
		})
	}
}
