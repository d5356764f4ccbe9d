package executor

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	valkeyv1 "github.com/opsuite/suite/api/valkey/v1alpha1"
	"github.com/opsuite/suite/services/valkey-operator/internal/planner"
	"github.com/opsuite/suite/services/valkey-operator/internal/resources"
	"github.com/opsuite/suite/services/valkey-operator/internal/valkey"
	"github.com/opsuite/suite/shared/testenv"
	valkeygo "github.com/valkey-io/valkey-go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// TestClusterClientUserAcrossReshard: a user declared as upstream's users sample declares
// its alice (categories @read, @write and @connection, @admin and @dangerous denied, key
// patterns by access) logs in through valkey-go's cluster client, which needs CLUSTER
// SLOTS or SHARDS (@slow) to start, and keeps writing and reading while the cluster is
// resharded from 3 to 4 shards (MOVED and ASK). A client reading from replicas (READONLY
// on their connections) starts too. The servers load the users.acl RenderACL writes.
func TestClusterClientUserAcrossReshard(t *testing.T) {
	const alicePW, operatorPW, replicationPW = "3mptyP@ssw0rd", "op-pw", "repl-pw"
	c := &valkeyv1.ValkeyCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns"},
		Spec: valkeyv1.ValkeyClusterSpec{Shards: 3, Replicas: 1, Users: []valkeyv1.UserACLSpec{{
			Name:           "alice",
			Enabled:        ptr.To(true),
			PasswordSecret: valkeyv1.PasswordSecretSpec{Name: "users", Keys: []string{"alicepw"}},
			Commands:       valkeyv1.CommandsACLSpec{Allow: []string{"@read", "@write", "@connection"}, Deny: []string{"@admin", "@dangerous"}},
			Keys: valkeyv1.KeysACLSpec{ReadWrite: []string{"app:*", "cache:*"}, ReadOnly: []string{"shared:*", "config:*"},
				WriteOnly: []string{"logs:*", "metrics:*"}},
			Channels: valkeyv1.ChannelsACLSpec{Patterns: []string{"notifications:*", "events:*"}},
			RawACL:   "+client|setname +debug",
		}}},
	}
	acl, err := resources.RenderACL(c, map[string][]string{"alice": {alicePW}}, resources.InternalPasswords{Operator: operatorPW, Replication: replicationPW})
	if err != nil {
		t.Fatal(err)
	}
	aclFile := filepath.Join(t.TempDir(), "users.acl")
	if err := os.WriteFile(aclFile, []byte(acl.Users), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := serverConfig{
		args: []string{"--aclfile", aclFile, "--masteruser", resources.ReplicationUser, "--masterauth", replicationPW},
		dial: valkey.Options{Username: resources.OperatorUser, Password: operatorPW},
	}
	servers := startServersWith(t, 8, cfg)
	var all []planner.Member
	var addrs []string
	for _, s := range servers {
		all = append(all, s.member)
		addrs = append(addrs, s.member.Addr)
	}
	dumpClusterOnFailure(t, addrs)
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()

	e := New(func(addr string) (valkey.Conn, error) { return valkey.Dial(addr, cfg.dial) })
	defer e.Close()
	convergeReal(ctx, t, e, planner.Desired{Shards: 3, Replicas: 1, Members: all[:6], MoveBatch: 512}, addrs[:6])

	dialAlice := func(replicas bool) (valkeygo.Client, error) {
		o := valkeygo.ClientOption{InitAddress: addrs[:2], Username: "alice", Password: alicePW, DisableCache: true,
			Dialer: net.Dialer{Timeout: 5 * time.Second}, ConnWriteTimeout: 10 * time.Second}
		if replicas {
			o.SendToReplicas = func(cmd valkeygo.Completed) bool { return cmd.IsReadOnly() }
		}
		return valkeygo.NewClient(o)
	}
	alice, err := dialAlice(false)
	if err != nil {
		t.Fatalf("alice's cluster client does not start: %v", err)
	}
	defer alice.Close()
	fromReplicas, err := dialAlice(true)
	if err != nil {
		t.Fatalf("alice's replica-reading cluster client does not start: %v", err)
	}
	defer fromReplicas.Close()

	// Her rules still hold: no key outside her patterns, nothing @admin.
	if err := alice.Do(ctx, alice.B().Set().Key("other:1").Value("x").Build()).Error(); !isNoPerm(err) {
		t.Fatalf("SET other:1 as alice: %v, want NOPERM", err)
	}
	if err := alice.Do(ctx, alice.B().Flushall().Build()).Error(); !isNoPerm(err) {
		t.Fatalf("FLUSHALL as alice: %v, want NOPERM", err)
	}

	// A writer runs through the reshard; every acknowledged key must read back.
	var (
		acked   atomic.Int64
		errs    atomic.Int64
		lastErr atomic.Value
		stop    = make(chan struct{})
		wg      sync.WaitGroup
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
			err := alice.Do(wctx, alice.B().Set().Key("app:"+strconv.Itoa(i)).Value(strconv.Itoa(i)).Build()).Error()
			wcancel()
			if err != nil {
				errs.Add(1)
				lastErr.Store(err.Error())
				time.Sleep(10 * time.Millisecond)
				i--
				continue
			}
			acked.Store(int64(i + 1))
			time.Sleep(2 * time.Millisecond) // a steady writer, not a load test
		}
	}()
	testenv.Eventually(t, 30*time.Second, "alice wrote 500 keys", func() (bool, string) {
		return acked.Load() >= 500, fmt.Sprint(acked.Load())
	})

	start := time.Now()
	convergeReal(ctx, t, e, planner.Desired{Shards: 4, Replicas: 1, Members: all, MoveBatch: 512}, addrs)
	resharded := time.Since(start)
	close(stop)
	wg.Wait()
	n := int(acked.Load())
	t.Logf("3 -> 4 shards in %v; alice wrote %d keys meanwhile, %d failed attempts (last: %v)", resharded.Round(time.Millisecond), n, errs.Load(), lastErr.Load())

	// Slots moved while she wrote: the keys now live on four primaries.
	snap, failed := e.Observe(ctx, addrs)
	if len(failed) > 0 {
		t.Fatalf("unreachable: %v", failed)
	}
	owners, slotOwners := map[string]bool{}, snap.Views[0].Owners()
	for i := range n {
		owners[slotOwners[valkey.KeySlot("app:"+strconv.Itoa(i))]] = true
	}
	if len(owners) != 4 {
		t.Fatalf("alice's %d keys are on %d primaries, want 4", n, len(owners))
	}
	for lo := 0; lo < n; lo += 1000 {
		var gets valkeygo.Commands
		for i := lo; i < min(lo+1000, n); i++ {
			gets = append(gets, alice.B().Get().Key("app:"+strconv.Itoa(i)).Build())
		}
		for j, r := range alice.DoMulti(ctx, gets...) {
			if v, err := r.ToString(); err != nil || v != strconv.Itoa(lo+j) {
				t.Fatalf("after the reshard: GET app:%d as alice = %q, %v", lo+j, v, err)
			}
		}
	}
	// The replica reader follows the new slot map too (replicas catch up asynchronously).
	testenv.Eventually(t, 30*time.Second, "alice reads her keys from replicas", func() (bool, string) {
		for i := 0; i < n; i += max(n/200, 1) {
			k := "app:" + strconv.Itoa(i)
			v, err := fromReplicas.Do(ctx, fromReplicas.B().Get().Key(k).Build()).ToString()
			if err != nil || v != strconv.Itoa(i) {
				return false, fmt.Sprintf("GET %s = %q, %v", k, v, err)
			}
		}
		return true, ""
	})
	// Her topology commands answer; what administers the cluster stays denied.
	for name, cmd := range map[string]valkeygo.Completed{
		"CLUSTER SLOTS":  alice.B().ClusterSlots().Build(),
		"CLUSTER SHARDS": alice.B().ClusterShards().Build(),
		"CLUSTER NODES":  alice.B().ClusterNodes().Build(),
		"CLUSTER INFO":   alice.B().ClusterInfo().Build(),
		"CLUSTER MYID":   alice.B().ClusterMyid().Build(),
	} {
		if err := alice.Do(ctx, cmd).Error(); err != nil {
			t.Errorf("%s as alice: %v", name, err)
		}
	}
	for name, cmd := range map[string]valkeygo.Completed{
		"CLUSTER FORGET":   alice.B().ClusterForget().NodeId("0000000000000000000000000000000000000000").Build(),
		"CLUSTER FAILOVER": alice.B().ClusterFailover().Build(),
		"CONFIG SET":       alice.B().ConfigSet().ParameterValue().ParameterValue("maxmemory", "1mb").Build(),
	} {
		if err := alice.Do(ctx, cmd).Error(); !isNoPerm(err) {
			t.Errorf("%s as alice: %v, want NOPERM", name, err)
		}
	}
}

func isNoPerm(err error) bool {
	var ve *valkeygo.ValkeyError
	return errors.As(err, &ve) && len(ve.Error()) >= 6 && ve.Error()[:6] == "NOPERM"
}
