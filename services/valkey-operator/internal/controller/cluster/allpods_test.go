package cluster_test

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	valkeyv1 "github.com/opsuite/suite/api/valkey/v1alpha1"
	"github.com/opsuite/suite/services/valkey-operator/internal/valkey"
	"github.com/opsuite/suite/services/valkey-operator/internal/valkeytest"
	"github.com/opsuite/suite/shared/testenv"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// views reads CLUSTER NODES, CLUSTER INFO and INFO replication of every server of the fleet.
func (f *fleet) views(ctx context.Context) (map[string]valkey.View, error) {
	out := map[string]valkey.View{}
	for _, addr := range f.seeds() {
		conn, err := valkey.Dial(addr, valkey.Options{DialTimeout: time.Second})
		if err != nil {
			return nil, fmt.Errorf("dial %s: %w", addr, err)
		}
		v, err := conn.ClusterNodes(ctx)
		if err == nil {
			var kv map[string]string
			if kv, err = conn.ClusterInfo(ctx); err == nil {
				v.Info = valkey.ClusterInfoFrom(kv)
				v.Repl, err = conn.ReplicationState(ctx)
			}
		}
		conn.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", addr, err)
		}
		out[addr] = v
	}
	return out, nil
}

// awaitCaughtUp waits until every replica's offset reached its primary's, so that what
// each server saves holds every acknowledged write of its shard.
func awaitCaughtUp(t *testing.T, f *fleet) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, "replicas caught up with their primaries", func() (bool, string) {
		views, err := f.views(context.Background())
		if err != nil {
			return false, err.Error()
		}
		offset := map[string]int64{}
		for _, v := range views {
			if me, ok := v.Myself(); ok && me.Primary {
				offset[me.ID] = v.Repl.Offset
			}
		}
		for addr, v := range views {
			me, _ := v.Myself()
			if me.Replica && (!v.Repl.MasterLinkUp || v.Repl.Offset < offset[me.PrimaryID]) {
				return false, fmt.Sprintf("replica %s at offset %d (link up %v), its primary at %d", addr, v.Repl.Offset, v.Repl.MasterLinkUp, offset[me.PrimaryID])
			}
		}
		return true, ""
	})
}

