package controller_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	memgraphv1 "github.com/opsuite/suite/api/memgraph/v1alpha1"
	"github.com/opsuite/suite/services/memgraph-operator/internal/controller"
	"github.com/opsuite/suite/services/memgraph-operator/internal/memgraph"
	"github.com/opsuite/suite/services/memgraph-operator/internal/memgraph/memgraphtest"
	"github.com/opsuite/suite/services/memgraph-operator/internal/planner"
	"github.com/opsuite/suite/services/memgraph-operator/internal/resources"
	"github.com/opsuite/suite/shared/testenv"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestOperatorCutOffFromItsDataPlane (issue "Faults across the suite", item 2): the
// operator's connections to members go to a black hole (connected, never answered, as when
// a partition drops the packets) while the members still reach each other. Cut off from
// the MAIN of a steady cluster, the failover watch notices it between resyncs (set to ten
// minutes here): Ready=False MembersUnreachable names the MAIN and the cause (state
// Degraded, Converged Unknown for the same reason), one Warning event says so, and nothing
// is run against the cluster. Cut off from every member, Ready names all five the same
// way. Healed, it converges again with the same MAIN, no failover recorded.
func TestOperatorCutOffFromItsDataPlane(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	const name, operator = "cut", "mg-cut"
	cl := memgraphtest.NewCluster(t)
	book := &addressBook{}
	opts := memgraph.Options{Resolve: book.resolve, Timeout: 3 * time.Second}
	reg := &holdable{Registrar: controller.BoltRegistrar{Options: opts}}
	h := start(t, operator, func(cfg *controller.Config) {
		cfg.Registrar = observingHoldable{reg}
		cfg.Resync = 10 * time.Minute
	})
	plane := mapSimMembers(t, cl, book, opts, h.ns, name, 3, 2)
	for id := 1; id <= 3; id++ {
		cl.StartCoordinator(id)
	}
	data := dataNames(name, 2)
	for _, d := range data {
		cl.StartData(d)
	}
	h.create(name, 3, 2)
	h.podsRun(resources.StatefulSetName(name, resources.RoleCoordinator))
	h.podsRun(resources.StatefulSetName(name, resources.RoleData))
	c := h.waitConverged(name, 3, 2)
	main := plane.assertMembers(ctx, c.Status.Leader, coordinatorNames(3), data)
	addrs := map[string]string{}
	book.mu.RLock()
	maps.Copy(addrs, book.m)
	book.mu.RUnlock()
	hole := testenv.BlackHole(t)

	cut := func(what string, members []string) {
		t.Helper()
		reg.mu.Lock()
		ranBefore := len(reg.executed)
		reg.mu.Unlock()
		cutoff := map[string]string{}
		for _, m := range members {
			cutoff[plane.bolt(m)] = hole
		}
		book.add(cutoff)
		begin := time.Now()
		var conv, rd *metav1.Condition
		testenv.Eventually(t, simTimeout, "Ready=False "+memgraphv1.ReasonMembersUnreachable+" cut off from "+what, func() (bool, string) {
			c = h.cluster(name)
			conv = meta.FindStatusCondition(c.Status.Conditions, memgraphv1.ConditionConverged)
			rd = meta.FindStatusCondition(c.Status.Conditions, memgraphv1.ConditionReady)
			ok := rd != nil && rd.Status == metav1.ConditionFalse && rd.Reason == memgraphv1.ReasonMembersUnreachable &&
				conv != nil && conv.Status == metav1.ConditionUnknown && conv.Reason == memgraphv1.ReasonMembersUnreachable &&
				c.Status.State == memgraphv1.StateDegraded
			return ok, fmt.Sprintf("state %s ready %+v converged %+v", c.Status.State, rd, conv)
		})
		t.Logf("cut off from %s: reported after %.1fs: Converged %s: %s; Ready=%s %s: %s; state %s", what, time.Since(begin).Seconds(),
			conv.Reason, conv.Message, rd.Status, rd.Reason, rd.Message, c.Status.State)
		for _, m := range members {
			if !strings.Contains(rd.Message, m+" (no answer within 3s)") {
				t.Errorf("cut off from %s: Ready's message does not name %s with the cause: %q", what, m, rd.Message)
			}
		}
		// Some passes while cut off: none may run a command.
		time.Sleep(8 * time.Second)
		reg.mu.Lock()
		ran := append([]string(nil), reg.executed[ranBefore:]...)
		reg.mu.Unlock()
		if len(ran) > 0 {
			t.Errorf("cut off from %s, the operator ran %q", what, ran)
		}
		if c = h.cluster(name); meta.FindStatusCondition(c.Status.Conditions, memgraphv1.ConditionReady).Reason != memgraphv1.ReasonMembersUnreachable {
			t.Errorf("cut off from %s, Ready after some passes: %+v", what, meta.FindStatusCondition(c.Status.Conditions, memgraphv1.ConditionReady))
		}
		book.set(maps.Clone(addrs))
		healed := time.Now()
		c = h.waitConverged(name, 3, 2)
		t.Logf("cut off from %s: converged again %.1fs after healing", what, time.Since(healed).Seconds())
		if c.Status.Main != main || c.Status.LastFailoverTime != nil {
			t.Errorf("after the cut from %s: status.main %q (was %q), lastFailoverTime %v", what, c.Status.Main, main, c.Status.LastFailoverTime)
		}
	}
	cut("the MAIN", []string{main})
	cut("every member", append(coordinatorNames(3), data...))

	var warnings []string
	for _, e := range h.events(name) {
		if e.Reason == memgraphv1.ReasonMembersUnreachable {
			warnings = append(warnings, e.Type+" "+e.Action)
		}
	}
	// One Warning (Ready turning False) per cut; Converged turning Unknown is Normal.
	warnings = slices.DeleteFunc(warnings, func(w string) bool { return !strings.HasPrefix(w, corev1.EventTypeWarning+" ") })
	if len(warnings) != 2 || warnings[0] != corev1.EventTypeWarning+" "+memgraphv1.ConditionReady || warnings[1] != warnings[0] {
		t.Errorf("%s events %q, want one Warning per cut", memgraphv1.ReasonMembersUnreachable, warnings)
	}
	plane.assertMembers(ctx, c.Status.Leader, coordinatorNames(3), data)
}

// observingHoldable is a holdable that also observes (the failover watch and the passes
// whose pods are not all ready use it).
type observingHoldable struct{ *holdable }

func (o observingHoldable) Observe(ctx context.Context, c *memgraphv1.MemgraphCluster, creds controller.Credentials, want planner.Desired) (controller.Registration, error) {
	return o.Registrar.(controller.Observer).Observe(ctx, c, creds, want)
}
