package e2e

import (
	"context"
	"crypto/sha256"
	"fmt"
	"strings"
	"testing"
	"time"
)

const vkRestoreNamespace = "e2e-valkey-restore"

// vkRestoreCluster is a ValkeyCluster backed up to (and, with bootstrap, restored from) the
// host's versitygw.
func vkRestoreCluster(name string, shards, replicas int, bootstrap string, s3 *mgS3) string {
	return fmt.Sprintf(`apiVersion: valkey.io/v1alpha1
kind: ValkeyCluster
metadata: {name: %s, namespace: %s}
spec:
  image: %s
  shards: %d
  replicas: %d
  resources: {requests: {cpu: 10m, memory: 32Mi}}
  backup:
    objectStore: {endpoint: %q, bucket: backups, prefix: e2e, region: us-east-1, forcePathStyle: true, credentials: {secretName: backup-s3}}
%s`, name, vkRestoreNamespace, vkImageOld, shards, replicas, s3.endpoint, bootstrap)
}

// TestValkeyRestore on the local cluster (issue 25 item 2): the chart's operator backs up
// a 2-shard cluster holding keys with checksummed values into a versitygw on the host,
// and a new cluster of 2 shards x 1 replica starts from that backup: each primary's pod
// runs the restore-rdb init container (the operator binary, from the chart's image) that
// loads its shard's RDB into the data volume under the operator's appendonly yes, the
// replicas sync, and every key reads back with its value.
func TestValkeyRestore(t *testing.T) {
	needInstalled(t, "valkey-operator")
	ctx := scenarioContext(t)
	s3 := startMgS3(t)
	setup := fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata: {name: %[1]s}
---
apiVersion: v1
kind: Secret
metadata: {name: backup-s3, namespace: %[1]s}
stringData: {AWS_ACCESS_KEY_ID: %[2]q, AWS_SECRET_ACCESS_KEY: %[3]q}
---
%[4]s`, vkRestoreNamespace, s3.access, s3.secret, vkRestoreCluster("src", 2, 0, "", s3))
	if out, err := kubectlStdin(ctx, setup, "apply", "-f", "-"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	t.Cleanup(func() {
		if out, err := kubectl(context.Background(), "delete", "namespace", vkRestoreNamespace, "--wait=false", "--ignore-not-found"); err != nil {
			t.Logf("%v\n%s", err, out)
		}
	})
	begin := time.Now()
	src := &vkScenario{t: t, begin: begin, ns: vkRestoreNamespace, name: "src"}
	src.waitReady(ctx, "src", 5*time.Minute, vkWant{2, 0, "", ""})
	nodes, err := src.nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ip := nodes[0].Status.PodIP
	want := map[string]string{}
	for i := range 200 {
		k, v := fmt.Sprintf("rk:%d", i), fmt.Sprintf("%x", sha256.Sum256([]byte(fmt.Sprint(i))))
		if _, err := src.cli(ctx, ip, "set", k, v); err != nil {
			t.Fatal(err)
		}
		want[k] = v
	}
	backup := fmt.Sprintf("apiVersion: valkey.io/v1alpha1\nkind: ValkeyBackup\nmetadata: {name: before, namespace: %s}\nspec: {cluster: {name: src}}\n", vkRestoreNamespace)
	if out, err := kubectlStdin(ctx, backup, "apply", "-f", "-"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if out, err := kubectl(ctx, "wait", "vkb/before", "-n", vkRestoreNamespace, "--for=condition=Completed", "--timeout=3m"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	t.Logf("backup completed %s after the start", since(begin))

	restored := time.Now()
	if out, err := kubectlStdin(ctx, vkRestoreCluster("dst", 2, 1, "  bootstrap: {recovery: {backup: {name: before}}}\n", s3), "apply", "-f", "-"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if out, err := kubectl(ctx, "wait", "vkc/dst", "-n", vkRestoreNamespace, "--for=condition=Restored", "--timeout=5m"); err != nil {
		out2, _ := kubectl(ctx, "get", "vkc,vkn,pods", "-n", vkRestoreNamespace)
		t.Fatalf("%v\n%s\n%s", err, out, out2)
	}
	dst := &vkScenario{t: t, begin: restored, ns: vkRestoreNamespace, name: "dst"}
	dst.waitReady(ctx, "dst", 5*time.Minute, vkWant{2, 1, "", ""})
	t.Logf("restored into 2 x 1 and Ready %s after its creation", since(restored))
	status, err := kubectl(ctx, "get", "pod", "dst-0-0-0", "-n", vkRestoreNamespace, "-o",
		`jsonpath={.status.initContainerStatuses[?(@.name=="restore-rdb")].state.terminated.exitCode}`)
	if err != nil || strings.TrimSpace(status) != "0" {
		t.Fatalf("restore-rdb init container of dst-0-0-0: exit code %q (%v)", status, err)
	}
	dnodes, err := dst.nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range want {
		got, err := dst.cli(ctx, dnodes[0].Status.PodIP, "get", k)
		if err != nil || strings.TrimSpace(got) != v {
			t.Fatalf("GET %s on the restored cluster = %q, %v; want %q", k, strings.TrimSpace(got), err, v)
		}
	}
	if _, err := kubectl(ctx, "get", "secret", "dst-restore", "-n", vkRestoreNamespace); err == nil {
		t.Fatal("the restore Secret outlived the restore")
	}
	out, _ := kubectl(ctx, "get", "vkc", "dst", "-n", vkRestoreNamespace, "-o", "jsonpath={.status.restore}")
	t.Logf("restore status: %s", out)
}
