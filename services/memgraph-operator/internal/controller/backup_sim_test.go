package controller_test

import (
	backupv1 "github.com/opsuite/suite/api/backup/v1alpha1"

	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	memgraphv1 "github.com/opsuite/suite/api/memgraph/v1alpha1"
	"github.com/opsuite/suite/services/memgraph-operator/internal/controller"
	"github.com/opsuite/suite/services/memgraph-operator/internal/controller/backup"
	"github.com/opsuite/suite/services/memgraph-operator/internal/memgraph"
	"github.com/opsuite/suite/services/memgraph-operator/internal/memgraph/memgraphtest"
	"github.com/opsuite/suite/services/memgraph-operator/internal/resources"
	"github.com/opsuite/suite/services/memgraph-operator/internal/snapshot"
	"github.com/opsuite/suite/shared/objectstore"
	"github.com/opsuite/suite/shared/objectstore/objectstoretest"
	"github.com/opsuite/suite/shared/testenv"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// simCluster is one MemgraphCluster's simulator processes with its pods' DNS names
// mapped to them (and to the backup agents serving their data directories).
type simCluster struct {
	name  string
	procs *memgraphtest.Cluster
	plane simPlane
}

// startSimCluster maps cluster name's members (3 coordinators, 2 data instances) onto
// loopback ports in book and starts its coordinators; its data instances are started by
// the caller (a restore fills a data directory first).
func startSimCluster(t *testing.T, ns, name string, book *addressBook, opts memgraph.Options, extraEnv ...string) *simCluster {
	t.Helper()
	shape := &memgraphv1.MemgraphCluster{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: memgraphv1.MemgraphClusterSpec{Coordinators: 3, DataInstances: 2}}
	all := resources.DesiredMembership(shape, 3, 2)
	names := append(coordinatorNames(3), dataNames(name, 2)...)
	procs := memgraphtest.NewCluster(t)
	procs.Ports = map[string]memgraphtest.Ports{}
	for i, p := range memgraphtest.ReservePorts(t, len(names)) {
		procs.Ports[names[i]] = p
	}
	addrs := addressMap(all, procs.Ports)
	// The agents' addresses: <pod FQDN>:<agent port> -> a loopback port served below.
	for i := range int32(2) {
		addrs[net.JoinHostPort(resources.PodFQDN(shape, resources.RoleData, i), strconv.Itoa(memgraphv1.DefaultBackupAgentPort))] =
			"127.0.0.1:" + strconv.Itoa(testenv.FreePortBelowEphemeral(t))
	}
	book.add(addrs)
	procs.ExtraEnv = append([]string{simAddressMapEnv(addrs), "MEMGRAPH_USER=admin", "MEMGRAPH_PASSWORD=s3cret"}, extraEnv...)
	for id := 1; id <= 3; id++ {
		procs.StartCoordinator(id)
	}
	return &simCluster{name: name, procs: procs, plane: simPlane{t: t, dialer: memgraph.NewDialer(opts), all: all}}
}

// serveAgents plays the backup agent sidecars: one per data instance, on the address its
// pod's agent port maps to, serving that instance's data directory with the cluster's
// token (read from the Secret the controller created, as the kubelet would mount it).
func (sc *simCluster) serveAgents(t *testing.T, h *harness, book *addressBook) {
	t.Helper()
	var token string
	testenv.Eventually(t, 30*time.Second, "the backup agent token Secret", func() (bool, string) {
		s := &corev1.Secret{}
		err := h.c.Get(context.Background(), client.ObjectKey{Namespace: h.ns, Name: resources.BackupAgentSecretName(sc.name)}, s)
		token = string(s.Data[resources.BackupAgentTokenKey])
		return err == nil && len(token) == 64, fmt.Sprint(err)
	})
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(token), 0o600); err != nil {
		t.Fatal(err)
	}
	shape := &memgraphv1.MemgraphCluster{ObjectMeta: metav1.ObjectMeta{Name: sc.name, Namespace: h.ns}}
	for i, name := range dataNames(sc.name, 2) {
		addr := book.resolve(net.JoinHostPort(resources.PodFQDN(shape, resources.RoleData, int32(i)), strconv.Itoa(memgraphv1.DefaultBackupAgentPort)))
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		srv := &http.Server{Handler: (&snapshot.Agent{DataDir: sc.procs.DataDirOf(name), TokenFile: tokenFile}).Handler(), ReadHeaderTimeout: 5 * time.Second}
		go func() { _ = srv.Serve(ln) }()
		t.Cleanup(func() { _ = srv.Close() })
	}
}

