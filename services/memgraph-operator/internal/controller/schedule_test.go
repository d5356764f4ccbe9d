package controller_test

import (
	backupv1 "github.com/opsuite/suite/api/backup/v1alpha1"

	"context"
	"fmt"
	"path"
	"slices"
	"strings"
	"testing"
	"time"

	memgraphv1 "github.com/opsuite/suite/api/memgraph/v1alpha1"
	"github.com/opsuite/suite/services/memgraph-operator/internal/controller"
	"github.com/opsuite/suite/services/memgraph-operator/internal/controller/backup"
	"github.com/opsuite/suite/services/memgraph-operator/internal/snapshot"
	"github.com/opsuite/suite/shared/objectstore"
	"github.com/opsuite/suite/shared/objectstore/objectstoretest"
	"github.com/opsuite/suite/shared/testenv"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestScheduledBackupsAndRetention, against the real API server and versitygw: a
// MemgraphScheduledBackup every 2 s with immediate creates a MemgraphBackup named after
// each scheduled time, labelled with the schedule; the test plays the backup controller
// (stores a file and a manifest where the backup's layout says, and marks it
// Completed). With keepLast 1 on the cluster, retention deletes the older backup's
// objects from the store, then the MemgraphBackup, and says so in a BackupPruned event; a
// backup still Pending is never pruned; suspend stops the schedule.
func TestScheduledBackupsAndRetention(t *testing.T) {
	ctx := context.Background()
	s3 := objectstoretest.Start(t)
	store := s3.Store(t, "backups", "sched")
	h := start(t, "mg-sched")
	env.StartManager(t, func(mgr ctrl.Manager) error {
		if err := backup.SetupSchedule(mgr, backup.ScheduleConfig{Operator: "mg-sched-s"}); err != nil {
			return err
		}
		return backup.SetupRetention(mgr, backup.RetentionConfig{})
	}, testenv.InNamespaces(h.ns), controller.ManagerOptions)
	if err := h.c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s3", Namespace: h.ns}, Data: map[string][]byte{
		objectstore.DefaultAccessKeyIDKey: []byte(s3.AccessKey), objectstore.DefaultSecretAccessKeyKey: []byte(s3.SecretKey)}}); err != nil {
		t.Fatal(err)
	}
	c := &memgraphv1.MemgraphCluster{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: h.ns},
		Spec: memgraphv1.MemgraphClusterSpec{Coordinators: 3, DataInstances: 2, Secrets: memgraphv1.SecretsSpec{Name: "memgraph-license"},
			Backup: &memgraphv1.BackupConfiguration{KeepLast: 1, ObjectStore: backupv1.ObjectStoreSpec{Endpoint: s3.Endpoint, Bucket: "backups",
				Prefix: "sched", Region: objectstoretest.Region, ForcePathStyle: true, Credentials: backupv1.ObjectStoreCredentials{SecretName: "s3"}}}}}
	if err := h.c.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	sb := &memgraphv1.MemgraphScheduledBackup{ObjectMeta: metav1.ObjectMeta{Name: "every2s", Namespace: h.ns},
		Spec: backupv1.ScheduledBackupSpec{Cluster: backupv1.ClusterReference{Name: "s"}, Schedule: "*/2 * * * * *", Immediate: true}}
	if err := h.c.Create(ctx, sb); err != nil {
		t.Fatal(err)
	}
	scheduled := func() []memgraphv1.MemgraphBackup {
		var list memgraphv1.MemgraphBackupList
		if err := h.c.List(ctx, &list, client.InNamespace(h.ns), client.MatchingLabels{memgraphv1.LabelScheduledBackup: sb.Name}); err != nil {
			t.Fatal(err)
		}
		slices.SortFunc(list.Items, func(a, b memgraphv1.MemgraphBackup) int { return strings.Compare(a.Name, b.Name) })
		return list.Items
	}
	// complete plays the backup controller for b.
	complete := func(b *memgraphv1.MemgraphBackup) {
		t.Helper()
		dir := backup.Layout(b)
		if err := store.PutBytes(ctx, path.Join(dir, "snapshots", "20261205000000000001_timestamp_1"), []byte("snapshot"), ""); err != nil {
			t.Fatal(err)
		}
		if err := store.PutBytes(ctx, path.Join(dir, snapshot.ManifestName), []byte("{}"), "application/json"); err != nil {
			t.Fatal(err)
		}
		now := metav1.Now()
		b.Status = memgraphv1.MemgraphBackupStatus{Phase: memgraphv1.BackupPhaseCompleted, StartedAt: &now, StoppedAt: &now,
			Bucket: "backups", Path: store.Key(dir), Size: 8}
		if err := h.c.Status().Update(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	var first memgraphv1.MemgraphBackup
	testenv.Eventually(t, 30*time.Second, "the immediate backup", func() (bool, string) {
		got := scheduled()
		if len(got) > 0 {
			first = got[0]
		}
		return len(got) >= 1, fmt.Sprint(len(got))
	})
	if first.Spec.Cluster.Name != "s" || first.Annotations[memgraphv1.AnnotationScheduledTime] == "" || !strings.HasPrefix(first.Name, sb.Name+"-") {
		t.Fatalf("scheduled backup %+v", first.ObjectMeta)
	}
	complete(&first)
	var second memgraphv1.MemgraphBackup
	testenv.Eventually(t, 30*time.Second, "a second scheduled backup", func() (bool, string) {
		for _, b := range scheduled() {
			if b.Name > first.Name {
				second = b
				return true, ""
			}
		}
		return false, ""
	})
	// While the second is Pending, the first (the newest completed) stays.
	time.Sleep(time.Second)
	if err := h.c.Get(ctx, client.ObjectKeyFromObject(&first), &memgraphv1.MemgraphBackup{}); err != nil {
		t.Fatalf("the only completed backup was pruned while a newer one was pending: %v", err)
	}
	// Suspend, so the set stays small, then complete the second: keepLast 1 prunes the first.
	got := &memgraphv1.MemgraphScheduledBackup{}
	if err := h.c.Get(ctx, client.ObjectKeyFromObject(sb), got); err != nil {
		t.Fatal(err)
	}
	got.Spec.Suspend = true
	if err := h.c.Update(ctx, got); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "Scheduled=False Suspended", func() (bool, string) {
		if err := h.c.Get(ctx, client.ObjectKeyFromObject(sb), got); err != nil {
			return false, err.Error()
		}
		cond := meta.FindStatusCondition(got.Status.Conditions, backupv1.ScheduledBackupConditionScheduled)
		return cond != nil && cond.Reason == backupv1.ScheduledBackupReasonSuspended && got.Status.NextScheduleTime == nil, fmt.Sprint(cond)
	})
	if err := h.c.Get(ctx, client.ObjectKeyFromObject(&second), &second); err != nil {
		t.Fatal(err)
	}
	complete(&second)
	testenv.Eventually(t, 30*time.Second, "the first backup pruned", func() (bool, string) {
		err := h.c.Get(ctx, client.ObjectKeyFromObject(&first), &memgraphv1.MemgraphBackup{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	testenv.Eventually(t, 30*time.Second, "a BackupPruned event on the cluster", func() (bool, string) {
		var evs eventsv1.EventList
		if err := h.c.List(ctx, &evs, client.InNamespace(h.ns)); err != nil {
			return false, err.Error()
		}
		for _, e := range evs.Items {
			if e.Reason == backupv1.BackupReasonBackupPruned && e.Regarding.Name == "s" && strings.Contains(e.Note, first.Name) {
				return true, ""
			}
		}
		return false, ""
	})
	objs, err := store.List(ctx, backup.Layout(&first)+"/")
	if err != nil || len(objs) != 0 {
		t.Errorf("the pruned backup's objects: %v %v", objs, err)
	}
	if objs, err := store.List(ctx, backup.Layout(&second)+"/"); err != nil || len(objs) != 2 {
		t.Errorf("the kept backup's objects: %v %v", objs, err)
	}
	// Suspended: no backup after the second.
	n := len(scheduled())
	time.Sleep(3 * time.Second)
	if m := len(scheduled()); m != n {
		t.Errorf("a suspended schedule created %d backups", m-n)
	}
}
