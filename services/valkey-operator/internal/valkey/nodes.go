// Package valkey is the operator's only door to the data plane: it parses what a member
// says about the cluster (CLUSTER NODES, CLUSTER INFO, INFO) into plain values and talks
// to one member at a time through valkey-go behind the Conn interface: client.go dials and
// sends membership and role commands, observe.go reads topology and replication,
// capabilities.go asks what the server offers, slots.go moves slots and their keys, and
// dataclient.go is the cluster-mode client that checks keys are served.
package valkey

import (
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
	"time"
)

// SlotCount is the fixed number of hash slots in a cluster.
const SlotCount = 16384

// SlotRange is an inclusive range of hash slots.
type SlotRange struct {
	Start, End int
}

// Len is the number of slots in the range.
func (r SlotRange) Len() int { return r.End - r.Start + 1 }

func (r SlotRange) String() string {
	if r.Start == r.End {
		return strconv.Itoa(r.Start)
	}
	return fmt.Sprintf("%d-%d", r.Start, r.End)
}

// Node is one line of CLUSTER NODES: a member as the answering member sees it.
type Node struct {
	ID   string
	Addr string // host:port clients use
	// Hostname is the hostname the node announces (cluster-announce-hostname), as the
	// answering member knows it; "" when none.
	Hostname  string
	BusPort   int
	Myself    bool
	Primary   bool
	Replica   bool
	Fail      bool // FAIL agreed by a majority of primaries
	PFail     bool // suspected by the answering member only
	Handshake bool
	NoAddr    bool
	// PrimaryID is the primary this replica follows, "" for a primary.
	PrimaryID   string
	ConfigEpoch uint64
	// PongRecv is when the answering member last got a pong from this node (zero when
	// never); for a failed node, about when it died.
	PongRecv  time.Time
	Connected bool
	Slots     []SlotRange
	// Migrating and Importing map a slot to the peer node id; CLUSTER NODES lists them only
	// on the answering member's own line.
	Migrating map[int]string
	Importing map[int]string
}

// SlotTotal is how many slots the node serves.
func (n Node) SlotTotal() int {
	t := 0
	for _, r := range n.Slots {
		t += r.Len()
	}
	return t
}

// Healthy is a node the answering member can talk to and nobody suspects.
func (n Node) Healthy() bool {
	return n.Connected && !n.Fail && !n.PFail && !n.Handshake && !n.NoAddr
}

// View is one member's CLUSTER NODES answer, with its CLUSTER INFO and INFO replication
// when the observer read them too.
type View struct {
	// Addr is where the answer came from (the address the operator dialled).
	Addr  string
	Nodes []Node
	// Info is the same member's CLUSTER INFO; zero when it was not read.
	Info ClusterInfo
	// Repl is the same member's INFO replication; zero when it was not read.
	Repl ReplicationState
	// ShardID is the member's CLUSTER MYSHARDID: "" where the server has no shard ids
	// (Redis 7.0) or it was not read.
	ShardID string
}

// ClusterInfo is what the planner needs of CLUSTER INFO.
type ClusterInfo struct {
	// State is cluster_state: "ok" or "fail" ("" when not read). A member in fail answers
	// CLUSTERDOWN to the keys MIGRATE sends it.
	State         string
	CurrentEpoch  uint64
	MyEpoch       uint64
	KnownNodes    int
	Size          int
	SlotsAssigned int
}

// OK reports cluster_state:ok.
func (i ClusterInfo) OK() bool { return i.State == "ok" }

// ClusterInfoFrom reads the fields of a parsed CLUSTER INFO (see ParseInfo); absent or
// malformed numbers read as 0.
func ClusterInfoFrom(kv map[string]string) ClusterInfo {
	u := func(k string) uint64 {
		n, _ := strconv.ParseUint(kv[k], 10, 64)
		return n
	}
	i := func(k string) int {
		n, _ := strconv.Atoi(kv[k])
		return n
	}
	return ClusterInfo{State: kv["cluster_state"], CurrentEpoch: u("cluster_current_epoch"),
		MyEpoch: u("cluster_my_epoch"), KnownNodes: i("cluster_known_nodes"), Size: i("cluster_size"),
		SlotsAssigned: i("cluster_slots_assigned")}
}

// ReplicationState is what failover decisions need of INFO replication.
type ReplicationState struct {
	// Role is "master" or "slave" ("" when not read).
	Role string
	// MasterLinkUp is a replica's master_link_status:up.
	MasterLinkUp bool
	// SyncInProgress is a replica's master_sync_in_progress:1 (a full sync is running).
	SyncInProgress bool
	// Offset is how far this member's replication stream got: slave_repl_offset on a
	// replica, master_repl_offset on a primary.
	Offset int64
	// MasterAddr is where a replica's replication link dials (master_host:master_port),
	// "" on a primary.
	MasterAddr string
}

// Replica reports role:slave.
func (r ReplicationState) Replica() bool { return r.Role == "slave" }

