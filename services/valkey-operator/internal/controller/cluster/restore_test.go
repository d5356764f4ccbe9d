package cluster_test

import (
	backupv1 "github.com/opsuite/suite/api/backup/v1alpha1"

	"context"
	"crypto/sha256"
	"fmt"
	"path"
	"strconv"
	"strings"
	"testing"
	"time"

	valkeyv1 "github.com/opsuite/suite/api/valkey/v1alpha1"
	"github.com/opsuite/suite/services/valkey-operator/internal/controller/backup"
	"github.com/opsuite/suite/services/valkey-operator/internal/resources"
	"github.com/opsuite/suite/services/valkey-operator/internal/restore"
	"github.com/opsuite/suite/services/valkey-operator/internal/valkey"
	"github.com/opsuite/suite/shared/conditions"
	"github.com/opsuite/suite/shared/objectstore"
	"github.com/opsuite/suite/shared/objectstore/objectstoretest"
	"github.com/opsuite/suite/shared/testenv"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// seedsOf are the addresses of the servers of cluster name's members.
func (f *fleet) seedsOf(name string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for node, s := range f.servers {
		if strings.HasPrefix(node, name+"-") {
			out = append(out, s.Addr)
		}
	}
	return out
}

// checksummedKeys writes n keys whose values are the SHA-256 of their index, through a
// cluster client.
func checksummedKeys(t *testing.T, seeds []string, n int) map[string]string {
	t.Helper()
	cl, err := valkey.DialCluster(seeds, valkey.Options{DialTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	keys, values := make([]string, n), make([]string, n)
	want := map[string]string{}
	for i := range n {
		keys[i], values[i] = "rk:"+strconv.Itoa(i), fmt.Sprintf("%x", sha256.Sum256([]byte(strconv.Itoa(i))))
		want[keys[i]] = values[i]
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := cl.SetMany(ctx, keys, values); err != nil {
		t.Fatal(err)
	}
	return want
}

func restoredCond(vc *valkeyv1.ValkeyCluster) *metav1.Condition {
	return conditions.Get(vc.Status.Conditions, valkeyv1.ConditionRestored)
}

// waitRestored drives the fleet until cluster name's Restored condition has reason.
func waitRestored(t *testing.T, f *fleet, name, reason string, timeout time.Duration) *valkeyv1.ValkeyCluster {
	t.Helper()
	var vc valkeyv1.ValkeyCluster
	testenv.Eventually(t, timeout, name+" Restored reason "+reason, func() (bool, string) {
		f.sync(context.Background())
		if err := f.c.Get(context.Background(), client.ObjectKey{Namespace: f.ns, Name: name}, &vc); err != nil {
			return false, err.Error()
		}
		r := restoredCond(&vc)
		if r == nil {
			return false, "no Restored condition; state " + string(vc.Status.State)
		}
		return r.Reason == reason, fmt.Sprintf("%s %s: %s (state %s %s)", r.Status, r.Reason, r.Message, vc.Status.State, vc.Status.Reason)
	})
	return &vc
}

func bootstrapped(ns, name string, shards, replicas int32, rec valkeyv1.BootstrapRecovery, store backupv1.ObjectStoreSpec) *valkeyv1.ValkeyCluster {
	return &valkeyv1.ValkeyCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: valkeyv1.ValkeyClusterSpec{
		Shards: shards, Replicas: replicas, Backup: &valkeyv1.BackupConfiguration{ObjectStore: store},
		Bootstrap: &valkeyv1.BootstrapConfiguration{Recovery: &rec}}}
}

func nodesOf(t *testing.T, c client.Client, ns, name string) int {
	t.Helper()
	var list valkeyv1.ValkeyNodeList
	if err := c.List(context.Background(), &list, client.InNamespace(ns), client.MatchingLabels{resources.LabelCluster: name}); err != nil {
		t.Fatal(err)
	}
	return len(list.Items)
}

// A 3-shard cluster with keys (values checksummed) is backed up by the ValkeyBackup
// controller to versitygw and restored into new clusters: one of the same shape, whose
// primaries start with their shards' RDBs and serve exactly the backed-up slot ranges,
// the replicas synced from them; one with 4 shards, restored with 3 and then resharded;
// one with 2, whose third shard then drains. Every key reads back with its value in all
// three. A corrupted copy of the backup fails with ChecksumMismatch before anything is
// created and changes no object; a folder without a manifest (a partial backup) is never
// restored; a cluster whose members' data volumes already exist is refused; a failing
// restore-rdb init container is named; spec.bootstrap cannot be changed, added or removed.
func TestRestoreFromBackup(t *testing.T) {
	t.Parallel()
	c := env.Client
	ctx := context.Background()
	srv := objectstoretest.Start(t)
	store := srv.Store(t, "backups", "")
	ns := testenv.NewNamespace(t, c, "restore")
	f := newFleet(t, c, ns)
	startController(t, f)
	env.StartManager(t, func(mgr ctrl.Manager) error {
		return backup.Setup(mgr, backup.Config{
			Operator: "restore-test-backup-" + ns,
			Members:  func(_ context.Context, vc *valkeyv1.ValkeyCluster) ([]string, error) { return f.seedsOf(vc.Name), nil },
			Options:  func(context.Context, *valkeyv1.ValkeyCluster) (valkey.Options, error) { return valkey.Options{}, nil },
			Poll:     300 * time.Millisecond,
		})
	}, testenv.InNamespaces(ns))
	if err := c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "s3"}, Data: map[string][]byte{
		"AWS_ACCESS_KEY_ID": []byte(srv.AccessKey), "AWS_SECRET_ACCESS_KEY": []byte(srv.SecretKey)}}); err != nil {
		t.Fatal(err)
	}
	objStore := backupv1.ObjectStoreSpec{Endpoint: srv.Endpoint, Bucket: "backups", Prefix: "team-a", Region: objectstoretest.Region,
		ForcePathStyle: true, Credentials: backupv1.ObjectStoreCredentials{SecretName: "s3"}}

	// The source: 3 shards x 1 replica with 3000 keys, backed up.
	src := &valkeyv1.ValkeyCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "src"}, Spec: valkeyv1.ValkeyClusterSpec{
		Shards: 3, Replicas: 1, Backup: &valkeyv1.BackupConfiguration{ObjectStore: objStore}}}
	if err := c.Create(ctx, src); err != nil {
		t.Fatal(err)
	}
	waitReady(t, f, "src", 120*time.Second)
	want := checksummedKeys(t, f.seedsOf("src"), 3000)
	b := &valkeyv1.ValkeyBackup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "nightly"},
		Spec: valkeyv1.ValkeyBackupSpec{Cluster: backupv1.ClusterReference{Name: "src"}}}
	if err := c.Create(ctx, b); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 90*time.Second, "backup Completed", func() (bool, string) {
		f.sync(ctx)
		if err := c.Get(ctx, client.ObjectKeyFromObject(b), b); err != nil {
			return false, err.Error()
		}
		return b.Status.Phase == valkeyv1.BackupPhaseCompleted, string(b.Status.Phase)
	})
	m, err := restore.ReadManifest(ctx, store, b.Status.Path)
	if err != nil {
		t.Fatal(err)
	}

	// Restore into a cluster of the same shape.
	began := time.Now()
	if err := c.Create(ctx, bootstrapped(ns, "same", 3, 1, valkeyv1.BootstrapRecovery{Backup: &valkeyv1.BackupReference{Name: "nightly"}}, objStore)); err != nil {
		t.Fatal(err)
	}
	waitRestored(t, f, "same", valkeyv1.ReasonRestoreCompleted, 120*time.Second)
	same := waitReady(t, f, "same", 60*time.Second)
	t.Logf("3x1 restored (%d keys, %d bytes) and Ready in %s", same.Status.Restore.Keys, same.Status.Restore.Size, time.Since(began).Round(time.Millisecond))
	if r := same.Status.Restore; r.Phase != valkeyv1.RestorePhaseCompleted || r.Shards != 3 || r.Keys != 3000 || r.Path != b.Status.Path || r.StartedAt == nil || r.CompletedAt == nil {
		t.Fatalf("restore status %+v", r)
	}
	readKeys(t, f.seedsOf("same"), want)
	// Each shard's primary serves exactly its manifest ranges.
	for i, sh := range m.Shards {
		conn, err := valkey.Dial(f.server(resources.NodeName("same", i, 0)).Addr, valkey.Options{})
		if err != nil {
			t.Fatal(err)
		}
		v, err := conn.ClusterNodes(ctx)
		conn.Close()
		if err != nil {
			t.Fatal(err)
		}
		me, _ := v.Myself()
		if fmt.Sprint(me.Slots) != fmt.Sprint(sh.Slots) || !me.Primary {
			t.Fatalf("shard %d's primary serves %v (primary %v), the backup's shard %v", i, me.Slots, me.Primary, sh.Slots)
		}
	}
	var sec corev1.Secret
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: resources.RestoreSecretName("same")}, &sec); !apierrors.IsNotFound(err) {
		t.Fatalf("the restore Secret outlived the restore: %v", err)
	}
	wantEvents(t, f, "same", map[string]int{valkeyv1.ReasonRestoreLoading: 1, valkeyv1.ReasonRestoreCompleted: 1})

	// spec.bootstrap is fixed at creation.
	same.Spec.Bootstrap.Recovery.Backup.Name = "other"
	if err := c.Update(ctx, same); err == nil || !strings.Contains(err.Error(), "spec.bootstrap is immutable") {
		t.Fatalf("changing spec.bootstrap: %v", err)
	}
	var srcNow valkeyv1.ValkeyCluster
	if err := c.Get(ctx, client.ObjectKeyFromObject(src), &srcNow); err != nil {
		t.Fatal(err)
	}
	srcNow.Spec.Bootstrap = &valkeyv1.BootstrapConfiguration{Recovery: &valkeyv1.BootstrapRecovery{Backup: &valkeyv1.BackupReference{Name: "nightly"}}}
	if err := c.Update(ctx, &srcNow); err == nil || !strings.Contains(err.Error(), "can be set only when the cluster is created") {
		t.Fatalf("adding spec.bootstrap to a running cluster: %v", err)
	}
	both := bootstrapped(ns, "both", 3, 0, valkeyv1.BootstrapRecovery{Backup: &valkeyv1.BackupReference{Name: "nightly"}, Manifest: b.Status.Path + "/manifest.json"}, objStore)
	if err := c.Create(ctx, both); err == nil || !strings.Contains(err.Error(), "exactly one of backup") {
		t.Fatalf("backup and manifest both: %v", err)
	}

	// A different shard count: loaded with the backup's 3, then resharded to 4.
	began = time.Now()
	if err := c.Create(ctx, bootstrapped(ns, "more", 4, 0, valkeyv1.BootstrapRecovery{Manifest: b.Status.Path + "/" + restore.ManifestName}, objStore)); err != nil {
		t.Fatal(err)
	}
	waitRestored(t, f, "more", valkeyv1.ReasonRestoreCompleted, 120*time.Second)
	more := waitReady(t, f, "more", movesTimeout)
	t.Logf("restored with 3 shards and resharded to 4 in %s", time.Since(began).Round(time.Millisecond))
	if more.Status.Shards != 4 || nodesOf(t, c, ns, "more") != 4 {
		t.Fatalf("after the reshard: %d shards, %d nodes", more.Status.Shards, nodesOf(t, c, ns, "more"))
	}
	readKeys(t, f.seedsOf("more"), want)

	// Fewer shards: loaded with 3, then the third drains into the other two.
	began = time.Now()
	if err := c.Create(ctx, bootstrapped(ns, "fewer", 2, 0, valkeyv1.BootstrapRecovery{Backup: &valkeyv1.BackupReference{Name: "nightly"}}, objStore)); err != nil {
		t.Fatal(err)
	}
	waitRestored(t, f, "fewer", valkeyv1.ReasonRestoreCompleted, 120*time.Second)
	fewer := waitReady(t, f, "fewer", movesTimeout)
	t.Logf("restored with 3 shards and resharded to 2 in %s", time.Since(began).Round(time.Millisecond))
	if fewer.Status.Shards != 2 || nodesOf(t, c, ns, "fewer") != 2 {
		t.Fatalf("after the scale-in: %d shards, %d nodes", fewer.Status.Shards, nodesOf(t, c, ns, "fewer"))
	}
	readKeys(t, f.seedsOf("fewer"), want)

	// A corrupted copy: one byte of shard 1 changed, manifest as it was.
	objs, err := store.List(ctx, b.Status.Path+"/")
	if err != nil || len(objs) != 4 {
		t.Fatalf("backup objects %v, %v", objs, err)
	}
	copyObj := func(to string, mutate func([]byte)) {
		for _, o := range objs {
			raw, err := store.GetBytes(ctx, o.Name, 64<<20)
			if err != nil {
				t.Fatal(err)
			}
			name := path.Base(o.Name)
			if name == backup.ShardObject(1) && mutate != nil {
				mutate(raw)
			}
			if name == restore.ManifestName && to == "partial" {
				continue
			}
			if err := store.PutBytes(ctx, path.Join(to, name), raw, "application/octet-stream"); err != nil {
				t.Fatal(err)
			}
		}
	}
	copyObj("corrupt", func(raw []byte) { raw[len(raw)/2] ^= 0xff })
	before := listing(t, store)
	if err := c.Create(ctx, bootstrapped(ns, "bad", 3, 0, valkeyv1.BootstrapRecovery{Manifest: "corrupt/manifest.json"}, objStore)); err != nil {
		t.Fatal(err)
	}
	bad := waitRestored(t, f, "bad", valkeyv1.ReasonChecksumMismatch, 60*time.Second)
	r := restoredCond(bad)
	if bad.Status.Restore.Phase != valkeyv1.RestorePhaseFailed || !strings.Contains(r.Message, "shard 1's object does not match the manifest's SHA-256") {
		t.Fatalf("corrupted backup: %+v, %s", bad.Status.Restore, r.Message)
	}
	wantCondition(t, bad, valkeyv1.ConditionReady, metav1.ConditionFalse, valkeyv1.ReasonChecksumMismatch)
	if n := nodesOf(t, c, ns, "bad"); n != 0 {
		t.Fatalf("a corrupted backup created %d ValkeyNodes", n)
	}
	wantEvents(t, f, "bad", map[string]int{valkeyv1.ReasonChecksumMismatch: 1})
	if after := listing(t, store); after != before {
		t.Fatalf("the failed restore changed the store:\n%s\nwas\n%s", after, before)
	}

	// A partial backup (no manifest) is never restored.
	copyObj("partial", nil)
	if err := c.Create(ctx, bootstrapped(ns, "part", 3, 0, valkeyv1.BootstrapRecovery{Manifest: "partial/manifest.json"}, objStore)); err != nil {
		t.Fatal(err)
	}
	waitRestored(t, f, "part", valkeyv1.ReasonManifestNotFound, 60*time.Second)
	if n := nodesOf(t, c, ns, "part"); n != 0 {
		t.Fatalf("a partial backup created %d ValkeyNodes", n)
	}

	// Data volumes kept from an earlier cluster of the name: refused, nothing created.
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: resources.PVCName(resources.NodeName("held", 1, 0))},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}
	if err := c.Create(ctx, pvc); err != nil {
		t.Fatal(err)
	}
	held := bootstrapped(ns, "held", 3, 0, valkeyv1.BootstrapRecovery{Backup: &valkeyv1.BackupReference{Name: "nightly"}}, objStore)
	held.Spec.Persistence = &valkeyv1.PersistenceSpec{Size: resource.MustParse("1Gi")}
	if err := c.Create(ctx, held); err != nil {
		t.Fatal(err)
	}
	got := waitRestored(t, f, "held", valkeyv1.ReasonClusterNotEmpty, 60*time.Second)
	wantCondition(t, got, valkeyv1.ConditionReady, metav1.ConditionFalse, valkeyv1.ReasonClusterNotEmpty)
	if n := nodesOf(t, c, ns, "held"); n != 0 || !strings.Contains(restoredCond(got).Message, pvc.Name) {
		t.Fatalf("a restore over kept volumes: %d ValkeyNodes, %s", n, restoredCond(got).Message)
	}
	wantEvents(t, f, "held", map[string]int{valkeyv1.ReasonClusterNotEmpty: 1})

	// A primary whose restore-rdb init container fails (as a kubelet reports it) is named
	// in the Restored condition; once it loads, the restore completes.
	if err := c.Create(ctx, bootstrapped(ns, "slow", 3, 0, valkeyv1.BootstrapRecovery{Backup: &valkeyv1.BackupReference{Name: "nightly"}}, objStore)); err != nil {
		t.Fatal(err)
	}
	var slow valkeyv1.ValkeyCluster
	testenv.Eventually(t, 60*time.Second, "slow loading", func() (bool, string) {
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "slow"}, &slow); err != nil {
			return false, err.Error()
		}
		r := restoredCond(&slow)
		return r != nil && r.Reason == valkeyv1.ReasonRestoreLoading, fmt.Sprint(r)
	})
	var node valkeyv1.ValkeyNode
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: resources.NodeName("slow", 1, 0)}, &node); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: resources.PodName(node.Name), Labels: resources.NodeLabels(&node)},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "valkey", Image: "valkey/valkey:8.0"}}}}
	if err := c.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	pod.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: resources.RestoreContainer, Image: "valkey-operator",
		State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error"}}}}
	if err := c.Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "slow RestoreInitFailed", func() (bool, string) {
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "slow"}, &slow); err != nil {
			return false, err.Error()
		}
		r := restoredCond(&slow)
		return r != nil && r.Reason == valkeyv1.ReasonRestoreInitFailed && strings.Contains(r.Message, pod.Name), fmt.Sprint(r)
	})
	wantEvents(t, f, "slow", map[string]int{valkeyv1.ReasonRestoreInitFailed: 1})
	waitRestored(t, f, "slow", valkeyv1.ReasonRestoreCompleted, 120*time.Second)
	readKeys(t, f.seedsOf("slow"), want)
}

// listing is every object in the store with its size.
func listing(t *testing.T, store *objectstore.Store) string {
	t.Helper()
	objs, err := store.List(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, o := range objs {
		fmt.Fprintf(&b, "%s %d\n", o.Name, o.Size)
	}
	return b.String()
}
