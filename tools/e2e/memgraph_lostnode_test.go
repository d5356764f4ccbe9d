package e2e

import (
	"context"
	"fmt"
	"maps"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	memgraphv1 "github.com/opsuite/suite/api/memgraph/v1alpha1"
	"github.com/opsuite/suite/tools/internal/bolt"
	"github.com/opsuite/suite/tools/internal/bolt/boltclient"
)

// The lost-node scenario's cluster and the class of its local volumes.
const (
	mglNamespace = "e2e-memgraph-lostnode"
	mglName      = "mgl"
	mglClass     = "e2e-memgraph-local"
	// mglVolumesPerNode: lib and log of up to three members on one node (5 members on
	// the 2 nodes left after two are deleted).
	mglVolumesPerNode = 6
)

// TestMemgraphLostNode (issue 24, item 1): a 3+2 cluster on local volumes pinned to nodes
// (class no-provisioner, WaitForFirstConsumer), every member reachable from outside
// through its load balancer, takes a writer through the coordinators' routing
// (neo4j://). The node of the MAIN is deleted: its pods stop with it and their claims pin
// their next pods to a node that no longer exists. The coordinators fail over; the
// operator (spec.lostNodes Automatic, the default) unregisters the old MAIN, deletes its
// claims and pod; the StatefulSet makes them anew, they bind volumes on another node, and
// the registration adds the instance again as a replica. Then, with spec.lostNodes Manual,
// the node of a coordinator is deleted: MemberLost says ReplacementManual and nothing
// leaves the Raft membership until the annotation memgraph.com/replace-member names the
// pod; then REMOVE COORDINATOR, new claims elsewhere, ADD COORDINATOR. Each time the
// cluster is Ready again; no write the writer had acknowledged is lost, never two MAINs
// are seen, and the Raft membership ends with 3 coordinators. The nodes are restored at
// the end, for the scenarios after this one.
func TestMemgraphLostNode(t *testing.T) {
	ctx := mgScenario(t)
	t.Cleanup(func() {
		_ = env.client.CoreV1().Namespaces().Delete(context.Background(), mglNamespace, metav1.DeleteOptions{})
	})
	if err := mglVolumes(ctx, t); err != nil {
		t.Fatal(err)
	}
	storage := fmt.Sprintf("{libPVCSize: 64Mi, logPVCSize: 64Mi, libStorageClassName: %[1]s, logStorageClassName: %[1]s}", mglClass)
	manifest := mgExternalManifest(mglNamespace, mglName, fmt.Sprintf("  storage:\n    coordinators: %[1]s\n    data: %[1]s\n", storage))
	m := &mglScenario{t: t, ns: mglNamespace, name: mglName, coordinators: 3, data: 2}
	begin := time.Now()
	if out, err := kubectlStdin(ctx, manifest, "apply", "-f", "-"); err != nil {
		t.Fatalf("applying the cluster: %v\n%s", err, out)
	}
	m.ready(ctx, "created", nil)
	t.Logf("3+2 on local volumes Ready after %s", since(begin))
	lbs := m.advertised(ctx, "created")
	w := startMgxWriter(ctx, t, "neo4j://"+lbs[mglName+"-external"])
	t.Cleanup(w.stop)
	w.waitAcked(ctx, "the writer starts", 20)
	watch := m.watchMains(ctx, lbs)

	// 1. The MAIN's node deleted.
	c := m.cluster(ctx)
	oldMain := c.Status.Main
	mainPod := strings.ReplaceAll(oldMain, "_", "-")
	node := m.nodeOf(ctx, mainPod)
	restoreMain := keepNode(ctx, m.t, node)
	on := m.podsOn(ctx, node)
	w.markNow("MAIN's node deleted")
	deleted := time.Now()
	t.Logf("deleting node %s with the members %v (MAIN %s; every pod there: %v)", node, m.members(on), oldMain, on)
	if err := env.client.CoreV1().Nodes().Delete(ctx, node, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	var failover, replacing time.Duration
	c = m.ready(ctx, "after the MAIN's node was deleted", func(c *memgraphv1.MemgraphCluster) bool {
		if failover == 0 && c.Status.Main != "" && c.Status.Main != oldMain {
			failover = time.Since(deleted)
		}
		lost := meta.FindStatusCondition(c.Status.Conditions, memgraphv1.ConditionMemberLost)
		if replacing == 0 && lost != nil && lost.Reason == memgraphv1.ReasonReplacing {
			replacing = time.Since(deleted)
		}
		return lost != nil && lost.Reason == memgraphv1.ReasonReplaced && m.replaced(ctx, c, mainPod, node)
	})
	readyAfter := since(deleted)
	t.Logf("the MAIN's node %s deleted: the coordinators promoted another MAIN after %.1fs, status.main %s after %.1fs, MemberLost Replacing after %.1fs, Ready and Converged again (%s on %s) after %s",
		node, watch.promoted(oldMain, deleted).Seconds(), c.Status.Main, failover.Seconds(), replacing.Seconds(), mainPod, m.nodeOf(ctx, mainPod), readyAfter)
	if c.Status.Main == oldMain || c.Status.LastFailoverTime == nil || c.Status.LastFailoverTime.Time.Before(deleted) {
		t.Errorf("status.main %q (was %q), lastFailoverTime %v: want the coordinators' failover", c.Status.Main, oldMain, c.Status.LastFailoverTime)
	}
	m.registered(ctx, lbs, oldMain, "replica")
	w.waitAcked(ctx, "writes after the MAIN's node", w.acked()+20)

	// 2. A coordinator's node deleted, with spec.lostNodes Manual.
	if _, err := env.dyn.Resource(mgcGVR).Namespace(mglNamespace).Patch(ctx, mglName, types.MergePatchType,
		[]byte(`{"spec":{"lostNodes":{"replace":"Manual"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	c = m.cluster(ctx)
	coordPod := m.coordinatorAway(ctx, c)
	node2 := m.nodeOf(ctx, coordPod)
	restoreCoord := keepNode(ctx, m.t, node2)
	on = m.podsOn(ctx, node2)
	w.markNow("a coordinator's node deleted")
	deleted = time.Now()
	t.Logf("deleting node %s with the members %v (leader %s, MAIN %s)", node2, m.members(on), c.Status.Leader, c.Status.Main)
	if err := env.client.CoreV1().Nodes().Delete(ctx, node2, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	m.until(ctx, "MemberLost ReplacementManual", false, func(c *memgraphv1.MemgraphCluster) bool {
		lost := meta.FindStatusCondition(c.Status.Conditions, memgraphv1.ConditionMemberLost)
		return lost != nil && lost.Reason == memgraphv1.ReasonReplacementManual && strings.Contains(lost.Message, memgraphv1.AnnotationReplaceMember+"="+coordPod) &&
			c.Status.State == memgraphv1.StateDegraded
	})
	manualAfter := since(deleted)
	coordinator := "coordinator_" + strings.TrimPrefix(coordPod, mglName+"-coordinator-")
	if rows, err := m.showInstances(ctx, lbs); err != nil || rows[coordinator].bolt == "" {
		t.Fatalf("%s is no longer in the membership before the annotation (err %v): %+v", coordinator, err, rows)
	}
	approved := time.Now()
	if _, err := env.dyn.Resource(mgcGVR).Namespace(mglNamespace).Patch(ctx, mglName, types.MergePatchType,
		fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, memgraphv1.AnnotationReplaceMember, coordPod), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	c = m.ready(ctx, "after the coordinator's replacement was approved", func(c *memgraphv1.MemgraphCluster) bool {
		lost := meta.FindStatusCondition(c.Status.Conditions, memgraphv1.ConditionMemberLost)
		_, annotated := c.Annotations[memgraphv1.AnnotationReplaceMember]
		return !annotated && lost != nil && lost.Reason == memgraphv1.ReasonReplaced && m.replaced(ctx, c, coordPod, node2)
	})
	t.Logf("the coordinator %s's node %s deleted: ReplacementManual after %s; Ready and Converged again %s after the annotation (leader %s)",
		coordPod, node2, manualAfter, since(approved), c.Status.Leader)
	rows := m.registered(ctx, lbs, coordinator, "")
	coords := 0
	for _, r := range rows {
		if r.coordinator {
			coords++
		}
	}
	if coords != 3 {
		t.Errorf("the Raft membership has %d coordinators, want 3: %+v", coords, rows)
	}
	w.waitAcked(ctx, "writes after the coordinator's node", w.acked()+20)
	w.stop()
	if most := watch.stop(); most > 1 {
		t.Errorf("%d instances were MAIN in one SHOW INSTANCES, want at most 1", most)
	}

	acked, attempts, failures, gaps := w.figures()
	t.Logf("writer through neo4j://%s: %d writes acknowledged of %d attempts, %d failed (first: %s)",
		lbs[mglName+"-external"], len(acked), attempts, failures, w.firstError())
	for _, g := range gaps {
		t.Logf("  %s", g)
	}
	m.readBack(ctx, acked)

	// 3. The nodes back: nothing is lost any more.
	for _, restore := range []func(context.Context) error{restoreMain, restoreCoord} {
		if err := restore(ctx); err != nil {
			t.Errorf("restoring a node: %v", err)
		}
	}
	back := time.Now()
	c = m.ready(ctx, "after the nodes came back", func(c *memgraphv1.MemgraphCluster) bool {
		lost := meta.FindStatusCondition(c.Status.Conditions, memgraphv1.ConditionMemberLost)
		return lost != nil && lost.Status == metav1.ConditionFalse && lost.Reason == memgraphv1.ReasonNoMemberLost && len(c.Status.LostNodes) == 0
	})
	t.Logf("the nodes back: MemberLost NoMemberLost after %s (the next resync); %s", since(back), mgDescribe(c))
}

// mglScenario is the cluster of TestMemgraphLostNode.
// mglScenario is a 3+2 cluster (TestMemgraphLostNode's, or the chaos run's) with every
// member behind a load balancer.
type mglScenario struct {
	t        *testing.T
	ns, name string
	// coordinators and data are the members Ready waits for (spec.coordinators and
	// spec.dataInstances).
	coordinators, data int32
}

func (m *mglScenario) cluster(ctx context.Context) *memgraphv1.MemgraphCluster {
	m.t.Helper()
	c, err := mgClusterIn(ctx, m.ns, m.name)
	if err != nil {
		m.t.Fatal(err)
	}
	return c
}

// ready waits until the cluster is Ready and Converged at its generation with every pod
// ready, and also(c) holds (nil: nothing more); it returns the cluster.
func (m *mglScenario) ready(ctx context.Context, step string, also func(*memgraphv1.MemgraphCluster) bool) *memgraphv1.MemgraphCluster {
	m.t.Helper()
	return m.until(ctx, step, true, also)
}

// until waits until also(c) holds and, with ready, the cluster is Ready as ready says.
func (m *mglScenario) until(ctx context.Context, step string, ready bool, also func(*memgraphv1.MemgraphCluster) bool) *memgraphv1.MemgraphCluster {
	m.t.Helper()
	var c *memgraphv1.MemgraphCluster
	last := ""
	err := poll(ctx, m.t, step+": "+m.name, 8*time.Minute, func(ctx context.Context) (bool, error) {
		u, err := env.dyn.Resource(mgcGVR).Namespace(m.ns).Get(ctx, m.name, metav1.GetOptions{})
		if err != nil {
			return transient(err)
		}
		got := &memgraphv1.MemgraphCluster{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, got); err != nil {
			return false, err
		}
		c = got
		line := mgDescribe(got)
		if lost := meta.FindStatusCondition(got.Status.Conditions, memgraphv1.ConditionMemberLost); lost != nil {
			line += fmt.Sprintf(" MemberLost=%s %s: %s", lost.Status, lost.Reason, lost.Message)
		}
		if line != last {
			m.t.Logf("%s: %s", step, line)
			last = line
		}
		if also != nil && !also(got) {
			return false, nil
		}
		if !ready {
			return true, nil
		}
		return m.isReady(got), nil
	})
	if err != nil {
		m.diagnose(ctx)
		m.t.Fatalf("%v: %s", err, mgDescribe(c))
	}
	return c
}

// isReady says whether c is Ready and Converged at its generation with every member ready.
func (m *mglScenario) isReady(c *memgraphv1.MemgraphCluster) bool {
	conv := meta.FindStatusCondition(c.Status.Conditions, memgraphv1.ConditionConverged)
	return c.Status.State == memgraphv1.StateReady && conv != nil && conv.Status == metav1.ConditionTrue &&
		conv.ObservedGeneration == c.Generation && c.Status.ReadyDataInstances == m.data && c.Status.ReadyCoordinators == m.coordinators
}

// replaced says whether pod runs again, Ready, on a node other than lost, with every claim
// of it bound to a volume that is not on lost, and status.lostNodes records it Replaced.
func (m *mglScenario) replaced(ctx context.Context, c *memgraphv1.MemgraphCluster, pod, lost string) bool {
	recorded := slices.ContainsFunc(c.Status.LostNodes, func(l memgraphv1.LostNode) bool {
		return l.Member == pod && l.Node == lost && l.Reason == memgraphv1.LostNodeDeleted && l.Replacement == memgraphv1.ReplacementReplaced
	})
	p, err := env.client.CoreV1().Pods(m.ns).Get(ctx, pod, metav1.GetOptions{})
	if !recorded || err != nil || p.Spec.NodeName == "" || p.Spec.NodeName == lost || !podReady(p) {
		return false
	}
	for _, v := range p.Spec.Volumes {
		if v.PersistentVolumeClaim == nil {
			continue
		}
		pvc, err := env.client.CoreV1().PersistentVolumeClaims(m.ns).Get(ctx, v.PersistentVolumeClaim.ClaimName, metav1.GetOptions{})
		if err != nil || pvc.Spec.VolumeName == "" {
			return false
		}
		pv, err := env.client.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
		if err != nil || vklNode(pv) == lost {
			return false
		}
	}
	return true
}

func (m *mglScenario) nodeOf(ctx context.Context, pod string) string {
	m.t.Helper()
	p, err := env.client.CoreV1().Pods(m.ns).Get(ctx, pod, metav1.GetOptions{})
	if err != nil {
		m.t.Fatal(err)
	}
	return p.Spec.NodeName
}

// podsOn are the names of every pod on node, of any namespace.
func (m *mglScenario) podsOn(ctx context.Context, node string) []string {
	m.t.Helper()
	pods, err := env.client.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		m.t.Fatal(err)
	}
	var out []string
	for _, p := range pods.Items {
		out = append(out, p.Namespace+"/"+p.Name)
	}
	slices.Sort(out)
	return out
}

// members are the scenario's pods among pods.
func (m *mglScenario) members(pods []string) []string {
	var out []string
	for _, p := range pods {
		if name, ok := strings.CutPrefix(p, m.ns+"/"); ok {
			out = append(out, name)
		}
	}
	return out
}

// coordinatorAway is a coordinator pod whose node runs neither data instance: the Raft
// leader's when it is one.
func (m *mglScenario) coordinatorAway(ctx context.Context, c *memgraphv1.MemgraphCluster) string {
	m.t.Helper()
	dataNodes := map[string]bool{}
	for o := range int(m.data) {
		dataNodes[m.nodeOf(ctx, fmt.Sprintf("%s-data-%d", m.name, o))] = true
	}
	leader := m.name + "-coordinator-" + strings.TrimPrefix(c.Status.Leader, "coordinator_")
	candidates := []string{leader}
	for id := 1; id <= 3; id++ {
		candidates = append(candidates, fmt.Sprintf("%s-coordinator-%d", m.name, id))
	}
	for _, p := range candidates {
		if n := m.nodeOf(ctx, p); n != "" && !dataNodes[n] {
			return p
		}
	}
	m.t.Fatalf("every coordinator shares a node with a data instance (data on %v)", slices.Sorted(maps.Keys(dataNodes)))
	return ""
}

// advertised waits until every member's Service has a load-balancer address and returns
// the addresses (host:7687) by Service name.
func (m *mglScenario) advertised(ctx context.Context, step string) map[string]string {
	m.t.Helper()
	lbs := map[string]string{}
	err := poll(ctx, m.t, step+": every member's load-balancer address", 3*time.Minute, func(ctx context.Context) (bool, error) {
		svcs, err := env.client.CoreV1().Services(m.ns).List(ctx, metav1.ListOptions{LabelSelector: "memgraph.com/cluster=" + m.name})
		if err != nil {
			return transient(err)
		}
		clear(lbs)
		for _, s := range svcs.Items {
			if !strings.HasSuffix(s.Name, "-external") {
				continue
			}
			if len(s.Status.LoadBalancer.Ingress) == 0 {
				return false, nil
			}
			lbs[s.Name] = net.JoinHostPort(s.Status.LoadBalancer.Ingress[0].IP, "7687")
		}
		return len(lbs) == 1+int(m.coordinators+m.data), nil
	})
	if err != nil {
		m.t.Fatal(err)
	}
	return maps.Clone(lbs)
}

// mglRow is one SHOW INSTANCES row.
type mglRow struct {
	bolt, health, role string
	coordinator        bool
}

// showInstances asks the coordinators (any forwards to the leader) through mgl-external.
func (m *mglScenario) showInstances(ctx context.Context, lbs map[string]string) (map[string]mglRow, error) {
	ctx, cancel := context.WithTimeout(ctx, mgCall)
	defer cancel()
	res, err := boltclient.Query(ctx, lbs[m.name+"-external"], boltclient.Options{Timeout: mgCall}, "SHOW INSTANCES")
	if err != nil {
		return nil, err
	}
	col := func(r []any, name string) string {
		if i := res.Column(name); i >= 0 {
			s, _ := r[i].(string)
			return s
		}
		return ""
	}
	out := map[string]mglRow{}
	for _, r := range res.Records {
		out[col(r, "name")] = mglRow{bolt: col(r, "bolt_server"), health: col(r, "health"), role: col(r, "role"),
			coordinator: col(r, "coordinator_server") != ""}
	}
	return out, nil
}

// registered waits until the leader shows member up (with role, unless empty) and returns
// its rows.
func (m *mglScenario) registered(ctx context.Context, lbs map[string]string, member, role string) map[string]mglRow {
	m.t.Helper()
	var rows map[string]mglRow
	err := poll(ctx, m.t, member+" registered and up", 2*time.Minute, func(ctx context.Context) (bool, error) {
		got, err := m.showInstances(ctx, lbs)
		if err != nil {
			return false, nil //nolint:nilerr // retried; a lasting failure times out
		}
		rows = got
		r, ok := got[member]
		return ok && r.health == "up" && (role == "" || r.role == role), nil
	})
	if err != nil {
		m.t.Fatalf("%v: %+v", err, rows)
	}
	return rows
}

// mglMainWatch reads SHOW INSTANCES every half second through mgl-external, keeps the most
// data instances one answer showed as MAIN, and when each instance was first seen MAIN.
type mglMainWatch struct {
	stopCh chan struct{}
	done   chan int

	mu    sync.Mutex
	mains []mglMainSeen
}

type mglMainSeen struct {
	at   time.Time
	main string
}

func (m *mglScenario) watchMains(ctx context.Context, lbs map[string]string) *mglMainWatch {
	w := &mglMainWatch{stopCh: make(chan struct{}), done: make(chan int, 1)}
	go func() {
		most := 0
		for {
			select {
			case <-w.stopCh:
				w.done <- most
				return
			case <-ctx.Done():
				w.done <- most
				return
			case <-time.After(500 * time.Millisecond):
			}
			rows, err := m.showInstances(ctx, lbs)
			if err != nil {
				continue
			}
			var mains []string
			for name, r := range rows {
				if !r.coordinator && r.role == "main" {
					mains = append(mains, name)
				}
			}
			most = max(most, len(mains))
			if len(mains) == 1 {
				w.mu.Lock()
				if n := len(w.mains); n == 0 || w.mains[n-1].main != mains[0] {
					w.mains = append(w.mains, mglMainSeen{time.Now(), mains[0]})
				}
				w.mu.Unlock()
			}
		}
	}()
	return w
}

// promoted is how long after since the coordinators first showed a MAIN other than old,
// 0 when they have not.
func (w *mglMainWatch) promoted(old string, since time.Time) time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, s := range w.mains {
		if s.at.After(since) && s.main != old {
			return s.at.Sub(since)
		}
	}
	return 0
}

func (w *mglMainWatch) stop() int {
	close(w.stopCh)
	return <-w.done
}

// readBack reads the writer's nodes on every data instance, each through its load
// balancer: every acknowledged write must be there.
func (m *mglScenario) readBack(ctx context.Context, acked []int64) {
	m.t.Helper()
	main := m.ready(ctx, "before the read-back", nil).Status.Main
	lbs := m.advertised(ctx, "before the read-back")
	for o := range int(m.data) {
		inst := fmt.Sprintf("%s_data_%d", m.name, o)
		addr := lbs[fmt.Sprintf("%s-data-%d-external", m.name, o)]
		var have map[int64]bool
		last := ""
		err := poll(ctx, m.t, "read back on "+inst, time.Minute, func(ctx context.Context) (bool, error) {
			cctx, cancel := context.WithTimeout(ctx, 3*mgCall)
			defer cancel()
			res, err := boltclient.Query(cctx, addr, boltclient.Options{Timeout: 3 * mgCall}, "MATCH (n:E2EExternal) RETURN n")
			if err != nil {
				last = err.Error()
				return false, nil
			}
			have = map[int64]bool{}
			for _, r := range res.Records {
				if n, ok := r[0].(bolt.Node); ok {
					if i, ok := n.Props["i"].(int64); ok {
						have[i] = true
					}
				}
			}
			for _, i := range acked {
				if !have[i] {
					return false, nil // a replica may still be catching up
				}
			}
			return true, nil
		})
		var missing []int64
		for _, i := range acked {
			if !have[i] {
				missing = append(missing, i)
			}
		}
		role := "replica"
		if inst == main {
			role = "MAIN"
		}
		m.t.Logf("read back on %s (%s): %d nodes, %d of %d acknowledged writes missing", inst, role, len(have), len(missing), len(acked))
		if err != nil || len(missing) > 0 {
			m.t.Errorf("%s lost %d acknowledged writes (first: %v; last error: %s)", inst, len(missing), missing[:min(len(missing), 10)], last)
		}
	}
}

func (m *mglScenario) diagnose(ctx context.Context) {
	if out, err := kubectl(ctx, "get", "mgc,sts,pods,pvc", "-n", m.ns, "-o", "wide"); err == nil {
		m.t.Logf("%s", out)
	}
	if out, err := kubectl(ctx, "get", "events", "-n", m.ns, "--sort-by=.lastTimestamp"); err == nil {
		lines := strings.Split(strings.TrimSpace(out), "\n")
		m.t.Logf("%s", strings.Join(lines[max(0, len(lines)-40):], "\n"))
	}
	diagnose(ctx, m.t, serviceByName("memgraph-operator"))
}

// mglVolumes creates the scenario's class (no provisioner, binding when a pod is
// scheduled) and mglVolumesPerNode local volumes on each node, removed when the test ends.
func mglVolumes(ctx context.Context, t *testing.T) error {
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: mglClass}, Provisioner: "kubernetes.io/no-provisioner",
		VolumeBindingMode: ptr.To(storagev1.VolumeBindingWaitForFirstConsumer), ReclaimPolicy: ptr.To(corev1.PersistentVolumeReclaimRetain)}
	if _, err := env.client.StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	t.Cleanup(func() {
		ctx := context.Background()
		_ = env.client.CoreV1().PersistentVolumes().DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: "e2e.opsuite.io/class=" + mglClass})
		_ = env.client.StorageV1().StorageClasses().Delete(ctx, mglClass, metav1.DeleteOptions{})
	})
	nodes, err := env.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, n := range nodes.Items {
		for i := range mglVolumesPerNode {
			pv := &corev1.PersistentVolume{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%s-%d", mglClass, n.Name, i), Labels: map[string]string{"e2e.opsuite.io/class": mglClass}},
				Spec: corev1.PersistentVolumeSpec{
					Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
					AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
					StorageClassName:              mglClass,
					PersistentVolumeSource:        corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: fmt.Sprintf("/mnt/%s/%d", mglClass, i)}},
					NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
						MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "kubernetes.io/hostname", Operator: corev1.NodeSelectorOpIn, Values: []string{n.Name}}},
					}}}},
				},
			}
			if _, err := env.client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				return err
			}
		}
	}
	return nil
}
