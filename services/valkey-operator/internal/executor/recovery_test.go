package executor

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/opsuite/suite/services/valkey-operator/internal/planner"
	"github.com/opsuite/suite/services/valkey-operator/internal/valkey"
	"github.com/opsuite/suite/shared/testenv"
)

// TestRecoversFromQuorumLoss kills two of the three primaries of a real 3x1 cluster: the
// last primary alone cannot mark them failed, so no replica is elected. The planner takes
// over with both orphaned replicas after TakeoverAfter; then the dead servers come back
// empty (new node ids, same addresses): they are met, attached as replicas and the dead ids
// forgotten on every member. Every key written before is read back.
func TestRecoversFromQuorumLoss(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	e, d, servers, addrs := formReal(ctx, t, 3, 1)
	d.TakeoverAfter = 3 * time.Second
	kv, err := valkey.DialCluster(addrs, valkey.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer kv.Close()
	const keys = 600
	writeKeys(ctx, t, kv, keys)
	awaitReplicasInSync(ctx, t, e, addrs)
	// Let every replica catch up with the last writes before the primaries die.
	testenv.Eventually(t, 20*time.Second, "replicas at their primaries' offsets", func() (bool, string) {
		snap, _ := e.Observe(ctx, addrs)
		offsets := map[string]int64{}
		for _, v := range snap.Views {
			me, _ := v.Myself()
			offsets[me.ID] = v.Repl.Offset
		}
		for _, v := range snap.Views {
			if me, _ := v.Myself(); me.Replica && v.Repl.Offset != offsets[me.PrimaryID] {
				return false, fmt.Sprintf("%s at %d, primary at %d", v.Addr, v.Repl.Offset, offsets[me.PrimaryID])
			}
		}
		return true, ""
	})

	snap, _ := e.Observe(ctx, addrs)
	var killed []*server
	deadIDs := map[string]bool{}
	for _, p := range snap.Views[0].Primaries() {
		if len(killed) == 2 || p.SlotTotal() == 0 {
			continue
		}
		for _, s := range servers {
			if s.member.Addr == p.Addr {
				s.stop(t)
				killed = append(killed, s)
				deadIDs[p.ID] = true
			}
		}
	}
	if len(killed) != 2 {
		t.Fatalf("killed %d primaries, want 2", len(killed))
	}

	tookOver := map[string]bool{}
	testenv.Eventually(t, 60*time.Second, "both orphaned replicas taken over", func() (bool, string) {
		snap, _ := e.Observe(ctx, addrs)
		p := planner.Compute(d, snap)
		n, err := e.Run(ctx, p.Steps)
		for _, to := range planner.Summarize(p.Steps[:n]).TakenOver {
			if !deadIDs[to.PrimaryID] {
				t.Fatalf("took over from %s, which is alive", to.PrimaryID)
			}
			tookOver[to.PrimaryID] = true
		}
		for _, s := range p.Steps {
			if s.Op != planner.Takeover {
				t.Fatalf("step %s planned while primaries are lost", s)
			}
		}
		return len(tookOver) == 2, fmt.Sprintf("steps %v, wait %q, err %v", p.Steps, p.Wait, err)
	})
	testenv.Eventually(t, 30*time.Second, "keys served by the survivors", func() (bool, string) {
		for i := range keys {
			v, err := kv.Get(ctx, fmt.Sprintf("k%d", i))
			if err != nil || v != strconv.Itoa(i) {
				return false, fmt.Sprintf("GET k%d = %q, %v", i, v, err)
			}
		}
		return true, ""
	})

	for _, s := range killed {
		restart(t, s, serverConfig{})
	}
	convergeReal(ctx, t, e, d, addrs)
	// A member may still hold a handshake entry for a moment (gossip naming the dead id at
	// the reused address starts one); it times out by itself.
	testenv.Eventually(t, 30*time.Second, "every member knows exactly the six members", func() (bool, string) {
		snap, failed := e.Observe(ctx, addrs)
		if len(failed) > 0 {
			return false, fmt.Sprint("unreachable: ", failed)
		}
		for _, v := range snap.Views {
			for _, n := range v.Nodes {
				if deadIDs[n.ID] {
					t.Fatalf("%s still lists the dead node %s", v.Addr, n.ID)
				}
			}
			if v.Info.KnownNodes != 6 || len(v.Nodes) != 6 {
				return false, fmt.Sprintf("%s knows %d nodes: %+v", v.Addr, v.Info.KnownNodes, v.Nodes)
			}
		}
		return true, ""
	})
	readKeys(ctx, t, kv, keys, "after the dead servers rejoined")
}
