package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
)

// checkShards checks what kubectl get vkn shows against CLUSTER NODES: every ValkeyNode's
// status.shard is the shard of the primary it serves (a replica's equals its primary's
// ValkeyNode's) and no two primaries show one number. fresh (a cluster formed from
// nothing) also wants the names to agree: <c>-<s>-0 the primary of shard s, every
// <c>-<s>-<i> its replica, status.shard s.
func (s *vkScenario) checkShards(ctx context.Context, step string, fresh bool) {
	var wrong []string
	err := poll(ctx, s.t, step+": ValkeyNode status.shard agrees with CLUSTER NODES", 60*time.Second, func(ctx context.Context) (bool, error) {
		nodes, err := s.nodes(ctx)
		if err != nil {
			return transient(err)
		}
		var members []vkMember
		for _, n := range nodes {
			if n.Status.PodIP == "" {
				continue
			}
			out, err := s.cli(ctx, n.Status.PodIP, "CLUSTER", "NODES")
			if err == nil {
				members = parseClusterNodes(out)
				break
			}
		}
		if members == nil {
			return transient(fmt.Errorf("no member answered CLUSTER NODES"))
		}
		hostOf, byHost := map[string]string{}, map[string]vkMember{}
		for _, m := range members {
			hostOf[m.id], byHost[m.host] = m.host, m
		}
		nameAt, shardAt := map[string]string{}, map[string]*int32{}
		for _, n := range nodes {
			nameAt[n.Status.PodIP], shardAt[n.Status.PodIP] = n.Name, n.Status.Shard
		}
		wrong = nil
		primaryOfShard := map[int32]string{}
		for _, n := range nodes {
			m, ok := byHost[n.Status.PodIP]
			if !ok || n.Status.Shard == nil {
				wrong = append(wrong, fmt.Sprintf("%s (%s): shard %v, in CLUSTER NODES %v", n.Name, n.Status.PodIP, show(n.Status.Shard), ok))
				continue
			}
			primaryHost := m.host
			if slices.Contains(m.flags, "slave") {
				primaryHost = hostOf[m.master]
			} else if other, dup := primaryOfShard[*n.Status.Shard]; dup {
				wrong = append(wrong, fmt.Sprintf("primaries %s and %s both show shard %d", n.Name, other, *n.Status.Shard))
			} else {
				primaryOfShard[*n.Status.Shard] = n.Name
			}
			if p := shardAt[primaryHost]; p == nil || *p != *n.Status.Shard {
				wrong = append(wrong, fmt.Sprintf("%s shows shard %d, its primary %s shard %s", n.Name, *n.Status.Shard, nameAt[primaryHost], show(p)))
			}
			if !fresh {
				continue
			}
			primary := fmt.Sprintf("%s-%d-0", s.name, n.Spec.ShardIndex)
			if *n.Status.Shard != n.Spec.ShardIndex || nameAt[primaryHost] != primary {
				wrong = append(wrong, fmt.Sprintf("%s serves shard %d through %s, want shard %d through %s", n.Name, *n.Status.Shard, nameAt[primaryHost], n.Spec.ShardIndex, primary))
			}
		}
		return len(wrong) == 0, nil
	})
	if err != nil {
		s.t.Errorf("%s: ValkeyNode status.shard disagrees with the data plane: %v:\n  %s", step, err, strings.Join(wrong, "\n  "))
	}
	if out, err := kubectl(ctx, "get", "vkn", "-n", s.ns, "-l", "valkey.io/cluster="+s.name); err == nil {
		s.t.Logf("%s: kubectl get vkn:\n%s", step, out)
	}
}

func show(p *int32) string {
	if p == nil {
		return "none"
	}
	return fmt.Sprint(*p)
}
