package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	valkeyv1 "github.com/opsuite/suite/api/valkey/v1alpha1"
)

var (
	vkcGVR = schema.GroupVersionResource{Group: "valkey.io", Version: "v1alpha1", Resource: "valkeyclusters"}
	vknGVR = schema.GroupVersionResource{Group: "valkey.io", Version: "v1alpha1", Resource: "valkeynodes"}
)

// The Valkey scenario's cluster: its own namespace, a spec user the writer logs in as.
const (
	vkNamespace = "e2e-valkey-data"
	vkName      = "vk"
	vkUser      = "app"
	vkPassword  = "e2e-app-password"
)

// The scenario's images and client follow VALKEY_SERVER, the variable the operator's own
// tests read: valkey-server (the default) runs it on valkey/valkey images, which the local
// cluster starts as Debian's valkey-server; redis-server on redis images (redis-server
// 7.0), the compatibility run of `make test-redis7`. The operator is the same either way:
// it tells the servers apart by what they answer, never by the tag.
var vkImageOld, vkImageNew, vkCLI, vkServerErr = vkServer(os.Getenv("VALKEY_SERVER"))

func vkServer(choice string) (imageOld, imageNew, cli string, err error) {
	switch choice {
	case "", "valkey-server":
		return "valkey/valkey:8.0", "valkey/valkey:8.1", "valkey-cli", nil
	case "redis-server":
		return "redis:7.0", "redis:7.0.15", "redis-cli", nil
	}
	return "", "", "", fmt.Errorf("VALKEY_SERVER=%q: want valkey-server or redis-server", choice)
}

