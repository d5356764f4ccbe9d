package backup_test

import (
	backupv1 "github.com/opsuite/suite/api/backup/v1alpha1"

	"context"
	"fmt"
	"path"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	valkeyv1 "github.com/opsuite/suite/api/valkey/v1alpha1"
	"github.com/opsuite/suite/services/valkey-operator/internal/controller/backup"
	"github.com/opsuite/suite/services/valkey-operator/internal/valkey"
	"github.com/opsuite/suite/services/valkey-operator/internal/valkeytest"
	"github.com/opsuite/suite/shared/backupschedule"
	"github.com/opsuite/suite/shared/conditions"
	"github.com/opsuite/suite/shared/objectstore/objectstoretest"
	"github.com/opsuite/suite/shared/testenv"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func scheduledCondition(c client.Client, sb *valkeyv1.ValkeyScheduledBackup) (*valkeyv1.ValkeyScheduledBackup, *metav1.Condition, error) {
	var got valkeyv1.ValkeyScheduledBackup
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(sb), &got); err != nil {
		return nil, nil, err
	}
	return &got, conditions.Get(got.Status.Conditions, backupv1.ScheduledBackupConditionScheduled), nil
}

func waitScheduled(t *testing.T, c client.Client, sb *valkeyv1.ValkeyScheduledBackup, status metav1.ConditionStatus, reason string) *valkeyv1.ValkeyScheduledBackup {
	t.Helper()
	var got *valkeyv1.ValkeyScheduledBackup
	testenv.Eventually(t, 30*time.Second, "Scheduled="+string(status)+" "+reason, func() (bool, string) {
		var cond *metav1.Condition
		var err error
		got, cond, err = scheduledCondition(c, sb)
		if err != nil || cond == nil {
			return false, fmt.Sprint(err)
		}
		return cond.Status == status && cond.Reason == reason && cond.ObservedGeneration == got.Generation && got.Status.ObservedGeneration == got.Generation,
			fmt.Sprintf("%s %s gen %d/%d: %s", cond.Status, cond.Reason, cond.ObservedGeneration, got.Generation, cond.Message)
	})
	return got
}

// scheduledBackups are the ValkeyBackups sb created, oldest first.
func scheduledBackups(t *testing.T, c client.Client, ns, schedule string) []valkeyv1.ValkeyBackup {
	t.Helper()
	var list valkeyv1.ValkeyBackupList
	if err := c.List(context.Background(), &list, client.InNamespace(ns), client.MatchingLabels{valkeyv1.LabelScheduledBackup: schedule}); err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(list.Items, func(a, b valkeyv1.ValkeyBackup) int { return strings.Compare(a.Name, b.Name) })
	return list.Items
}

