package backup

import (
	"cmp"
	"slices"

	memgraphv1 "github.com/opsuite/suite/api/memgraph/v1alpha1"
	"github.com/opsuite/suite/services/memgraph-operator/internal/memgraph"
	"github.com/opsuite/suite/services/memgraph-operator/internal/resources"
	"github.com/opsuite/suite/services/memgraph-operator/internal/snapshot"
)

// source is a data instance a backup may take its snapshot on.
type source struct {
	Instance string
	Ordinal  int32
	// Role is memgraphv1.BackupRoleReplica or BackupRoleMain.
	Role string
	// Timestamp is, for a replica, its commit timestamp in the default database as the
	// MAIN saw it caught up: a snapshot taken on it must reach at least that far.
	Timestamp int64
}

// sources orders where a backup's snapshot is tried: every replica the MAIN's SHOW
// REPLICAS shows caught up (ready and no transaction behind in every database), the
// most advanced first and then by name, and the MAIN last. CREATE SNAPSHOT holds a read
// transaction and writes the whole graph to disk, so a replica that holds every commit
// takes that load off the MAIN, which serves the writes; the MAIN is used only when no
// replica is caught up (or none of them could be backed up). Rows naming no data
// instance of the cluster are left out.
func sources(c *memgraphv1.MemgraphCluster, main string, replicas []memgraph.Replica) []source {
	var out []source
	for _, r := range replicas {
		ord, ok := ordinalOf(c, r.Name)
		if !ok || r.Name == main || !r.CaughtUp() {
			continue
		}
		out = append(out, source{Instance: r.Name, Ordinal: ord, Role: memgraphv1.BackupRoleReplica, Timestamp: r.Databases[defaultDatabase].Timestamp})
	}
	slices.SortStableFunc(out, func(a, b source) int {
		if a.Timestamp != b.Timestamp {
			return cmp.Compare(b.Timestamp, a.Timestamp)
		}
		return cmp.Compare(a.Instance, b.Instance)
	})
	if ord, ok := ordinalOf(c, main); ok {
		out = append(out, source{Instance: main, Ordinal: ord, Role: memgraphv1.BackupRoleMain})
	}
	return out
}

// defaultDatabase is Memgraph's database of a data directory's own snapshots/ and wal/.
const defaultDatabase = "memgraph"

// ordinalOf is the pod ordinal of the data instance registered as name.
func ordinalOf(c *memgraphv1.MemgraphCluster, name string) (int32, bool) {
	if name == "" {
		return 0, false
	}
	for i := int32(0); i < memgraphv1.MaxDataInstances; i++ {
		if resources.DataInstanceName(c.Name, i) == name {
			return i, true
		}
	}
	return 0, false
}

// walToStore picks the WAL files a backup stores with a snapshot of commit timestamp
// snap, from what the agent says of each file of wal/: those that hold commits after the
// snapshot, in the order they were written, and the commit timestamp the backup then
// reaches. A file whose content the agent read (Format set) must continue the run of
// commits from the snapshot on; the first one that does not (a gap: files removed, or a
// replica that took a whole graph from its MAIN since) ends the run, and nothing after it
// is stored, since a restore could not replay it. A file known by its name only
// (Memgraph's binary format) is stored when its name's range ends after the snapshot or
// tells none (the file being written), and Memgraph's recovery decides what of it
// applies.
func walToStore(snap uint64, infos []snapshot.Info) ([]snapshot.Info, uint64) {
	infos = slices.Clone(infos)
	slices.SortFunc(infos, func(a, b snapshot.Info) int { return cmp.Compare(a.Name, b.Name) })
	var out []snapshot.Info
	last, chained := snap, false
	for _, in := range infos {
		if !in.IsWAL() {
			continue
		}
		if in.Format == "" {
			if !in.Known || in.Timestamp > snap {
				out = append(out, in)
			}
			continue
		}
		switch {
		case !in.Known || in.Timestamp <= last:
			continue // no whole transaction, or nothing after what is held
		case !chained && in.Prev > last, chained && in.Prev != last:
			return out, last
		}
		out = append(out, in)
		last, chained = in.Timestamp, true
	}
	return out, last
}
