package resources

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"path"
	"slices"
	"strconv"
	"strings"

	valkeyv1 "github.com/opsuite/suite/api/valkey/v1alpha1"
)

// LiveConfigKeys are the spec.config keys the node controller applies with CONFIG SET on
// the running server (listed in live.conf); every other key is applied by rolling the
// pods (it changes the restart hash). A key is here only when it is MODIFIABLE in both
// Redis 7.0 (what the local cluster runs) and Valkey 8 (config.c), takes effect at once,
// and setting it node by node, in any order, is harmless to a running cluster. The
// aliases (slave-*, *-ziplist-*, lua-time-limit) are the same settings under their old
// names. A test sets every key that Redis 7.0 knows on a real redis-server 7.0.
//
// Left out on purpose, so they roll the pods instead:
//   - appendonly: CONFIG SET appendonly yes starts an AOF rewrite (a fork) on every node
//     at once; the rolling update switches one node at a time, after a failover.
//   - cluster-manual-failover-timeout: only Valkey 8.1+ knows it; a restart is always safe.
//   - dir, dbfilename, appendfilename, appenddirname: where the data is; changing it live
//     makes the next restart look for the data elsewhere.
//   - replica-read-only, replica-serve-stale-data, acl-pubsub-default: they change what
//     clients or users may do, so every node should switch at a known point.
//   - set-max-listpack-*: Redis 7.2+ only.
//   - the keys admission refuses (ports, bind, cluster-enabled, cluster-announce-*, TLS
//     files, ACL and replication credentials): the operator owns them.
var LiveConfigKeys = map[string]bool{
	// Memory and eviction: the reason most users touch config at all.
	"maxmemory":                   true,
	"maxmemory-policy":            true,
	"maxmemory-samples":           true,
	"maxmemory-eviction-tenacity": true,
	"maxmemory-clients":           true,
	"lfu-log-factor":              true,
	"lfu-decay-time":              true,
	"active-expire-effort":        true,

	// Clients and connections.
	"maxclients":                 true,
	"timeout":                    true,
	"tcp-keepalive":              true,
	"client-output-buffer-limit": true,
	"client-query-buffer-limit":  true,
	"proto-max-bulk-len":         true,
	"tracking-table-max-keys":    true,
	"busy-reply-threshold":       true,
	"lua-time-limit":             true,

	// Observability.
	"slowlog-log-slower-than":           true,
	"slowlog-max-len":                   true,
	"latency-monitor-threshold":         true,
	"latency-tracking":                  true,
	"latency-tracking-info-percentiles": true,
	"notify-keyspace-events":            true,
	"acllog-max-len":                    true,
	"loglevel":                          true,

	// Background work.
	"hz":                            true,
	"dynamic-hz":                    true,
	"activerehashing":               true,
	"activedefrag":                  true,
	"active-defrag-ignore-bytes":    true,
	"active-defrag-threshold-lower": true,
	"active-defrag-threshold-upper": true,
	"active-defrag-cycle-min":       true,
	"active-defrag-cycle-max":       true,
	"active-defrag-max-scan-fields": true,
	"lazyfree-lazy-eviction":        true,
	"lazyfree-lazy-expire":          true,
	"lazyfree-lazy-server-del":      true,
	"lazyfree-lazy-user-del":        true,
	"lazyfree-lazy-user-flush":      true,
	"replica-lazy-flush":            true,
	"slave-lazy-flush":              true,

	// Encodings: only decide how new or growing values are stored.
	"hash-max-listpack-entries": true,
	"hash-max-listpack-value":   true,
	"hash-max-ziplist-entries":  true,
	"hash-max-ziplist-value":    true,
	"zset-max-listpack-entries": true,
	"zset-max-listpack-value":   true,
	"zset-max-ziplist-entries":  true,
	"zset-max-ziplist-value":    true,
	"list-max-listpack-size":    true,
	"list-max-ziplist-size":     true,
	"list-compress-depth":       true,
	"set-max-intset-entries":    true,
	"stream-node-max-bytes":     true,
	"stream-node-max-entries":   true,
	"hll-sparse-max-bytes":      true,

	// Persistence tuning (not whether AOF is on, see above).
	"save":                          true,
	"appendfsync":                   true,
	"no-appendfsync-on-rewrite":     true,
	"auto-aof-rewrite-percentage":   true,
	"auto-aof-rewrite-min-size":     true,
	"aof-rewrite-incremental-fsync": true,
	"rdb-save-incremental-fsync":    true,
	"aof-use-rdb-preamble":          true,
	"aof-timestamp-enabled":         true,
	"rdbcompression":                true,
	"stop-writes-on-bgsave-error":   true,
	"shutdown-timeout":              true,

	// Replication: each node reads these when it next needs them.
	"repl-backlog-size":               true,
	"repl-backlog-ttl":                true,
	"repl-timeout":                    true,
	"repl-ping-replica-period":        true,
	"repl-ping-slave-period":          true,
	"repl-diskless-sync":              true,
	"repl-diskless-sync-delay":        true,
	"repl-diskless-sync-max-replicas": true,
	"repl-disable-tcp-nodelay":        true,
	"min-replicas-to-write":           true,
	"min-replicas-max-lag":            true,
	"min-slaves-to-write":             true,
	"min-slaves-max-lag":              true,
	"replica-priority":                true,
	"slave-priority":                  true,

	// Cluster behaviour. Each node uses its own value, so a node already switched and one
	// not yet are both valid members while the change goes round.
	"cluster-node-timeout":                true,
	"cluster-replica-validity-factor":     true,
	"cluster-slave-validity-factor":       true,
	"cluster-allow-reads-when-down":       true,
	"cluster-allow-pubsubshard-when-down": true,
	"cluster-require-full-coverage":       true,
	"cluster-migration-barrier":           true,
	"cluster-allow-replica-migration":     true,
	"cluster-replica-no-failover":         true,
	"cluster-slave-no-failover":           true,
	"cluster-link-sendbuf-limit":          true,
}

