package veltrixsim

import (
	"encoding/binary"
	"hash/fnv"
	"slices"
	"sort"
	"strings"
)

// Member states, as GET /admin/cluster/members reports them.
const (
	StateActive  = "active"
	StateJoining = "joining"
	StateLeaving = "leaving"
)

// Member is one cluster member. Since is the epoch at which it took its state: a joining
// member turns active once every member has moved data for that epoch.
type Member struct {
	ID    string `json:"id"`
	Addr  string `json:"addr"`
	State string `json:"state"`
	Since int64  `json:"since_epoch,omitempty"`
}

// View is one epoch of membership. Every change is made by the leader (the smallest id)
// and raises the epoch; members adopt the highest epoch they hear of.
type View struct {
	Epoch             int64    `json:"epoch"`
	PartitionCount    int      `json:"partition_count"`
	ReplicationFactor int      `json:"replication_factor"`
	Members           []Member `json:"members"`
}

// Clone returns a deep copy.
func (v View) Clone() View {
	v.Members = slices.Clone(v.Members)
	return v
}

// Member returns the member with id.
func (v View) Member(id string) (Member, bool) {
	for _, m := range v.Members {
		if m.ID == id {
			return m, true
		}
	}
	return Member{}, false
}

// Leader is the member that makes membership changes: the smallest id.
func (v View) Leader() (Member, bool) {
	if len(v.Members) == 0 {
		return Member{}, false
	}
	return v.Members[0], true
}

// withMember returns v with m added or replaced, sorted by id.
func (v View) withMember(m Member) View {
	out := v.Clone()
	out.Members = slices.DeleteFunc(out.Members, func(x Member) bool { return x.ID == m.ID })
	out.Members = append(out.Members, m)
	sort.Slice(out.Members, func(i, j int) bool { return out.Members[i].ID < out.Members[j].ID })
	return out
}

// without returns v without the member id.
func (v View) without(id string) View {
	out := v.Clone()
	out.Members = slices.DeleteFunc(out.Members, func(x Member) bool { return x.ID == id })
	return out
}

// Targets are the members that own partitions: every member but the leaving ones.
func (v View) Targets() []Member {
	var out []Member
	for _, m := range v.Members {
		if m.State != StateLeaving {
			out = append(out, m)
		}
	}
	return out
}

// Owners returns the ids owning partition p: the ReplicationFactor targets with the
// highest rendezvous weight, so a membership change moves only the partitions of the
// member that came or went.
func (v View) Owners(p int) []string {
	targets := v.Targets()
	type weighted struct {
		id string
		w  uint64
	}
	ws := make([]weighted, 0, len(targets))
	for _, m := range targets {
		ws = append(ws, weighted{m.ID, rendezvous(p, m.ID)})
	}
	sort.Slice(ws, func(i, j int) bool {
		if ws[i].w != ws[j].w {
			return ws[i].w > ws[j].w
		}
		return ws[i].id < ws[j].id
	})
	n := min(max(v.ReplicationFactor, 1), len(ws))
	out := make([]string, n)
	for i := range n {
		out[i] = ws[i].id
	}
	return out
}

// PartitionCounts returns how many partitions each member owns (replicas included).
func (v View) PartitionCounts() map[string]int {
	out := map[string]int{}
	for _, m := range v.Members {
		out[m.ID] = 0
	}
	for p := range v.PartitionCount {
		for _, id := range v.Owners(p) {
			out[id]++
		}
	}
	return out
}

// Partition returns the partition of key.
func Partition(key string, partitions int) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(key))
	return int(h.Sum32() % uint32(max(partitions, 1)))
}

func rendezvous(p int, id string) uint64 {
	h := fnv.New64a()
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(p))
	_, _ = h.Write(b[:])
	_, _ = h.Write([]byte(id))
	// splitmix64 finaliser: FNV alone weighs ids that differ in one digit too alike.
	x := h.Sum64()
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

func containsID(ids []string, id string) bool { return slices.Contains(ids, id) }

func splitHostPort(addr string) (string, int) {
	i := strings.LastIndex(addr, ":")
	if i < 0 {
		return addr, 0
	}
	port := 0
	for _, c := range addr[i+1:] {
		if c < '0' || c > '9' {
			return addr, 0
		}
		port = port*10 + int(c-'0')
	}
	return strings.Trim(addr[:i], "[]"), port
}
