package backup_test

import (
	backupv1 "github.com/opsuite/suite/api/backup/v1alpha1"

	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	valkeyv1 "github.com/opsuite/suite/api/valkey/v1alpha1"
	"github.com/opsuite/suite/services/valkey-operator/internal/controller/backup"
	"github.com/opsuite/suite/services/valkey-operator/internal/valkey"
	"github.com/opsuite/suite/services/valkey-operator/internal/valkeytest"
	"github.com/opsuite/suite/shared/metrics"
	"github.com/opsuite/suite/shared/objectstore/objectstoretest"
	"github.com/opsuite/suite/shared/testenv"
	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapcore.ErrorLevel)))
	testenv.Main(m, &env, valkeyv1.AddToScheme)
}

// formCluster makes servers a cluster of shards primaries (the first servers, slots split
// evenly) each with replicas in-sync replicas.
func formCluster(t *testing.T, servers []*valkeytest.Server, shards, replicas int) {
	t.Helper()
	ctx := context.Background()
	conns := make([]valkey.Conn, len(servers))
	for i, s := range servers {
		c, err := valkey.Dial(s.Addr, valkey.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		conns[i] = c
	}
	ids := make([]string, len(servers))
	for i, c := range conns {
		v, err := c.ClusterNodes(ctx)
		if err != nil {
			t.Fatal(err)
		}
		me, _ := v.Myself()
		ids[i] = me.ID
	}
	for i := range shards {
		r := valkey.SlotRange{Start: i * valkey.SlotCount / shards, End: (i+1)*valkey.SlotCount/shards - 1}
		if err := conns[i].AddSlotsRange(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	for i := 1; i < len(servers); i++ {
		if err := conns[i].Meet(ctx, servers[0].Addr, servers[0].BusPort); err != nil {
			t.Fatal(err)
		}
	}
	for r := range replicas {
		for p := range shards {
			i := shards + r*shards + p
			testenv.Eventually(t, 20*time.Second, "replica knows its primary", func() (bool, string) {
				err := conns[i].Replicate(ctx, ids[p])
				return err == nil, fmt.Sprint(err)
			})
		}
	}
	testenv.Eventually(t, 60*time.Second, "cluster formed, replicas in sync", func() (bool, string) {
		for i, c := range conns {
			kv, err := c.ClusterInfo(ctx)
			if err != nil || kv["cluster_state"] != "ok" || kv["cluster_known_nodes"] != strconv.Itoa(len(servers)) {
				return false, fmt.Sprintf("%s: %v %v", servers[i].Addr, kv["cluster_state"], err)
			}
			if i >= shards {
				st, err := c.ReplicationState(ctx)
				if err != nil || !st.MasterLinkUp || st.SyncInProgress {
					return false, fmt.Sprintf("%s: %+v %v", servers[i].Addr, st, err)
				}
			}
		}
		return true, ""
	})
}

func writeKeys(t *testing.T, seed string, n int) map[string]string {
	t.Helper()
	d, err := valkey.DialCluster([]string{seed}, valkey.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	keys, values := make([]string, n), make([]string, n)
	want := map[string]string{}
	for i := range n {
		keys[i], values[i] = fmt.Sprintf("k%d", i), fmt.Sprintf("%x", sha256.Sum256([]byte(strconv.Itoa(i))))
		want[keys[i]] = values[i]
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := d.SetMany(ctx, keys, values); err != nil {
		t.Fatal(err)
	}
	return want
}

func addrs(servers []*valkeytest.Server) []string {
	out := make([]string, len(servers))
	for i, s := range servers {
		out[i] = s.Addr
	}
	return out
}

func startController(t *testing.T, ns string, members []string) {
	t.Helper()
	env.StartManager(t, func(mgr ctrl.Manager) error {
		return backup.Setup(mgr, backup.Config{
			Operator: "backup-test-" + ns,
			Members:  func(context.Context, *valkeyv1.ValkeyCluster) ([]string, error) { return members, nil },
			Options:  func(context.Context, *valkeyv1.ValkeyCluster) (valkey.Options, error) { return valkey.Options{}, nil },
			Poll:     500 * time.Millisecond,
		})
	}, testenv.InNamespaces(ns))
}

func newCluster(t *testing.T, c client.Client, ns, name string, srv *objectstoretest.Server) {
	t.Helper()
	ctx := context.Background()
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "s3"}, Data: map[string][]byte{
		"AWS_ACCESS_KEY_ID": []byte(srv.AccessKey), "AWS_SECRET_ACCESS_KEY": []byte(srv.SecretKey)}}
	if err := c.Create(ctx, sec); err != nil {
		t.Fatal(err)
	}
	vc := &valkeyv1.ValkeyCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: valkeyv1.ValkeyClusterSpec{
		Shards: 3, Replicas: 1,
		Backup: &valkeyv1.BackupConfiguration{ObjectStore: backupv1.ObjectStoreSpec{
			Endpoint: srv.Endpoint, Bucket: "backups", Prefix: "team-a", Region: objectstoretest.Region, ForcePathStyle: true,
			Credentials: backupv1.ObjectStoreCredentials{SecretName: "s3"}}}}}
	if err := c.Create(ctx, vc); err != nil {
		t.Fatal(err)
	}
}

func completed(b *valkeyv1.ValkeyBackup) *metav1.Condition {
	for i := range b.Status.Conditions {
		if b.Status.Conditions[i].Type == valkeyv1.BackupConditionCompleted {
			return &b.Status.Conditions[i]
		}
	}
	return nil
}

func waitReason(t *testing.T, c client.Client, b *valkeyv1.ValkeyBackup, status metav1.ConditionStatus, reason string, timeout time.Duration) *valkeyv1.ValkeyBackup {
	t.Helper()
	var got valkeyv1.ValkeyBackup
	testenv.Eventually(t, timeout, "backup Completed="+string(status)+" "+reason, func() (bool, string) {
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(b), &got); err != nil {
			return false, err.Error()
		}
		cond := completed(&got)
		if cond == nil {
			return false, "no condition; phase " + string(got.Status.Phase)
		}
		return cond.Status == status && cond.Reason == reason, fmt.Sprintf("%s %s %s: %s", got.Status.Phase, cond.Status, cond.Reason, cond.Message)
	})
	return &got
}

// A 3-shard cluster with a replica per shard is backed up from its replicas, after the
// backup waited out a slot migration; every stored RDB matches its recorded checksum, the
// manifest lists the layout, and the RDBs loaded into fresh servers hold every key.
func TestBackupThreeShardsFromReplicas(t *testing.T) {
	servers := valkeytest.StartN(t, 6)
	formCluster(t, servers, 3, 1)
	want := writeKeys(t, servers[0].Addr, 3000)

	srv := objectstoretest.Start(t)
	store := srv.Store(t, "backups", "")
	c := env.Client
	ns := testenv.NewNamespace(t, c, "backup")
	newCluster(t, c, ns, "cache", srv)

	// A reshard in progress: shard 0 migrating slot 0 to shard 1.
	ctx := context.Background()
	p0, _ := valkey.Dial(servers[0].Addr, valkey.Options{})
	defer p0.Close()
	v1, _ := valkey.Dial(servers[1].Addr, valkey.Options{})
	defer v1.Close()
	view1, err := v1.ClusterNodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	me1, _ := view1.Myself()
	if err := p0.SetSlotMigrating(ctx, 0, me1.ID); err != nil {
		t.Fatal(err)
	}

	// The replicas wrote the RDB of their initial sync; the backup must write none.
	rdbFiles := func() map[string]time.Time {
		out := map[string]time.Time{}
		for _, s := range servers {
			files, _ := filepath.Glob(filepath.Join(s.Dir, "*.rdb"))
			for _, f := range files {
				if fi, err := os.Stat(f); err == nil {
					out[f] = fi.ModTime()
				}
			}
		}
		return out
	}
	before := rdbFiles()

	startController(t, ns, addrs(servers))
	b := &valkeyv1.ValkeyBackup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "nightly"},
		Spec: valkeyv1.ValkeyBackupSpec{Cluster: backupv1.ClusterReference{Name: "cache"}}}
	if err := c.Create(ctx, b); err != nil {
		t.Fatal(err)
	}
	got := waitReason(t, c, b, metav1.ConditionFalse, valkeyv1.BackupReasonReshardInProgress, 30*time.Second)
	if got.Status.Phase != valkeyv1.BackupPhasePending {
		t.Fatalf("phase %s while resharding, want Pending", got.Status.Phase)
	}
	if err := p0.SetSlotStable(ctx, 0); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	got = waitReason(t, c, b, metav1.ConditionTrue, valkeyv1.BackupReasonBackupCompleted, 90*time.Second)
	st := got.Status
	t.Logf("backup of %d keys, %d bytes in %s (from Running: %s)", st.Keys, st.Size, time.Since(began).Round(time.Millisecond), st.StoppedAt.Sub(st.StartedAt.Time))
	if st.Phase != valkeyv1.BackupPhaseCompleted || st.Keys != 3000 || len(st.Shards) != 3 || st.ServerVersion == "" || st.StartedAt == nil || st.StoppedAt == nil {
		t.Fatalf("status %+v", st)
	}
	wantPath := path.Join("team-a", backup.Layout(got))
	if st.Path != wantPath || st.Bucket != "backups" {
		t.Fatalf("stored at %s/%s, want backups/%s", st.Bucket, st.Path, wantPath)
	}

	// The manifest, read back, describes the layout.
	raw, err := store.GetBytes(ctx, path.Join(st.Path, backup.ManifestName), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	var m backup.Manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	if m.Format != backup.ManifestFormat || m.ShardCount != 3 || m.Keys != 3000 || m.Cluster.Name != "cache" || m.Backup.Name != "nightly" {
		t.Fatalf("manifest %s", raw)
	}
	wantSlots := []string{"0-5460", "5461-10921", "10922-16383"}
	total := int64(0)
	for i, sh := range st.Shards {
		if sh.Role != "replica" || sh.Slots != wantSlots[i] || m.Shards[i].SHA256 != sh.SHA256 || m.Shards[i].Object != backup.ShardObject(i) {
			t.Fatalf("shard %d: %+v, manifest %+v", i, sh, m.Shards[i])
		}
		// Checksums verified by downloading.
		r, err := store.Get(ctx, path.Join(st.Path, m.Shards[i].Object))
		if err != nil {
			t.Fatal(err)
		}
		h := sha256.New()
		rdb, err := io.ReadAll(io.TeeReader(r, h))
		_ = r.Close()
		if err != nil || hex.EncodeToString(h.Sum(nil)) != sh.SHA256 || int64(len(rdb)) != sh.Size {
			t.Fatalf("shard %d downloads as %d bytes sha %x (%v), status says %d %s", i, len(rdb), h.Sum(nil), err, sh.Size, sh.SHA256)
		}
		total += sh.Keys
		readShard(t, rdb, want, m.Shards[i].Slots)
	}
	if total != 3000 {
		t.Fatalf("shards hold %d keys, want 3000", total)
	}
	// Nothing but the three RDBs and the manifest; no pod wrote an RDB file.
	if objs, _ := store.List(ctx, st.Path+"/"); len(objs) != 4 {
		t.Fatalf("stored objects: %v", objs)
	}
	if after := rdbFiles(); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("RDB files on the members changed during the backup: %v, before %v", after, before)
	}
}

