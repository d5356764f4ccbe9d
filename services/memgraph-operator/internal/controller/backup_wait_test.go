package controller_test

import (
	backupv1 "github.com/opsuite/suite/api/backup/v1alpha1"

	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	memgraphv1 "github.com/opsuite/suite/api/memgraph/v1alpha1"
	"github.com/opsuite/suite/services/memgraph-operator/internal/controller"
	"github.com/opsuite/suite/services/memgraph-operator/internal/controller/backup"
	"github.com/opsuite/suite/services/memgraph-operator/internal/resources"
	"github.com/opsuite/suite/shared/metrics"
	"github.com/opsuite/suite/shared/objectstore"
	"github.com/opsuite/suite/shared/objectstore/objectstoretest"
	"github.com/opsuite/suite/shared/testenv"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// TestBackupWaitsAndFails: a MemgraphBackup waits, Pending with the reason, for a cluster
// that does not exist (ClusterNotFound), then for its spec.backup (NoObjectStore) and its
// credentials Secret (CredentialsMissing); with a MAIN but no backup agent answering
// (pods made before spec.backup), it fails after its three attempts with
// AgentUnavailable, a Warning event, and nothing left in the store; the credentials never
// appear in its status. Its state series (memgraph_operator_backup_state, the alert
// MemgraphBackupFailed's source) follow each phase and go with the backup.
func TestBackupWaitsAndFails(t *testing.T) {
	ctx := context.Background()
	s3 := objectstoretest.Start(t)
	store := s3.Store(t, "backups", "")
	h := start(t, "mg-backup-wait", func(cfg *controller.Config) { cfg.OperatorImage = "registry.example/memgraph-operator:test" })
	closed := "127.0.0.1:" + strconv.Itoa(testenv.FreePortBelowEphemeral(t))
	env.StartManager(t, func(mgr ctrl.Manager) error {
		return backup.Setup(mgr, backup.Config{Operator: "mg-backup-wait-b", Poll: 200 * time.Millisecond, RetryDelay: 50 * time.Millisecond,
			Resolve: func(string) string { return closed }})
	}, testenv.InNamespaces(h.ns), controller.ManagerOptions)

	b := &memgraphv1.MemgraphBackup{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: h.ns},
		Spec: memgraphv1.MemgraphBackupSpec{Cluster: backupv1.ClusterReference{Name: "w"}}}
	if err := h.c.Create(ctx, b); err != nil {
		t.Fatal(err)
	}
	waitBackupReason(t, h, "b", memgraphv1.BackupReasonClusterNotFound)
	h.create("w", 3, 2)
	waitBackupReason(t, h, "b", memgraphv1.BackupReasonNoObjectStore)
	// The operator writes the cluster meanwhile: read it again on a conflict.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		c := h.cluster("w")
		c.Spec.Backup = &memgraphv1.BackupConfiguration{ObjectStore: backupv1.ObjectStoreSpec{Endpoint: s3.Endpoint, Bucket: "backups",
			Region: objectstoretest.Region, ForcePathStyle: true, Credentials: backupv1.ObjectStoreCredentials{SecretName: "s3"}}}
		return h.c.Update(ctx, c)
	}); err != nil {
		t.Fatal(err)
	}
	waitBackupReason(t, h, "b", memgraphv1.BackupReasonCredentialsMissing)
	wantBackupState(t, "mg-backup-wait-b", h.ns, "b", memgraphv1.BackupPhasePending)
	if err := h.c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s3", Namespace: h.ns}, Data: map[string][]byte{
		objectstore.DefaultAccessKeyIDKey: []byte(s3.AccessKey), objectstore.DefaultSecretAccessKeyKey: []byte(s3.SecretKey)}}); err != nil {
		t.Fatal(err)
	}
	// spec.backup adds the backup agent to the data instances' StatefulSet; the pods made
	// below must be of that spec, since podsRun marks a StatefulSet rolled out at its
	// generation of the moment (a later change would wait for a rollout nobody runs here).
	testenv.Eventually(t, time.Minute, "the data StatefulSet with the backup agent", func() (bool, string) {
		for _, c := range h.sts(resources.StatefulSetName("w", resources.RoleData)).Spec.Template.Spec.Containers {
			if c.Name == resources.ContainerBackupAgent {
				return true, ""
			}
		}
		return false, "no " + resources.ContainerBackupAgent + " container yet"
	})
	// The stub registrar makes the first data instance MAIN once the pods run.
	h.podsRun(resources.StatefulSetName("w", resources.RoleCoordinator))
	h.podsRun(resources.StatefulSetName("w", resources.RoleData))
	got := waitBackup(t, h, "b", memgraphv1.BackupPhaseFailed)
	cond := meta.FindStatusCondition(got.Status.Conditions, memgraphv1.BackupConditionCompleted)
	if cond == nil || cond.Reason != memgraphv1.BackupReasonAgentUnavailable || got.Status.Attempts != 3 || got.Status.StoppedAt == nil {
		t.Fatalf("failed backup: %+v", got.Status)
	}
	if got.Status.Instance != resources.DataInstanceName("w", 0) {
		t.Errorf("instance %q", got.Status.Instance)
	}
	for _, c := range got.Status.Conditions {
		if containsAny(c.Message, s3.AccessKey, s3.SecretKey) {
			t.Errorf("a condition carries a key: %q", c.Message)
		}
	}
	h.waitBackupEvent("b", memgraphv1.BackupReasonAgentUnavailable)
	wantBackupState(t, "mg-backup-wait-b", h.ns, "b", memgraphv1.BackupPhaseFailed)
	if objs, err := store.List(ctx, ""); err != nil || len(objs) != 0 {
		t.Errorf("a failed backup left %v (%v)", objs, err)
	}
	// The token Secret the sidecars mount exists, owned by the cluster.
	sec := h.secret(resources.BackupAgentSecretName("w"))
	if ref := metav1.GetControllerOf(sec); ref == nil || ref.Name != "w" || len(sec.Data[resources.BackupAgentTokenKey]) != 64 {
		t.Errorf("token Secret %+v", sec.ObjectMeta)
	}
	// A deleted backup's series go with it.
	if err := h.c.Delete(ctx, got); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "series of the deleted backup gone", func() (bool, string) {
		series, err := metrics.ObjectSeries(ctrlmetrics.Registry, h.ns, "b")
		return err == nil && len(series) == 0, fmt.Sprint(series, err)
	})
}