func eventNotes(t *testing.T, c client.Client, ns, reason string) []string {
	t.Helper()
	var evs eventsv1.EventList
	if err := c.List(context.Background(), &evs, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range evs.Items {
		if e.Reason == reason {
			out = append(out, e.Note)
		}
	}
	return out
}

// TestScheduledBackupsAndRetention: a ValkeyScheduledBackup every 2 seconds waits while
// its cluster is missing, then backs the cluster up at each time of the schedule into the
// real object store, each backup named after its scheduled time; a second scheduler
// racing the first (an operator restarted while the old one still runs) adds no backup.
// With keepLast 1, retention deletes the first backup's objects from the store and then
// its ValkeyBackup once a later one completed, and keeps the newest whole. Suspended, the
// schedule creates nothing more.
func TestScheduledBackupsAndRetention(t *testing.T) {
	servers := valkeytest.StartN(t, 1)
	formCluster(t, servers, 1, 0)
	writeKeys(t, servers[0].Addr, 200)
	srv := objectstoretest.Start(t)
	store := srv.Store(t, "backups", "")
	c := env.Client
	ctx := context.Background()
	ns := testenv.NewNamespace(t, c, "vksb")

	env.StartManager(t, func(mgr ctrl.Manager) error {
		if err := backup.Setup(mgr, backup.Config{
			Operator: "schedule-test-" + ns,
			Members:  func(context.Context, *valkeyv1.ValkeyCluster) ([]string, error) { return addrs(servers), nil },
			Options:  func(context.Context, *valkeyv1.ValkeyCluster) (valkey.Options, error) { return valkey.Options{}, nil },
			Poll:     500 * time.Millisecond,
		}); err != nil {
			return err
		}
		if err := backup.SetupSchedule(mgr, backup.ScheduleConfig{Operator: "schedule-test-" + ns}); err != nil {
			return err
		}
		return backup.SetupRetention(mgr, backup.RetentionConfig{})
	}, testenv.InNamespaces(ns))
	// The racing scheduler: schedules only.
	env.StartManager(t, func(mgr ctrl.Manager) error {
		return backup.SetupSchedule(mgr, backup.ScheduleConfig{Operator: "schedule-test-2-" + ns})
	}, testenv.InNamespaces(ns))

	sb := &valkeyv1.ValkeyScheduledBackup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "every2s"},
		Spec: backupv1.ScheduledBackupSpec{Cluster: backupv1.ClusterReference{Name: "cache"}, Schedule: "*/2 * * * * *"}}
	if err := c.Create(ctx, sb); err != nil {
		t.Fatal(err)
	}
	waitScheduled(t, c, sb, metav1.ConditionFalse, backupv1.ScheduledBackupReasonClusterNotFound)
	if got := scheduledBackups(t, c, ns, sb.Name); len(got) != 0 {
		t.Fatalf("%d backups created for a missing cluster", len(got))
	}
	newCluster(t, c, ns, "cache", srv)
	var vc valkeyv1.ValkeyCluster
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "cache"}, &vc); err != nil {
		t.Fatal(err)
	}
	vc.Spec.Backup.KeepLast = 1
	if err := c.Update(ctx, &vc); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	active := waitScheduled(t, c, sb, metav1.ConditionTrue, backupv1.ScheduledBackupReasonActive)
	if active.Status.NextScheduleTime == nil || active.Status.NextScheduleTime.Second()%2 != 0 {
		t.Fatalf("nextScheduleTime %v, want an even second", active.Status.NextScheduleTime)
	}

	// Two backups created, named after their scheduled times; the first one's UID gives
	// its folder.
	var first valkeyv1.ValkeyBackup
	testenv.Eventually(t, 30*time.Second, "two scheduled backups", func() (bool, string) {
		got := scheduledBackups(t, c, ns, sb.Name)
		if len(got) > 0 && first.Name == "" {
			first = got[0]
		}
		return len(got) >= 2, fmt.Sprintf("%d backups", len(got))
	})
	t.Logf("two scheduled backups %s after the cluster appeared", time.Since(began).Round(time.Millisecond))

	// Every backup of the schedule so far: one per scheduled time, named after it.
	checkNames := func(list []valkeyv1.ValkeyBackup) {
		t.Helper()
		seen := map[string]bool{}
		for _, b := range list {
			at, err := time.Parse(time.RFC3339, b.Annotations[valkeyv1.AnnotationScheduledTime])
			if err != nil || at.Second()%2 != 0 || b.Name != backupschedule.Name(sb.Name, at) || b.Spec.Cluster.Name != "cache" {
				t.Fatalf("backup %s for scheduled time %q (%v), cluster %s", b.Name, b.Annotations[valkeyv1.AnnotationScheduledTime], err, b.Spec.Cluster.Name)
			}
			if seen[at.String()] {
				t.Fatalf("two backups for %s", at)
			}
			seen[at.String()] = true
			if len(b.OwnerReferences) != 0 {
				t.Fatalf("backup %s has owners %v with backupOwnerReference none", b.Name, b.OwnerReferences)
			}
		}
	}
	checkNames(scheduledBackups(t, c, ns, sb.Name))

	// Retention: the first backup's objects and object go once a later backup completed.
	firstPath := path.Join("team-a", backup.Layout(&first))
	testenv.Eventually(t, 60*time.Second, "the first backup pruned", func() (bool, string) {
		var b valkeyv1.ValkeyBackup
		err := c.Get(ctx, client.ObjectKeyFromObject(&first), &b)
		if err == nil {
			return false, "first backup " + string(b.Status.Phase)
		}
		return client.IgnoreNotFound(err) == nil, err.Error()
	})
	if objs, err := store.List(ctx, firstPath+"/"); err != nil || len(objs) != 0 {
		t.Fatalf("the pruned backup left %v (%v) in the store", objs, err)
	}
	want := fmt.Sprintf("Deleted backup %s (Completed, 2 objects) under the retention policy.", first.Name)
	testenv.Eventually(t, 10*time.Second, "the BackupPruned event", func() (bool, string) {
		notes := eventNotes(t, c, ns, backupv1.BackupReasonBackupPruned)
		return slices.Contains(notes, want), fmt.Sprintf("%q", notes)
	})

	// Suspended: nothing more is created.
	testenv.EventuallyNil(t, 10*time.Second, "suspend", func() error {
		var cur valkeyv1.ValkeyScheduledBackup
		if err := c.Get(ctx, client.ObjectKeyFromObject(sb), &cur); err != nil {
			return err
		}
		cur.Spec.Suspend = true
		return c.Update(ctx, &cur)
	})
	suspended := waitScheduled(t, c, sb, metav1.ConditionFalse, backupv1.ScheduledBackupReasonSuspended)
	if suspended.Status.NextScheduleTime != nil {
		t.Fatalf("nextScheduleTime %v while suspended", suspended.Status.NextScheduleTime)
	}
	// A pass of either scheduler that began before the update may still create one.
	time.Sleep(time.Second)
	before := scheduledBackups(t, c, ns, sb.Name)
	time.Sleep(5 * time.Second)
	after := scheduledBackups(t, c, ns, sb.Name)
	if len(after) > len(before) {
		t.Fatalf("suspended schedule created %s", after[len(after)-1].Name)
	}
	checkNames(after)

	// Retention settles on one completed backup, the newest, stored whole.
	testenv.Eventually(t, 60*time.Second, "one completed backup kept", func() (bool, string) {
		got := scheduledBackups(t, c, ns, sb.Name)
		var phases []string
		for _, b := range got {
			phases = append(phases, b.Name+"="+string(b.Status.Phase))
		}
		return len(got) == 1 && got[0].Status.Phase == valkeyv1.BackupPhaseCompleted, strings.Join(phases, " ")
	})
	kept := scheduledBackups(t, c, ns, sb.Name)[0]
	if objs, err := store.List(ctx, kept.Status.Path+"/"); err != nil || len(objs) != 2 {
		t.Fatalf("the kept backup has %v (%v) in the store, want its RDB and manifest", objs, err)
	}
	final, _, err := scheduledCondition(c, sb)
	if err != nil {
		t.Fatal(err)
	}
	// The newest backup's, or (when the suspend raced the status write of the pass that
	// created it) the one before.
	if n := final.Status.LastBackupName; !strings.HasPrefix(n, sb.Name+"-") || n > kept.Name || final.Status.LastScheduleTime == nil ||
		n != backupschedule.Name(sb.Name, final.Status.LastScheduleTime.Time) {
		t.Fatalf("status lastBackupName %q lastScheduleTime %v, newest backup %s", n, final.Status.LastScheduleTime, kept.Name)
	}
	created := eventNotes(t, c, ns, backupv1.ScheduledBackupReasonBackupCreated)
	t.Logf("%d BackupCreated events, %d BackupPruned, 1 backup kept", len(created), len(eventNotes(t, c, ns, backupv1.BackupReasonBackupPruned)))
}

