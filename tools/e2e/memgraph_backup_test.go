package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	memgraphv1 "github.com/opsuite/suite/api/memgraph/v1alpha1"
	"github.com/opsuite/suite/shared/testenv"
	"github.com/opsuite/suite/tools/internal/bolt"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// mgS3 is a versitygw (posix backend) on a host loopback port, which the local cluster's
// pods (host processes) reach; a bucket is a directory of its root, an object a file.
type mgS3 struct {
	endpoint, root, access, secret string
}

func startMgS3(t *testing.T) *mgS3 {
	t.Helper()
	bin := filepath.Join(env.root, ".cache", "bin", "versitygw")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%s is missing: run `make objectstore`", bin)
	}
	key := func(n int) string {
		b := make([]byte, n)
		_, _ = rand.Read(b)
		return hex.EncodeToString(b)
	}
	s := &mgS3{root: t.TempDir(), access: key(10), secret: key(20)}
	if err := os.Mkdir(filepath.Join(s.root, "backups"), 0o755); err != nil {
		t.Fatal(err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(testenv.FreePortBelowEphemeral(t))
	s.endpoint = "http://" + addr
	cmd := exec.Command(bin, "--port", addr, "--health", "/health", "--region", "us-east-1", "--quiet", "posix", s.root)
	cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY_ID="+s.access, "ROOT_SECRET_ACCESS_KEY="+s.secret)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return s
}

// mgReplicationEpoch reads the epoch the simulator's replication state file holds on the
// volume of claim (sim-replication.json: the epoch the coordinators gave the instance).
func mgReplicationEpoch(ctx context.Context, t *testing.T, claim string) string {
	t.Helper()
	if env.local == nil {
		t.Fatal("reading a data instance's volume needs the local cluster the suite starts (E2E_KUBECONFIG is set)")
	}
	pv, err := kubectl(ctx, "get", "pvc", claim, "-n", mgNamespace, "-o", "jsonpath={.spec.volumeName}")
	if err != nil || strings.TrimSpace(pv) == "" {
		t.Fatalf("claim %s: %v %s", claim, err, pv)
	}
	dir := filepath.Join(env.local.VolumeDir(), strings.TrimSpace(pv))
	if hp, err := kubectl(ctx, "get", "pv", strings.TrimSpace(pv), "-o", "jsonpath={.spec.hostPath.path}"); err == nil && strings.TrimSpace(hp) != "" {
		dir = strings.TrimSpace(hp)
	}
	var st struct {
		Epoch uint64 `json:"epoch"`
	}
	b, err := os.ReadFile(filepath.Join(dir, "sim-replication.json"))
	if err != nil || json.Unmarshal(b, &st) != nil || st.Epoch == 0 {
		t.Fatalf("the replication state on %s: %v %s", dir, err, b)
	}
	return strconv.FormatUint(st.Epoch, 10)
}

// mgCommitted is the committed transactions on a data pod (the simulator's SHOW STORAGE
// INFO row committed_transactions).
func mgCommitted(ctx context.Context, t *testing.T, pod string) uint64 {
	t.Helper()
	res, err := mgRun(ctx, pod, "SHOW STORAGE INFO")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res.Records {
		if r[0] == "committed_transactions" {
			n, _ := r[1].(int64)
			return uint64(n)
		}
	}
	t.Fatalf("SHOW STORAGE INFO on %s has no committed_transactions: %v", pod, res.Records)
	return 0
}

func mgBackupCluster(name, endpoint, bootstrap string) string {
	y := fmt.Sprintf(`apiVersion: memgraph.com/v1alpha1
kind: MemgraphCluster
metadata: {name: %s, namespace: %s}
spec:
  secrets: {name: memgraph-license}
  auth: {secretName: memgraph-auth}
  backup:
    objectStore: {endpoint: %q, bucket: backups, prefix: e2e, region: us-east-1, forcePathStyle: true, credentials: {secretName: mg-backup-s3}}
`, name, mgNamespace, endpoint)
	if bootstrap != "" {
		y += fmt.Sprintf("  bootstrap:\n    backup: {name: %s}\n", bootstrap)
	}
	return y
}

// TestMemgraphBackupRestore on the local cluster: the operator's chart as installed, its
// pods as processes (the backup agent sidecar and the restore init container run
// bin/memgraph-operator, the data instances bin/memgraph-sim), a versitygw on the host.
// Nodes and edges are written through the MAIN, a writer goes on writing one node per
// commit while a MemgraphBackup runs; the backup completes on the replica (the MAIN's
// SHOW REPLICAS shows it caught up), its manifest names the replica, the MAIN's epoch
// (as the MAIN's replication state holds it) and the server version, and its timestamp
// is where the snapshot and the WAL stored with it end. More nodes are written, the
// cluster is deleted, a new cluster restores the backup, and exactly the nodes committed
// up to the manifest's timestamp, and the edges, read back on its MAIN.
func TestMemgraphBackupRestore(t *testing.T) {
	ctx := mgScenario(t)
	s3 := startMgS3(t)
	secrets := sampleSecrets(t, filepath.Join(env.root, "deploy", "samples", "memgraph.yaml"))
	s3Secret := fmt.Sprintf("apiVersion: v1\nkind: Secret\nmetadata: {name: mg-backup-s3, namespace: %s}\nstringData: {AWS_ACCESS_KEY_ID: %q, AWS_SECRET_ACCESS_KEY: %q}\n",
		mgNamespace, s3.access, s3.secret)
	if out, err := kubectlStdin(ctx, secrets+"\n---\n"+s3Secret, "apply", "-f", "-"); err != nil {
		t.Fatalf("applying the Secrets: %v\n%s", err, out)
	}
	const src, dst, bad = "mg-bk-src", "mg-bk-dst", "mg-bk-bad"
	t.Cleanup(func() {
		bg := context.Background()
		for _, args := range [][]string{{"delete", "mgc", src, dst, bad, "-n", mgNamespace, "--ignore-not-found", "--wait=false"},
			{"delete", "mgsb", "mg-bk-sched", "-n", mgNamespace, "--ignore-not-found"},
			{"delete", "mgb", "-l", "memgraph.com/scheduled-backup=mg-bk-sched", "-n", mgNamespace, "--ignore-not-found"},
			{"delete", "mgb", "mg-bk-1", "mg-bk-2", "-n", mgNamespace, "--ignore-not-found"}} {
			if out, err := kubectl(bg, args...); err != nil {
				t.Logf("%v\n%s", err, out)
			}
		}
	})
	waitReady := func(name string, timeout time.Duration) *memgraphv1.MemgraphCluster {
		t.Helper()
		var c *memgraphv1.MemgraphCluster
		err := poll(ctx, t, "MemgraphCluster "+name+" Ready", timeout, func(ctx context.Context) (bool, error) {
			got, err := mgClusterNamed(ctx, name)
			if err != nil {
				return transient(err)
			}
			c = got
			return got.Status.State == memgraphv1.StateReady && got.Status.Main != "", nil
		})
		if err != nil {
			t.Logf("last seen: %s", mgDescribe(c))
			if out, kerr := kubectl(ctx, "get", "mgc,mgb,sts,pods", "-n", mgNamespace, "-o", "wide"); kerr == nil {
				t.Logf("objects:\n%s", out)
			}
			t.Fatalf("%s did not become Ready: %v", name, err)
		}
		return c
	}
	begin := time.Now()
	if out, err := kubectlStdin(ctx, mgBackupCluster(src, s3.endpoint, ""), "apply", "-f", "-"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	c := waitReady(src, 5*time.Minute)
	t.Logf("%s Ready in %s, MAIN %s", src, since(begin), c.Status.Main)
	mgAuth = mgCredentials(ctx, t, c)
	mainPod := func(c *memgraphv1.MemgraphCluster) string {
		return c.Name + "-data-" + c.Status.Main[strings.LastIndex(c.Status.Main, "_")+1:]
	}
	const before = 200
	for i := 0; i < before; i += 2 {
		q := fmt.Sprintf(`CREATE (:Person {id: %d})-[:KNOWS]->(:Person {id: %d})`, i, i+1)
		if _, err := mgRun(ctx, mainPod(c), q); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}

	// The MAIN's epoch, as its replication state on its volume holds it.
	mainEpoch := mgReplicationEpoch(ctx, t, "lib-"+mainPod(c))
	base := mgCommitted(ctx, t, mainPod(c))

	// The backup, with a writer going on meanwhile.
	stopWriter, writer := make(chan struct{}), make(chan error, 1)
	go func() {
		for i := before; ; i++ {
			select {
			case <-stopWriter:
				writer <- nil
				return
			case <-time.After(20 * time.Millisecond):
			}
			if _, err := mgRun(ctx, mainPod(c), fmt.Sprintf(`CREATE (:Person {id: %d})`, i)); err != nil {
				writer <- fmt.Errorf("write %d: %w", i, err)
				return
			}
		}
	}()
	begin = time.Now()
	if out, err := kubectlStdin(ctx, fmt.Sprintf("apiVersion: memgraph.com/v1alpha1\nkind: MemgraphBackup\nmetadata: {name: mg-bk-1, namespace: %s}\nspec: {cluster: {name: %s}}\n", mgNamespace, src), "apply", "-f", "-"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if out, err := kubectl(ctx, "wait", "mgb/mg-bk-1", "-n", mgNamespace, "--for=condition=Completed", "--timeout=3m"); err != nil {
		out2, _ := kubectl(ctx, "get", "mgb", "mg-bk-1", "-n", mgNamespace, "-o", "yaml")
		t.Fatalf("backup: %v\n%s\n%s", err, out, out2)
	}
	took := since(begin)
	close(stopWriter)
	if err := <-writer; err != nil {
		t.Fatal(err)
	}
	var bk memgraphv1.MemgraphBackup
	if out, err := kubectl(ctx, "get", "mgb", "mg-bk-1", "-n", mgNamespace, "-o", "json"); err != nil || json.Unmarshal([]byte(out), &bk) != nil {
		t.Fatalf("the backup: %v\n%s", err, out)
	}
	var m struct {
		Instance, Role, Main, Epoch, ServerVersion string
		SnapshotTimestamp, Timestamp               uint64
		Files                                      []struct{ Name string }
	}
	if b, err := os.ReadFile(filepath.Join(s3.root, "backups", filepath.FromSlash(bk.Status.Path), "manifest.json")); err != nil || json.Unmarshal(b, &m) != nil {
		t.Fatalf("the manifest of %s: %v", bk.Status.Path, err)
	}
	if bk.Status.Role != memgraphv1.BackupRoleReplica || bk.Status.Instance == c.Status.Main || bk.Status.Main != c.Status.Main ||
		m.Role != bk.Status.Role || m.Instance != bk.Status.Instance || m.Main != c.Status.Main {
		t.Fatalf("the backup was taken on %s (%s; manifest: %s, %s), want a replica of the MAIN %s", bk.Status.Instance, bk.Status.Role, m.Instance, m.Role, c.Status.Main)
	}
	if m.Epoch != mainEpoch || bk.Status.Epoch != mainEpoch || m.ServerVersion != "3.12.1-sim" || bk.Status.ServerVersion != m.ServerVersion {
		t.Fatalf("manifest epoch %q, version %q (status %q, %q); the MAIN's epoch is %q", m.Epoch, m.ServerVersion, bk.Status.Epoch, bk.Status.ServerVersion, mainEpoch)
	}
	if m.Timestamp < m.SnapshotTimestamp || m.Timestamp < base || int64(m.Timestamp) != bk.Status.Timestamp || m.Files[0].Name != bk.Status.Files[0].Name {
		t.Fatalf("manifest timestamps %d (snapshot %d), %d commits before the backup; status %+v", m.Timestamp, m.SnapshotTimestamp, base, bk.Status)
	}
	restoredIDs := before + int(m.Timestamp-base)
	written := mgCommitted(ctx, t, mainPod(c)) - base
	t.Logf("backup in %s on %s (%s): snapshot at commit %d, %d WAL files up to %d, epoch %s; the writer made %d commits",
		took, bk.Status.Instance, bk.Status.Role, m.SnapshotTimestamp, len(m.Files)-1, m.Timestamp, m.Epoch, written)
	next := before + int(written)
	for i := next; i < next+20; i++ {
		if _, err := mgRun(ctx, mainPod(c), fmt.Sprintf(`CREATE (:Person {id: %d})`, i)); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
	if out, err := kubectl(ctx, "delete", "mgc", src, "-n", mgNamespace, "--wait=true", "--timeout=3m"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}

	begin = time.Now()
	if out, err := kubectlStdin(ctx, mgBackupCluster(dst, s3.endpoint, "mg-bk-1"), "apply", "-f", "-"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	d := waitReady(dst, 5*time.Minute)
	if cond := meta.FindStatusCondition(d.Status.Conditions, memgraphv1.ConditionRestored); cond == nil || cond.Status != metav1.ConditionTrue {
		err := poll(ctx, t, dst+" Restored", time.Minute, func(ctx context.Context) (bool, error) {
			got, err := mgClusterNamed(ctx, dst)
			if err != nil {
				return transient(err)
			}
			cond := meta.FindStatusCondition(got.Status.Conditions, memgraphv1.ConditionRestored)
			return cond != nil && cond.Status == metav1.ConditionTrue, nil
		})
		if err != nil {
			t.Fatalf("Restored: %v", err)
		}
	}
	t.Logf("%s restored and Ready in %s, MAIN %s", dst, since(begin), d.Status.Main)
	res, err := mgRun(ctx, mainPod(d), "MATCH (n:Person) RETURN n")
	if err != nil {
		t.Fatal(err)
	}
	var ids []int
	for _, r := range res.Records {
		n, ok := r[0].(bolt.Node)
		if !ok {
			t.Fatalf("row %v is no node", r)
		}
		id, _ := n.Props["id"].(int64)
		ids = append(ids, int(id))
	}
	slices.Sort(ids)
	want := make([]int, restoredIDs)
	for i := range want {
		want[i] = i
	}
	if !slices.Equal(ids, want) {
		t.Fatalf("the restored cluster holds %d Person nodes (%v...), want ids 0..%d (up to the manifest's commit %d) and none written after", len(ids), ids[:min(len(ids), 5)], restoredIDs-1, m.Timestamp)
	}
	edges, err := mgRun(ctx, mainPod(d), "MATCH ()-[r:KNOWS]->() RETURN count(r)")
	if err != nil || len(edges.Records) != 1 || edges.Records[0][0] != int64(before/2) {
		t.Fatalf("edges: %v %v", edges, err)
	}

	// A backup whose stored snapshot changed restores nothing, and says so.
	if out, err := kubectlStdin(ctx, fmt.Sprintf("apiVersion: memgraph.com/v1alpha1\nkind: MemgraphBackup\nmetadata: {name: mg-bk-2, namespace: %s}\nspec: {cluster: {name: %s}}\n", mgNamespace, dst), "apply", "-f", "-"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if out, err := kubectl(ctx, "wait", "mgb/mg-bk-2", "-n", mgNamespace, "--for=condition=Completed", "--timeout=3m"); err != nil {
		t.Fatalf("second backup: %v\n%s", err, out)
	}
	p2, _ := kubectl(ctx, "get", "mgb", "mg-bk-2", "-n", mgNamespace, "-o", "jsonpath={.status.path}/{.status.files[0].name}")
	file := filepath.Join(s3.root, "backups", filepath.FromSlash(strings.TrimSpace(p2)))
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("the stored snapshot %s: %v", file, err)
	}
	b[len(b)/2] ^= 0x20
	if err := os.WriteFile(file, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := kubectlStdin(ctx, mgBackupCluster(bad, s3.endpoint, "mg-bk-2"), "apply", "-f", "-"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if out, err := kubectl(ctx, "wait", "mgc/"+bad, "-n", mgNamespace, "--for=jsonpath={.status.conditions[?(@.type==\"Restored\")].reason}=BackupCorrupted", "--timeout=2m"); err != nil {
		t.Fatalf("a corrupted backup: %v\n%s", err, out)
	}
	if out, _ := kubectl(ctx, "get", "sts,pods", "-n", mgNamespace, "-l", "memgraph.com/cluster="+bad, "-o", "name"); strings.TrimSpace(out) != "" {
		t.Errorf("a cluster bootstrapped from a corrupted backup created %s", out)
	}
	if after, err := os.ReadFile(file); err != nil || string(after) != string(b) {
		t.Errorf("the corrupted backup's file changed: %v", err)
	}
	if n, err := mgRun(ctx, mainPod(d), "MATCH (n:Person) RETURN count(n)"); err != nil || n.Records[0][0] != int64(restoredIDs) {
		t.Errorf("the restored cluster after the failed restore: %v %v", n, err)
	}

	// A schedule every 5 s with keepLast 1: it runs twice, and retention removes the
	// first backup, its objects first.
	if out, err := kubectl(ctx, "patch", "mgc", dst, "-n", mgNamespace, "--type", "merge", "-p", `{"spec":{"backup":{"keepLast":1}}}`); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if out, err := kubectlStdin(ctx, fmt.Sprintf("apiVersion: memgraph.com/v1alpha1\nkind: MemgraphScheduledBackup\nmetadata: {name: mg-bk-sched, namespace: %s}\nspec: {cluster: {name: %s}, schedule: \"*/5 * * * * *\", immediate: true}\n", mgNamespace, dst), "apply", "-f", "-"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var firstName, firstPath string
	err = poll(ctx, t, "the first scheduled backup Completed", 2*time.Minute, func(ctx context.Context) (bool, error) {
		out, err := kubectl(ctx, "get", "mgb", "-n", mgNamespace, "-l", "memgraph.com/scheduled-backup=mg-bk-sched", "--sort-by=.metadata.name",
			"-o", `jsonpath={range .items[?(@.status.phase=="Completed")]}{.metadata.name} {.status.path}{"\n"}{end}`)
		if err != nil {
			return transient(err)
		}
		if lines := strings.Fields(out); len(lines) >= 2 {
			firstName, firstPath = lines[0], lines[1]
			return true, nil
		}
		return false, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(s3.root, "backups", filepath.FromSlash(firstPath), "manifest.json")); err != nil {
		t.Fatalf("the first scheduled backup's manifest: %v", err)
	}
	err = poll(ctx, t, "retention removing "+firstName, 2*time.Minute, func(ctx context.Context) (bool, error) {
		out, err := kubectl(ctx, "get", "mgb", firstName, "-n", mgNamespace, "--ignore-not-found", "-o", "name")
		if err != nil {
			return transient(err)
		}
		_, serr := os.Stat(filepath.Join(s3.root, "backups", filepath.FromSlash(firstPath), "manifest.json"))
		return strings.TrimSpace(out) == "" && os.IsNotExist(serr), nil
	})
	if err != nil {
		out, _ := kubectl(ctx, "get", "mgb", "-n", mgNamespace)
		t.Fatalf("%v\n%s", err, out)
	}
	out, _ := kubectl(ctx, "get", "mgb", "-n", mgNamespace, "-l", "memgraph.com/scheduled-backup=mg-bk-sched", "-o", "name")
	t.Logf("retention removed %s; scheduled backups now: %s", firstName, strings.Join(strings.Fields(out), " "))
	if out, err := kubectl(ctx, "patch", "mgsb", "mg-bk-sched", "-n", mgNamespace, "--type", "merge", "-p", `{"spec":{"suspend":true}}`); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
}
