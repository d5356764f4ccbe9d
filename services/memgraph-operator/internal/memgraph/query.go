package memgraph

import (
	"strconv"
	"strings"
)

// Read-only queries the operator runs.
const (
	ShowInstancesQuery       = "SHOW INSTANCES"
	ShowInstanceQuery        = "SHOW INSTANCE"
	ShowReplicationLagQuery  = "SHOW REPLICATION LAG"
	ShowReplicationRoleQuery = "SHOW REPLICATION ROLE"
	// ShowCoordinatorSettingsQuery lists the coordinators' settings (setting_name,
	// setting_value), both strings.
	ShowCoordinatorSettingsQuery = "SHOW COORDINATOR SETTINGS"
	// ShowReplicasQuery on the MAIN lists its replicas with their sync_mode.
	ShowReplicasQuery = "SHOW REPLICAS"
	// YieldLeadershipQuery asks the leader to step down; the election names the successor.
	YieldLeadershipQuery = "YIELD LEADERSHIP"
	// ReloadBoltTLSQuery makes an instance (either role) read its --bolt-cert-file and
	// --bolt-key-file again, which Memgraph does not do on its own: connections opened
	// afterwards get the renewed certificate; a failed reload keeps the old one.
	ReloadBoltTLSQuery = "RELOAD BOLT_SERVER TLS"
)

// AddCoordinator is ADD COORDINATOR with exactly the three keys Memgraph accepts.
func AddCoordinator(id int, boltServer, coordinatorServer, managementServer string) string {
	return "ADD COORDINATOR " + strconv.Itoa(id) + " WITH CONFIG {" +
		configEntry("bolt_server", boltServer) + ", " +
		configEntry("coordinator_server", coordinatorServer) + ", " +
		configEntry("management_server", managementServer) + "}"
}

// RemoveCoordinator is REMOVE COORDINATOR; Memgraph refuses it for the leader.
func RemoveCoordinator(id int) string {
	return "REMOVE COORDINATOR " + strconv.Itoa(id)
}

// Replication modes as REGISTER INSTANCE spells them (SHOW REPLICAS writes them in
// lower case).
const (
	ModeSync       = "SYNC"
	ModeAsync      = "ASYNC"
	ModeStrictSync = "STRICT_SYNC"
)

// RegisterInstance registers a data instance as a replica of mode (ModeSync, ModeAsync or
// ModeStrictSync; empty is SYNC, Memgraph's default, written without a clause).
func RegisterInstance(name, mode, boltServer, managementServer, replicationServer string) string {
	clause := ""
	switch mode {
	case ModeAsync:
		clause = " AS ASYNC"
	case ModeStrictSync:
		clause = " AS STRICT_SYNC"
	}
	return "REGISTER INSTANCE " + QuoteName(name) + clause + " WITH CONFIG {" +
		configEntry("bolt_server", boltServer) + ", " +
		configEntry("management_server", managementServer) + ", " +
		configEntry("replication_server", replicationServer) + "}"
}

// UpdateInstanceBoltServer is UPDATE CONFIG FOR INSTANCE with the one key Memgraph lets
// change on a registered instance, bolt_server: the address coordinators put in routing
// tables (management and replication addresses stay as registered).
func UpdateInstanceBoltServer(name, boltServer string) string {
	return "UPDATE CONFIG FOR INSTANCE " + QuoteName(name) + " {" + configEntry("bolt_server", boltServer) + "}"
}

// UpdateCoordinatorBoltServer is UPDATE CONFIG FOR COORDINATOR: a coordinator's
// bolt_server, which routing tables list as a router.
func UpdateCoordinatorBoltServer(id int, boltServer string) string {
	return "UPDATE CONFIG FOR COORDINATOR " + strconv.Itoa(id) + " {" + configEntry("bolt_server", boltServer) + "}"
}

// SetCoordinatorSetting is SET COORDINATOR SETTING; Memgraph takes name and value as
// string literals.
func SetCoordinatorSetting(name, value string) string {
	return "SET COORDINATOR SETTING " + QuoteString(name) + " TO " + QuoteString(value)
}

// UnregisterInstance is UNREGISTER INSTANCE; Memgraph refuses it for an alive MAIN.
func UnregisterInstance(name string) string { return "UNREGISTER INSTANCE " + QuoteName(name) }

// SetInstanceToMain is SET INSTANCE ... TO MAIN; Memgraph refuses it while a MAIN exists.
func SetInstanceToMain(name string) string {
	return "SET INSTANCE " + QuoteName(name) + " TO MAIN"
}

// DemoteInstance is DEMOTE INSTANCE; it leaves the cluster without a MAIN (no failover).
func DemoteInstance(name string) string { return "DEMOTE INSTANCE " + QuoteName(name) }

func configEntry(key, value string) string {
	return QuoteString(key) + ": " + QuoteString(value)
}

// QuoteString renders s as a Cypher string literal in double quotes, escaping what would
// end or alter it, so a value can never become query text.
func QuoteString(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '\\':
			b.WriteString(`\\`)
		case '"':
			b.WriteString(`\"`)
		case '\'':
			b.WriteString(`\'`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		default:
			if r < 0x20 {
				b.WriteString(`\u00`)
				b.WriteByte("0123456789abcdef"[r>>4])
				b.WriteByte("0123456789abcdef"[r&0xf])
				continue
			}
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// QuoteName renders an instance name as a Cypher symbolic name: bare when it is a plain
// identifier (what the operator's names always are: pod names with '-' turned into '_'),
// else in backticks with backticks doubled.
func QuoteName(name string) string {
	if IsPlainName(name) {
		return name
	}
	return "`" + strings.ReplaceAll(name, "`", "``") + "`"
}

// IsPlainName says whether name is an unquoted Cypher identifier: a letter or '_', then
// letters, digits or '_' (ASCII only), and not a keyword of the HA commands.
func IsPlainName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c == '_', c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
		case c >= '0' && c <= '9' && i > 0:
		default:
			return false
		}
	}
	_, keyword := haKeywords[strings.ToUpper(name)]
	return !keyword
}

// haKeywords are words of the HA grammar that would not parse as a bare name.
var haKeywords = map[string]struct{}{
	"AS": {}, "ASYNC": {}, "CONFIG": {}, "COORDINATOR": {}, "DEMOTE": {}, "INSTANCE": {},
	"INSTANCES": {}, "MAIN": {}, "REGISTER": {}, "REPLICA": {}, "SET": {}, "SYNC": {},
	"STRICT_SYNC": {}, "TO": {}, "UNREGISTER": {}, "WITH": {},
}