// TestScheduledBackupImmediateOwnedAndInvalid: immediate creates the first backup at once,
// named after the schedule's creation time and owned by the schedule with
// backupOwnerReference self; a schedule the API server lets through that names no time
// (the 30th of February) is Scheduled=False InvalidSchedule with a Warning event, and
// creates nothing.
func TestScheduledBackupImmediateOwnedAndInvalid(t *testing.T) {
	c := env.Client
	ctx := context.Background()
	ns := testenv.NewNamespace(t, c, "vksb")
	env.StartManager(t, func(mgr ctrl.Manager) error {
		return backup.SetupSchedule(mgr, backup.ScheduleConfig{Operator: "schedule-test-" + ns})
	}, testenv.InNamespaces(ns))
	if err := c.Create(ctx, &valkeyv1.ValkeyCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cache"},
		Spec: valkeyv1.ValkeyClusterSpec{Shards: 3}}); err != nil {
		t.Fatal(err)
	}

	sb := &valkeyv1.ValkeyScheduledBackup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "yearly"},
		Spec: backupv1.ScheduledBackupSpec{Cluster: backupv1.ClusterReference{Name: "cache"}, Schedule: "@yearly",
			Immediate: true, BackupOwnerReference: backupv1.BackupOwnerSelf}}
	if err := c.Create(ctx, sb); err != nil {
		t.Fatal(err)
	}
	got := waitScheduled(t, c, sb, metav1.ConditionTrue, backupv1.ScheduledBackupReasonActive)
	wantName := backupschedule.Name(sb.Name, sb.CreationTimestamp.Time)
	if got.Status.LastBackupName != wantName || !got.Status.LastScheduleTime.Equal(&sb.CreationTimestamp) {
		t.Fatalf("last backup %s at %v, want %s at the creation time %v", got.Status.LastBackupName, got.Status.LastScheduleTime, wantName, sb.CreationTimestamp)
	}
	year := time.Now().UTC().Year() + 1
	if n := got.Status.NextScheduleTime; n == nil || !n.Equal(ptrTime(time.Date(year, 1, 1, 0, 0, 0, 0, time.UTC))) {
		t.Fatalf("nextScheduleTime %v, want %d-01-01", n, year)
	}
	list := scheduledBackups(t, c, ns, sb.Name)
	if len(list) != 1 || list[0].Name != wantName {
		t.Fatalf("backups %v, want %s only", list, wantName)
	}
	if refs := list[0].OwnerReferences; len(refs) != 1 || refs[0].UID != sb.UID || refs[0].Kind != "ValkeyScheduledBackup" {
		t.Fatalf("owner references %+v, want the schedule", refs)
	}

	bad := &valkeyv1.ValkeyScheduledBackup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "feb30"},
		Spec: backupv1.ScheduledBackupSpec{Cluster: backupv1.ClusterReference{Name: "cache"}, Schedule: "0 0 0 30 2 *", Immediate: true}}
	if err := c.Create(ctx, bad); err != nil {
		t.Fatal(err)
	}
	waitScheduled(t, c, bad, metav1.ConditionFalse, backupv1.ScheduledBackupReasonInvalidSchedule)
	testenv.Eventually(t, 10*time.Second, "InvalidSchedule Warning event", func() (bool, string) {
		notes := eventNotes(t, c, ns, backupv1.ScheduledBackupReasonInvalidSchedule)
		return len(notes) == 1 && strings.Contains(notes[0], "names no time"), fmt.Sprint(notes)
	})
	if list := scheduledBackups(t, c, ns, bad.Name); len(list) != 0 {
		t.Fatalf("an invalid schedule created %d backups", len(list))
	}
}