// IsLiveConfigKey reports whether key (any case, as the server ignores it) is applied
// live rather than by a restart.
func IsLiveConfigKey(key string) bool { return LiveConfigKeys[strings.ToLower(key)] }

// ServerConfig is what the ConfigMap C-config holds, with the hashes the controllers
// compare.
type ServerConfig struct {
	// Server is valkey.conf: the whole config the pod starts with.
	Server string
	// Live is live.conf: the live keys of spec.config, one "key value" line each (the
	// value as CONFIG SET takes it, unquoted), sorted; empty when there are none. A live
	// key removed from spec.config keeps its running value until the pod next restarts.
	Live string
	// RestartHash covers everything in valkey.conf but the live keys: a change rolls the
	// pods (annotation valkey.io/restart-hash).
	RestartHash string
	// LiveHash covers live.conf.
	LiveHash string
}

// serverPaths are where the pod mounts things; tests point them at temp dirs.
type serverPaths struct {
	data, acl, tls string
}

var podPaths = serverPaths{data: DataDir, acl: ACLDir, tls: TLSDir}

// operatorConfigKeys are the directives the operator writes; admission refuses them in
// spec.config. The renderer drops them too (lower-cased), because the server keeps the
// last of repeated directives and a stored object may predate a rule.
var operatorConfigKeys = map[string]bool{
	"port": true, "tls-port": true, "bind": true, "protected-mode": true,
	"cluster-enabled": true, "cluster-config-file": true, "dir": true, "aclfile": true,
	"include": true, "tls-cluster": true, "tls-replication": true, "tls-cert-file": true,
	"tls-key-file": true, "tls-ca-cert-file": true, "tls-ca-cert-dir": true,
	"tls-client-cert-file": true, "tls-client-key-file": true, "cluster-port": true,
	"daemonize": true, "replicaof": true, "slaveof": true, "rename-command": true,
	"cluster-announce-ip": true, "cluster-announce-port": true,
	"cluster-announce-bus-port": true, "cluster-announce-tls-port": true,
	"cluster-announce-hostname": true, "cluster-preferred-endpoint-type": true,
	"requirepass": true, "masterauth": true, "masteruser": true, "primaryauth": true,
	"primaryuser": true,
}

// RenderConfig renders valkey.conf and live.conf of cluster c. Deterministic: the same
// spec gives the same bytes and hashes.
func RenderConfig(c *valkeyv1.ValkeyCluster) ServerConfig {
	return renderConfig(c, podPaths)
}

