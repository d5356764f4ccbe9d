package veltrix

// MemberState is a member's state in GET /admin/cluster/members.
type MemberState string

// Member states.
const (
	// MemberActive owns partitions and serves.
	MemberActive MemberState = "active"
	// MemberJoining was added and is receiving its partitions.
	MemberJoining MemberState = "joining"
	// MemberLeaving was removed and is handing its partitions over; it disappears from the
	// list once they moved.
	MemberLeaving MemberState = "leaving"
)

// Member is one entry of GET /admin/cluster/members.
type Member struct {
	ID    string      `json:"id"`
	Addr  string      `json:"addr"`
	State MemberState `json:"state"`
}

// Cluster is GET /admin/cluster: the topology as the answering node sees it.
type Cluster struct {
	NodeID         string `json:"node_id"`
	Mode           string `json:"mode"`
	Epoch          int64  `json:"epoch"`
	PartitionCount int32  `json:"partition_count"`
	Nodes          []Node `json:"nodes"`
}

// Node is one node of Cluster.
type Node struct {
	NodeID  string `json:"node_id"`
	Address string `json:"address"`
	Port    int32  `json:"port"`
	State   string `json:"state"`
}