// ParseReplication parses INFO replication.
func ParseReplication(text string) ReplicationState {
	kv := ParseInfo(text)
	r := ReplicationState{Role: kv["role"], MasterLinkUp: kv["master_link_status"] == "up",
		SyncInProgress: kv["master_sync_in_progress"] == "1"}
	key := "master_repl_offset"
	if r.Replica() {
		key = "slave_repl_offset"
	}
	r.Offset, _ = strconv.ParseInt(kv[key], 10, 64)
	if r.Replica() && kv["master_host"] != "" {
		r.MasterAddr = net.JoinHostPort(kv["master_host"], kv["master_port"])
	}
	return r
}

// StripVerbatim removes the RESP3 verbatim-string format prefix ("txt:") that valkey-go
// keeps on CLUSTER NODES, CLUSTER INFO and INFO replies.
func StripVerbatim(s string) string {
	if len(s) >= 4 && s[3] == ':' && (strings.HasPrefix(s, "txt:") || strings.HasPrefix(s, "mkd:")) {
		return s[4:]
	}
	return s
}

// ParseNodes parses a CLUSTER NODES reply as answered by the member at addr.
func ParseNodes(addr, text string) (View, error) {
	v := View{Addr: addr}
	for i, line := range strings.Split(StripVerbatim(text), "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		n, err := parseNodeLine(line)
		if err != nil {
			return View{}, fmt.Errorf("CLUSTER NODES from %s, line %d: %w", addr, i+1, err)
		}
		v.Nodes = append(v.Nodes, n)
	}
	if _, ok := v.Myself(); !ok {
		return View{}, fmt.Errorf("CLUSTER NODES from %s has no myself line", addr)
	}
	return v, nil
}

func parseNodeLine(line string) (Node, error) {
	f := strings.Fields(line)
	if len(f) < 8 {
		return Node{}, fmt.Errorf("%d fields, want at least 8", len(f))
	}
	n := Node{ID: f[0], Connected: f[7] == "connected"}
	// ip:port@cport[,hostname]
	addr := f[1]
	if i := strings.IndexByte(addr, ','); i >= 0 {
		n.Hostname, _, _ = strings.Cut(addr[i+1:], ",")
		addr = addr[:i]
	}
	if i := strings.IndexByte(addr, '@'); i >= 0 {
		bus, err := strconv.Atoi(addr[i+1:])
		if err != nil {
			return Node{}, fmt.Errorf("bus port in %q: %w", f[1], err)
		}
		n.BusPort, addr = bus, addr[:i]
	}
	n.Addr = addr
	for _, fl := range strings.Split(f[2], ",") {
		switch fl {
		case "myself":
			n.Myself = true
		case "master":
			n.Primary = true
		case "slave":
			n.Replica = true
		case "fail":
			n.Fail = true
		case "fail?":
			n.PFail = true
		case "handshake":
			n.Handshake = true
		case "noaddr":
			n.NoAddr = true
		}
	}
	if f[3] != "-" {
		n.PrimaryID = f[3]
	}
	epoch, err := strconv.ParseUint(f[6], 10, 64)
	if err != nil {
		return Node{}, fmt.Errorf("config epoch %q: %w", f[6], err)
	}
	n.ConfigEpoch = epoch
	pong, err := strconv.ParseInt(f[5], 10, 64)
	if err != nil {
		return Node{}, fmt.Errorf("pong_recv %q: %w", f[5], err)
	}
	if pong > 0 {
		n.PongRecv = time.UnixMilli(pong)
	}
	for _, s := range f[8:] {
		if err := n.addSlotField(s); err != nil {
			return Node{}, err
		}
	}
	return n, nil
}

// slotNumber parses a hash slot, refusing one outside [0, SlotCount): the planner indexes
// its owner tables by the slots a move names.
func slotNumber(s string) (int, error) {
	slot, err := strconv.Atoi(s)
	if err != nil {
		return 0, err
	}
	if slot < 0 || slot >= SlotCount {
		return 0, fmt.Errorf("slot %d out of range", slot)
	}
	return slot, nil
}

func (n *Node) addSlotField(s string) error {
	if strings.HasPrefix(s, "[") {
		body := strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")
		if i := strings.Index(body, "->-"); i >= 0 {
			slot, err := slotNumber(body[:i])
			if err != nil {
				return fmt.Errorf("migrating slot %q: %w", s, err)
			}
			if n.Migrating == nil {
				n.Migrating = map[int]string{}
			}
			n.Migrating[slot] = body[i+3:]
			return nil
		}
		if i := strings.Index(body, "-<-"); i >= 0 {
			slot, err := slotNumber(body[:i])
			if err != nil {
				return fmt.Errorf("importing slot %q: %w", s, err)
			}
			if n.Importing == nil {
				n.Importing = map[int]string{}
			}
			n.Importing[slot] = body[i+3:]
			return nil
		}
		return fmt.Errorf("slot state %q not understood", s)
	}
	lo, hi, isRange := strings.Cut(s, "-")
	start, err := strconv.Atoi(lo)
	if err != nil {
		return fmt.Errorf("slot %q: %w", s, err)
	}
	end := start
	if isRange {
		if end, err = strconv.Atoi(hi); err != nil {
			return fmt.Errorf("slot %q: %w", s, err)
		}
	}
	if start < 0 || end >= SlotCount || start > end {
		return fmt.Errorf("slot %q out of range", s)
	}
	n.Slots = append(n.Slots, SlotRange{Start: start, End: end})
	return nil
}