func renderConfig(c *valkeyv1.ValkeyCluster, p serverPaths) ServerConfig {
	var restart, live strings.Builder
	restart.WriteString("# Rendered by valkey-operator from the ValkeyCluster spec; edits are overwritten.\n")
	line := func(b *strings.Builder, key, value string) {
		b.WriteString(key)
		b.WriteByte(' ')
		b.WriteString(value)
		b.WriteByte('\n')
	}
	port := strconv.Itoa(ClientPort)
	if tls := c.Spec.EffectiveTLS(); tls.Enabled {
		// TLS only: the plain port is closed, and peers talk TLS on the bus and for
		// replication. Clients may present a certificate but need not: they log in with
		// ACL passwords.
		line(&restart, "port", "0")
		line(&restart, "tls-port", port)
		line(&restart, "tls-cluster", "yes")
		line(&restart, "tls-replication", "yes")
		line(&restart, "tls-cert-file", quoteConfig(path.Join(p.tls, TLSKeyCert)))
		line(&restart, "tls-key-file", quoteConfig(path.Join(p.tls, TLSKeyKey)))
		line(&restart, "tls-ca-cert-file", quoteConfig(path.Join(p.tls, TLSKeyCA)))
		line(&restart, "tls-auth-clients", "optional")
	} else {
		line(&restart, "port", port)
	}
	// Every address, IPv6 optional ("-"); protected mode off because access is guarded by
	// ACL users, not by the bind address.
	line(&restart, "bind", "* -::*")
	line(&restart, "protected-mode", "no")
	line(&restart, "cluster-enabled", "yes")
	line(&restart, "cluster-config-file", quoteConfig(path.Join(p.data, "nodes.conf")))
	line(&restart, "dir", quoteConfig(p.data))
	line(&restart, "aclfile", quoteConfig(path.Join(p.acl, ACLKeyUsers)))
	line(&restart, "include", quoteConfig(path.Join(p.acl, ACLKeyAuth)))
	if c.Spec.PreferredEndpointType() == valkeyv1.PreferredEndpointTypeHostname {
		// Clients are redirected (MOVED/ASK, CLUSTER SLOTS/SHARDS) to each node's DNS name;
		// the pod announces its own with --cluster-announce-hostname.
		line(&restart, "cluster-preferred-endpoint-type", "hostname")
	}

	user := map[string]string{}
	for k, v := range c.Spec.Config {
		if operatorConfigKeys[strings.ToLower(k)] {
			continue
		}
		user[k] = string(v)
	}
	if !hasKeyFold(user, "appendonly") {
		// Durable by default: a restarted primary reloads its writes from the AOF.
		line(&restart, "appendonly", "yes")
	}
	if !hasKeyFold(user, "repl-diskless-sync-delay") {
		// A new replica holds no copy of its shard until its first sync completes; the
		// server's 5 s wait for more replicas to share one transfer is 5 s more without a
		// copy (and the shard not ready) for the one or two replicas a shard has here.
		line(&restart, "repl-diskless-sync-delay", "1")
	}
	server := restart.String()
	for _, k := range slices.Sorted(maps.Keys(user)) {
		l := quoteKey(k) + " " + quoteConfig(user[k]) + "\n"
		server += l
		if IsLiveConfigKey(k) && !strings.ContainsAny(user[k], "\r\n") {
			// live.conf carries the raw value, as CONFIG SET takes it; admission keeps
			// values on one line (one that is not restarts the pods instead).
			line(&live, k, user[k])
			continue
		}
		restart.WriteString(l)
	}
	return ServerConfig{
		Server:      server,
		Live:        live.String(),
		RestartHash: hashOf(restart.String()),
		LiveHash:    hashOf(live.String()),
	}
}

// LiveSetting is one line of live.conf.
type LiveSetting struct{ Key, Value string }

// ParseLiveConfig reads live.conf back into the CONFIG SET arguments, in order: the key
// is the first word, the value the rest of the line (it may hold spaces, as in
// "save 3600 1 300 100").
func ParseLiveConfig(live string) []LiveSetting {
	var out []LiveSetting
	for l := range strings.SplitSeq(live, "\n") {
		if l == "" {
			continue
		}
		k, v, _ := strings.Cut(l, " ")
		out = append(out, LiveSetting{Key: k, Value: v})
	}
	return out
}