// vkManifest is what a user applies: the password Secret and a 3x1 ValkeyCluster name in
// namespace ns on the scenario's server (VALKEY_SERVER) whose spec user may read and write
// k:* keys (and see the topology, as cluster clients must).
func vkManifest(ns, name string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata:
  name: %[1]s
---
apiVersion: v1
kind: Secret
metadata:
  name: %[2]s-users
  namespace: %[1]s
stringData:
  %[3]s: %[4]s
---
apiVersion: valkey.io/v1alpha1
kind: ValkeyCluster
metadata:
  name: %[2]s
  namespace: %[1]s
spec:
  image: %[5]s
  shards: 3
  replicas: 1
  resources:
    requests:
      cpu: 10m
      memory: 32Mi
  users:
    - name: %[3]s
      passwordSecret:
        name: %[2]s-users
        keys: [%[3]s]
      commands:
        allow: ["@all"]
        deny: ["@admin", "@dangerous"]
      keys:
        readWrite: ["k:*"]
`, ns, name, vkUser, vkPassword, vkImageOld)
}

// TestValkeyScenario is issue 9's end-to-end scenario on the chart Helm installed: create
// 3x1, then with a writer running (cluster mode, every acknowledged key checked at the
// end) scale to 4x1, 5x2 and back to 3x1, roll the image tag, delete a primary's pod and
// kill the operator's pod in the middle of a rebalance. After every step the cluster is
// Ready with the documented conditions, the data plane agrees (CLUSTER NODES on every
// member), and the step's documented events were emitted. Then a steady cluster emits no
// event for 30 s, and no acknowledged write was lost.
// vkMovesTimeout bounds a step that moves a shard's worth of slots: Valkey 8 answers each
// SETSLOT once the primary's replicas have it, and on a 2-core host running the whole suite
// (load 30) a scale-out from 3 to 4 shards took 4 min 5 s, and one from 4x1 to 5x2 (seven
// members, then a fifth of the slots moved with two replicas acknowledging each SETSLOT)
// 4 min 48 s in CI: the bound leaves room above that.
const vkMovesTimeout = 8 * time.Minute

func TestValkeyScenario(t *testing.T) {
	needRunner(t, "the writer and the cli reach the Valkey pods at their addresses")
	needInstalled(t, "valkey-operator")
	needCLI(t)
	// Every wait below is bounded; together they stay inside the suite's -timeout, so a
	// stuck step fails with its diagnosis instead of the binary being killed.
	ctx := scenarioContext(t)
	s := &vkScenario{t: t, begin: time.Now(), ns: vkNamespace, name: vkName, user: vkUser, password: vkPassword}
	writerBin := make(chan string, 1)
	go func() { writerBin <- s.buildWriter() }()

	t.Cleanup(func() {
		_ = env.client.CoreV1().Namespaces().Delete(context.Background(), s.ns, metav1.DeleteOptions{})
	})
	s.step(ctx, "create 3x1", 4*time.Minute, vkWant{3, 1, vkImageOld, ""}, func(ctx context.Context) error {
		return s.apply(ctx, vkManifest(vkNamespace, vkName))
	}, valkeyv1.EventServiceCreated, valkeyv1.EventConfigMapCreated, valkeyv1.EventInternalSecretsCreated,
		valkeyv1.EventValkeyNodeCreated, valkeyv1.EventPodDisruptionBudgetCreated, valkeyv1.EventClusterMeetBatch,
		valkeyv1.EventPrimaryCreated, valkeyv1.EventPrimariesCreated, valkeyv1.EventReplicaCreated,
		valkeyv1.EventReplicasAttached, valkeyv1.EventClusterReady)

	bin := <-writerBin
	if bin == "" {
		t.FailNow()
	}
	s.startWriter(ctx, bin)

	s.step(ctx, "scale out to 4x1", vkMovesTimeout, vkWant{4, 1, vkImageOld, valkeyv1.ReasonRebalancingSlots}, s.patch(`{"spec":{"shards":4}}`),
		valkeyv1.EventValkeyNodeCreated, valkeyv1.EventClusterMeetBatch, valkeyv1.EventSlotsRebalancing,
		valkeyv1.EventReplicaCreated, valkeyv1.EventClusterReady)
	s.step(ctx, "scale out to 5x2", vkMovesTimeout, vkWant{5, 2, vkImageOld, valkeyv1.ReasonRebalancingSlots}, s.patch(`{"spec":{"shards":5,"replicas":2}}`),
		valkeyv1.EventValkeyNodeCreated, valkeyv1.EventClusterMeetBatch, valkeyv1.EventSlotsRebalancing,
		valkeyv1.EventReplicaCreated, valkeyv1.EventClusterReady)
	s.step(ctx, "scale in to 3x1", vkMovesTimeout, vkWant{3, 1, vkImageOld, valkeyv1.ReasonRebalancingSlots}, s.patch(`{"spec":{"shards":3,"replicas":1}}`),
		valkeyv1.EventSlotsDraining, valkeyv1.EventValkeyNodeDeleted, valkeyv1.EventClusterReady)
	before := s.podUIDs(ctx)
	s.step(ctx, "roll the image to "+vkImageNew, 5*time.Minute, vkWant{3, 1, vkImageNew, valkeyv1.ReasonUpdatingNodes}, s.patch(`{"spec":{"image":"`+vkImageNew+`"}}`),
		valkeyv1.EventValkeyNodeUpdated, valkeyv1.EventFailoverInitiated, valkeyv1.EventFailoverCompleted,
		valkeyv1.EventClusterReady)
	for name, uid := range s.podUIDs(ctx) {
		if before[name] == uid {
			t.Errorf("pod %s kept its UID through the image roll", name)
		}
	}

	// From here on the steps break things on purpose: warnings are expected.
	s.allowWarnings = true
	var victim corev1.Pod
	s.step(ctx, "delete a primary's pod", 3*time.Minute, vkWant{3, 1, vkImageNew, ""}, func(ctx context.Context) error {
		p, err := s.primaryPod(ctx)
		if err != nil {
			return err
		}
		victim = p
		s.t.Logf("deleting pod %s (primary, %s)", p.Name, p.Status.PodIP)
		if err := env.client.CoreV1().Pods(s.ns).Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil {
			return err
		}
		// Until the old pod is gone its member may still answer: the cluster would look
		// Ready before the loss was noticed.
		return poll(ctx, t, "pod "+p.Name+" gone or replaced", 2*time.Minute, func(ctx context.Context) (bool, error) {
			q, err := env.client.CoreV1().Pods(s.ns).Get(ctx, p.Name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return true, nil
			}
			if err != nil {
				return transient(err)
			}
			return q.UID != p.UID, nil
		})
	}, valkeyv1.EventClusterMeetBatch, valkeyv1.EventReplicaCreated, valkeyv1.EventStaleNodeForgotten,
		valkeyv1.EventClusterReady)
	if p, err := env.client.CoreV1().Pods(s.ns).Get(ctx, victim.Name, metav1.GetOptions{}); err != nil || p.UID == victim.UID {
		t.Errorf("pod %s was not replaced after its deletion (err %v)", victim.Name, err)
	}

	s.step(ctx, "kill the operator in the middle of a rebalance to 4x1", vkMovesTimeout, vkWant{4, 1, vkImageNew, ""}, s.scaleAndKillOperator,
		valkeyv1.EventValkeyNodeCreated, valkeyv1.EventSlotsRebalancing, valkeyv1.EventClusterReady)

	s.step(ctx, "restart the control plane in the middle of a rebalance to 5x1", vkMovesTimeout+time.Minute, vkWant{5, 1, vkImageNew, ""}, s.scaleAndRestartControlPlane,
		valkeyv1.EventValkeyNodeCreated, valkeyv1.EventSlotsRebalancing, valkeyv1.EventClusterReady)

	sum := s.stopWriter()
	s.steady(ctx, 30*time.Second, vkWant{5, 1, vkImageNew, ""})

	t.Logf("writer: %d writes acknowledged, %d refused, longest outage %.2fs, %d lost, %d unreadable; its summary:\n%s",
		sum.Acked, sum.Refused, sum.LongestOutageSeconds, sum.Lost, sum.Unreadable, sum.raw)
	if sum.Acked < 1000 {
		t.Errorf("only %d writes acknowledged through the whole scenario: the writer hardly ran", sum.Acked)
	}
	if sum.Lost != 0 || sum.Unreadable != 0 {
		t.Errorf("data safety: %d acknowledged keys lost (first: %v), %d unreadable", sum.Lost, sum.LostKeys, sum.Unreadable)
	}
	t.Logf("Valkey scenario: %s in all", since(s.begin))
}

// vkWant is the cluster a step must reach (an empty image is not checked) and the
// Progressing reason it must be seen going through on the way ("" for none).
type vkWant struct {
	shards, replicas int
	image            string
	through          string
}

// vkScenario drives one ValkeyCluster (name in namespace ns); user and password log
// redis-cli and the writer in (no user: the default user, open when spec.users is empty).
type vkScenario struct {
	t              *testing.T
	begin          time.Time
	ns, name       string
	user, password string

	// allowWarnings: Warning events are logged, not failures (steps that break something
	// on purpose); otherwise a Warning event about the cluster fails the step.
	allowWarnings bool

	writer      *exec.Cmd
	writerRate  int // writes per second; 0 is 100
	writerStart time.Time
	writerOut   bytes.Buffer
	writerLog   string
	seeds       string
	writerEnd   chan error
	stopSeeds   context.CancelFunc
}

// step applies a change, waits until the cluster is Ready as wanted, then until every
// event reason in events has been emitted since the change.
func (s *vkScenario) step(ctx context.Context, name string, timeout time.Duration, want vkWant, change func(context.Context) error, events ...string) {
	t := s.t
	t.Helper()
	begin := time.Now()
	if s.writer != nil {
		// Outages in the writer's summary are timed from its start: this maps them to steps.
		t.Logf("%s: begins at writer time +%.1fs", name, begin.Sub(s.writerStart).Seconds())
	}
	if err := change(ctx); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	seen := s.waitReady(ctx, name, timeout, want)
	t.Logf("%s: Ready after %s; states seen: %s", name, since(begin), strings.Join(seen, " -> "))
	if want.through != "" && !slices.ContainsFunc(seen, func(l string) bool { return strings.Contains(l, "(Progressing "+want.through+")") }) {
		t.Errorf("%s: Progressing=True with reason %s was never seen on the way to Ready", name, want.through)
	}
	if _, err := kubectl(ctx, "wait", "--for=condition=Ready", "vkc/"+s.name, "-n", s.ns, "--timeout=30s"); err != nil {
		t.Errorf("%s: kubectl wait --for=condition=Ready: %v", name, err)
	}
	s.wantEvents(ctx, name, begin, events)
	s.checkRoles(ctx, name)
	s.checkShards(ctx, name, false)
}

// apply runs kubectl apply on a manifest, as a user does.
func (s *vkScenario) apply(ctx context.Context, manifest string) error {
	path := filepath.Join(s.t.TempDir(), "valkey.yaml")
	if err := os.WriteFile(path, []byte(manifest), 0o600); err != nil {
		return err
	}
	out, err := kubectl(ctx, "apply", "-f", path)
	s.t.Logf("%s", strings.TrimSpace(out))
	return err
}

func (s *vkScenario) patch(p string) func(context.Context) error {
	return func(ctx context.Context) error {
		out, err := kubectl(ctx, "patch", "vkc", s.name, "-n", s.ns, "--type", "merge", "-p", p)
		s.t.Logf("kubectl patch vkc %s %s: %s", s.name, p, strings.TrimSpace(out))
		return err
	}
}

func (s *vkScenario) cluster(ctx context.Context) (*valkeyv1.ValkeyCluster, error) {
	u, err := env.dyn.Resource(vkcGVR).Namespace(s.ns).Get(ctx, s.name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	var c valkeyv1.ValkeyCluster
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &c); err != nil {
		return nil, err
	}
	return &c, nil
}

func (s *vkScenario) nodes(ctx context.Context) ([]valkeyv1.ValkeyNode, error) {
	list, err := env.dyn.Resource(vknGVR).Namespace(s.ns).List(ctx, metav1.ListOptions{LabelSelector: "valkey.io/cluster=" + s.name})
	if err != nil {
		return nil, err
	}
	out := make([]valkeyv1.ValkeyNode, len(list.Items))
	for i := range list.Items {
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(list.Items[i].Object, &out[i]); err != nil {
			return nil, err
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// vkCondition is the documented value of one condition on a Ready cluster.
type vkCondition struct {
	typ    string
	status metav1.ConditionStatus
	reason string
}

var vkReadyConditions = []vkCondition{
	{valkeyv1.ConditionReady, metav1.ConditionTrue, valkeyv1.ReasonClusterHealthy},
	{valkeyv1.ConditionProgressing, metav1.ConditionFalse, valkeyv1.ReasonReconcileComplete},
	{valkeyv1.ConditionClusterFormed, metav1.ConditionTrue, valkeyv1.ReasonTopologyComplete},
	{valkeyv1.ConditionSlotsAssigned, metav1.ConditionTrue, valkeyv1.ReasonAllSlotsAssigned},
}

// apiReady says what, if anything, keeps the cluster's API objects from the documented
// Ready picture of want.
func (s *vkScenario) apiReady(ctx context.Context, want vkWant) (string, error) {
	c, err := s.cluster(ctx)
	if err != nil {
		return "", err
	}
	st := c.Status
	if st.State != valkeyv1.StateReady || st.Reason != valkeyv1.ReasonClusterHealthy {
		return fmt.Sprintf("state %s reason %s: %s", st.State, st.Reason, st.Message), nil
	}
	for _, w := range vkReadyConditions {
		cond := findCondition(st.Conditions, w.typ)
		switch {
		case cond == nil:
			return "no " + w.typ + " condition", nil
		case cond.ObservedGeneration != c.Generation:
			return fmt.Sprintf("%s observed generation %d, the spec is at %d", w.typ, cond.ObservedGeneration, c.Generation), nil
		case cond.Status != w.status || cond.Reason != w.reason:
			return fmt.Sprintf("%s %s %s (%s), want %s %s", w.typ, cond.Status, cond.Reason, cond.Message, w.status, w.reason), nil
		}
	}
	if d := findCondition(st.Conditions, valkeyv1.ConditionDegraded); d != nil && d.Status == metav1.ConditionTrue {
		return fmt.Sprintf("Degraded %s: %s", d.Reason, d.Message), nil
	}
	if int(st.Shards) != want.shards || int(st.ReadyShards) != want.shards {
		return fmt.Sprintf("status shards %d, readyShards %d, want %d", st.Shards, st.ReadyShards, want.shards), nil
	}
	nodes, err := s.nodes(ctx)
	if err != nil {
		return "", err
	}
	var names []string
	for _, n := range nodes {
		names = append(names, n.Name)
		if !n.Status.Ready || n.Status.PodIP == "" {
			return fmt.Sprintf("ValkeyNode %s not ready (pod %q, ip %q)", n.Name, n.Status.PodName, n.Status.PodIP), nil
		}
		if want.image != "" && n.Spec.Image != want.image {
			return fmt.Sprintf("ValkeyNode %s image %s, want %s", n.Name, n.Spec.Image, want.image), nil
		}
	}
	var wantNames []string
	for i := range want.shards {
		for j := range want.replicas + 1 {
			wantNames = append(wantNames, fmt.Sprintf("%s-%d-%d", s.name, i, j))
		}
	}
	sort.Strings(wantNames)
	if !slices.Equal(names, wantNames) {
		return fmt.Sprintf("ValkeyNodes %v, want %v", names, wantNames), nil
	}
	return "", nil
}

// waitReady polls until the API objects and the data plane show want; it returns the
// distinct (state, reason, Progressing reason) the cluster went through.
func (s *vkScenario) waitReady(ctx context.Context, step string, timeout time.Duration, want vkWant) []string {
	t := s.t
	t.Helper()
	var seen, planeSeen []string
	var why string
	err := poll(ctx, t, step+": Ready", timeout, func(ctx context.Context) (bool, error) {
		if c, err := s.cluster(ctx); err == nil {
			p := findCondition(c.Status.Conditions, valkeyv1.ConditionProgressing)
			label := fmt.Sprintf("%s/%s", c.Status.State, c.Status.Reason)
			if p != nil && p.Status == metav1.ConditionTrue {
				label += "(Progressing " + p.Reason + ")"
			}
			if len(seen) == 0 || seen[len(seen)-1] != label {
				seen = append(seen, label)
			}
		}
		w, err := s.apiReady(ctx, want)
		if err != nil {
			why = err.Error()
			return transient(err)
		}
		if w != "" {
			why = w
			return false, nil
		}
		// The API says Ready: the data plane must agree, as every member sees it.
		if why, err = s.dataPlane(ctx, want); err != nil {
			return false, err
		}
		if why != "" && (len(planeSeen) == 0 || planeSeen[len(planeSeen)-1] != why) {
			planeSeen = append(planeSeen, why)
		}
		return why == "", nil
	})
	if err != nil {
		s.diagnose(ctx)
		t.Fatalf("%s: %v\n  last seen: %s\n  states seen: %s\n  data plane disagreeing with a Ready API (last 5): %s", step, err, why,
			strings.Join(seen, " -> "), strings.Join(planeSeen[max(0, len(planeSeen)-5):], " | "))
	}
	return seen
}

// dataPlane checks CLUSTER NODES on every member: the members are exactly the cluster's
// pods, none failed or in handshake, want.shards primaries own all 16384 slots with none
// in migration, and each has want.replicas replicas.
func (s *vkScenario) dataPlane(ctx context.Context, want vkWant) (string, error) {
	nodes, err := s.nodes(ctx)
	if err != nil {
		return "", err
	}
	var ips []string
	for _, n := range nodes {
		ips = append(ips, n.Status.PodIP)
	}
	for _, n := range nodes {
		out, err := s.cli(ctx, n.Status.PodIP, "CLUSTER", "NODES")
		if err != nil {
			return fmt.Sprintf("%s: %v", n.Name, err), nil
		}
		if why := checkTopology(parseClusterNodes(out), ips, want.shards, want.replicas); why != "" {
			return fmt.Sprintf("CLUSTER NODES on %s (%s): %s", n.Name, n.Status.PodIP, why), nil
		}
	}
	return "", nil
}

// vkMember is one line of CLUSTER NODES.
type vkMember struct {
	id, host, master, link string
	flags                  []string
	slots                  int
	migrating              bool
}

func parseClusterNodes(out string) []vkMember {
	var ms []vkMember
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 8 {
			continue
		}
		addr, _, _ := strings.Cut(f[1], "@")
		host := addr
		if i := strings.LastIndex(addr, ":"); i >= 0 {
			host = addr[:i]
		}
		m := vkMember{id: f[0], host: host, flags: strings.Split(f[2], ","), master: f[3], link: f[7]}
		for _, r := range f[8:] {
			if strings.HasPrefix(r, "[") {
				m.migrating = true
				continue
			}
			lo, hi, isRange := strings.Cut(r, "-")
			var a, b int
			if _, err := fmt.Sscan(lo, &a); err != nil {
				continue
			}
			b = a
			if isRange {
				if _, err := fmt.Sscan(hi, &b); err != nil {
					continue
				}
			}
			m.slots += b - a + 1
		}
		ms = append(ms, m)
	}
	return ms
}

func checkTopology(ms []vkMember, ips []string, shards, replicas int) string {
	if len(ms) != len(ips) {
		var hosts []string
		for _, m := range ms {
			hosts = append(hosts, m.host+"("+strings.Join(m.flags, ",")+")")
		}
		return fmt.Sprintf("knows %d nodes %v, want the %d pods %v", len(ms), hosts, len(ips), ips)
	}
	primaries, total := map[string]int{}, 0
	for _, m := range ms {
		if !slices.Contains(ips, m.host) {
			return fmt.Sprintf("member %s at %s is none of the pods %v", m.id, m.host, ips)
		}
		for _, f := range m.flags {
			if f == "fail" || f == "fail?" || f == "handshake" || f == "noaddr" {
				return fmt.Sprintf("member %s at %s is flagged %s", m.id, m.host, f)
			}
		}
		if !slices.Contains(m.flags, "myself") && m.link != "connected" {
			return fmt.Sprintf("member %s at %s link %s", m.id, m.host, m.link)
		}
		if m.migrating {
			return fmt.Sprintf("member %s at %s has a slot in migration", m.id, m.host)
		}
		if slices.Contains(m.flags, "master") {
			if m.slots == 0 {
				return fmt.Sprintf("primary %s at %s owns no slots", m.id, m.host)
			}
			primaries[m.id] = 0
			total += m.slots
		}
	}
	if len(primaries) != shards || total != 16384 {
		return fmt.Sprintf("%d primaries own %d slots, want %d primaries owning 16384", len(primaries), total, shards)
	}
	for _, m := range ms {
		if slices.Contains(m.flags, "slave") {
			if _, ok := primaries[m.master]; !ok {
				return fmt.Sprintf("replica %s at %s follows %s, no primary", m.id, m.host, m.master)
			}
			primaries[m.master]++
		}
	}
	for id, n := range primaries {
		if n != replicas {
			return fmt.Sprintf("primary %s has %d replicas, want %d", id, n, replicas)
		}
	}
	return ""
}

// needCLI fails the test when VALKEY_SERVER is not understood or its cli is missing.
func needCLI(t *testing.T) {
	t.Helper()
	if vkServerErr != nil {
		t.Fatal(vkServerErr)
	}
	if _, err := exec.LookPath(vkCLI); err != nil {
		t.Fatalf("%s not found (%v): valkey-cli comes with valkey-tools from bookworm-backports, redis-cli with redis-tools (.ci/run installs both)", vkCLI, err)
	}
}

// cli runs the cli against one member as the scenario's user, as README's examples do.
func (s *vkScenario) cli(ctx context.Context, ip string, args ...string) (string, error) {
	return redisCLI(ctx, ip, s.user, s.password, args...)
}

// redisCLI runs vkCLI (valkey-cli or redis-cli) -c against one member, as user (none: the
// default user).
func redisCLI(ctx context.Context, ip, user, password string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	flags := []string{"-c", "-h", ip, "-p", "6379"}
	if user != "" {
		flags = append(flags, "--user", user, "--pass", password, "--no-auth-warning")
	}
	cmd := exec.CommandContext(ctx, vkCLI, append(flags, args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	text := out.String()
	if err == nil && cliError(text) != "" {
		// The cli prints an error reply (or a failed AUTH) and still exits 0.
		err = errors.New(cliError(text))
	}
	if err != nil {
		return text, fmt.Errorf("%s -h %s %s: %w: %s", vkCLI, ip, strings.Join(args, " "), err, strings.TrimSpace(head(text, 300)))
	}
	return text, nil
}

// cliError is the first line of redis-cli's output that is an error reply.
func cliError(out string) string {
	for _, line := range strings.Split(out, "\n") {
		for _, p := range []string{"ERR", "NOAUTH", "NOPERM", "WRONGPASS", "AUTH failed", "Could not connect", "CLUSTERDOWN", "TRYAGAIN", "WRONGTYPE"} {
			if strings.HasPrefix(line, p) {
				return line
			}
		}
	}
	return ""
}

// vkEvent is one event about the cluster or its nodes.
type vkEvent struct {
	reason, typ, kind, name, note string
	at                            time.Time
}

func (s *vkScenario) events(ctx context.Context) ([]vkEvent, error) {
	list, err := env.client.EventsV1().Events(s.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var out []vkEvent
	for i := range list.Items {
		e := &list.Items[i]
		if !s.about(e.Regarding.Kind, e.Regarding.Name) {
			continue
		}
		out = append(out, vkEvent{reason: e.Reason, typ: e.Type, kind: e.Regarding.Kind, name: e.Regarding.Name, note: e.Note, at: eventTime(e)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].at.Before(out[j].at) })
	return out, nil
}

// about reports whether an object is the cluster or one of its ValkeyNodes
// (<cluster>-<shard>-<index>: demo-0-0 is demo's, demo-users-0-0 is not).
func (s *vkScenario) about(kind, name string) bool {
	switch kind {
	case "ValkeyCluster":
		return name == s.name
	case "ValkeyNode":
		rest, ok := strings.CutPrefix(name, s.name+"-")
		var shard, index int
		n, err := fmt.Sscanf(rest, "%d-%d", &shard, &index)
		return ok && err == nil && n == 2 && rest == fmt.Sprintf("%d-%d", shard, index)
	}
	return false
}

// eventTime is when an event last happened: a series' last observation, else its time.
func eventTime(e *eventsv1.Event) time.Time {
	at := e.EventTime.Time
	if e.Series != nil && e.Series.LastObservedTime.After(at) {
		at = e.Series.LastObservedTime.Time
	}
	if e.DeprecatedLastTimestamp.After(at) {
		at = e.DeprecatedLastTimestamp.Time
	}
	if at.IsZero() {
		at = e.CreationTimestamp.Time
	}
	return at
}

// wantEvents waits (events are recorded asynchronously) until every reason was emitted
// since begin, then logs the step's events by reason and its warnings.
func (s *vkScenario) wantEvents(ctx context.Context, step string, begin time.Time, reasons []string) {
	t := s.t
	t.Helper()
	// The operator's clock is this host's and events.k8s.io events carry microseconds, so
	// an event of the previous step never counts for this one.
	var got map[string]int
	var warnings []string
	missing := func() []string {
		var out []string
		for _, r := range reasons {
			if got[r] == 0 {
				out = append(out, r)
			}
		}
		return out
	}
	err := poll(ctx, t, step+": events "+strings.Join(reasons, ","), 30*time.Second, func(ctx context.Context) (bool, error) {
		evs, err := s.events(ctx)
		if err != nil {
			return transient(err)
		}
		got, warnings = map[string]int{}, nil
		for _, e := range evs {
			if e.at.Before(begin) {
				continue
			}
			got[e.reason]++
			if e.typ == corev1.EventTypeWarning {
				warnings = append(warnings, fmt.Sprintf("%s %s/%s: %s", e.reason, e.kind, e.name, e.note))
			}
		}
		return len(missing()) == 0, nil
	})
	var summary []string
	for r, n := range got {
		summary = append(summary, fmt.Sprintf("%s=%d", r, n))
	}
	sort.Strings(summary)
	t.Logf("%s: events since the change (event objects by reason): %s", step, strings.Join(summary, " "))
	for _, w := range warnings {
		if s.allowWarnings {
			t.Logf("%s: warning event %s", step, w)
		} else {
			t.Errorf("%s: warning event %s", step, w)
		}
	}
	if err != nil {
		t.Errorf("%s: documented events not emitted: %v (got %v)", step, missing(), summary)
	}
}

// roles are the members' roles as the data plane has them (CLUSTER NODES on the first
// member that answers), by pod IP: primary or replica.
func (s *vkScenario) roles(ctx context.Context, nodes []valkeyv1.ValkeyNode) (map[string]valkeyv1.NodeRole, error) {
	var last error
	for _, n := range nodes {
		if n.Status.PodIP == "" {
			continue
		}
		out, err := s.cli(ctx, n.Status.PodIP, "CLUSTER", "NODES")
		if err != nil {
			last = err
			continue
		}
		roles := map[string]valkeyv1.NodeRole{}
		for _, m := range parseClusterNodes(out) {
			switch {
			case slices.Contains(m.flags, "master"):
				roles[m.host] = valkeyv1.RolePrimary
			case slices.Contains(m.flags, "slave"):
				roles[m.host] = valkeyv1.RoleReplica
			}
		}
		return roles, nil
	}
	return nil, fmt.Errorf("no member answered CLUSTER NODES: %w", last)
}

// primaryPod is the pod of a member the data plane has as a primary (the scenario does
// not take ValkeyNode status.role on trust: checkRoles does that).
func (s *vkScenario) primaryPod(ctx context.Context) (corev1.Pod, error) {
	nodes, err := s.nodes(ctx)
	if err != nil {
		return corev1.Pod{}, err
	}
	roles, err := s.roles(ctx, nodes)
	if err != nil {
		return corev1.Pod{}, err
	}
	for _, n := range nodes {
		if roles[n.Status.PodIP] == valkeyv1.RolePrimary && n.Status.PodName != "" {
			p, err := env.client.CoreV1().Pods(s.ns).Get(ctx, n.Status.PodName, metav1.GetOptions{})
			if err != nil {
				return corev1.Pod{}, err
			}
			return *p, nil
		}
	}
	return corev1.Pod{}, fmt.Errorf("no ValkeyNode's pod is a primary in CLUSTER NODES (%v)", roles)
}

// checkRoles: every ValkeyNode's status.role (the ROLE column) agrees with the data plane
// within 30 s of the cluster being Ready.
func (s *vkScenario) checkRoles(ctx context.Context, step string) {
	var wrong []string
	err := poll(ctx, s.t, step+": ValkeyNode roles agree with CLUSTER NODES", 30*time.Second, func(ctx context.Context) (bool, error) {
		nodes, err := s.nodes(ctx)
		if err != nil {
			return transient(err)
		}
		roles, err := s.roles(ctx, nodes)
		if err != nil {
			return transient(err)
		}
		wrong = nil
		for _, n := range nodes {
			if want := roles[n.Status.PodIP]; n.Status.Role != want {
				wrong = append(wrong, fmt.Sprintf("%s (%s) says %q, CLUSTER NODES %q", n.Name, n.Status.PodIP, n.Status.Role, want))
			}
		}
		return len(wrong) == 0, nil
	})
	if err != nil {
		s.t.Errorf("%s: ValkeyNode status.role disagrees with the data plane: %v:\n  %s", step, err, strings.Join(wrong, "\n  "))
	}
}

func (s *vkScenario) podUIDs(ctx context.Context) map[string]types.UID {
	out := map[string]types.UID{}
	list, err := env.client.CoreV1().Pods(s.ns).List(ctx, metav1.ListOptions{LabelSelector: "valkey.io/cluster=" + s.name})
	if err != nil {
		s.t.Fatal(err)
	}
	for _, p := range list.Items {
		out[p.Name] = p.UID
	}
	return out
}

// scaleAndKillOperator scales to 4x1 and deletes the operator's pod (no grace period) as
// soon as slots start moving to the new shard, while the move is still under way.
func (s *vkScenario) scaleAndKillOperator(ctx context.Context) error {
	t := s.t
	begin := time.Now()
	if err := s.patch(`{"spec":{"shards":4}}`)(ctx); err != nil {
		return err
	}
	how, done, err := s.awaitRebalanceStarted(ctx, begin, 4)
	if err != nil {
		return err
	}
	op := serviceByName("valkey-operator")
	ps, err := readyPods(ctx, op)
	if err != nil || len(ps) == 0 {
		return fmt.Errorf("no ready operator pod to kill (%w):\n%s", err, describePods(ctx, op))
	}
	for _, p := range ps {
		if err := env.client.CoreV1().Pods(op.namespace()).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
			return err
		}
		t.Logf("deleted operator pod %s (grace 0) mid-rebalance: %s", p.Name, how)
	}
	if done {
		t.Errorf("the rebalance had already finished when the operator was killed (%s): the kill proves nothing", how)
	}
	killed := map[types.UID]bool{}
	for _, p := range ps {
		killed[p.UID] = true
	}
	return poll(ctx, t, "a new operator pod Ready", 3*time.Minute, func(ctx context.Context) (bool, error) {
		ready, err := readyPods(ctx, op)
		if err != nil {
			return transient(err)
		}
		for _, p := range ready {
			if !killed[p.UID] {
				return true, nil
			}
		}
		return false, nil
	})
}

// scaleAndRestartControlPlane scales out to 5 shards and, once slots move to the new
// shard, stops kube-apiserver and etcd for 20 s: the operator (which loses its lease and
// restarts) must finish the reshard from what it finds, the writer losing nothing.
func (s *vkScenario) scaleAndRestartControlPlane(ctx context.Context) error {
	begin := time.Now()
	if err := s.patch(`{"spec":{"shards":5}}`)(ctx); err != nil {
		return err
	}
	how, done, err := s.awaitRebalanceStarted(ctx, begin, 5)
	if err != nil {
		return err
	}
	if done {
		s.t.Errorf("the rebalance had already finished before the outage (%s): the outage proves nothing", how)
	}
	s.t.Logf("control-plane outage mid-rebalance: %s", how)
	return controlPlaneOutage(ctx, s.t, 20*time.Second)
}

// awaitRebalanceStarted waits until the newest shard's primary (of shards) owns a slot
// or is importing one, or SlotsRebalancing was emitted since begin; done says whether it
// already owned its whole share.
func (s *vkScenario) awaitRebalanceStarted(ctx context.Context, begin time.Time, shards int) (how string, done bool, err error) {
	newPrimary := fmt.Sprintf("%s-%d-0", s.name, shards-1)
	share := 16384 / shards
	var owned int
	err = pollEvery(ctx, 100*time.Millisecond, 2*time.Minute, func(ctx context.Context) (bool, error) {
		u, err := env.dyn.Resource(vknGVR).Namespace(s.ns).Get(ctx, newPrimary, metav1.GetOptions{})
		if err != nil {
			return transient(err) // not created yet
		}
		var n valkeyv1.ValkeyNode
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &n); err != nil {
			return false, err
		}
		if n.Status.PodIP == "" {
			return false, nil
		}
		out, err := s.cli(ctx, n.Status.PodIP, "CLUSTER", "NODES")
		if err != nil {
			return transient(err) // the new member may not answer yet
		}
		for _, m := range parseClusterNodes(out) {
			if slices.Contains(m.flags, "myself") {
				owned = m.slots
				if m.slots > 0 || m.migrating {
					how = fmt.Sprintf("%s owns %d of its %d slots", newPrimary, m.slots, share)
					return true, nil
				}
			}
		}
		evs, err := s.events(ctx)
		if err != nil {
			return transient(err)
		}
		for _, e := range evs {
			if e.reason == valkeyv1.EventSlotsRebalancing && !e.at.Before(begin) {
				how = fmt.Sprintf("SlotsRebalancing emitted, %s owns %d slots", newPrimary, owned)
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return "", false, fmt.Errorf("no slot moved to %s within 2 minutes of the scale: %w", newPrimary, err)
	}
	return how, owned >= share, nil
}

// transient lets a poll go on after an error that may pass (a busy apiserver, a member
// not answering yet); the poll's timeout bounds it.
func transient(error) (bool, error) { return false, nil }

// pollEvery is poll with its own interval and no log line.
func pollEvery(ctx context.Context, every, timeout time.Duration, cond func(context.Context) (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		if ok, err := cond(ctx); err != nil || ok {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(every):
		}
	}
}

// steady pokes the Ready cluster with an annotation (a reconcile with nothing to do) and
// then watches it for d: no event about it or its nodes may appear; status writes are
// reported.
func (s *vkScenario) steady(ctx context.Context, d time.Duration, want vkWant) {
	t := s.t
	begin := time.Now() // events carry microseconds: the previous step's are before this
	out, err := kubectl(ctx, "annotate", "vkc", s.name, "-n", s.ns, "--overwrite", "e2e.opsuite.io/poke="+time.Now().UTC().Format(time.RFC3339))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s", strings.TrimSpace(out))
	c, err := s.cluster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rv := c.ResourceVersion
	select {
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	case <-time.After(d):
	}
	evs, err := s.events(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var fresh []string
	for _, e := range evs {
		if !e.at.Before(begin) {
			fresh = append(fresh, fmt.Sprintf("%s %s %s/%s: %s", e.typ, e.reason, e.kind, e.name, e.note))
		}
	}
	if len(fresh) > 0 {
		t.Errorf("a steady cluster emitted %d event(s) in %s:\n  %s", len(fresh), d, strings.Join(fresh, "\n  "))
	} else {
		t.Logf("steady cluster: no event in %s after a reconcile-triggering annotation", d)
	}
	if c, err := s.cluster(ctx); err == nil && c.ResourceVersion != rv {
		t.Logf("steady cluster: the ValkeyCluster was written during those %s (resourceVersion %s -> %s)", d, rv, c.ResourceVersion)
	}
	if w, err := s.apiReady(ctx, want); err != nil || w != "" {
		t.Errorf("the cluster left Ready while steady: %s %v", w, err)
	}
}

// buildWriter builds the valkey-writer test command from the operator's module; "" after
// failing the test.
func (s *vkScenario) buildWriter() string {
	dir := s.t.TempDir()
	bin := filepath.Join(dir, "valkey-writer")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/valkey-writer")
	cmd.Dir = filepath.Join(env.root, "services", "valkey-operator")
	if out, err := cmd.CombinedOutput(); err != nil {
		s.t.Errorf("building valkey-writer: %v\n%s", err, out)
		return ""
	}
	return bin
}

// startWriter runs the writer against the cluster's pods; a goroutine keeps its seeds
// file current (pod addresses change as pods are replaced).
func (s *vkScenario) startWriter(ctx context.Context, bin string) {
	t := s.t
	dir := t.TempDir()
	s.seeds = filepath.Join(dir, "seeds")
	s.writerLog = filepath.Join(dir, "writer.log")
	if err := s.writeSeeds(ctx); err != nil {
		t.Fatal(err)
	}
	seedCtx, stop := context.WithCancel(context.Background())
	s.stopSeeds = stop
	go func() {
		for {
			select {
			case <-seedCtx.Done():
				return
			case <-time.After(2 * time.Second):
				_ = s.writeSeeds(seedCtx)
			}
		}
	}()
	logf, err := os.Create(s.writerLog)
	if err != nil {
		t.Fatal(err)
	}
	rate := s.writerRate
	if rate == 0 {
		rate = 100
	}
	s.writer = exec.Command(bin, "run", "-seeds-file", s.seeds, "-user", s.user, "-acked", filepath.Join(dir, "acked"), "-rate", strconv.Itoa(rate))
	s.writer.Env = append(os.Environ(), "VALKEY_PASSWORD="+s.password)
	s.writer.Stdout, s.writer.Stderr = &s.writerOut, logf
	if err := s.writer.Start(); err != nil {
		t.Fatal(err)
	}
	s.writerStart = time.Now()
	s.writerEnd = make(chan error, 1)
	go func() {
		s.writerEnd <- s.writer.Wait()
		_ = logf.Close()
	}()
	t.Logf("writer started (pid %d, log %s)", s.writer.Process.Pid, s.writerLog)
	t.Cleanup(func() {
		if s.writer != nil {
			// The scenario stopped early: still say what the writer saw.
			sum := s.stopWriter()
			t.Logf("writer at the failure: %d acknowledged, %d lost, %d unreadable, %d refused, longest outage %.2fs", sum.Acked, sum.Lost, sum.Unreadable, sum.Refused, sum.LongestOutageSeconds)
		}
	})
}

func (s *vkScenario) writeSeeds(ctx context.Context) error {
	list, err := env.client.CoreV1().Pods(s.ns).List(ctx, metav1.ListOptions{LabelSelector: "valkey.io/cluster=" + s.name})
	if err != nil {
		return err
	}
	var addrs []string
	for i := range list.Items {
		if podReady(&list.Items[i]) {
			addrs = append(addrs, list.Items[i].Status.PodIP+":6379")
		}
	}
	if len(addrs) == 0 {
		return fmt.Errorf("no ready pod of cluster %s", s.name)
	}
	tmp := s.seeds + ".tmp"
	if err := os.WriteFile(tmp, []byte(strings.Join(addrs, "\n")+"\n"), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, s.seeds)
}

// vkWriterSummary is what the scenario checks of valkey-writer's JSON summary (outages,
// refusal windows and errors are logged as the writer printed them, in raw).
type vkWriterSummary struct {
	Acked                int      `json:"acked"`
	Lost                 int      `json:"lost"`
	Unreadable           int      `json:"unreadable"`
	Refused              int      `json:"refused"`
	LongestOutageSeconds float64  `json:"longestOutageSeconds"`
	LostKeys             []string `json:"lostKeys"`
	raw                  string
}

// stopWriter sends SIGTERM and waits (bounded) for the writer's read-back summary.
func (s *vkScenario) stopWriter() vkWriterSummary {
	t := s.t
	w := s.writer
	s.writer = nil
	s.stopSeeds()
	_ = w.Process.Signal(syscall.SIGTERM)
	var sum vkWriterSummary
	select {
	case err := <-s.writerEnd:
		out := bytes.TrimSpace(s.writerOut.Bytes())
		var indented bytes.Buffer
		if json.Indent(&indented, out, "  ", "  ") == nil {
			sum.raw = "  " + indented.String()
		}
		if jerr := json.Unmarshal(out, &sum); jerr != nil {
			t.Errorf("writer exited (%v) without a JSON summary (%v); stdout %q; log tail:\n%s", err, jerr, s.writerOut.String(), fileEnd(s.writerLog, 3000))
		} else if err != nil {
			t.Logf("writer exited: %v; log tail:\n%s", err, fileEnd(s.writerLog, 1000))
		}
	case <-time.After(3 * time.Minute):
		_ = w.Process.Kill()
		t.Errorf("the writer did not finish reading back within 3 minutes of SIGTERM; log tail:\n%s", fileEnd(s.writerLog, 3000))
	}
	return sum
}

// fileEnd is the last n bytes of a file.
func fileEnd(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	return string(b[max(0, len(b)-n):])
}

func findCondition(conds []metav1.Condition, typ string) *metav1.Condition {
	for i := range conds {
		if conds[i].Type == typ {
			return &conds[i]
		}
	}
	return nil
}

// diagnose logs what a failed step needs: the cluster's status, its nodes, pods and
// events, the operator's log, and CLUSTER NODES as one member sees it.
func (s *vkScenario) diagnose(ctx context.Context) {
	t := s.t
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if c, err := s.cluster(ctx); err == nil {
		b, _ := yaml.Marshal(c.Status)
		t.Logf("ValkeyCluster %s (generation %d) status:\n%s", c.Name, c.Generation, b)
	} else if !apierrors.IsNotFound(err) {
		t.Logf("ValkeyCluster: %v", err)
	}
	nodes, _ := s.nodes(ctx)
	var b strings.Builder
	for _, n := range nodes {
		fmt.Fprintf(&b, "  %s role=%s ready=%v pod=%s ip=%s id=%s gen=%d/%d", n.Name, n.Status.Role, n.Status.Ready, n.Status.PodName, n.Status.PodIP, n.Status.ValkeyNodeID, n.Status.ObservedGeneration, n.Generation)
		for _, c := range n.Status.Conditions {
			fmt.Fprintf(&b, " %s=%s(%s)", c.Type, c.Status, c.Reason)
		}
		b.WriteString("\n")
	}
	t.Logf("ValkeyNodes:\n%s", b.String())
	if out, err := kubectl(ctx, "get", "pods", "-n", s.ns, "-o", "wide"); err == nil {
		t.Logf("pods:\n%s", out)
	}
	if evs, err := s.events(ctx); err == nil {
		if len(evs) > 40 {
			evs = evs[len(evs)-40:]
		}
		var lines []string
		for _, e := range evs {
			lines = append(lines, fmt.Sprintf("  %s %s %s %s/%s: %s", e.at.Format("15:04:05.000"), e.typ, e.reason, e.kind, e.name, e.note))
		}
		t.Logf("last events:\n%s", strings.Join(lines, "\n"))
	}
	for _, n := range nodes {
		if n.Status.PodIP != "" {
			out, err := s.cli(ctx, n.Status.PodIP, "CLUSTER", "NODES")
			t.Logf("CLUSTER NODES on %s (%v):\n%s", n.Name, err, out)
			break
		}
	}
	op := serviceByName("valkey-operator")
	all, _ := pods(ctx, op)
	for i := range all {
		t.Logf("operator pod %s:\n%s", all[i].Name, podLogTail(&all[i], 60))
	}
}

// TestValkeySamples applies deploy/samples/valkey.yaml and valkey-users.yaml as README.md
// does, waits until both clusters are Ready with the documented conditions, and runs
// README's redis-cli checks: the sample without users serves the open default user, the
// operator's own user logs in with the password of <cluster>-internal, and in the users
// sample "app" writes app:* keys while "reader" reads them and is refused writes.
func TestValkeySamples(t *testing.T) {
	needRunner(t, "the cli reaches the Valkey pods at their addresses")
	needInstalled(t, "valkey-operator")
	needCLI(t)
	ctx := scenarioContext(t)
	begin := time.Now()
	var files []string
	for _, f := range []string{"valkey.yaml", "valkey-users.yaml"} {
		files = append(files, "-f", filepath.Join(env.root, "deploy", "samples", f))
	}
	out, err := kubectl(ctx, append([]string{"apply"}, files...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s", strings.TrimSpace(out))
	t.Cleanup(func() {
		// The samples live in namespace default: delete them (and their Secrets) by file.
		_, _ = kubectl(context.Background(), append([]string{"delete", "--wait=false", "--ignore-not-found"}, files...)...)
	})
	get := func(args ...string) string {
		t.Helper()
		out, err := kubectl(ctx, args...)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	decoded := func(secret, key string) string {
		t.Helper()
		s, err := base64.StdEncoding.DecodeString(get("get", "secret", secret, "-o", "jsonpath={.data."+key+"}"))
		if err != nil || len(s) == 0 {
			t.Fatalf("Secret %s key %s: %q (%v)", secret, key, s, err)
		}
		return string(s)
	}
	demo := &vkScenario{t: t, begin: begin, ns: "default", name: "demo"}
	users := &vkScenario{t: t, begin: begin, ns: "default", name: "demo-users", user: "app", password: decoded("demo-users-passwords", "app")}
	for _, s := range []*vkScenario{demo, users} {
		seen := s.waitReady(ctx, s.name, 5*time.Minute, vkWant{3, 1, "", ""})
		t.Logf("sample %s Ready after %s; states seen: %s", s.name, since(begin), strings.Join(seen, " -> "))
		s.wantEvents(ctx, s.name, begin, []string{valkeyv1.EventClusterReady})
		s.checkRoles(ctx, s.name)
		s.checkShards(ctx, s.name, true)
		wantObjectMetrics(ctx, t, "valkey-operator", s.ns, s.name, "valkey_operator_cluster_state", "valkey_operator_cluster_shards_ready",
			"valkey_operator_cluster_shards", "valkey_operator_failovers_total", "valkey_operator_slot_moves_total")
	}

	must := func(want, ip, user, password string, args ...string) {
		t.Helper()
		got, err := redisCLI(ctx, ip, user, password, args...)
		if err != nil || strings.TrimSpace(got) != want {
			t.Errorf("%s -h %s --user %q %s: %q (%v), want %q", vkCLI, ip, user, strings.Join(args, " "), got, err, want)
		}
	}
	refused := func(code, ip, user, password string, args ...string) {
		t.Helper()
		got, err := redisCLI(ctx, ip, user, password, args...)
		if err == nil || !strings.Contains(err.Error(), code) {
			t.Errorf("%s -h %s --user %q %s: %q (%v), want a %s error", vkCLI, ip, user, strings.Join(args, " "), got, err, code)
		}
	}
	ip := strings.TrimSpace(get("get", "vkn", "demo-0-0", "-o", "jsonpath={.status.podIP}"))
	must("OK", ip, "", "", "set", "greeting", "hello")
	must("hello", ip, "", "", "get", "greeting")
	opPass := decoded("demo-internal", "operator-password")
	info, err := redisCLI(ctx, ip, "valkey-operator", opPass, "cluster", "info")
	if err != nil || !strings.Contains(info, "cluster_state:ok") {
		t.Errorf("CLUSTER INFO as valkey-operator: %v\n%s", err, info)
	}

	ip = strings.TrimSpace(get("get", "vkn", "demo-users-0-0", "-o", "jsonpath={.status.podIP}"))
	readerPass := decoded("demo-users-passwords", "reader")
	must("OK", ip, "app", users.password, "set", "app:1", "one")
	must("one", ip, "reader", readerPass, "get", "app:1")
	refused("NOPERM", ip, "reader", readerPass, "set", "app:1", "two")
	refused("NOPERM", ip, "app", users.password, "set", "other:1", "x")
	refused("WRONGPASS", ip, "app", "wrong-password", "get", "app:1")
	refused("NOAUTH", ip, "", "", "get", "app:1") // the default user is off once spec.users is set

	// Persistence: each member's PVC <vkn>-data is Bound.
	for i := range 3 {
		for j := range 2 {
			name := fmt.Sprintf("demo-users-%d-%d-data", i, j)
			phase := get("get", "pvc", name, "-o", "jsonpath={.status.phase}")
			if phase != "Bound" {
				t.Errorf("PVC %s: phase %q, want Bound", name, phase)
			}
		}
	}
}