// Myself is the answering member's own line.
func (v View) Myself() (Node, bool) {
	for _, n := range v.Nodes {
		if n.Myself {
			return n, true
		}
	}
	return Node{}, false
}

// Node finds a node by id.
func (v View) Node(id string) (Node, bool) {
	for _, n := range v.Nodes {
		if n.ID == id {
			return n, true
		}
	}
	return Node{}, false
}

// ByAddr finds the node announced at addr (host:port), skipping nodes still in handshake.
func (v View) ByAddr(addr string) (Node, bool) {
	for _, n := range v.Nodes {
		if n.Addr == addr && !n.Handshake {
			return n, true
		}
	}
	return Node{}, false
}

// Owners is the owner node id of every slot, "" where unassigned.
func (v View) Owners() [SlotCount]string {
	var o [SlotCount]string
	for _, n := range v.Nodes {
		for _, r := range n.Slots {
			for s := r.Start; s <= r.End; s++ {
				o[s] = n.ID
			}
		}
	}
	return o
}

// Primaries are the primaries this member knows, sorted by id.
func (v View) Primaries() []Node {
	var out []Node
	for _, n := range v.Nodes {
		if n.Primary {
			out = append(out, n)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// ReplicasOf are the replicas of primaryID this member knows, sorted by id.
func (v View) ReplicasOf(primaryID string) []Node {
	var out []Node
	for _, n := range v.Nodes {
		if n.Replica && n.PrimaryID == primaryID {
			out = append(out, n)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Failed are the nodes this member marks fail or fail?.
func (v View) Failed() []Node {
	var out []Node
	for _, n := range v.Nodes {
		if n.Fail || n.PFail {
			out = append(out, n)
		}
	}
	return out
}

// Snapshot is what the operator observed in one pass: the views of the members it reached.
type Snapshot struct {
	Views []View
	// At is when the snapshot was taken; with FailSince it tells the planner how long a
	// node has been failing without reading a clock itself.
	At time.Time
	// FailSince maps the id of every node some view marks fail or fail? to when the
	// observer first saw it so (across passes); ids no view marks are absent.
	FailSince map[string]time.Time
}

// View returns the view answered by the member at addr.
func (s Snapshot) View(addr string) (View, bool) {
	for _, v := range s.Views {
		if v.Addr == addr {
			return v, true
		}
	}
	return View{}, false
}

// Agree reports whether every view names the same owner for every slot; it is the
// precondition for moving slots or failing over (a stale epoch gets the command refused).
func (s Snapshot) Agree() bool {
	if len(s.Views) == 0 {
		return true
	}
	first := s.Views[0].Owners()
	for _, v := range s.Views[1:] {
		if v.Owners() != first {
			return false
		}
	}
	return true
}

// SlotMove is a slot some member is moving: From has it MIGRATING and/or To has it IMPORTING.
type SlotMove struct {
	Slot     int
	From, To string // node ids
}

// Moves are the slots in a migrating or importing state on any primary, sorted by slot;
// a half-done move shows on one side only. Replicas are left out: Valkey 8.0+ replicates
// CLUSTER SETSLOT, so a replica lists its primary's states on its own line (Redis 7.0's
// never do), and the move is the primary's.
func (s Snapshot) Moves() []SlotMove {
	bySlot := map[int]SlotMove{}
	for _, v := range s.Views {
		me, _ := v.Myself()
		if !me.Primary {
			continue
		}
		for slot, to := range me.Migrating {
			m := bySlot[slot]
			m.Slot, m.From, m.To = slot, me.ID, to
			bySlot[slot] = m
		}
		for slot, from := range me.Importing {
			m := bySlot[slot]
			m.Slot, m.To = slot, me.ID
			if m.From == "" {
				m.From = from
			}
			bySlot[slot] = m
		}
	}
	out := make([]SlotMove, 0, len(bySlot))
	for _, m := range bySlot {
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Slot < out[j].Slot })
	return out
}

// Ranges compresses sorted slots into contiguous ranges.
func Ranges(slots []int) []SlotRange {
	var out []SlotRange
	for _, s := range slots {
		if len(out) > 0 && out[len(out)-1].End == s-1 {
			out[len(out)-1].End = s
			continue
		}
		out = append(out, SlotRange{Start: s, End: s})
	}
	return out
}

// ParseInfo parses CLUSTER INFO or INFO into key/value pairs (section headers dropped).
func ParseInfo(text string) map[string]string {
	out := map[string]string{}
	for _, line := range strings.Split(StripVerbatim(text), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if k, v, ok := strings.Cut(line, ":"); ok {
			out[k] = v
		}
	}
	return out
}
