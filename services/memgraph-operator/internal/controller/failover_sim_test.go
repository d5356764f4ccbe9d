package controller_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	memgraphv1 "github.com/opsuite/suite/api/memgraph/v1alpha1"
	"github.com/opsuite/suite/services/memgraph-operator/internal/controller"
	"github.com/opsuite/suite/services/memgraph-operator/internal/memgraph"
	"github.com/opsuite/suite/services/memgraph-operator/internal/memgraph/memgraphtest"
	"github.com/opsuite/suite/services/memgraph-operator/internal/resources"
	"github.com/opsuite/suite/shared/metrics"
	"github.com/opsuite/suite/shared/testenv"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// statusFollowBound is how long after the coordinators' promotion the status may take to
// name the new MAIN: generous for a loaded machine, and well under the resync (set to ten
// minutes here, so that only the failover watch can explain a status that follows).
const statusFollowBound = 15 * time.Second

// TestStatusFollowsFailover (issue 24): the MAIN's process dies while its pod stays Ready
// in the API, as when the network cuts the MAIN off from the coordinators: no Kubernetes
// event at all. The coordinators promote the replica; status.main names it, and Converged
// says MembersDown, within statusFollowBound of the promotion, not at the resync. The move
// is a failover (issue 26): status.lastFailoverTime, one Warning event "Failover" naming
// both instances, memgraph_operator_failovers_total 1. The old MAIN back as a replica is
// no further failover.
func TestStatusFollowsFailover(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	const name, operator = "fo", "mg-failover"
	cl := memgraphtest.NewCluster(t)
	book := &addressBook{}
	opts := memgraph.Options{Resolve: book.resolve, Timeout: 10 * time.Second}
	h := start(t, operator, func(cfg *controller.Config) {
		cfg.Registrar = controller.BoltRegistrar{Options: opts}
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
	oldMain := plane.assertMembers(ctx, c.Status.Leader, coordinatorNames(3), data)
	if c.Status.Main != oldMain || c.Status.LastFailoverTime != nil {
		t.Fatalf("converged with status.main %q (the leader shows %q), lastFailoverTime %v", c.Status.Main, oldMain, c.Status.LastFailoverTime)
	}
	failovers := func() float64 {
		s, err := metrics.ObjectSeries(ctrlmetrics.Registry, h.ns, name)
		if err != nil {
			t.Fatal(err)
		}
		return s[metrics.Prefix(operator)+"_failovers_total"]
	}
	if n := failovers(); n != 0 {
		t.Fatalf("failovers_total %v before any failover", n)
	}

	cl.Kill(cl.Data[oldMain])
	killed := time.Now()
	var newMain string
	var promoted time.Time
	testenv.Eventually(t, simTimeout, "the coordinators promote the replica", func() (bool, string) {
		leader, rows := leaderView(ctx, plane)
		for _, r := range rows {
			if !r.IsCoordinator() && r.Role == memgraph.RoleMain && r.Name != oldMain {
				newMain, promoted = r.Name, time.Now()
				return true, ""
			}
		}
		return false, fmt.Sprintf("leader %q rows %+v", leader, rows)
	})
	t.Logf("the coordinators promoted %s %.1fs after %s died", newMain, promoted.Sub(killed).Seconds(), oldMain)

	var followed time.Duration
	testenv.Eventually(t, simTimeout, "status.main "+newMain+" and Converged MembersDown", func() (bool, string) {
		c = h.cluster(name)
		conv := meta.FindStatusCondition(c.Status.Conditions, memgraphv1.ConditionConverged)
		ok := c.Status.Main == newMain && conv != nil && conv.Reason == memgraphv1.ReasonMembersDown
		if ok {
			followed = time.Since(promoted)
		}
		return ok, fmt.Sprintf("main %q converged %+v", c.Status.Main, conv)
	})
	t.Logf("the status named %s and MembersDown %.1fs after the promotion", newMain, followed.Seconds())
	if followed > statusFollowBound {
		t.Errorf("the status followed the failover %.1fs after the promotion, want within %v (the resync is 10 minutes)", followed.Seconds(), statusFollowBound)
	}
	if c.Status.LastFailoverTime == nil || c.Status.LastFailoverTime.Time.Before(killed.Add(-time.Second)) {
		t.Errorf("lastFailoverTime %v, want a time after the MAIN died (%v)", c.Status.LastFailoverTime, killed)
	}
	at := c.Status.LastFailoverTime

	// The old MAIN comes back and is made a replica of the new one: converged again, the
	// failover recorded once.
	cl.Restart(cl.Data[oldMain])
	c = h.waitConverged(name, 3, 2)
	if c.Status.Main != newMain {
		t.Errorf("status.main %q after %s came back, want %s", c.Status.Main, oldMain, newMain)
	}
	if at == nil || c.Status.LastFailoverTime == nil || !c.Status.LastFailoverTime.Equal(at) {
		t.Errorf("lastFailoverTime %v after the old MAIN came back, want it kept at %v", c.Status.LastFailoverTime, at)
	}
	if n := failovers(); n != 1 {
		t.Errorf("failovers_total %v, want 1", n)
	}
	var warnings []string
	for _, e := range h.events(name) {
		if e.Reason == memgraphv1.EventReasonFailover {
			warnings = append(warnings, e.Type+": "+e.Note)
		}
	}
	if len(warnings) != 1 || !strings.HasPrefix(warnings[0], corev1.EventTypeWarning) ||
		!strings.Contains(warnings[0], oldMain) || !strings.Contains(warnings[0], newMain) {
		t.Errorf("Failover events %q, want one Warning naming %s and %s", warnings, oldMain, newMain)
	}
}

// leaderView is the view of the coordinator that names itself leader, asked in id order.
func leaderView(ctx context.Context, plane simPlane) (string, []memgraph.Instance) {
	for _, coord := range coordinatorNames(3) {
		s, err := plane.dialer.Dial(ctx, plane.bolt(coord))
		if err != nil {
			continue
		}
		rows, err := s.ShowInstances(ctx)
		_ = s.Close(ctx)
		if l, ok := memgraph.LeaderOf(rows); err == nil && ok && l.Name == coord {
			return coord, rows
		}
	}
	return "", nil
}
