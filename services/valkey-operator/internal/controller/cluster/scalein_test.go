package cluster_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	valkeyv1 "github.com/opsuite/suite/api/valkey/v1alpha1"
	"github.com/opsuite/suite/services/valkey-operator/internal/valkey"
	"github.com/opsuite/suite/shared/testenv"
)

// TestScaleInUndoneAfterDrain plays upstream valkey-operator #445: a 4-shard cluster scaled
// in to 3, and back to 4 as soon as the removed shard serves no slot (its primary and
// replica are still running, some members may have forgotten them). The cluster converges
// on 4 shards of one primary and one replica each, every server's CLUSTER SHARDS names
// exactly one primary per shard with the slots it serves, and a cluster client (valkey-go,
// which maps slots from CLUSTER SHARDS) reads every acknowledged key and writes new ones.
func TestScaleInUndoneAfterDrain(t *testing.T) {
	t.Parallel()
	c := env.Client
	f, _ := startCluster(t, "vkc-undo", "u", valkeyv1.ValkeyClusterSpec{Shards: 4, Replicas: 1})
	ctx := context.Background()
	waitReady(t, f, "u", 90*time.Second)
	keys := writeKeys(t, f.seeds(), "u", 3000)
	t.Cleanup(func() { f.dumpOnFailure(t) })

	scale(t, c, f.ns, "u", 3, 1)
	testenv.Eventually(t, movesTimeout, "shard 3 drained", func() (bool, string) {
		f.sync(ctx)
		s := f.server("u-3-0")
		if s == nil {
			return true, ""
		}
		conn, err := valkey.Dial(s.Addr, valkey.Options{DialTimeout: time.Second})
		if err != nil {
			return false, err.Error()
		}
		defer conn.Close()
		v, err := conn.ClusterNodes(ctx)
		if err != nil {
			return false, err.Error()
		}
		me, _ := v.Myself()
		return me.SlotTotal() == 0, fmt.Sprintf("u-3-0 serves %d slots", me.SlotTotal())
	})
	scale(t, c, f.ns, "u", 4, 1)
	waitReady(t, f, "u", movesTimeout)
	assertTopology(t, f, 4, 1)
	assertConverged(t, f)
	assertShardsOnePrimary(t, f, 4)
	readKeys(t, f.seeds(), keys)
	readKeys(t, f.seeds(), writeKeys(t, f.seeds(), "u-after", 300))
}

// assertShardsOnePrimary checks CLUSTER SHARDS on every server: shards entries that serve
// slots, each with exactly one primary, the slots covering all 16384 once.
func assertShardsOnePrimary(t *testing.T, f *fleet, shards int) {
	t.Helper()
	for _, addr := range f.seeds() {
		conn, err := valkey.Dial(addr, valkey.Options{DialTimeout: time.Second})
		if err != nil {
			t.Fatalf("dial %s: %v", addr, err)
		}
		got, err := conn.ClusterShards(context.Background())
		conn.Close()
		if err != nil {
			t.Fatal(err)
		}
		serving, slots := 0, 0
		for _, sh := range got {
			primaries := 0
			for _, n := range sh.Nodes {
				if n.Role == "master" {
					primaries++
				}
			}
			for _, r := range sh.Slots {
				slots += r.Len()
			}
			if len(sh.Slots) > 0 {
				serving++
			}
			if primaries != 1 {
				t.Errorf("%s: CLUSTER SHARDS lists a shard with %d primaries (slots %v, nodes %+v)", addr, primaries, sh.Slots, sh.Nodes)
			}
		}
		if serving != shards || slots != valkey.SlotCount {
			t.Errorf("%s: CLUSTER SHARDS has %d shards serving %d slots, want %d serving %d", addr, serving, slots, shards, valkey.SlotCount)
		}
	}
}
