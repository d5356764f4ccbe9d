package handover

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	valkeyv1 "github.com/opsuite/suite/api/valkey/v1alpha1"
	"github.com/opsuite/suite/services/valkey-operator/internal/connect"
	"github.com/opsuite/suite/services/valkey-operator/internal/executor"
	"github.com/opsuite/suite/services/valkey-operator/internal/planner"
	"github.com/opsuite/suite/services/valkey-operator/internal/resources"
	"github.com/opsuite/suite/services/valkey-operator/internal/valkey"
	"github.com/opsuite/suite/services/valkey-operator/internal/valkeytest"
	"github.com/opsuite/suite/shared/testenv"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// member is one real server with the operator's users.acl and auth.conf, as a pod has
// them.
type member struct {
	Addr string
	Stop func()
}

// cluster starts shards*(1+replicas) servers with the users and replication credentials
// RenderACL writes for a cluster (over TLS only when tlsDir holds ca.crt, tls.crt and
// tls.key), forms them with the planner as the operator does, and returns the members,
// the operator's login and the auth.conf path the hook reads.
func cluster(ctx context.Context, t *testing.T, shards, replicas int, tlsDir string) ([]member, valkey.Options, string) {
	t.Helper()
	pw := resources.InternalPasswords{Operator: "op-secret", Replication: `repl "secret"\x`, Exporter: "exp-secret"}
	files, err := resources.RenderACL(&valkeyv1.ValkeyCluster{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns"}}, nil, pw)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	aclPath, authPath := filepath.Join(dir, resources.ACLKeyUsers), filepath.Join(dir, resources.ACLKeyAuth)
	if err := os.WriteFile(aclPath, []byte(files.Users), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(authPath, []byte(files.Auth), 0o600); err != nil {
		t.Fatal(err)
	}
	op := valkey.Options{Username: resources.OperatorUser, Password: pw.Operator}
	if tlsDir != "" {
		ca, err := os.ReadFile(filepath.Join(tlsDir, resources.TLSKeyCA))
		if err != nil {
			t.Fatal(err)
		}
		if op.TLS, err = connect.ClientTLS(ca); err != nil {
			t.Fatal(err)
		}
	}
	var ms []member
	var members []planner.Member
	var addrs []string
	for i := range shards * (1 + replicas) {
		var m member
		var bus int
		if tlsDir == "" {
			s := valkeytest.Start(t, "--aclfile", aclPath, "--include", authPath)
			m, bus = member{Addr: s.Addr, Stop: s.Stop}, s.BusPort
		} else {
			m, bus = startTLS(t, op, "--aclfile", aclPath, "--include", authPath,
				"--tls-cert-file", filepath.Join(tlsDir, resources.TLSKeyCert), "--tls-key-file", filepath.Join(tlsDir, resources.TLSKeyKey),
				"--tls-ca-cert-file", filepath.Join(tlsDir, resources.TLSKeyCA), "--tls-cluster", "yes", "--tls-replication", "yes",
				"--tls-auth-clients", "optional")
		}
		ms = append(ms, m)
		members = append(members, planner.Member{Addr: m.Addr, BusPort: bus, Host: fmt.Sprintf("host-%d", i%3)})
		addrs = append(addrs, m.Addr)
	}
	d := planner.Desired{Shards: shards, Replicas: replicas, Members: members}
	e := executor.New(func(addr string) (valkey.Conn, error) { return valkey.Dial(addr, op) })
	t.Cleanup(e.Close)
	testenv.Eventually(t, 3*time.Minute, "cluster formed, replicas in sync", func() (bool, string) {
		snap, failed := e.Observe(ctx, addrs)
		if len(failed) > 0 {
			return false, fmt.Sprint("unreachable: ", failed)
		}
		p := planner.Compute(d, snap)
		if !p.Converged() {
			n, err := e.Run(ctx, p.Steps)
			return false, fmt.Sprintf("%d/%d steps, wait %q, err %v", n, len(p.Steps), p.Wait, err)
		}
		for _, v := range snap.Views {
			me, _ := v.Myself()
			if v.Info.State != "ok" || me.Replica && (!v.Repl.MasterLinkUp || v.Repl.SyncInProgress) {
				return false, fmt.Sprintf("%s: state %q, %+v", v.Addr, v.Info.State, v.Repl)
			}
		}
		return true, ""
	})
	return ms, op, authPath
}

// startTLS starts one cluster-mode server that serves TLS only, on free loopback ports,
// and kills it at cleanup; op logs in to wait for it.
func startTLS(t *testing.T, op valkey.Options, extra ...string) (member, int) {
	t.Helper()
	port, bus := testenv.FreePort(t), testenv.FreePort(t)
	dir := t.TempDir()
	args := append([]string{"--port", "0", "--tls-port", strconv.Itoa(port), "--cluster-enabled", "yes",
		"--cluster-port", strconv.Itoa(bus), "--bind", "127.0.0.1",
		"--cluster-config-file", filepath.Join(dir, "nodes.conf"), "--dir", dir,
		"--save", "", "--appendonly", "no", "--cluster-node-timeout", "2000",
		"--logfile", filepath.Join(dir, "server.log")}, extra...)
	cmd := exec.Command(valkeytest.Bins(t).Server, args...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait() // killed at the end, so its exit status says nothing
		close(done)
	}()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			_ = cmd.Process.Signal(syscall.SIGKILL)
			<-done
		})
	}
	t.Cleanup(func() {
		stop()
		if t.Failed() {
			if b, err := os.ReadFile(filepath.Join(dir, "server.log")); err == nil {
				t.Logf("127.0.0.1:%d log tail:\n%s", port, b[max(0, len(b)-2000):])
			}
		}
	})
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	testenv.Eventually(t, 10*time.Second, addr+" accepting TLS connections", func() (bool, string) {
		o := op
		o.DialTimeout = time.Second
		c, err := valkey.Dial(addr, o)
		if err != nil {
			return false, err.Error()
		}
		defer c.Close()
		_, err = c.ClusterInfo(context.Background())
		return err == nil, fmt.Sprint(err)
	})
	return member{Addr: addr, Stop: stop}, bus
}

