package cluster_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	valkeyv1 "github.com/opsuite/suite/api/valkey/v1alpha1"
	"github.com/opsuite/suite/services/valkey-operator/internal/valkey"
	"github.com/opsuite/suite/shared/testenv"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// servedState is what the members say (CLUSTER NODES on each) next to what the
// ValkeyNodes' status.shard says: ok when every node shows the shard of the primary it
// serves, every member of one running shard the same number and no two shards one number.
func servedState(ctx context.Context, t *testing.T, f *fleet) (ok bool, why string, shardOf map[string]int32, primaryOf map[string]string) {
	t.Helper()
	var list valkeyv1.ValkeyNodeList
	if err := f.c.List(ctx, &list, client.InNamespace(f.ns)); err != nil {
		t.Fatal(err)
	}
	nameOf, shardOf, primaryOf := map[string]string{}, map[string]int32{}, map[string]string{}
	ids := map[string]string{}
	for _, n := range list.Items {
		s := f.server(n.Name)
		if s == nil {
			return false, n.Name + " has no server yet", nil, nil
		}
		conn, err := valkey.Dial(s.Addr, valkey.Options{DialTimeout: time.Second})
		if err != nil {
			return false, err.Error(), nil, nil
		}
		v, err := conn.ClusterNodes(ctx)
		conn.Close()
		if err != nil {
			return false, err.Error(), nil, nil
		}
		me, _ := v.Myself()
		nameOf[me.ID], ids[n.Name] = n.Name, me.ID
		if me.Replica {
			primaryOf[n.Name] = me.PrimaryID
		}
		if n.Status.Shard == nil {
			return false, n.Name + " shows no shard", nil, nil
		}
		shardOf[n.Name] = *n.Status.Shard
	}
	var lines []string
	byShard := map[int32]string{} // shard -> its primary's name
	for name := range ids {
		if _, replica := primaryOf[name]; replica {
			continue
		}
		if other, dup := byShard[shardOf[name]]; dup {
			return false, fmt.Sprintf("primaries %s and %s both show shard %d", name, other, shardOf[name]), nil, nil
		}
		byShard[shardOf[name]] = name
	}
	for name := range ids {
		p := name
		if pid, replica := primaryOf[name]; replica {
			p = nameOf[pid]
			primaryOf[name] = p
		}
		lines = append(lines, fmt.Sprintf("%s shard %d (primary %s, shard %d)", name, shardOf[name], p, shardOf[p]))
		if shardOf[name] != shardOf[p] {
			return false, fmt.Sprintf("%s shows shard %d, its primary %s shard %d", name, shardOf[name], p, shardOf[p]), nil, nil
		}
	}
	sort.Strings(lines)
	return true, strings.Join(lines, "; "), shardOf, primaryOf
}

// TestServedShardFollowsFailover: on a fresh 3x1 cluster every ValkeyNode shows the shard
// it was named for; after a failover (the replica of shard 1 takes over) both of its
// members still show shard 1, the new primary as primary of it; a replica moved to
// another shard's primary and then promoted shows the shard it serves, and no shard is
// renumbered by the failover.
func TestServedShardFollowsFailover(t *testing.T) {
	t.Parallel()
	f, _ := startCluster(t, "vkc-served", "s", valkeyv1.ValkeyClusterSpec{Shards: 3, Replicas: 1})
	ctx := context.Background()
	waitReady(t, f, "s", 90*time.Second)

	var shards map[string]int32
	var primaries map[string]string
	served := func(what string, check func() string) {
		t.Helper()
		testenv.Eventually(t, 60*time.Second, what, func() (bool, string) {
			f.sync(ctx)
			ok, why, s, p := servedState(ctx, t, f)
			if !ok {
				return false, why
			}
			shards, primaries = s, p
			if msg := check(); msg != "" {
				return false, msg + "; " + why
			}
			t.Logf("%s: %s", what, why)
			return true, ""
		})
	}
	served("fresh: every node shows the shard of its name", func() string {
		for name, s := range shards {
			if want := name[len("s-") : len("s-")+1]; fmt.Sprint(s) != want {
				return fmt.Sprintf("%s shows shard %d", name, s)
			}
		}
		return ""
	})

	failover := func(name string) {
		t.Helper()
		conn, err := valkey.Dial(f.server(name).Addr, valkey.Options{DialTimeout: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if err := conn.Failover(ctx, valkey.FailoverDefault); err != nil {
			t.Fatalf("CLUSTER FAILOVER on %s: %v", name, err)
		}
	}
	failover("s-1-1")
	served("after s-1-1 took over shard 1", func() string {
		if _, replica := primaries["s-1-1"]; replica || primaries["s-1-0"] != "s-1-1" || shards["s-1-1"] != 1 {
			return fmt.Sprintf("s-1-1 replica of %q, s-1-0 of %q", primaries["s-1-1"], primaries["s-1-0"])
		}
		return ""
	})

	// s-2-1 follows shard 0's primary; the operator gives shard 2 a replica again (s-2-1
	// back, or s-0-1, whichever it keeps), then s-2-1's new primary's replica takes over.
	conn, err := valkey.Dial(f.server("s-2-1").Addr, valkey.Options{DialTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	v, err := conn.ClusterNodes(ctx)
	if err == nil {
		p, _ := v.ByAddr(f.server("s-0-0").Addr)
		err = conn.Replicate(ctx, p.ID)
	}
	conn.Close()
	if err != nil {
		t.Fatalf("moving s-2-1 to shard 0: %v", err)
	}
	waitReady(t, f, "s", 90*time.Second)
	served("after s-2-1 was moved", func() string { return "" })
	before := shards["s-0-0"]
	replica := ""
	for name, p := range primaries {
		if p == "s-0-0" {
			replica = name
		}
	}
	if replica == "" {
		t.Fatalf("s-0-0 has no replica: %v", primaries)
	}
	t.Logf("%s replicates s-0-0 (shard %d); it takes over", replica, before)
	failover(replica)
	served("after "+replica+" took over s-0-0's shard", func() string {
		if _, isReplica := primaries[replica]; isReplica || primaries["s-0-0"] != replica {
			return fmt.Sprintf("%s replica of %q, s-0-0 of %q", replica, primaries[replica], primaries["s-0-0"])
		}
		if shards[replica] != before {
			return fmt.Sprintf("%s took over shard %d but shows %d", replica, before, shards[replica])
		}
		return ""
	})
}