func hasKeyFold(m map[string]string, key string) bool {
	for k := range m {
		if strings.EqualFold(k, key) {
			return true
		}
	}
	return false
}

// quoteConfig writes value as one double-quoted argument of the server's config parser
// (sdssplitargs): backslash, quote and every control or non-ASCII byte are escaped, so no
// value can end its line and start a second directive. Multi-word values ("3600 1 300
// 100") stay one argument; the server splits those of multi-argument directives itself.
func quoteConfig(value string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(value); i++ {
		switch ch := value[i]; {
		case ch == '\\' || ch == '"':
			b.WriteByte('\\')
			b.WriteByte(ch)
		case ch < 0x20 || ch >= 0x7f:
			fmt.Fprintf(&b, "\\x%02x", ch)
		default:
			b.WriteByte(ch)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// quoteKey leaves a directive name admission accepts as it is and quotes anything else,
// so even a key that bypassed admission stays one word.
func quoteKey(key string) string {
	if key == "" {
		return quoteConfig(key)
	}
	for i := 0; i < len(key); i++ {
		if !isKeyChar(key[i]) {
			return quoteConfig(key)
		}
	}
	return key
}

func isKeyChar(ch byte) bool {
	return ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9' || ch == '-' || ch == '_' || ch == '.'
}

func hashOf(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// Graceful shutdown: a primary hands its shard to a replica on SIGTERM and waits up to
// cluster-manual-failover-timeout for it; the pod's grace period has to outlast that.
const (
	// DefaultManualFailoverTimeoutMillis is the server's cluster-manual-failover-timeout
	// when spec.config does not set it.
	DefaultManualFailoverTimeoutMillis = 5000
	// GracePeriodBufferSeconds is the headroom for the shutdown around the failover
	// (saving, closing clients).
	GracePeriodBufferSeconds = 10
	// DefaultGracePeriodSeconds is Kubernetes' own default.
	DefaultGracePeriodSeconds = 30
)

// MinGracePeriodSeconds is the shortest terminationGracePeriodSeconds that lets the
// SIGTERM failover finish: cluster-manual-failover-timeout (spec.config, else the
// server's default; an unparsable value counts as the default) rounded up to seconds,
// plus GracePeriodBufferSeconds.
func MinGracePeriodSeconds(c *valkeyv1.ValkeyCluster) int64 {
	ms := int64(DefaultManualFailoverTimeoutMillis)
	for k, v := range c.Spec.Config {
		if strings.EqualFold(k, "cluster-manual-failover-timeout") {
			if n, err := strconv.ParseInt(strings.TrimSpace(string(v)), 10, 64); err == nil && n > 0 {
				ms = n
			}
		}
	}
	return (ms+999)/1000 + GracePeriodBufferSeconds
}

// GracePeriodSeconds is the grace period the pods get: the spec's value when set (even a
// short one, which GracePeriodWarning reports), otherwise the larger of Kubernetes'
// default and MinGracePeriodSeconds.
func GracePeriodSeconds(c *valkeyv1.ValkeyCluster) int64 {
	if c.Spec.TerminationGracePeriodSeconds != nil {
		return *c.Spec.TerminationGracePeriodSeconds
	}
	return max(int64(DefaultGracePeriodSeconds), MinGracePeriodSeconds(c))
}

// GracePeriodWarning says whether spec.terminationGracePeriodSeconds is too short for the
// failover on shutdown (ConfigurationWarning, reason GracePeriodTooShort), and what to
// change. An unset value is never too short: the operator derives one.
func GracePeriodWarning(c *valkeyv1.ValkeyCluster) (warn bool, message string) {
	g := c.Spec.TerminationGracePeriodSeconds
	if g == nil {
		return false, ""
	}
	minimum := MinGracePeriodSeconds(c)
	if *g >= minimum {
		return false, ""
	}
	return true, fmt.Sprintf("terminationGracePeriodSeconds is %d, below the %d seconds a primary needs to hand its shard to a replica on shutdown (cluster-manual-failover-timeout plus %d s); it is applied, but a primary may be killed before its failover completes: raise terminationGracePeriodSeconds to at least %d or leave it unset",
		*g, minimum, GracePeriodBufferSeconds, minimum)
}