// assertConverged checks every server's view: cluster_state ok, every slot owned, and the
// same single owner of each slot on every server.
func assertConverged(t *testing.T, f *fleet) {
	t.Helper()
	views, err := f.views(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var first string
	var owners [valkey.SlotCount]string
	for addr, v := range views {
		if !v.Info.OK() {
			t.Errorf("%s: cluster_state %q", addr, v.Info.State)
		}
		o := v.Owners()
		for slot, id := range o {
			if id == "" {
				t.Errorf("%s: slot %d has no owner", addr, slot)
				break
			}
		}
		if first == "" {
			first, owners = addr, o
			continue
		}
		for slot := range o {
			if o[slot] != owners[slot] {
				t.Errorf("slot %d: owned by %s as %s sees it, by %s as %s sees it", slot, o[slot], addr, owners[slot], first)
				break
			}
		}
	}
}

// moveAll plays every pod of the cluster deleted together and rescheduled with its
// volume: each node reported not ready, every server saved (as a persistent pod's server
// does on SIGTERM) and killed, then all started again from their directories on new ports.
// It returns the node id each ValkeyNode ran.
func (f *fleet) moveAll(ctx context.Context, t *testing.T) map[string]string {
	t.Helper()
	cli := valkeytest.Bins(t).CLI
	ids := map[string]string{}
	f.mu.Lock()
	names := make([]string, 0, len(f.servers))
	for name := range f.servers {
		names = append(names, name)
	}
	f.mu.Unlock()
	for _, name := range names {
		s := f.server(name)
		conn, err := valkey.Dial(s.Addr, valkey.Options{DialTimeout: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		v, err := conn.ClusterNodes(ctx)
		conn.Close()
		if err != nil {
			t.Fatal(err)
		}
		me, _ := v.Myself()
		ids[name] = me.ID
		host, port, _ := strings.Cut(s.Addr, ":")
		if out, err := exec.Command(cli, "-h", host, "-p", port, "SAVE").CombinedOutput(); err != nil || !strings.Contains(string(out), "OK") {
			t.Fatalf("SAVE on %s: %v %s", s.Addr, err, out)
		}
	}
	for _, name := range names {
		f.down(ctx, name)
	}
	for _, name := range names {
		f.server(name).Stop()
	}
	for _, name := range names {
		// Under the fleet's lock: the controller reads the address meanwhile.
		f.mu.Lock()
		f.servers[name].Move()
		f.mu.Unlock()
	}
	return ids
}

// TestEveryPodBackAtNewAddresses deletes every pod of a persistent 3x1 cluster at once:
// they come back with their data and node ids on new addresses, each server's nodes.conf
// naming the others at addresses nothing listens on (upstream valkey-operator #275,
// #352). The operator introduces them at their new addresses: the cluster is Ready again
// with every node at its new address, the same node ids, one owner per slot, cluster_state
// ok on every server and every acknowledged key readable and writable.
func TestEveryPodBackAtNewAddresses(t *testing.T) {
	t.Parallel()
	f, _ := startCluster(t, "vkc-move", "m", valkeyv1.ValkeyClusterSpec{Shards: 3, Replicas: 1})
	ctx := context.Background()
	waitReady(t, f, "m", 90*time.Second)
	keys := writeKeys(t, f.seeds(), "m", 2000)
	awaitCaughtUp(t, f)
	old := map[string]bool{}
	for _, a := range f.seeds() {
		old[a] = true
	}

	t.Cleanup(func() { f.dumpOnFailure(t) })
	moved := time.Now()
	ids := f.moveAll(ctx, t)
	waitReady(t, f, "m", 120*time.Second)
	t.Logf("every pod back at a new address: Ready after %s", time.Since(moved).Round(time.Millisecond))
	assertTopology(t, f, 3, 1)
	assertConverged(t, f)
	views, err := f.views(ctx)
	if err != nil {
		t.Fatal(err)
	}
	addrOf := map[string]string{}
	for name, id := range ids {
		addrOf[id] = f.server(name).Addr
		var n valkeyv1.ValkeyNode
		if err := f.c.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: name}, &n); err != nil {
			t.Fatal(err)
		}
		if n.Status.ValkeyNodeID != id {
			t.Errorf("%s runs node %q, ran %q before the move", name, n.Status.ValkeyNodeID, id)
		}
	}
	for addr, v := range views {
		if old[addr] {
			t.Fatalf("%s served before the move too", addr)
		}
		for _, n := range v.Nodes {
			if n.Myself {
				if addrOf[n.ID] != addr {
					t.Errorf("%s is node %s, which ran at %s", addr, n.ID, addrOf[n.ID])
				}
				continue
			}
			if want, ok := addrOf[n.ID]; !ok || n.Addr != want {
				t.Errorf("%s lists node %s at %s, want %q", addr, n.ID, n.Addr, want)
			}
		}
	}
	readKeys(t, f.seeds(), keys)
	readKeys(t, f.seeds(), writeKeys(t, f.seeds(), "m-after", 300))
}

// dumpOnFailure logs every server's CLUSTER NODES and INFO replication when the test failed.
func (f *fleet) dumpOnFailure(t *testing.T) {
	if !t.Failed() {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	cli := valkeytest.Bins(t).CLI
	for name, s := range f.servers {
		host, port, _ := strings.Cut(s.Addr, ":")
		nodes, _ := exec.Command(cli, "-h", host, "-p", port, "CLUSTER", "NODES").CombinedOutput()
		repl, _ := exec.Command(cli, "-h", host, "-p", port, "INFO", "replication").CombinedOutput()
		t.Logf("%s at %s:\n%s%s", name, s.Addr, nodes, repl)
	}
}
