package valkey

import (
	"context"
	"fmt"
)

// Shard is one entry of CLUSTER SHARDS.
type Shard struct {
	Slots []SlotRange
	Nodes []ShardNode
}

// ShardNode is a member as CLUSTER SHARDS describes it.
type ShardNode struct {
	ID                string
	IP                string
	Port              int
	Role              string // master or replica
	Health            string // online, failed, loading
	ReplicationOffset int64
}

func (c *conn) ClusterNodes(ctx context.Context) (View, error) {
	s, err := c.text(ctx, "CLUSTER", "NODES")
	if err != nil {
		return View{}, err
	}
	return ParseNodes(c.addr, s)
}

func (c *conn) ClusterInfo(ctx context.Context) (map[string]string, error) {
	s, err := c.text(ctx, "CLUSTER", "INFO")
	if err != nil {
		return nil, err
	}
	return ParseInfo(s), nil
}

func (c *conn) ClusterShards(ctx context.Context) ([]Shard, error) {
	arr, err := c.do(ctx, "CLUSTER", "SHARDS").ToArray()
	if err != nil {
		return nil, fmt.Errorf("CLUSTER SHARDS on %s: %w", c.addr, err)
	}
	out := make([]Shard, 0, len(arr))
	for _, e := range arr {
		m, err := e.AsMap()
		if err != nil {
			return nil, fmt.Errorf("CLUSTER SHARDS on %s: %w", c.addr, err)
		}
		var sh Shard
		if slots, ok := m["slots"]; ok {
			ints, err := slots.AsIntSlice()
			if err != nil {
				return nil, fmt.Errorf("CLUSTER SHARDS slots on %s: %w", c.addr, err)
			}
			for i := 0; i+1 < len(ints); i += 2 {
				sh.Slots = append(sh.Slots, SlotRange{Start: int(ints[i]), End: int(ints[i+1])})
			}
		}
		if nodes, ok := m["nodes"]; ok {
			list, err := nodes.ToArray()
			if err != nil {
				return nil, fmt.Errorf("CLUSTER SHARDS nodes on %s: %w", c.addr, err)
			}
			for _, ne := range list {
				nm, err := ne.AsMap()
				if err != nil {
					return nil, fmt.Errorf("CLUSTER SHARDS node on %s: %w", c.addr, err)
				}
				str := func(k string) string {
					m := nm[k]
					v, _ := m.ToString()
					return v
				}
				num := func(k string) int64 {
					m := nm[k]
					v, _ := m.AsInt64()
					return v
				}
				sn := ShardNode{ID: str("id"), IP: str("ip"), Port: int(num("port")), Role: str("role"),
					Health: str("health"), ReplicationOffset: num("replication-offset")}
				sh.Nodes = append(sh.Nodes, sn)
			}
		}
		out = append(out, sh)
	}
	return out, nil
}

func (c *conn) ReplicationState(ctx context.Context) (ReplicationState, error) {
	s, err := c.text(ctx, "INFO", "replication")
	if err != nil {
		return ReplicationState{}, err
	}
	return ParseReplication(s), nil
}
