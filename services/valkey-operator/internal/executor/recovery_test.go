package executor

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
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

// TestMembersBackAtNewAddresses restarts every server of a real 3x1 cluster from its data
// directory (same node id, data saved) on new ports, as pods with persistent volumes all
// coming back with new IPs: no member can reach another at the addresses it remembers, so
// only the planner's MEETs at the new addresses bring the cluster back. It converges with
// every node at its new address, no stale entry, and every key read back.
func TestMembersBackAtNewAddresses(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	e, d, servers, addrs := formReal(ctx, t, 3, 1)
	kv, err := valkey.DialCluster(addrs, valkey.Options{})
	if err != nil {
		t.Fatal(err)
	}
	const keys = 500
	writeKeys(ctx, t, kv, keys)
	kv.Close()
	awaitReplicasInSync(ctx, t, e, addrs)
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		t.Fatalf("redis-cli not found (%v): apt-get install redis-tools", err)
	}
	snap, _ := e.Observe(ctx, addrs)
	ids := map[string]string{} // new address -> the id it must keep
	for _, s := range servers {
		v, _ := snap.View(s.member.Addr)
		me, _ := v.Myself()
		// A pod with a persistent volume keeps its data too: save it on the way down.
		host, port, _ := strings.Cut(s.member.Addr, ":")
		if out, err := exec.Command(cli, "-h", host, "-p", port, "SHUTDOWN", "SAVE").CombinedOutput(); err != nil && len(out) > 0 {
			t.Logf("SHUTDOWN SAVE on %s: %v %s", s.member.Addr, err, out)
		}
		s.stop(t)
		ids[s.member.Addr] = me.ID
	}
	e.Close()
	var moved []*server
	for i, s := range servers {
		m := s.member
		m.Addr, m.BusPort = fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t)), testenv.FreePort(t)
		ids[m.Addr] = ids[s.member.Addr]
		delete(ids, s.member.Addr)
		moved = append(moved, moveTo(t, s, m, serverConfig{}))
		d.Members[i], addrs[i] = m, m.Addr
	}
	if len(moved) != 6 {
		t.Fatalf("moved %d servers", len(moved))
	}
	convergeReal(ctx, t, e, d, addrs)
	testenv.Eventually(t, 30*time.Second, "every member knows the six members at their new addresses", func() (bool, string) {
		snap, failed := e.Observe(ctx, addrs)
		if len(failed) > 0 {
			return false, fmt.Sprint("unreachable: ", failed)
		}
		for _, v := range snap.Views {
			if v.Info.KnownNodes != 6 || len(v.Nodes) != 6 {
				return false, fmt.Sprintf("%s knows %d nodes: %+v", v.Addr, v.Info.KnownNodes, v.Nodes)
			}
			for addr, id := range ids {
				if n, ok := v.Node(id); !ok || (!n.Myself && n.Addr != addr) {
					return false, fmt.Sprintf("%s sees %s at %q, want %s", v.Addr, id, n.Addr, addr)
				}
			}
		}
		return true, ""
	})
	kv, err = valkey.DialCluster(addrs, valkey.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer kv.Close()
	readKeys(ctx, t, kv, keys, "after every member came back at a new address")
}