// graphOf reads every Person's id and the KNOWS count on member.
func (sc *simCluster) graphOf(ctx context.Context, member string) ([]int64, int64, error) {
	s, err := sc.plane.dialer.Dial(ctx, sc.plane.bolt(member))
	if err != nil {
		return nil, 0, err
	}
	defer func() { _ = s.Close(ctx) }()
	rows, err := s.Query(ctx, "MATCH (n:Person) RETURN n")
	if err != nil {
		return nil, 0, err
	}
	var ids []int64
	for _, r := range rows {
		n, ok := r["n"].(interface{ GetProperties() map[string]any })
		if !ok {
			return nil, 0, fmt.Errorf("row %v is no node", r)
		}
		id, _ := n.GetProperties()["id"].(int64)
		if want := "person-" + strconv.FormatInt(id, 10); n.GetProperties()["name"] != want {
			return nil, 0, fmt.Errorf("node %d has name %v, want %s", id, n.GetProperties()["name"], want)
		}
		ids = append(ids, id)
	}
	slices.Sort(ids)
	edges, err := s.Query(ctx, "MATCH ()-[r:KNOWS]->() RETURN count(r) AS c")
	if err != nil {
		return nil, 0, err
	}
	return ids, edges[0]["c"].(int64), nil
}

// TestBackupAndRestoreAgainstSimulators: against the real API server, a real S3 server
// (versitygw) and simulator processes driven over Bolt by the real registrar. A cluster
// with spec.backup gets the backup agent sidecar and its token; nodes and edges are
// written through the MAIN, and a writer goes on writing one node per commit while a
// MemgraphBackup runs. The backup is taken on the replica, which the MAIN's SHOW REPLICAS
// shows caught up (LOCK DATA DIRECTORY, CREATE SNAPSHOT, which takes 1.5 s here while the
// commits go on into the replica's WAL); the snapshot and the WAL files after it are
// streamed from the agent into the store and the manifest written: Completed, the
// replica as source, the MAIN's epoch, the server version, the WAL carrying commits after
// the snapshot's. With the replica stopped (SHOW REPLICAS: invalid) a second backup is
// taken on the MAIN, CompletedOnMain with a Warning event. A new cluster with
// spec.bootstrap naming the first backup verifies it and renders the restore init
// container, which the test runs (as the kubelet would) on the first data instance's
// empty volume; its simulators start, recovering the snapshot and replaying the WAL, the
// registration makes that instance MAIN, the replica syncs, Restored turns True, and
// every node and edge up to the manifest's last commit, and none after, reads back on
// the MAIN and the replica. A third cluster bootstrapped from a backup whose snapshot
// object was corrupted creates nothing and says BackupCorrupted, a fourth from a backup
// whose manifest was changed to leave a gap in its WAL says ManifestInvalid; the stored
// objects stay where they were.
func TestBackupAndRestoreAgainstSimulators(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	s3 := objectstoretest.Start(t)
	bucketStore := s3.Store(t, "backups", "")
	book := &addressBook{m: map[string]string{}}
	opts := memgraph.Options{Resolve: book.resolve, Timeout: 10 * time.Second, Username: "admin", Password: "s3cret"}
	reg := controller.BoltRegistrar{Options: memgraph.Options{Resolve: book.resolve, Timeout: 10 * time.Second}}
	h := start(t, "mg-backup", func(cfg *controller.Config) {
		cfg.Registrar = reg
		cfg.OperatorImage = "registry.example/memgraph-operator:test"
	})
	env.StartManager(t, func(mgr ctrl.Manager) error {
		return backup.Setup(mgr, backup.Config{Operator: "mg-backup-b", Resolve: book.resolve, Poll: 200 * time.Millisecond, RetryDelay: 100 * time.Millisecond})
	}, testenv.InNamespaces(h.ns), controller.ManagerOptions)

	for _, s := range []*corev1.Secret{
		{ObjectMeta: metav1.ObjectMeta{Name: "admin", Namespace: h.ns}, Data: map[string][]byte{"USER": []byte("admin"), "PASSWORD": []byte("s3cret")}},
		{ObjectMeta: metav1.ObjectMeta{Name: "s3", Namespace: h.ns}, Data: map[string][]byte{
			objectstore.DefaultAccessKeyIDKey: []byte(s3.AccessKey), objectstore.DefaultSecretAccessKeyKey: []byte(s3.SecretKey)}},
	} {
		if err := h.c.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	store := &memgraphv1.BackupConfiguration{ObjectStore: backupv1.ObjectStoreSpec{Endpoint: s3.Endpoint, Bucket: "backups", Prefix: "team-a",
		Region: objectstoretest.Region, ForcePathStyle: true, Credentials: backupv1.ObjectStoreCredentials{SecretName: "s3"}}}
	newCluster := func(name string, bootstrap string) *memgraphv1.MemgraphCluster {
		c := &memgraphv1.MemgraphCluster{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: h.ns},
			Spec: memgraphv1.MemgraphClusterSpec{Coordinators: 3, DataInstances: 2, Secrets: memgraphv1.SecretsSpec{Name: "memgraph-license"},
				Auth: &memgraphv1.AuthSpec{SecretName: "admin"}, Backup: store.DeepCopy()}}
		if bootstrap != "" {
			c.Spec.Bootstrap = &memgraphv1.BootstrapSpec{Backup: memgraphv1.BackupReference{Name: bootstrap}}
		}
		if err := h.c.Create(ctx, c); err != nil {
			t.Fatal(err)
		}
		return c
	}

	// The source cluster, its data written through the MAIN. Its snapshots take 1.5 s to
	// write, as a large graph's would.
	src := startSimCluster(t, h.ns, "src", book, opts, "MEMGRAPH_SIM_SNAPSHOT_DELAY=1500ms")
	srcProcs := map[string]*memgraphtest.Process{}
	for _, n := range dataNames("src", 2) {
		srcProcs[n] = src.procs.StartData(n)
	}
	newCluster("src", "")
	h.podsRun(resources.StatefulSetName("src", resources.RoleCoordinator))
	h.podsRun(resources.StatefulSetName("src", resources.RoleData))
	c := h.waitConverged("src", 3, 2)
	dataSts := h.sts(resources.StatefulSetName("src", resources.RoleData))
	if !hasContainer(dataSts.Spec.Template.Spec.Containers, resources.ContainerBackupAgent) {
		t.Fatalf("the data StatefulSet has no backup agent sidecar: %+v", dataSts.Spec.Template.Spec.Containers)
	}
	if len(dataSts.Spec.Template.Spec.InitContainers) != 0 {
		t.Errorf("a cluster without spec.bootstrap got init containers %+v", dataSts.Spec.Template.Spec.InitContainers)
	}
	src.serveAgents(t, h, book)
	mainSession := src.plane.session(ctx, c.Status.Main)
	const before = 120
	for i := int64(0); i < before; i += 2 {
		q := fmt.Sprintf(`CREATE (a:Person {id: %d, name: "person-%d"})-[:KNOWS {since: %d}]->(b:Person {id: %d, name: "person-%d"})`, i, i, 2000+i, i+1, i+1)
		if _, err := mainSession.Query(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	ids, edges, err := src.graphOf(ctx, c.Status.Main)
	if err != nil || len(ids) != before || edges != before/2 {
		t.Fatalf("source graph: %d nodes, %d edges, %v", len(ids), edges, err)
	}
	replicaName := dataNames("src", 2)[1]
	if c.Status.Main == replicaName {
		replicaName = dataNames("src", 2)[0]
	}
	var epoch struct {
		Epoch uint64 `json:"epoch"`
	}
	if b, err := os.ReadFile(filepath.Join(src.procs.DataDirOf(c.Status.Main), "sim-replication.json")); err != nil || json.Unmarshal(b, &epoch) != nil || epoch.Epoch == 0 {
		t.Fatalf("the MAIN's replication state: %v", err)
	}
	base := storageCommitted(ctx, t, mainSession)

	// The backup, with a writer going on meanwhile: one node per commit, ids counting up.
	stopWriter := make(chan struct{})
	writer := make(chan error, 1)
	go func() {
		for i := int64(before); ; i++ {
			select {
			case <-stopWriter:
				writer <- nil
				return
			case <-time.After(20 * time.Millisecond):
			}
			if _, err := mainSession.Query(ctx, fmt.Sprintf(`CREATE (:Person {id: %d, name: "person-%d"})`, i, i)); err != nil {
				writer <- fmt.Errorf("write %d: %w", i, err)
				return
			}
		}
	}()
	b1 := &memgraphv1.MemgraphBackup{ObjectMeta: metav1.ObjectMeta{Name: "b1", Namespace: h.ns},
		Spec: memgraphv1.MemgraphBackupSpec{Cluster: backupv1.ClusterReference{Name: "src"}}}
	if err := h.c.Create(ctx, b1); err != nil {
		t.Fatal(err)
	}
	b1 = waitBackup(t, h, "b1", memgraphv1.BackupPhaseCompleted)
	close(stopWriter)
	if err := <-writer; err != nil {
		t.Fatal(err)
	}
	cond := meta.FindStatusCondition(b1.Status.Conditions, memgraphv1.BackupConditionCompleted)
	if b1.Status.Instance != replicaName || b1.Status.Role != memgraphv1.BackupRoleReplica || b1.Status.Main != c.Status.Main ||
		b1.Status.Epoch != strconv.FormatUint(epoch.Epoch, 10) || b1.Status.ServerVersion != "3.12.1-sim" || cond.Reason != memgraphv1.BackupReasonBackupCompleted ||
		b1.Status.Size <= 0 || len(b1.Status.Files) < 2 || b1.Status.Timestamp <= b1.Status.SnapshotTimestamp ||
		!strings.HasPrefix(b1.Status.Path, "team-a/memgraph/"+h.ns+"/src/b1-") || b1.Status.Bucket != "backups" {
		t.Fatalf("backup status %+v, want the replica %s as source, the MAIN's epoch %d and WAL after the snapshot", b1.Status, replicaName, epoch.Epoch)
	}
	m, err := snapshot.ReadManifest(ctx, bucketStore, b1.Status.Path)
	if err != nil {
		t.Fatal(err)
	}
	if m.Format != snapshot.ManifestFormat || m.Snapshot != b1.Status.Files[0].Name || m.Files[0].SHA256 != b1.Status.Files[0].SHA256 ||
		m.Instance != replicaName || m.Role != memgraphv1.BackupRoleReplica || m.Main != c.Status.Main || m.Epoch != b1.Status.Epoch ||
		m.ServerVersion != b1.Status.ServerVersion || int64(m.Timestamp) != b1.Status.Timestamp || int64(m.SnapshotTimestamp) != b1.Status.SnapshotTimestamp ||
		m.Files[1].Prev > m.SnapshotTimestamp || m.Files[len(m.Files)-1].Timestamp != m.Timestamp ||
		m.Cluster.Name != "src" || m.Backup.UID != string(b1.UID) || !m.StoppedAt.After(m.StartedAt) {
		t.Fatalf("manifest %+v against status %+v", m, b1.Status)
	}
	// The restore holds every commit up to the manifest's last: the 60 before the backup
	// and the writer's first ones, in order.
	wantIDs := make([]int64, before+int(m.Timestamp-base))
	for i := range wantIDs {
		wantIDs[i] = int64(i)
	}
	wantEdges := int64(before / 2)
	written := storageCommitted(ctx, t, mainSession) - base
	t.Logf("backup %s: %s at commit %d and %d WAL files up to %d (the writer made %d commits), %d bytes, %s",
		b1.Status.Path, m.Snapshot, m.SnapshotTimestamp, len(m.Files)-1, m.Timestamp, written, m.Size, m.StoppedAt.Sub(m.StartedAt))
	// Written after the backup: not in the restore.
	next := before + int64(written)
	for i := next; i < next+10; i++ {
		if _, err := mainSession.Query(ctx, fmt.Sprintf(`CREATE (:Person {id: %d, name: "person-%d"})`, i, i)); err != nil {
			t.Fatal(err)
		}
	}

	// The replica stopped: the MAIN's SHOW REPLICAS shows it invalid, and a second backup
	// is taken on the MAIN, with a warning. Its snapshot object is then corrupted.
	src.procs.Stop(srcProcs[replicaName])
	testenv.Eventually(t, 15*time.Second, "the MAIN sees its replica gone", func() (bool, string) {
		reps, err := mainSession.Replicas(ctx)
		return err == nil && len(reps) == 1 && !reps[0].CaughtUp(), fmt.Sprintf("%+v %v", reps, err)
	})
	b2 := &memgraphv1.MemgraphBackup{ObjectMeta: metav1.ObjectMeta{Name: "b2", Namespace: h.ns},
		Spec: memgraphv1.MemgraphBackupSpec{Cluster: backupv1.ClusterReference{Name: "src"}}}
	if err := h.c.Create(ctx, b2); err != nil {
		t.Fatal(err)
	}
	b2 = waitBackup(t, h, "b2", memgraphv1.BackupPhaseCompleted)
	if cond := meta.FindStatusCondition(b2.Status.Conditions, memgraphv1.BackupConditionCompleted); b2.Status.Instance != c.Status.Main ||
		b2.Status.Role != memgraphv1.BackupRoleMain || cond.Reason != memgraphv1.BackupReasonCompletedOnMain || b2.Status.Epoch != b1.Status.Epoch {
		t.Fatalf("a backup with no replica caught up: %+v", b2.Status)
	}
	h.waitBackupEvent("b2", memgraphv1.BackupReasonCompletedOnMain)
	obj := path.Join(b2.Status.Path, b2.Status.Files[0].Name)
	good, err := bucketStore.GetBytes(ctx, obj, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	bad := append([]byte(nil), good...)
	bad[len(bad)/2] ^= 0x20
	if err := bucketStore.PutBytes(ctx, obj, bad, "application/octet-stream"); err != nil {
		t.Fatal(err)
	}

	// Restore into a new cluster.
	dst := startSimCluster(t, h.ns, "dst", book, opts)
	newCluster("dst", "b1")
	h.waitCondition("dst", memgraphv1.ConditionRestored, metav1.ConditionFalse, memgraphv1.ReasonRestoreInProgress)
	dstData := h.sts(resources.StatefulSetName("dst", resources.RoleData))
	var init *corev1.Container
	for i := range dstData.Spec.Template.Spec.InitContainers {
		if dstData.Spec.Template.Spec.InitContainers[i].Name == resources.ContainerRestore {
			init = &dstData.Spec.Template.Spec.InitContainers[i]
		}
	}
	if init == nil || !slices.Contains(init.Args, "--backup-path="+b1.Status.Path) {
		t.Fatalf("the restored cluster's data StatefulSet has no restore container for %s: %+v", b1.Status.Path, dstData.Spec.Template.Spec.InitContainers)
	}
	// A retained volume that holds data is refused: the init container fails, and the
	// cluster says so from the pod's status; nothing on the volume changes.
	leftover := filepath.Join(dst.procs.DataDirOf(resources.DataInstanceName("dst", 0)), "wal", "leftover")
	if err := os.MkdirAll(filepath.Dir(leftover), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(leftover, []byte("an older graph"), 0o600); err != nil {
		t.Fatal(err)
	}
	term := filepath.Join(t.TempDir(), "termination")
	restoreEnv := func(i int) func(string) string {
		m := map[string]string{snapshot.EnvPodIndex: strconv.Itoa(i), snapshot.EnvAccessKeyID: s3.AccessKey, snapshot.EnvSecretAccessKey: s3.SecretKey}
		return func(k string) string { return m[k] }
	}
	restoreArgs := func(name string) []string {
		args := slices.Clone(init.Args)
		for j, a := range args {
			if strings.HasPrefix(a, "--data-dir=") {
				args[j] = "--data-dir=" + dst.procs.DataDirOf(name)
			}
		}
		return append(args, "--termination-log="+term)
	}
	err = snapshot.RestoreCommand(ctx, restoreArgs(resources.DataInstanceName("dst", 0)), restoreEnv(0), io.Discard)
	if !snapshot.IsNotEmpty(err) {
		t.Fatalf("restore onto a used volume: %v", err)
	}
	msg, _ := os.ReadFile(term)
	if b, _ := os.ReadFile(leftover); string(b) != "an older graph" || !strings.Contains(string(msg), "data directory not empty") {
		t.Fatalf("the used volume changed, or the termination message is %q", msg)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: resources.PodName("dst", resources.RoleData, 0), Namespace: h.ns,
		Labels: resources.Selector("dst", resources.RoleData)},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "memgraph", Image: "memgraph/memgraph"}}}}
	if err := h.c.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	pod.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: resources.ContainerRestore,
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Message: string(msg)}}}}
	if err := h.c.Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
	h.waitCondition("dst", memgraphv1.ConditionRestored, metav1.ConditionFalse, memgraphv1.ReasonRestoreFailed)
	if err := h.c.Delete(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(leftover); err != nil {
		t.Fatal(err)
	}

	// The kubelet's part: run the init container on each data pod, its env resolved.
	for i, name := range dataNames("dst", 2) {
		if err := os.MkdirAll(dst.procs.DataDirOf(name), 0o750); err != nil {
			t.Fatal(err)
		}
		var log strings.Builder
		if err := snapshot.RestoreCommand(ctx, restoreArgs(name), restoreEnv(i), &log); err != nil {
			t.Fatalf("restore on %s: %v\n%s", name, err, log.String())
		}
		t.Logf("restore container on %s: %s", name, strings.TrimSpace(log.String()))
		dst.procs.StartData(name)
	}
	h.podsRun(resources.StatefulSetName("dst", resources.RoleCoordinator))
	h.podsRun(resources.StatefulSetName("dst", resources.RoleData))
	dc := h.waitConverged("dst", 3, 2)
	if want := resources.DataInstanceName("dst", 0); dc.Status.Main != want {
		t.Errorf("the restored cluster's MAIN is %s, want the restored %s", dc.Status.Main, want)
	}
	h.waitCondition("dst", memgraphv1.ConditionRestored, metav1.ConditionTrue, memgraphv1.ReasonRestored)
	for _, member := range dataNames("dst", 2) {
		testenv.Eventually(t, 30*time.Second, member+" holds the backup's graph", func() (bool, string) {
			ids, edges, err := dst.graphOf(ctx, member)
			return err == nil && slices.Equal(ids, wantIDs) && edges == wantEdges, fmt.Sprintf("%d nodes, %d edges, %v", len(ids), edges, err)
		})
	}

	// A manifest whose WAL no longer follows on its snapshot restores nothing.
	gapDir := "team-a/gap"
	for _, f := range m.Files {
		b, err := bucketStore.GetBytes(ctx, path.Join(b1.Status.Path, f.Name), 1<<30)
		if err != nil {
			t.Fatal(err)
		}
		if err := bucketStore.PutBytes(ctx, path.Join(gapDir, f.Name), b, "application/octet-stream"); err != nil {
			t.Fatal(err)
		}
	}
	gapped := m
	gapped.Files = slices.Clone(m.Files)
	gapped.Files[1].Prev = m.SnapshotTimestamp + 1
	body, _ := json.Marshal(gapped)
	if err := bucketStore.PutBytes(ctx, path.Join(gapDir, snapshot.ManifestName), body, "application/json"); err != nil {
		t.Fatal(err)
	}
	b3 := &memgraphv1.MemgraphBackup{ObjectMeta: metav1.ObjectMeta{Name: "b3", Namespace: h.ns},
		Spec: memgraphv1.MemgraphBackupSpec{Cluster: backupv1.ClusterReference{Name: "src"}}}
	if err := h.c.Create(ctx, b3); err != nil {
		t.Fatal(err)
	}
	// b3 stands for a backup whose manifest was changed in the store: its status points
	// at the changed copy (the backup itself completes on the MAIN first).
	b3 = waitBackup(t, h, "b3", memgraphv1.BackupPhaseCompleted)
	b3.Status.Path = gapDir
	if err := h.c.Status().Update(ctx, b3); err != nil {
		t.Fatal(err)
	}
	newCluster("gap", "b3")
	if got := h.waitCondition("gap", memgraphv1.ConditionRestored, metav1.ConditionFalse, memgraphv1.ReasonManifestInvalid); got.Status.State != memgraphv1.StateFailed {
		t.Errorf("state %s with an invalid manifest, want Failed", got.Status.State)
	}

	// A corrupted backup restores nothing.
	newCluster("bad", "b2")
	got := h.waitCondition("bad", memgraphv1.ConditionRestored, metav1.ConditionFalse, memgraphv1.ReasonBackupCorrupted)
	if got.Status.State != memgraphv1.StateFailed {
		t.Errorf("state %s with a corrupted backup, want Failed", got.Status.State)
	}
	for _, name := range []string{"bad", "gap"} {
		for _, r := range []resources.Role{resources.RoleCoordinator, resources.RoleData} {
			err := h.c.Get(ctx, client.ObjectKey{Namespace: h.ns, Name: resources.StatefulSetName(name, r)}, &appsv1.StatefulSet{})
			if !apierrors.IsNotFound(err) {
				t.Errorf("StatefulSet %s of a cluster with a corrupted backup: %v", resources.StatefulSetName(name, r), err)
			}
		}
	}
	if still, err := bucketStore.GetBytes(ctx, obj, 1<<30); err != nil || len(still) != len(bad) {
		t.Errorf("the corrupted backup's object changed: %v", err)
	}
	if _, err := snapshot.ReadManifest(ctx, bucketStore, b2.Status.Path); err != nil {
		t.Errorf("the corrupted backup's manifest is gone: %v", err)
	}
}