// wantBackupState waits until the backup's state series (<operator>_backup_state) are 1
// for phase and 0 for every other phase.
func wantBackupState(t *testing.T, operator, ns, name string, phase memgraphv1.BackupPhase) {
	t.Helper()
	family := metrics.Prefix(operator) + "_backup_state"
	testenv.Eventually(t, 10*time.Second, fmt.Sprintf("%s of %s/%s %s", family, ns, name, phase), func() (bool, string) {
		got, err := metrics.ObjectSeries(ctrlmetrics.Registry, ns, name)
		if err != nil {
			return false, err.Error()
		}
		for _, p := range []memgraphv1.BackupPhase{memgraphv1.BackupPhasePending, memgraphv1.BackupPhaseRunning, memgraphv1.BackupPhaseCompleted, memgraphv1.BackupPhaseFailed} {
			want := 0.0
			if p == phase {
				want = 1
			}
			if v, ok := got[fmt.Sprintf("%s{state=%q}", family, p)]; !ok || v != want {
				return false, fmt.Sprint(got)
			}
		}
		return true, ""
	})
}

func waitBackupReason(t *testing.T, h *harness, name, reason string) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, "backup "+name+" "+reason, func() (bool, string) {
		b := &memgraphv1.MemgraphBackup{}
		if err := h.c.Get(context.Background(), client.ObjectKey{Namespace: h.ns, Name: name}, b); err != nil {
			return false, err.Error()
		}
		c := meta.FindStatusCondition(b.Status.Conditions, memgraphv1.BackupConditionCompleted)
		return c != nil && c.Reason == reason && b.Status.Phase == memgraphv1.BackupPhasePending, string(b.Status.Phase)
	})
}

func (h *harness) waitBackupEvent(name, reason string) {
	h.t.Helper()
	testenv.Eventually(h.t, 30*time.Second, "a "+reason+" event", func() (bool, string) {
		var list eventsv1.EventList
		if err := h.c.List(context.Background(), &list, client.InNamespace(h.ns)); err != nil {
			return false, err.Error()
		}
		for _, e := range list.Items {
			if e.Regarding.Kind == "MemgraphBackup" && e.Regarding.Name == name && e.Reason == reason && e.Type == corev1.EventTypeWarning {
				return true, ""
			}
		}
		return false, ""
	})
}

func containsAny(s string, subs ...string) bool {
	for _, x := range subs {
		if x != "" && strings.Contains(s, x) {
			return true
		}
	}
	return false
}
