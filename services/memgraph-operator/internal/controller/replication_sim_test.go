package controller_test

import (
	"context"
	"fmt"
	"maps"
	"testing"
	"time"

	memgraphv1 "github.com/opsuite/suite/api/memgraph/v1alpha1"
	"github.com/opsuite/suite/services/memgraph-operator/internal/controller"
	"github.com/opsuite/suite/services/memgraph-operator/internal/memgraph"
	"github.com/opsuite/suite/services/memgraph-operator/internal/memgraph/memgraphtest"
	"github.com/opsuite/suite/services/memgraph-operator/internal/resources"
	"github.com/opsuite/suite/shared/testenv"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// replicaModes is the MAIN's SHOW REPLICAS as name -> mode ("" when it cannot say).
func (p simPlane) replicaModes(ctx context.Context, main string) map[string]string {
	s, err := p.dialer.Dial(ctx, p.bolt(main))
	if err != nil {
		return nil
	}
	defer func() { _ = s.Close(ctx) }()
	reps, err := s.Replicas(ctx)
	if err != nil {
		return nil
	}
	out := map[string]string{}
	for _, r := range reps {
		out[r.Name] = r.Mode
	}
	return out
}

// TestReplicationModeAndSettingsAgainstSimulators: a MemgraphCluster declaring
// STRICT_SYNC with one ASYNC instance and tuned coordinator settings is registered so by
// the controller through neo4j-go-driver against simulator processes (the MAIN's SHOW
// REPLICAS and the coordinators' SHOW COORDINATOR SETTINGS say so); switching the spec to
// SYNC re-registers the replicas (through ASYNC and a handover of the MAIN, since Memgraph
// refuses SYNC beside STRICT_SYNC) and the written nodes survive.
func TestReplicationModeAndSettingsAgainstSimulators(t *testing.T) {
	began := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	const name = "modes"
	cl := memgraphtest.NewCluster(t)
	book := &addressBook{}
	opts := memgraph.Options{Resolve: book.resolve, Timeout: 10 * time.Second}
	reg := &holdable{Registrar: controller.BoltRegistrar{Options: opts}}
	h := start(t, "mg-modes", func(cfg *controller.Config) { cfg.Registrar = reg })

	plane := mapSimMembers(t, cl, book, opts, h.ns, name, 3, 3)
	data := dataNames(name, 3)
	for id := 1; id <= 3; id++ {
		cl.StartCoordinator(id)
	}
	for _, d := range data {
		cl.StartData(d)
	}

	c := &memgraphv1.MemgraphCluster{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: h.ns},
		Spec: memgraphv1.MemgraphClusterSpec{Coordinators: 3, DataInstances: 3,
			Secrets: memgraphv1.SecretsSpec{Name: "memgraph-license"},
			Replication: memgraphv1.ReplicationSpec{Mode: memgraphv1.ReplicationStrictSync,
				Instances: []memgraphv1.InstanceReplication{{Ordinal: 2, Mode: memgraphv1.ReplicationAsync}}},
			CoordinatorSettings: memgraphv1.CoordinatorSettings{InstanceDownTimeoutSec: 4, InstanceHealthCheckFrequencySec: 1,
				SyncFailoverOnly: ptr.To(true)}}}
	if err := h.c.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	h.podsRun(resources.StatefulSetName(name, resources.RoleCoordinator))
	h.podsRun(resources.StatefulSetName(name, resources.RoleData))
	c = h.waitConverged(name, 3, 3)
	main := plane.assertMembers(ctx, c.Status.Leader, coordinatorNames(3), data)
	want := map[string]string{data[0]: memgraph.ModeStrictSync, data[1]: memgraph.ModeStrictSync, data[2]: memgraph.ModeAsync}
	delete(want, main)
	if got := plane.replicaModes(ctx, main); !maps.Equal(got, want) {
		t.Errorf("MAIN %s lists replicas %v, want %v", main, got, want)
	}
	for _, coord := range coordinatorNames(3) {
		s := plane.session(ctx, coord)
		got, err := s.CoordinatorSettings(ctx)
		if err != nil || got["instance_down_timeout_sec"] != "4" || got["instance_health_check_frequency_sec"] != "1" || got["sync_failover_only"] != "true" {
			t.Errorf("%s settings %v, %v", coord, got, err)
		}
	}
	plane.exec(ctx, main, "CREATE (:T {i: 1}), (:T {i: 2})")
	t.Logf("registered STRICT_SYNC with one ASYNC after %v: MAIN %s", time.Since(began).Round(time.Second), main)

	// STRICT_SYNC -> SYNC, instance 2 staying ASYNC.
	cur := h.cluster(name)
	patch := client.MergeFrom(cur.DeepCopy())
	cur.Spec.Replication.Mode = memgraphv1.ReplicationSync
	if err := h.c.Patch(ctx, cur, patch); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, simTimeout, "every replica in its declared mode", func() (bool, string) {
		c = h.cluster(name)
		if c.Status.Main == "" {
			return false, "no MAIN"
		}
		want := map[string]string{data[0]: memgraph.ModeSync, data[1]: memgraph.ModeSync, data[2]: memgraph.ModeAsync}
		delete(want, c.Status.Main)
		got := plane.replicaModes(ctx, c.Status.Main)
		return maps.Equal(got, want), fmt.Sprintf("MAIN %s replicas %v", c.Status.Main, got)
	})
	c = h.waitConverged(name, 3, 3)
	main = plane.assertMembers(ctx, c.Status.Leader, coordinatorNames(3), data)
	if n := plane.count(ctx, main); n != 2 {
		t.Errorf("MAIN %s holds %d nodes after the switch, want 2", main, n)
	}
	if most, _ := memgraphtest.WritableMains(cl.Events()); most != 1 {
		t.Errorf("the invariant log shows at most %d writable MAINs at once, want exactly 1", most)
	}
	t.Logf("switched to SYNC after %v: MAIN %s", time.Since(began).Round(time.Second), main)
}