// readShard loads rdb into a fresh server (as a restored primary) and reads every key of
// want in slots there.
func readShard(t *testing.T, rdb []byte, want map[string]string, slots []valkey.SlotRange) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "shard.rdb"), rdb, 0o600); err != nil {
		t.Fatal(err)
	}
	s := valkeytest.Start(t, "--dir", dir, "--dbfilename", "shard.rdb", "--cluster-require-full-coverage", "no")
	d, err := valkey.DialCluster([]string{s.Addr}, valkey.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n := 0
	for k, v := range want {
		slot := valkey.KeySlot(k)
		in := false
		for _, r := range slots {
			in = in || (slot >= r.Start && slot <= r.End)
		}
		if !in {
			continue
		}
		got, err := d.Get(ctx, k)
		if err != nil || got != v {
			t.Fatalf("restored shard %v: %s = %q, %v; want %q", slots, k, got, err, v)
		}
		n++
	}
	if n == 0 {
		t.Fatalf("no key of the test in slots %v", slots)
	}
}

// A shard without replicas is read from its primary, with a Warning event; a cluster
// without an object store, or with missing credentials, waits and says why.
func TestBackupFromPrimaryAndWaits(t *testing.T) {
	servers := valkeytest.StartN(t, 3)
	formCluster(t, servers, 3, 0)
	writeKeys(t, servers[0].Addr, 300)
	srv := objectstoretest.Start(t)
	srv.Store(t, "backups", "")
	c := env.Client
	ctx := context.Background()
	ns := testenv.NewNamespace(t, c, "backup")
	startController(t, ns, addrs(servers))

	b := &valkeyv1.ValkeyBackup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "early"},
		Spec: valkeyv1.ValkeyBackupSpec{Cluster: backupv1.ClusterReference{Name: "cache"}}}
	if err := c.Create(ctx, b); err != nil {
		t.Fatal(err)
	}
	waitReason(t, c, b, metav1.ConditionFalse, valkeyv1.BackupReasonClusterNotFound, 20*time.Second)
	vc := &valkeyv1.ValkeyCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cache"}, Spec: valkeyv1.ValkeyClusterSpec{Shards: 3}}
	if err := c.Create(ctx, vc); err != nil {
		t.Fatal(err)
	}
	waitReason(t, c, b, metav1.ConditionFalse, valkeyv1.BackupReasonNoObjectStore, 20*time.Second)
	vc.Spec.Backup = &valkeyv1.BackupConfiguration{ObjectStore: backupv1.ObjectStoreSpec{Endpoint: srv.Endpoint, Bucket: "backups",
		Credentials: backupv1.ObjectStoreCredentials{SecretName: "s3"}}}
	if err := c.Update(ctx, vc); err != nil {
		t.Fatal(err)
	}
	waitReason(t, c, b, metav1.ConditionFalse, valkeyv1.BackupReasonCredentialsMissing, 20*time.Second)
	if err := c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "s3"}, Data: map[string][]byte{
		"AWS_ACCESS_KEY_ID": []byte(srv.AccessKey), "AWS_SECRET_ACCESS_KEY": []byte(srv.SecretKey)}}); err != nil {
		t.Fatal(err)
	}
	got := waitReason(t, c, b, metav1.ConditionTrue, valkeyv1.BackupReasonBackupCompleted, 60*time.Second)
	for _, sh := range got.Status.Shards {
		if sh.Role != "primary" {
			t.Fatalf("shard %d read from its %s, want its primary", sh.Index, sh.Role)
		}
	}
	if got.Status.Keys != 300 {
		t.Fatalf("keys %d, want 300", got.Status.Keys)
	}
	testenv.Eventually(t, 10*time.Second, "BackupFromPrimary Warning events", func() (bool, string) {
		var evs eventsv1.EventList
		if err := c.List(ctx, &evs, client.InNamespace(ns)); err != nil {
			return false, err.Error()
		}
		n := 0
		for _, e := range evs.Items {
			if e.Reason == valkeyv1.BackupReasonBackupFromPrimary && e.Type == corev1.EventTypeWarning {
				n++
			}
			for _, s := range []string{srv.SecretKey, srv.AccessKey} {
				if strings.Contains(e.Note, s) {
					t.Fatalf("event %s carries a key: %s", e.Reason, e.Note)
				}
			}
		}
		return n == 1, fmt.Sprintf("%d BackupFromPrimary events, want 1", n)
	})
}