// storageCommitted is the instance's committed transactions (the simulator's SHOW
// STORAGE INFO row committed_transactions).
func storageCommitted(ctx context.Context, t *testing.T, s memgraph.Session) uint64 {
	t.Helper()
	rows, err := s.Query(ctx, "SHOW STORAGE INFO")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if r["storage info"] == "committed_transactions" {
			n, _ := r["value"].(int64)
			return uint64(n)
		}
	}
	t.Fatalf("SHOW STORAGE INFO has no committed_transactions: %v", rows)
	return 0
}

func hasContainer(cs []corev1.Container, name string) bool {
	return slices.ContainsFunc(cs, func(c corev1.Container) bool { return c.Name == name })
}

func waitBackup(t *testing.T, h *harness, name string, phase memgraphv1.BackupPhase) *memgraphv1.MemgraphBackup {
	t.Helper()
	b := &memgraphv1.MemgraphBackup{}
	// Three minutes: the local CI at a load of 60 saw the cluster take more than one to
	// get a MAIN (its informers alone missed their sync timeout).
	testenv.Eventually(t, 3*time.Minute, "backup "+name+" "+string(phase), func() (bool, string) {
		if err := h.c.Get(context.Background(), client.ObjectKey{Namespace: h.ns, Name: name}, b); err != nil {
			return false, err.Error()
		}
		return b.Status.Phase == phase, fmt.Sprintf("%s %+v", b.Status.Phase, b.Status.Conditions)
	})
	return b
}
