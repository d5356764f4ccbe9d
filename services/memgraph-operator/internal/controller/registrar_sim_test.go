package controller_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	memgraphv1 "github.com/opsuite/suite/api/memgraph/v1alpha1"
	"github.com/opsuite/suite/services/memgraph-operator/internal/controller"
	"github.com/opsuite/suite/services/memgraph-operator/internal/memgraph"
	"github.com/opsuite/suite/services/memgraph-operator/internal/memgraph/memgraphtest"
	"github.com/opsuite/suite/services/memgraph-operator/internal/planner"
	"github.com/opsuite/suite/services/memgraph-operator/internal/resources"
	"github.com/opsuite/suite/shared/testenv"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// simTimeout bounds each wait on the data plane: a step takes a few registration passes
// and Raft elections of 0.5-1 s, on a machine other tests share.
const simTimeout = 120 * time.Second

// addressBook maps the addresses the controller registers (pod DNS names, every member
// on Memgraph's fixed ports) to the loopback port of the simulator process playing that
// pod. It is filled once the test's namespace is known, while the manager already runs,
// hence the lock.
type addressBook struct {
	mu sync.RWMutex
	m  map[string]string
}

func (b *addressBook) set(m map[string]string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.m = m
}

// add maps more addresses.
func (b *addressBook) add(m map[string]string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.m == nil {
		b.m = map[string]string{}
	}
	for k, v := range m {
		b.m[k] = v
	}
}

// resolve is memgraph.Options.Resolve: an address without a mapping is dialled as is.
func (b *addressBook) resolve(addr string) string {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if to, ok := b.m[addr]; ok {
		return to
	}
	return addr
}

// addressMap pairs every address of the membership with the port its process listens
// on (ports by member name).
func addressMap(m planner.Desired, ports map[string]memgraphtest.Ports) map[string]string {
	out := map[string]string{}
	loop := func(p int) string { return fmt.Sprintf("127.0.0.1:%d", p) }
	for _, c := range m.Coordinators {
		p := ports[c.Name]
		out[c.BoltServer], out[c.ManagementServer], out[c.CoordinatorServer] = loop(p.Bolt), loop(p.Mgmt), loop(p.Peer)
	}
	for _, d := range m.Data {
		p := ports[d.Name]
		out[d.BoltServer], out[d.ManagementServer], out[d.ReplicationServer] = loop(p.Bolt), loop(p.Mgmt), loop(p.Peer)
	}
	return out
}

// simAddressMapEnv is m as the simulator's MEMGRAPH_SIM_ADDRESS_MAP, sorted so that
// process logs compare across runs.
func simAddressMapEnv(m map[string]string) string {
	var entries []string
	for _, from := range slices.Sorted(maps.Keys(m)) {
		entries = append(entries, from+"="+m[from])
	}
	return "MEMGRAPH_SIM_ADDRESS_MAP=" + strings.Join(entries, ",")
}

// mapSimMembers reserves loopback ports for every member of cluster name at its largest
// shape, maps the addresses the controller registers to them on both sides (the test's
// dialer through book, the simulators through cl.ExtraEnv) and returns the test's view of
// the plane. The processes are started by the caller.
func mapSimMembers(t *testing.T, cl *memgraphtest.Cluster, book *addressBook, opts memgraph.Options, ns, name string, coordinators, data int32) simPlane {
	t.Helper()
	shape := &memgraphv1.MemgraphCluster{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: memgraphv1.MemgraphClusterSpec{Coordinators: coordinators, DataInstances: data}}
	all := resources.DesiredMembership(shape, coordinators, data)
	names := append(coordinatorNames(int(coordinators)), dataNames(name, int(data))...)
	cl.Ports = map[string]memgraphtest.Ports{}
	for i, p := range memgraphtest.ReservePorts(t, len(names)) {
		cl.Ports[names[i]] = p
	}
	addrs := addressMap(all, cl.Ports)
	book.set(addrs)
	cl.ExtraEnv = []string{simAddressMapEnv(addrs)}
	return simPlane{t: t, dialer: memgraph.NewDialer(opts), all: all}
}

// holdable is the real registrar behind a gate the test can close, so that it can change
// the data plane by hand without a pass racing it, and it keeps every command the
// registrar ran.
type holdable struct {
	controller.Registrar
	gate     sync.RWMutex
	mu       sync.Mutex
	executed []string
	calls    int
}

func (h *holdable) Register(ctx context.Context, c *memgraphv1.MemgraphCluster, creds controller.Credentials, want planner.Desired) (controller.Registration, error) {
	h.gate.RLock()
	defer h.gate.RUnlock()
	r, err := h.Registrar.Register(ctx, c, creds, want)
	h.mu.Lock()
	h.executed = append(h.executed, r.Executed...)
	h.calls++
	h.mu.Unlock()
	return r, err
}