func ptrTime(t time.Time) *metav1.Time {
	m := metav1.NewTime(t)
	return &m
}

// TestRetentionNeverPrunesInProgress: under keepLast 1 and 1d, retention deletes an old
// completed backup (objects first) and a failed one older than a completed backup, keeps
// backups pending or running, however old, and leaves alone one stored where the cluster's
// store no longer points; once the running backup completes it is the one kept, and the
// completed backup before it goes.
func TestRetentionNeverPrunesInProgress(t *testing.T) {
	srv := objectstoretest.Start(t)
	store := srv.Store(t, "backups", "")
	c := env.Client
	ctx := context.Background()
	ns := testenv.NewNamespace(t, c, "retention")
	newCluster(t, c, ns, "cache", srv)

	now := time.Now().UTC().Truncate(time.Second)
	type fixture struct {
		name    string
		phase   valkeyv1.BackupPhase
		stopped time.Time
		bucket  string
	}
	fixtures := []fixture{
		{name: "old-completed", phase: valkeyv1.BackupPhaseCompleted, stopped: now.Add(-72 * time.Hour)},
		{name: "old-failed", phase: valkeyv1.BackupPhaseFailed, stopped: now.Add(-48 * time.Hour)},
		{name: "elsewhere", phase: valkeyv1.BackupPhaseCompleted, stopped: now.Add(-96 * time.Hour), bucket: "other"},
		{name: "pending"},
		{name: "running", phase: valkeyv1.BackupPhaseRunning},
		{name: "new-completed", phase: valkeyv1.BackupPhaseCompleted, stopped: now.Add(-time.Hour)},
	}
	paths := map[string]string{}
	for _, f := range fixtures {
		b := &valkeyv1.ValkeyBackup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: f.name},
			Spec: valkeyv1.ValkeyBackupSpec{Cluster: backupv1.ClusterReference{Name: "cache"}}}
		if err := c.Create(ctx, b); err != nil {
			t.Fatal(err)
		}
		dir := path.Join("team-a", backup.Layout(b))
		paths[f.name] = dir
		for _, obj := range []string{backup.ShardObject(0), backup.ManifestName} {
			if err := store.PutBytes(ctx, path.Join(dir, obj), []byte(f.name), "application/octet-stream"); err != nil {
				t.Fatal(err)
			}
		}
		if f.phase == "" {
			continue
		}
		b.Status.Phase, b.Status.Bucket, b.Status.Path = f.phase, "backups", dir
		if f.bucket != "" {
			b.Status.Bucket = f.bucket
		}
		if !f.stopped.IsZero() {
			b.Status.StoppedAt = ptrTime(f.stopped)
		}
		if err := c.Status().Update(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	var vc valkeyv1.ValkeyCluster
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "cache"}, &vc); err != nil {
		t.Fatal(err)
	}
	vc.Spec.Backup.KeepLast, vc.Spec.Backup.RetentionPolicy = 1, "1d"
	if err := c.Update(ctx, &vc); err != nil {
		t.Fatal(err)
	}
	env.StartManager(t, func(mgr ctrl.Manager) error {
		return backup.SetupRetention(mgr, backup.RetentionConfig{})
	}, testenv.InNamespaces(ns))

	remaining := func() []string {
		var list valkeyv1.ValkeyBackupList
		if err := c.List(ctx, &list, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, b := range list.Items {
			out = append(out, b.Name)
		}
		slices.Sort(out)
		return out
	}
	stored := func(name string) int {
		objs, err := store.List(ctx, paths[name]+"/")
		if err != nil {
			t.Fatal(err)
		}
		return len(objs)
	}
	wantLeft := []string{"elsewhere", "new-completed", "pending", "running"}
	testenv.Eventually(t, 30*time.Second, "old backups pruned", func() (bool, string) {
		got := remaining()
		return slices.Equal(got, wantLeft), fmt.Sprint(got)
	})
	for name, want := range map[string]int{"old-completed": 0, "old-failed": 0, "elsewhere": 2, "pending": 2, "running": 2, "new-completed": 2} {
		if got := stored(name); got != want {
			t.Errorf("%s has %d objects in the store, want %d", name, got, want)
		}
	}
	testenv.Eventually(t, 10*time.Second, "PruneSkipped Warning event", func() (bool, string) {
		notes := eventNotes(t, c, ns, backupv1.BackupReasonPruneSkipped)
		return len(notes) > 0 && strings.Contains(notes[0], "elsewhere"), fmt.Sprint(notes)
	})

	// The running backup completes: it is now the newest, and the one kept.
	var running valkeyv1.ValkeyBackup
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "running"}, &running); err != nil {
		t.Fatal(err)
	}
	running.Status.Phase, running.Status.StoppedAt = valkeyv1.BackupPhaseCompleted, ptrTime(time.Now())
	if err := c.Status().Update(ctx, &running); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "the completed backup before it pruned", func() (bool, string) {
		got := remaining()
		return slices.Equal(got, []string{"elsewhere", "pending", "running"}), fmt.Sprint(got)
	})
	if stored("new-completed") != 0 || stored("running") != 2 || stored("pending") != 2 {
		t.Fatalf("objects left: new-completed %d, running %d, pending %d", stored("new-completed"), stored("running"), stored("pending"))
	}
	for _, e := range eventNotes(t, c, ns, backupv1.BackupReasonBackupPruned) {
		if strings.Contains(e, srv.SecretKey) || strings.Contains(e, srv.AccessKey) {
			t.Fatalf("event carries a key: %s", e)
		}
	}
}