// TestHandoverKeepsWriting runs the preStop hook's command on a primary of a real 3x1
// cluster (the operator's users.acl: the hook logs in as the replication user from
// auth.conf) while a client writes to that primary's slots without pause, then stops the
// server as the kubelet would after the hook. The replica takes over by a coordinated
// CLUSTER FAILOVER; the longest wait between two acknowledged writes stays under 1 s and
// every acknowledged write is read back. The hook on a replica does nothing.
func TestHandoverKeepsWriting(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	ms, op, auth := cluster(ctx, t, 3, 1, "")

	admin, err := valkey.Dial(ms[0].Addr, op)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	v, err := admin.ClusterNodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var victim, replica valkey.Node
	for _, n := range v.Primaries() {
		if n.SlotTotal() > 0 {
			victim = n
			break
		}
	}
	rs := v.ReplicasOf(victim.ID)
	if len(rs) != 1 {
		t.Fatalf("primary %s has replicas %v", victim.Addr, rs)
	}
	replica = rs[0]

	t.Run("a replica hands nothing over", func(t *testing.T) {
		var out bytes.Buffer
		begin := time.Now()
		if err := Command(ctx, []string{"--addr", replica.Addr, "--auth-file", auth, "--timeout", "10s"}, &out); err != nil {
			t.Fatalf("hook on a replica: %v\n%s", err, out.String())
		}
		if took := time.Since(begin); took > 2*time.Second || !strings.Contains(out.String(), "nothing to hand over") {
			t.Errorf("hook on a replica took %s and said %q", took, out.String())
		}
	})

	// The writer: one key after another, all in the victim's first slot, so every write
	// waits for that shard; each acknowledged key is remembered with when it was.
	tag := keyInSlot(victim.Slots[0].Start)
	kv, err := valkey.DialClusterData([]string{ms[0].Addr}, valkey.DataOptions{Options: op, ConnTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer kv.Close()
	var (
		mu    sync.Mutex
		acked []string
		ackAt []time.Time
		fails int
	)
	stop := make(chan struct{})
	wrote := make(chan struct{})
	go func() {
		defer close(wrote)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			key := fmt.Sprintf("{%s}:%d", tag, i)
			wctx, wcancel := context.WithTimeout(ctx, 3*time.Second)
			err := kv.Set(wctx, key, strconv.Itoa(i))
			wcancel()
			mu.Lock()
			if err == nil {
				acked, ackAt = append(acked, key), append(ackAt, time.Now())
			} else {
				fails++
			}
			mu.Unlock()
			time.Sleep(time.Millisecond)
		}
	}()
	time.Sleep(time.Second)

	var out bytes.Buffer
	begin := time.Now()
	err = Command(ctx, []string{"--addr", victim.Addr, "--auth-file", auth, "--timeout", "20s"}, &out)
	took := time.Since(begin)
	t.Logf("hook on primary %s: %v in %s\n%s", victim.Addr, err, took.Round(time.Millisecond), out.String())
	if err != nil {
		t.Fatal(err)
	}
	// What SIGTERM (or SIGKILL) does to it now costs the shard nothing: it is a replica.
	role := func(addr string) string {
		c, err := valkey.Dial(addr, op)
		if err != nil {
			return err.Error()
		}
		defer c.Close()
		st, err := c.ReplicationState(ctx)
		if err != nil {
			return err.Error()
		}
		return st.Role
	}
	if r := role(victim.Addr); r != "slave" {
		t.Errorf("after the hook %s is %q, want a replica", victim.Addr, r)
	}
	if r := role(replica.Addr); r != "master" {
		t.Errorf("after the hook %s is %q, want the primary", replica.Addr, r)
	}
	for _, m := range ms {
		if m.Addr == victim.Addr {
			m.Stop()
		}
	}
	time.Sleep(time.Second)
	close(stop)
	<-wrote

	mu.Lock()
	defer mu.Unlock()
	gap, at := time.Duration(0), time.Time{}
	for i := 1; i < len(ackAt); i++ {
		if d := ackAt[i].Sub(ackAt[i-1]); d > gap {
			gap, at = d, ackAt[i-1]
		}
	}
	t.Logf("writer: %d acknowledged, %d refused; longest wait between two acknowledged writes %s (from hook start +%s)",
		len(acked), fails, gap.Round(time.Millisecond), at.Sub(begin).Round(time.Millisecond))
	if gap >= time.Second {
		t.Errorf("the shard took no write for %s during the hand-over, want under 1 s", gap)
	}
	if len(acked) < 200 {
		t.Errorf("only %d writes acknowledged: the writer hardly ran", len(acked))
	}
	lost := 0
	for i, k := range acked {
		got, err := kv.Get(ctx, k)
		if err != nil || got != strings.TrimPrefix(k, "{"+tag+"}:") {
			lost++
			if lost <= 3 {
				t.Errorf("acknowledged key %d %s: %q, %v", i, k, got, err)
			}
		}
	}
	if lost > 0 {
		t.Errorf("%d of %d acknowledged writes lost", lost, len(acked))
	}
}

// TestHandoverWithoutReplica: a primary whose replica is gone cannot hand over; the hook
// gives up at once with ErrNoReplica rather than holding the pod's deletion until its
// timeout (as when a whole cluster is deleted); the kubelet then stops the server.
func TestHandoverWithoutReplica(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ms, op, auth := cluster(ctx, t, 3, 1, "")
	admin, err := valkey.Dial(ms[0].Addr, op)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	v, err := admin.ClusterNodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var victim valkey.Node
	for _, n := range v.Primaries() {
		if n.SlotTotal() > 0 && n.Addr != ms[0].Addr {
			victim = n
			break
		}
	}
	for _, r := range v.ReplicasOf(victim.ID) {
		for _, m := range ms {
			if m.Addr == r.Addr {
				m.Stop()
			}
		}
	}
	var out bytes.Buffer
	begin := time.Now()
	err = Command(ctx, []string{"--addr", victim.Addr, "--auth-file", auth, "--timeout", "15s"}, &out)
	took := time.Since(begin)
	if !errors.Is(err, ErrNoReplica) || took > 5*time.Second {
		t.Errorf("hook without a replica: %v after %s, want ErrNoReplica at once, not at the 15 s timeout\n%s", err, took, out.String())
	}
}

// TestHandoverTLS: on a cluster that speaks TLS only (clients, bus, replication), the hook
// reads the CA and this member's certificate from --tls-dir, as the pod mounts them, and
// hands the primary's slots over.
func TestHandoverTLS(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	tlsDir := t.TempDir()
	testenv.NewCA(t, "handover ca").WriteFiles(t, tlsDir, "127.0.0.1")
	ms, op, auth := cluster(ctx, t, 3, 1, tlsDir)
	admin, err := valkey.Dial(ms[0].Addr, op)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	v, err := admin.ClusterNodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	victim := v.Primaries()[0]
	var out bytes.Buffer
	// Without the CA the hook cannot even log in.
	if err := Command(ctx, []string{"--addr", victim.Addr, "--auth-file", auth, "--timeout", "2s", "--linger", "0s"}, &out); err == nil {
		t.Errorf("the hook handed over in plain text to a TLS-only server:\n%s", out.String())
	}
	out.Reset()
	if err := Command(ctx, []string{"--addr", victim.Addr, "--auth-file", auth, "--tls-dir", tlsDir, "--timeout", "20s", "--linger", "0s"}, &out); err != nil {
		t.Fatalf("hook over TLS: %v\n%s", err, out.String())
	}
	c, err := valkey.Dial(victim.Addr, op)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if st, err := c.ReplicationState(ctx); err != nil || !st.Replica() {
		t.Errorf("after the hook %s is %+v (%v), want a replica\n%s", victim.Addr, st, err, out.String())
	}
}

func TestReadAuth(t *testing.T) {
	pw := resources.InternalPasswords{Operator: "o", Replication: "a \"quoted\" \\ pass\x01word é", Exporter: "e"}
	files, err := resources.RenderACL(&valkeyv1.ValkeyCluster{ObjectMeta: metav1.ObjectMeta{Name: "c"}}, nil, pw)
	if err != nil {
		t.Fatal(err)
	}
	user, pass, err := ReadAuth(strings.NewReader(files.Auth))
	if err != nil || user != resources.ReplicationUser || pass != pw.Replication {
		t.Errorf("ReadAuth(%q) = %q, %q, %v; want %q, %q", files.Auth, user, pass, err, resources.ReplicationUser, pw.Replication)
	}
	for _, bad := range []string{"", "masteruser u\n", "masteruser u\nmasterauth \"open\n", "masteruser u\nmasterauth \"x\\x4\"\n"} {
		if _, _, err := ReadAuth(strings.NewReader(bad)); err == nil {
			t.Errorf("ReadAuth(%q): no error", bad)
		}
	}
}

// keyInSlot is a hash tag whose keys all land in slot.
func keyInSlot(slot int) string {
	for i := 0; ; i++ {
		k := "t" + strconv.Itoa(i)
		if valkey.KeySlot(k) == slot {
			return k
		}
	}
}