// hold waits for a running pass to end and keeps the next one from starting until
// release.
func (h *holdable) hold() (release func()) {
	h.gate.Lock()
	return h.gate.Unlock
}

func (h *holdable) passes() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.calls
}

func (h *holdable) ran(cmd string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Contains(h.executed, cmd)
}

// simPlane is the test's own view of the simulators, through the addresses the
// controller registered.
type simPlane struct {
	t      *testing.T
	dialer memgraph.Dialer
	// all is the membership at its largest (5 coordinators, 3 data instances): every
	// member's addresses by name.
	all planner.Desired
}

func (p simPlane) bolt(name string) string {
	for _, c := range p.all.Coordinators {
		if c.Name == name {
			return c.BoltServer
		}
	}
	for _, d := range p.all.Data {
		if d.Name == name {
			return d.BoltServer
		}
	}
	p.t.Fatalf("no member %q", name)
	return ""
}

// session dials a member by name; it is closed when the test ends.
func (p simPlane) session(ctx context.Context, name string) memgraph.Session {
	p.t.Helper()
	s, err := p.dialer.Dial(ctx, p.bolt(name))
	if err != nil {
		p.t.Fatalf("dial %s: %v", name, err)
	}
	p.t.Cleanup(func() { _ = s.Close(context.Background()) })
	return s
}

func (p simPlane) showInstances(ctx context.Context, leader string) []memgraph.Instance {
	p.t.Helper()
	rows, err := p.session(ctx, leader).ShowInstances(ctx)
	if err != nil {
		p.t.Fatalf("SHOW INSTANCES on %s: %v", leader, err)
	}
	return rows
}

func (p simPlane) exec(ctx context.Context, member, q string) {
	p.t.Helper()
	if err := p.session(ctx, member).Exec(ctx, q); err != nil {
		p.t.Fatalf("%s on %s: %v", q, member, err)
	}
}

// count is the number of :T nodes member holds (-1 when it cannot say).
func (p simPlane) count(ctx context.Context, member string) int64 {
	s, err := p.dialer.Dial(ctx, p.bolt(member))
	if err != nil {
		return -1
	}
	defer func() { _ = s.Close(ctx) }()
	rows, err := s.Query(ctx, "MATCH (n:T) RETURN count(n) AS c")
	if err != nil || len(rows) != 1 {
		return -1
	}
	n, ok := rows[0]["c"].(int64)
	if !ok {
		return -1
	}
	return n
}

// membership summarises SHOW INSTANCES: the coordinators' and data instances' names,
// sorted, and the MAINs among the data instances.
func membership(rows []memgraph.Instance) (coords, data, mains []string) {
	for _, r := range rows {
		switch {
		case r.IsCoordinator():
			coords = append(coords, r.Name)
		case r.Role == memgraph.RoleMain:
			mains = append(mains, r.Name)
			data = append(data, r.Name)
		default:
			data = append(data, r.Name)
		}
	}
	slices.Sort(coords)
	slices.Sort(data)
	return coords, data, mains
}

func coordinatorNames(n int) []string {
	var out []string
	for id := 1; id <= n; id++ {
		out = append(out, memgraph.CoordinatorName(id))
	}
	return out
}

func dataNames(cluster string, n int) []string {
	var out []string
	for i := range n {
		out = append(out, resources.DataInstanceName(cluster, int32(i)))
	}
	return out
}

// assertMembers checks the leader's SHOW INSTANCES: exactly these members, each under the
// bolt address the controller built for it, exactly one MAIN; it returns the MAIN.
func (p simPlane) assertMembers(ctx context.Context, leader string, wantCoords, wantData []string) string {
	p.t.Helper()
	rows := p.showInstances(ctx, leader)
	coords, data, mains := membership(rows)
	if !slices.Equal(coords, wantCoords) || !slices.Equal(data, wantData) || len(mains) != 1 {
		p.t.Fatalf("%s's SHOW INSTANCES: coordinators %v data %v MAINs %v; want %v, %v and one MAIN (rows %+v)",
			leader, coords, data, mains, wantCoords, wantData, rows)
	}
	for _, r := range rows {
		if r.BoltServer != p.bolt(r.Name) {
			p.t.Errorf("%s registered with bolt server %q, want the controller's %q", r.Name, r.BoltServer, p.bolt(r.Name))
		}
	}
	return mains[0]
}

