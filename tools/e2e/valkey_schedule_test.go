package e2e

import (
	backupv1 "github.com/opsuite/suite/api/backup/v1alpha1"

	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	valkeyv1 "github.com/opsuite/suite/api/valkey/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var vkbGVR = schema.GroupVersionResource{Group: "valkey.io", Version: "v1alpha1", Resource: "valkeybackups"}

const vkSchedNamespace = "e2e-valkey-sched"

// vkSchedManifest: a 1-shard cluster backed up to the host's versitygw every 5 seconds,
// keeping the last completed backup.
func vkSchedManifest(s3 *mgS3) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata: {name: %[1]s}
---
apiVersion: v1
kind: Secret
metadata: {name: backup-s3, namespace: %[1]s}
stringData: {AWS_ACCESS_KEY_ID: %[2]q, AWS_SECRET_ACCESS_KEY: %[3]q}
---
apiVersion: valkey.io/v1alpha1
kind: ValkeyCluster
metadata: {name: sched, namespace: %[1]s}
spec:
  image: %[5]s
  shards: 1
  replicas: 0
  resources: {requests: {cpu: 10m, memory: 32Mi}}
  backup:
    objectStore: {endpoint: %[4]q, bucket: backups, prefix: e2e, region: us-east-1, forcePathStyle: true, credentials: {secretName: backup-s3}}
    keepLast: 1
---
apiVersion: valkey.io/v1alpha1
kind: ValkeyScheduledBackup
metadata: {name: every5s, namespace: %[1]s}
spec:
  cluster: {name: sched}
  schedule: "*/5 * * * * *"
`, vkSchedNamespace, s3.access, s3.secret, s3.endpoint, vkImageOld)
}

// TestValkeyScheduledBackup on the local cluster (issue 25 items 6 and 8): the operator as
// the chart installs it, with its ServiceAccount's RBAC, backs a cluster up every 5 seconds
// into a versitygw on the host; with keepLast 1 the first scheduled backup's objects leave
// the store and its ValkeyBackup goes once a later one completed; suspended, the schedule
// says so and creates nothing more.
func TestValkeyScheduledBackup(t *testing.T) {
	needInstalled(t, "valkey-operator")
	ctx := scenarioContext(t)
	s3 := startMgS3(t)
	if out, err := kubectlStdin(ctx, vkSchedManifest(s3), "apply", "-f", "-"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	t.Cleanup(func() {
		if out, err := kubectl(context.Background(), "delete", "namespace", vkSchedNamespace, "--wait=false", "--ignore-not-found"); err != nil {
			t.Logf("%v\n%s", err, out)
		}
	})
	begin := time.Now()
	s := &vkScenario{t: t, begin: begin, ns: vkSchedNamespace, name: "sched"}
	s.waitReady(ctx, "sched", 5*time.Minute, vkWant{1, 0, "", ""})
	t.Logf("cluster sched Ready after %s", since(begin))

	backups := func(ctx context.Context) ([]valkeyv1.ValkeyBackup, error) {
		list, err := env.dyn.Resource(vkbGVR).Namespace(vkSchedNamespace).List(ctx, metav1.ListOptions{LabelSelector: valkeyv1.LabelScheduledBackup + "=every5s"})
		if err != nil {
			return nil, err
		}
		var out []valkeyv1.ValkeyBackup
		for _, u := range list.Items {
			var b valkeyv1.ValkeyBackup
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &b); err != nil {
				return nil, err
			}
			out = append(out, b)
		}
		slices.SortFunc(out, func(a, b valkeyv1.ValkeyBackup) int { return strings.Compare(a.Name, b.Name) })
		return out, nil
	}
	var first valkeyv1.ValkeyBackup
	var firstDone time.Time
	var last string
	err := poll(ctx, t, "the first scheduled backup completed, then pruned", 3*time.Minute, func(ctx context.Context) (bool, error) {
		list, err := backups(ctx)
		if err != nil {
			return transient(err)
		}
		var states []string
		for _, b := range list {
			states = append(states, b.Name+"="+string(b.Status.Phase))
		}
		last = strings.Join(states, " ")
		if first.Name == "" && len(list) > 0 {
			first = list[0]
		}
		for _, b := range list {
			if b.Name == first.Name && b.Status.Phase == valkeyv1.BackupPhaseCompleted && firstDone.IsZero() {
				first, firstDone = b, time.Now()
			}
		}
		if firstDone.IsZero() {
			return false, nil
		}
		_, err = env.dyn.Resource(vkbGVR).Namespace(vkSchedNamespace).Get(ctx, first.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Fatalf("%v; backups: %s", err, last)
	}
	t.Logf("first backup %s completed after %s (path %s), pruned %s later", first.Name, firstDone.Sub(begin).Round(100*time.Millisecond),
		first.Status.Path, since(firstDone))
	// The posix backend keeps an object as a file under <root>/<bucket>/<key>.
	dir := filepath.Join(s3.root, "backups", first.Status.Path)
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		t.Fatalf("the pruned backup left %d objects in %s", len(entries), dir)
	}
	list, err := backups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var kept *valkeyv1.ValkeyBackup
	for i := range list {
		if list[i].Status.Phase == valkeyv1.BackupPhaseCompleted {
			kept = &list[i]
		}
	}
	if kept == nil {
		t.Fatalf("no completed backup kept: %s", last)
	}
	if entries, err := os.ReadDir(filepath.Join(s3.root, "backups", kept.Status.Path)); err != nil || len(entries) != 2 {
		t.Fatalf("the kept backup %s has %d objects (%v), want its RDB and manifest", kept.Name, len(entries), err)
	}

	if out, err := kubectl(ctx, "patch", "vksb", "every5s", "-n", vkSchedNamespace, "--type", "merge", "-p", `{"spec":{"suspend":true}}`); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if out, err := kubectl(ctx, "wait", "vksb/every5s", "-n", vkSchedNamespace, "--for=condition=Scheduled=false", "--timeout=1m"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	reason, err := kubectl(ctx, "get", "vksb", "every5s", "-n", vkSchedNamespace, "-o", `jsonpath={.status.conditions[?(@.type=="Scheduled")].reason}`)
	if err != nil || reason != backupv1.ScheduledBackupReasonSuspended {
		t.Fatalf("Scheduled reason %q (%v), want Suspended", reason, err)
	}
	time.Sleep(2 * time.Second)
	before, err := backups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(11 * time.Second)
	after, err := backups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	newest := func(l []valkeyv1.ValkeyBackup) string {
		if len(l) == 0 {
			return ""
		}
		return l[len(l)-1].Name
	}
	if newest(after) > newest(before) {
		t.Fatalf("the suspended schedule created %s", newest(after))
	}
	out, _ := kubectl(ctx, "get", "vksb,vkb", "-n", vkSchedNamespace)
	t.Logf("suspended:\n%s", out)
}