// A shard whose snapshot breaks off is tried again and the backup completes, counting the
// attempts; one that never gets through fails the backup, which leaves no object behind.
func TestBackupRetriesThenFails(t *testing.T) {
	servers := valkeytest.StartN(t, 3)
	formCluster(t, servers, 3, 0)
	writeKeys(t, servers[0].Addr, 100)
	srv := objectstoretest.Start(t)
	store := srv.Store(t, "backups", "")
	c := env.Client
	ctx := context.Background()
	ns := testenv.NewNamespace(t, c, "backup")
	newCluster(t, c, ns, "cache", srv)

	// The stream of shard 1's member breaks after 1 kB: once for "flaky", always for "broken".
	var mu sync.Mutex
	breaks := map[string]int{}
	cut := servers[1].Addr
	env.StartManager(t, func(mgr ctrl.Manager) error {
		return backup.Setup(mgr, backup.Config{
			Operator:   "backup-test-retry-" + ns,
			Members:    func(context.Context, *valkeyv1.ValkeyCluster) ([]string, error) { return addrs(servers), nil },
			Options:    func(context.Context, *valkeyv1.ValkeyCluster) (valkey.Options, error) { return valkey.Options{}, nil },
			Poll:       500 * time.Millisecond,
			RetryDelay: 10 * time.Millisecond,
			Stream: func(ctx context.Context, addr string, o valkey.Options, consume func(io.Reader) error) (valkey.RDBInfo, error) {
				return valkey.StreamRDB(ctx, addr, o, func(r io.Reader) error {
					mu.Lock()
					backupName := currentBackup
					fail := addr == cut && (backupName == "broken" || breaks[backupName] == 0)
					if fail {
						breaks[backupName]++
					}
					mu.Unlock()
					if fail {
						r = io.MultiReader(io.LimitReader(r, 1000), errReader{})
					}
					return consume(r)
				})
			},
		})
	}, testenv.InNamespaces(ns))

	for _, name := range []string{"flaky", "broken"} {
		mu.Lock()
		currentBackup = name
		mu.Unlock()
		b := &valkeyv1.ValkeyBackup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: valkeyv1.ValkeyBackupSpec{Cluster: backupv1.ClusterReference{Name: "cache"}}}
		if err := c.Create(ctx, b); err != nil {
			t.Fatal(err)
		}
		if name == "flaky" {
			got := waitReason(t, c, b, metav1.ConditionTrue, valkeyv1.BackupReasonBackupCompleted, 60*time.Second)
			if got.Status.Attempts != 4 || len(got.Status.Shards) != 3 {
				t.Fatalf("attempts %d (want 4: one retry), shards %d", got.Status.Attempts, len(got.Status.Shards))
			}
			if objs, err := store.List(ctx, got.Status.Path+"/"); err != nil || len(objs) != 4 {
				t.Fatalf("the retried backup stored %v (%v), want 3 RDBs and the manifest", objs, err)
			}
			wantBackupState(t, "backup-test-retry-"+ns, ns, name, valkeyv1.BackupPhaseCompleted)
			continue
		}
		got := waitReason(t, c, b, metav1.ConditionFalse, valkeyv1.BackupReasonUploadFailed, 60*time.Second)
		if got.Status.Phase != valkeyv1.BackupPhaseFailed || got.Status.StoppedAt == nil || len(got.Status.Shards) != 0 || breaks["broken"] != 3 {
			t.Fatalf("failed backup: %+v, %d breaks", got.Status, breaks["broken"])
		}
		if objs, err := store.List(ctx, path.Join("team-a", backup.Layout(got))+"/"); err != nil || len(objs) != 0 {
			t.Fatalf("a failed backup left %v (%v)", objs, err)
		}
		wantBackupState(t, "backup-test-retry-"+ns, ns, name, valkeyv1.BackupPhaseFailed)
	}
	// A deleted backup's series go with it.
	for _, name := range []string{"flaky", "broken"} {
		if err := c.Delete(ctx, &valkeyv1.ValkeyBackup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, 10*time.Second, "series of deleted backup "+name+" gone", func() (bool, string) {
			got, err := metrics.ObjectSeries(ctrlmetrics.Registry, ns, name)
			return err == nil && len(got) == 0, fmt.Sprint(got, err)
		})
	}
}

// wantBackupState waits until the backup's state series (valkey_operator_backup_state for
// the operator valkey-operator, the alert ValkeyBackupFailed's source) are 1 for phase and
// 0 for every other phase.
func wantBackupState(t *testing.T, operator, ns, name string, phase valkeyv1.BackupPhase) {
	t.Helper()
	family := metrics.Prefix(operator) + "_backup_state"
	testenv.Eventually(t, 10*time.Second, fmt.Sprintf("%s of %s/%s", family, ns, name), func() (bool, string) {
		got, err := metrics.ObjectSeries(ctrlmetrics.Registry, ns, name)
		if err != nil {
			return false, err.Error()
		}
		for _, p := range []valkeyv1.BackupPhase{valkeyv1.BackupPhasePending, valkeyv1.BackupPhaseRunning, valkeyv1.BackupPhaseCompleted, valkeyv1.BackupPhaseFailed} {
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

// currentBackup is the backup TestBackupRetriesThenFails is taking.
var currentBackup string

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errors.New("connection reset by the test") }