// waitConverged waits until the cluster's current generation is Ready and Converged with
// the member counts in its status, and returns it.
func (h *harness) waitConverged(name string, coordinators, data int32) *memgraphv1.MemgraphCluster {
	h.t.Helper()
	var c *memgraphv1.MemgraphCluster
	testenv.Eventually(h.t, simTimeout, fmt.Sprintf("%s converged with %d coordinators and %d data instances", name, coordinators, data), func() (bool, string) {
		c = &memgraphv1.MemgraphCluster{}
		if err := h.c.Get(context.Background(), client.ObjectKey{Namespace: h.ns, Name: name}, c); err != nil {
			return false, err.Error()
		}
		ok := func(t string) bool {
			got := meta.FindStatusCondition(c.Status.Conditions, t)
			return got != nil && got.Status == metav1.ConditionTrue && got.ObservedGeneration == c.Generation
		}
		return ok(memgraphv1.ConditionReady) && ok(memgraphv1.ConditionConverged) &&
				c.Status.Coordinators == coordinators && c.Status.DataInstances == data,
			fmt.Sprintf("generation %d state %s status %d/%d main %q leader %q conditions %+v", c.Generation, c.Status.State,
				c.Status.Coordinators, c.Status.DataInstances, c.Status.Main, c.Status.Leader, c.Status.Conditions)
	})
	return c
}

// scale sets the declared counts by a merge patch (no conflict with the status writes).
func (h *harness) scale(name string, coordinators, data int32) {
	h.t.Helper()
	c := h.cluster(name)
	patch := client.MergeFrom(c.DeepCopy())
	c.Spec.Coordinators, c.Spec.DataInstances = coordinators, data
	if err := h.c.Patch(context.Background(), c, patch); err != nil {
		h.t.Fatalf("scale %s to %d coordinators and %d data instances: %v", name, coordinators, data, err)
	}
}

// waitReplicas waits for the controller to size the role's StatefulSet to n.
func (h *harness) waitReplicas(name string, role resources.Role, n int32) {
	h.t.Helper()
	sts := resources.StatefulSetName(name, role)
	testenv.Eventually(h.t, simTimeout, fmt.Sprintf("StatefulSet %s at %d replicas", sts, n), func() (bool, string) {
		got := *h.sts(sts).Spec.Replicas
		return got == n, fmt.Sprint(got)
	})
}

