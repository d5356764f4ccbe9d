package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
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
// Nodes and edges are written through the MAIN, a MemgraphBackup completes, more nodes
// are written, the cluster is deleted, a new cluster restores the backup, and every node
// and edge written before the backup (none after) reads back on its MAIN.
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

	begin = time.Now()
	if out, err := kubectlStdin(ctx, fmt.Sprintf("apiVersion: memgraph.com/v1alpha1\nkind: MemgraphBackup\nmetadata: {name: mg-bk-1, namespace: %s}\nspec: {cluster: {name: %s}}\n", mgNamespace, src), "apply", "-f", "-"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if out, err := kubectl(ctx, "wait", "mgb/mg-bk-1", "-n", mgNamespace, "--for=condition=Completed", "--timeout=3m"); err != nil {
		out2, _ := kubectl(ctx, "get", "mgb", "mg-bk-1", "-n", mgNamespace, "-o", "yaml")
		t.Fatalf("backup: %v\n%s\n%s", err, out, out2)
	}
	out, _ := kubectl(ctx, "get", "mgb", "mg-bk-1", "-n", mgNamespace, "-o", "jsonpath={.status.phase} {.status.instance} {.status.size} {.status.path}")
	t.Logf("backup in %s: %s", since(begin), out)
	for i := before; i < before+20; i++ {
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
	want := make([]int, before)
	for i := range want {
		want[i] = i
	}
	if !slices.Equal(ids, want) {
		t.Fatalf("the restored cluster holds %d Person nodes (%v...), want ids 0..%d and none written after the backup", len(ids), ids[:min(len(ids), 5)], before-1)
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
	if n, err := mgRun(ctx, mainPod(d), "MATCH (n:Person) RETURN count(n)"); err != nil || n.Records[0][0] != int64(before) {
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
	out, _ = kubectl(ctx, "get", "mgb", "-n", mgNamespace, "-l", "memgraph.com/scheduled-backup=mg-bk-sched", "-o", "name")
	t.Logf("retention removed %s; scheduled backups now: %s", firstName, strings.Join(strings.Fields(out), " "))
	if out, err := kubectl(ctx, "patch", "mgsb", "mg-bk-sched", "-n", mgNamespace, "--type", "merge", "-p", `{"spec":{"suspend":true}}`); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
}
