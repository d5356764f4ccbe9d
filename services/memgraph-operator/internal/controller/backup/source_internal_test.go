package backup

import (
	"reflect"
	"testing"

	memgraphv1 "github.com/opsuite/suite/api/memgraph/v1alpha1"
	"github.com/opsuite/suite/services/memgraph-operator/internal/memgraph"
	"github.com/opsuite/suite/services/memgraph-operator/internal/snapshot"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestSources: the replicas the MAIN sees ready and 0 behind in every database, the most
// advanced first then by name, and the MAIN last; a replica behind, recovering, without
// data_info or of another cluster is never a source; with none caught up, the MAIN only.
func TestSources(t *testing.T) {
	c := &memgraphv1.MemgraphCluster{ObjectMeta: metav1.ObjectMeta{Name: "g"}}
	db := func(ts, behind int64, status string) map[string]memgraph.ReplicaDatabase {
		return map[string]memgraph.ReplicaDatabase{"memgraph": {Timestamp: ts, Behind: behind, Status: status}}
	}
	rep := func(name string, d map[string]memgraph.ReplicaDatabase) memgraph.Replica {
		return memgraph.Replica{Name: name, Mode: memgraph.ModeSync, Databases: d}
	}
	main := source{Instance: "g_data_0", Ordinal: 0, Role: memgraphv1.BackupRoleMain}
	for name, tc := range map[string]struct {
		replicas []memgraph.Replica
		want     []source
	}{
		"no replicas": {want: []source{main}},
		"caught up, most advanced first then by name": {
			replicas: []memgraph.Replica{rep("g_data_3", db(40, 0, "ready")), rep("g_data_1", db(41, 0, "ready")), rep("g_data_2", db(41, 0, "ready"))},
			want: []source{{Instance: "g_data_1", Ordinal: 1, Role: memgraphv1.BackupRoleReplica, Timestamp: 41},
				{Instance: "g_data_2", Ordinal: 2, Role: memgraphv1.BackupRoleReplica, Timestamp: 41},
				{Instance: "g_data_3", Ordinal: 3, Role: memgraphv1.BackupRoleReplica, Timestamp: 40}, main},
		},
		"none caught up": {
			replicas: []memgraph.Replica{rep("g_data_1", db(40, 1, "ready")), rep("g_data_2", db(41, 0, "recovery")), rep("g_data_3", nil),
				rep("g_data_4", db(41, 0, "diverged"))},
			want: []source{main},
		},
		"another cluster's name, the MAIN itself": {
			replicas: []memgraph.Replica{rep("other_data_1", db(41, 0, "ready")), rep("g_data_0", db(41, 0, "ready"))},
			want:     []source{main},
		},
		"behind in another database": {
			replicas: []memgraph.Replica{rep("g_data_1", map[string]memgraph.ReplicaDatabase{"memgraph": {Timestamp: 5, Status: "ready"}, "t": {Behind: 2, Status: "ready"}})},
			want:     []source{main},
		},
	} {
		if got := sources(c, "g_data_0", tc.replicas); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %+v, want %+v", name, got, tc.want)
		}
	}
	if got := sources(c, "", nil); len(got) != 0 {
		t.Errorf("without a MAIN: %+v", got)
	}
}

// TestWALToStore: the WAL files that hold commits after the snapshot, in the order they
// were written, up to the first gap; files before the snapshot, without a whole
// transaction or outside wal/ are left out; files known by name only are stored when
// their range ends after the snapshot or is not known.
func TestWALToStore(t *testing.T) {
	sim := func(name string, prev, to uint64) snapshot.Info {
		return snapshot.Info{Name: "wal/" + name, Format: snapshot.FormatSim, Prev: prev, Timestamp: to, Known: true}
	}
	named := func(name string, prev, to uint64, known bool) snapshot.Info {
		return snapshot.Info{Name: "wal/" + name, Prev: prev, Timestamp: to, Known: known}
	}
	names := func(in []snapshot.Info) []string {
		var out []string
		for _, i := range in {
			out = append(out, i.Name)
		}
		return out
	}
	for name, tc := range map[string]struct {
		snap  uint64
		infos []snapshot.Info
		want  []string
		point uint64
	}{
		"none": {snap: 10, point: 10},
		"in order": {snap: 10, infos: []snapshot.Info{sim("3_current", 14, 15), sim("1_from_1_to_10", 0, 10), sim("2_from_11_to_14", 10, 14),
			{Name: "snapshots/x_timestamp_10", Format: snapshot.FormatSim, Timestamp: 10, Known: true}},
			want: []string{"wal/2_from_11_to_14", "wal/3_current"}, point: 15},
		"spanning the snapshot":  {snap: 10, infos: []snapshot.Info{sim("1_current", 7, 12)}, want: []string{"wal/1_current"}, point: 12},
		"gap after the snapshot": {snap: 10, infos: []snapshot.Info{sim("1_current", 11, 12)}, point: 10},
		"gap between": {snap: 10, infos: []snapshot.Info{sim("1_from_11_to_12", 10, 12), sim("2_from_14_to_15", 13, 15), sim("3_current", 15, 16)},
			want: []string{"wal/1_from_11_to_12"}, point: 12},
		"no whole transaction": {snap: 10, infos: []snapshot.Info{{Name: "wal/1_current", Format: snapshot.FormatSim}, sim("2_current", 10, 11)},
			want: []string{"wal/2_current"}, point: 11},
		"names only": {snap: 10, infos: []snapshot.Info{named("1_from_1_to_9", 0, 9, true), named("2_from_10_to_20", 9, 20, true), named("3_current", 0, 0, false)},
			want: []string{"wal/2_from_10_to_20", "wal/3_current"}, point: 10},
	} {
		got, point := walToStore(tc.snap, tc.infos)
		if !reflect.DeepEqual(names(got), tc.want) || point != tc.point {
			t.Errorf("%s: %v up to %d, want %v up to %d", name, names(got), point, tc.want, tc.point)
		}
	}
}