// TestBoltRegistrarAgainstSimulators: the controller, against the real API server, drives
// the real BoltRegistrar over Bolt against simulator processes that play its pods (each
// pod's DNS name and Memgraph's fixed ports mapped to a loopback port, on both sides):
// bootstrap of 3 coordinators and 2 data instances, data 2->3, data 3->2 with the MAIN
// parked on the retiring instance, coordinators 3->5->3. Every step is checked in the
// status and in the leader's own SHOW INSTANCES; the written nodes survive; the
// simulators' invariant log never shows two writable MAINs.
func TestBoltRegistrarAgainstSimulators(t *testing.T) {
	began := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	const name = "sim"
	// Created before the manager starts, so that its processes are stopped after it.
	cl := memgraphtest.NewCluster(t)
	book := &addressBook{}
	opts := memgraph.Options{Resolve: book.resolve, Timeout: 10 * time.Second}
	reg := &holdable{Registrar: controller.BoltRegistrar{Options: opts}}
	h := start(t, "mg-sim", func(cfg *controller.Config) { cfg.Registrar = reg })

	// Every member's addresses at the largest size, mapped to ports picked now: the
	// simulators need the whole map when the first of them starts.
	plane := mapSimMembers(t, cl, book, opts, h.ns, name, 5, 3)
	data := dataNames(name, 3)

	// Bootstrap: 3 coordinators and 2 data instances, registered by the controller once
	// their pods run.
	for id := 1; id <= 3; id++ {
		cl.StartCoordinator(id)
	}
	cl.StartData(data[0])
	cl.StartData(data[1])
	h.create(name, 3, 2)
	h.podsRun(resources.StatefulSetName(name, resources.RoleCoordinator))
	h.podsRun(resources.StatefulSetName(name, resources.RoleData))
	c := h.waitConverged(name, 3, 2)
	if c.Status.Main == "" || c.Status.Leader == "" || c.Status.State != memgraphv1.StateReady {
		t.Fatalf("converged without a MAIN or leader: %+v", c.Status)
	}
	main := plane.assertMembers(ctx, c.Status.Leader, coordinatorNames(3), data[:2])
	if main != c.Status.Main {
		t.Errorf("status.main %q, the leader shows %q", c.Status.Main, main)
	}
	t.Logf("bootstrapped after %v: leader %s, MAIN %s", time.Since(began).Round(time.Second), c.Status.Leader, main)

	const nodes = 7
	var create strings.Builder
	create.WriteString("CREATE ")
	for i := range nodes {
		if i > 0 {
			create.WriteString(", ")
		}
		fmt.Fprintf(&create, "(:T {i: %d})", i)
	}
	plane.exec(ctx, main, create.String())
	if n := plane.count(ctx, main); n != nodes {
		t.Fatalf("the MAIN holds %d nodes after writing %d", n, nodes)
	}

	// Data 2->3: the new pod's instance is registered as a replica and catches up.
	cl.StartData(data[2])
	h.scale(name, 3, 3)
	h.waitReplicas(name, resources.RoleData, 3)
	h.podsRun(resources.StatefulSetName(name, resources.RoleData))
	c = h.waitConverged(name, 3, 3)
	plane.assertMembers(ctx, c.Status.Leader, coordinatorNames(3), data)
	testenv.Eventually(t, simTimeout, data[2]+" caught up", func() (bool, string) {
		n := plane.count(ctx, data[2])
		return n == nodes, fmt.Sprint(n)
	})
	t.Logf("data scaled to 3 after %v", time.Since(began).Round(time.Second))

	// Park the MAIN on the instance the next scale-down retires, with the registrar held
	// so that no pass promotes another instance between the two commands.
	release := reg.hold()
	leader := h.cluster(name).Status.Leader
	plane.exec(ctx, leader, memgraph.DemoteInstance(main))
	plane.exec(ctx, leader, memgraph.SetInstanceToMain(data[2]))
	release()
	testenv.Eventually(t, simTimeout, "status.main "+data[2], func() (bool, string) {
		c = h.cluster(name)
		return c.Status.Main == data[2], c.Status.Main
	})

	// Data 3->2: the MAIN moves to a survivor before the retiring instance leaves, and
	// only then does the StatefulSet shrink.
	h.scale(name, 3, 2)
	h.waitReplicas(name, resources.RoleData, 2)
	h.podsRun(resources.StatefulSetName(name, resources.RoleData))
	c = h.waitConverged(name, 3, 2)
	main = plane.assertMembers(ctx, c.Status.Leader, coordinatorNames(3), data[:2])
	if main != c.Status.Main || !slices.Contains(data[:2], main) {
		t.Errorf("after the shrink status.main %q, the leader shows %q; want one of %v", c.Status.Main, main, data[:2])
	}
	if n := plane.count(ctx, main); n != nodes {
		t.Errorf("the new MAIN %s holds %d nodes, want %d", main, n, nodes)
	}
	for _, q := range []string{memgraph.DemoteInstance(data[2]), memgraph.UnregisterInstance(data[2])} {
		if !reg.ran(q) {
			t.Errorf("the registrar never ran %q", q)
		}
	}
	cl.Stop(cl.Data[data[2]]) // the StatefulSet controller deletes the pod
	t.Logf("data scaled to 2 after %v: MAIN %s", time.Since(began).Round(time.Second), main)

	// Coordinators 3->5->3: the new pods run before the spec asks for them; the retired
	// ones stop only once the StatefulSet shed them.
	cl.StartCoordinator(4)
	cl.StartCoordinator(5)
	h.scale(name, 5, 2)
	h.waitReplicas(name, resources.RoleCoordinator, 5)
	h.podsRun(resources.StatefulSetName(name, resources.RoleCoordinator))
	c = h.waitConverged(name, 5, 2)
	plane.assertMembers(ctx, c.Status.Leader, coordinatorNames(5), data[:2])
	t.Logf("coordinators scaled to 5 after %v: leader %s", time.Since(began).Round(time.Second), c.Status.Leader)

	h.scale(name, 3, 2)
	h.waitReplicas(name, resources.RoleCoordinator, 3)
	h.podsRun(resources.StatefulSetName(name, resources.RoleCoordinator))
	c = h.waitConverged(name, 3, 2)
	if !slices.Contains(coordinatorNames(3), c.Status.Leader) {
		t.Errorf("leader %q after the shrink, want one of coordinators 1-3", c.Status.Leader)
	}
	for _, id := range []int{4, 5} {
		if !reg.ran(memgraph.RemoveCoordinator(id)) {
			t.Errorf("the registrar never ran %q", memgraph.RemoveCoordinator(id))
		}
		cl.Stop(cl.Coordinators[id])
	}
	// The cluster stays converged on the three that remain once the retired processes are
	// gone: a few more passes, the status unchanged.
	passes := reg.passes()
	testenv.Eventually(t, simTimeout, "three passes after coordinators 4 and 5 stopped", func() (bool, string) {
		return reg.passes() >= passes+3, fmt.Sprint(reg.passes() - passes)
	})
	c = h.waitConverged(name, 3, 2)
	main = plane.assertMembers(ctx, c.Status.Leader, coordinatorNames(3), data[:2])
	if n := plane.count(ctx, main); n != nodes {
		t.Errorf("the MAIN %s holds %d nodes at the end, want %d", main, n, nodes)
	}

	most, _ := memgraphtest.WritableMains(cl.Events())
	if most != 1 {
		t.Errorf("the invariant log shows at most %d writable MAINs at once, want exactly 1", most)
	}
	t.Logf("done after %v", time.Since(began).Round(time.Second))
}