// TestScheduledBackupClockAndLostStatus drives the schedule's clock: at a time a day after
// the schedule's creation the 03:00 backup of that day is created; with its status write
// lost (lastScheduleTime cleared, as after a crash between the create and the write) the
// next pass owes the same time and creates no second backup; a day later on the clock the
// next 03:00 backup follows.
func TestScheduledBackupClockAndLostStatus(t *testing.T) {
	c := env.Client
	ctx := context.Background()
	ns := testenv.NewNamespace(t, c, "vksb")
	var mu sync.Mutex
	var clock time.Time
	now := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return clock
	}
	setClock := func(t time.Time) {
		mu.Lock()
		defer mu.Unlock()
		clock = t
	}
	if err := c.Create(ctx, &valkeyv1.ValkeyCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cache"},
		Spec: valkeyv1.ValkeyClusterSpec{Shards: 3}}); err != nil {
		t.Fatal(err)
	}
	sb := &valkeyv1.ValkeyScheduledBackup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "nightly"},
		Spec: backupv1.ScheduledBackupSpec{Cluster: backupv1.ClusterReference{Name: "cache"}, Schedule: "0 0 3 * * *"}}
	if err := c.Create(ctx, sb); err != nil {
		t.Fatal(err)
	}
	created := sb.CreationTimestamp.UTC()
	day1 := time.Date(created.Year(), created.Month(), created.Day()+1, 3, 0, 0, 0, time.UTC)
	setClock(day1.Add(time.Hour))
	env.StartManager(t, func(mgr ctrl.Manager) error {
		return backup.SetupSchedule(mgr, backup.ScheduleConfig{Operator: "schedule-test-" + ns, Now: now})
	}, testenv.InNamespaces(ns))

	names := func() []string {
		var out []string
		for _, b := range scheduledBackups(t, c, ns, sb.Name) {
			out = append(out, b.Name)
		}
		return out
	}
	waitLast := func(want time.Time) {
		t.Helper()
		testenv.Eventually(t, 20*time.Second, "lastScheduleTime "+want.String(), func() (bool, string) {
			got, _, err := scheduledCondition(c, sb)
			if err != nil || got.Status.LastScheduleTime == nil {
				return false, fmt.Sprint(err)
			}
			return got.Status.LastScheduleTime.Equal(ptrTime(want)) && got.Status.LastBackupName == backupschedule.Name(sb.Name, want),
				got.Status.LastScheduleTime.String() + " " + got.Status.LastBackupName
		})
	}
	waitLast(day1)
	if got := names(); !slices.Equal(got, []string{backupschedule.Name(sb.Name, day1)}) {
		t.Fatalf("backups %v after the first time", got)
	}

	// The status write lost: the next pass owes day1 again and finds its backup.
	testenv.EventuallyNil(t, 10*time.Second, "clear the status", func() error {
		var cur valkeyv1.ValkeyScheduledBackup
		if err := c.Get(ctx, client.ObjectKeyFromObject(sb), &cur); err != nil {
			return err
		}
		cur.Status.LastScheduleTime, cur.Status.LastBackupName = nil, ""
		return c.Status().Update(ctx, &cur)
	})
	waitLast(day1)
	if got := names(); len(got) != 1 {
		t.Fatalf("backups %v after the lost status write, want one", got)
	}

	// A day later on the clock; an annotation starts a pass at once.
	day2 := day1.AddDate(0, 0, 1)
	setClock(day2.Add(time.Minute))
	testenv.EventuallyNil(t, 10*time.Second, "touch the schedule", func() error {
		var cur valkeyv1.ValkeyScheduledBackup
		if err := c.Get(ctx, client.ObjectKeyFromObject(sb), &cur); err != nil {
			return err
		}
		cur.Annotations = map[string]string{"test/touch": "1"}
		return c.Update(ctx, &cur)
	})
	waitLast(day2)
	if got := names(); !slices.Equal(got, []string{backupschedule.Name(sb.Name, day1), backupschedule.Name(sb.Name, day2)}) {
		t.Fatalf("backups %v, want day1's and day2's", got)
	}
	got, _, err := scheduledCondition(c, sb)
	if err != nil {
		t.Fatal(err)
	}
	if n := got.Status.NextScheduleTime; n == nil || !n.Equal(ptrTime(day2.AddDate(0, 0, 1))) {
		t.Fatalf("nextScheduleTime %v, want %s", n, day2.AddDate(0, 0, 1))
	}
}
