package memgraph

import (
	"fmt"
	"strconv"
	"strings"
)

// Roles and health values as SHOW INSTANCES spells them.
const (
	RoleLeader   = "leader"
	RoleFollower = "follower"
	RoleMain     = "main"
	RoleReplica  = "replica"
	// RoleUnknown is what Memgraph 3.12 shows for a data instance it cannot reach.
	RoleUnknown = "unknown"

	HealthUp   = "up"
	HealthDown = "down"
)

// coordinatorPrefix is how Memgraph names a coordinator in SHOW INSTANCES.
const coordinatorPrefix = "coordinator_"

// Instance is one row of SHOW INSTANCES.
type Instance struct {
	Name              string
	BoltServer        string
	CoordinatorServer string
	ManagementServer  string
	Health            string
	Role              string
	LastResponseMS    int64
}

// IsCoordinator says whether the row is a coordinator (its role is leader or follower,
// or it carries a coordinator server).
func (i Instance) IsCoordinator() bool {
	return i.Role == RoleLeader || i.Role == RoleFollower || i.CoordinatorServer != "" ||
		(strings.HasPrefix(i.Name, coordinatorPrefix) && i.Role != RoleMain && i.Role != RoleReplica)
}

// Up says whether the coordinators' health checks currently reach the instance.
func (i Instance) Up() bool { return i.Health == HealthUp }

// CoordinatorName is the name Memgraph gives coordinator id in SHOW INSTANCES.
func CoordinatorName(id int) string { return coordinatorPrefix + strconv.Itoa(id) }

// CoordinatorID parses a coordinator's name back into its id.
func CoordinatorID(name string) (int, bool) {
	rest, ok := strings.CutPrefix(name, coordinatorPrefix)
	if !ok {
		return 0, false
	}
	id, err := strconv.Atoi(rest)
	if err != nil || id < 0 || strconv.Itoa(id) != rest {
		return 0, false
	}
	return id, true
}

// LeaderOf returns the row a SHOW INSTANCES answer names as Raft leader, if any. A
// coordinator that lost its leader (no quorum, stepped down, removed) names none.
func LeaderOf(rows []Instance) (Instance, bool) {
	for _, r := range rows {
		if r.Role == RoleLeader {
			return r, true
		}
	}
	return Instance{}, false
}

// MainOf returns the data instance a SHOW INSTANCES answer shows as MAIN, if any.
func MainOf(rows []Instance) (Instance, bool) {
	for _, r := range rows {
		if r.Role == RoleMain && !r.IsCoordinator() {
			return r, true
		}
	}
	return Instance{}, false
}

// Lag is one row of SHOW REPLICATION LAG: how far an instance is behind the MAIN, per
// database.
type Lag struct {
	Instance  string
	Databases map[string]DatabaseLag
}

// DatabaseLag is one database's entry of a Lag row's data_info.
type DatabaseLag struct {
	Committed int64 // num_committed_txns
	Behind    int64 // num_txns_behind_main
}

// CaughtUp says whether the instance has every transaction the MAIN committed, in every
// database it reports. A row without databases proves nothing.
func (l Lag) CaughtUp() bool {
	if len(l.Databases) == 0 {
		return false
	}
	for _, d := range l.Databases {
		if d.Behind != 0 {
			return false
		}
	}
	return true
}

func (l Lag) String() string {
	return fmt.Sprintf("%s%v", l.Instance, l.Databases)
}

// Replica is one row of SHOW REPLICAS on the MAIN: a replica's registered name, its
// mode (ModeSync, ModeAsync or ModeStrictSync) and, per database, how far it is (the
// data_info column).
type Replica struct {
	Name string
	Mode string
	// Databases is data_info: database name to the replica's state there (nil when the
	// row carries none).
	Databases map[string]ReplicaDatabase
}

// ReplicaDatabase is one database's entry of SHOW REPLICAS' data_info.
type ReplicaDatabase struct {
	// Timestamp is the replica's commit timestamp there (ts), Behind how many
	// transactions it lacks that the MAIN committed (behind), Status the MAIN's view of
	// the replica (ready, replicating, recovery, invalid, diverged).
	Timestamp int64
	Behind    int64
	Status    string
}

// ReplicaReady is the data_info status of a replica that holds every transaction sent.
const ReplicaReady = "ready"

// CaughtUp says whether the MAIN sees the replica ready and no transaction behind in
// every database it lists. A row without databases proves nothing.
func (r Replica) CaughtUp() bool {
	if len(r.Databases) == 0 {
		return false
	}
	for _, d := range r.Databases {
		if d.Status != ReplicaReady || d.Behind != 0 {
			return false
		}
	}
	return true
}

// ModeConflicts says whether replicas of modes a and b cannot be in one cluster:
// Memgraph refuses SYNC together with STRICT_SYNC.
func ModeConflicts(a, b string) bool {
	return (a == ModeSync && b == ModeStrictSync) || (a == ModeStrictSync && b == ModeSync)
}
