package cluster

import (
	"context"
	"time"

	valkeyv1 "github.com/opsuite/suite/api/valkey/v1alpha1"
	"github.com/opsuite/suite/services/valkey-operator/internal/resources"
	"github.com/opsuite/suite/shared/reconciler"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// pass is one reconcile of one cluster: what it found and decided, turned into status and
// events at the end.
type pass struct {
	ctl *Controller
	c   *valkeyv1.ValkeyCluster
	// before is the status the previous pass wrote (the reconciler's memory when the cache
	// lags it).
	before valkeyv1.ValkeyClusterStatus
	now    time.Time
	// failedOver: the pass promoted a replica (status.lastFailoverTime).
	failedOver bool
	// events records through the kit: actions at once, states after the status write.
	events *reconciler.PassEvents

	internal resources.InternalPasswords
	config   resources.ServerConfig
	// certHash identifies the members' TLS certificate ("" without TLS).
	certHash string

	// failure ends the pass early: the Ready reason and message.
	failReason, failMessage string
	// progress is the Progressing reason and message when work is under way.
	progress, progressMsg string
	// degraded is the Degraded reason and message.
	degraded, degradedMsg string
	// formed: ClusterFormed status, reason and message.
	formed                  metav1.ConditionStatus
	formedReason, formedMsg string
	// slots: every slot owned (nil: not observed).
	slotsAssigned *bool
	shards        int32
	readyShards   int32
	// healthy: every desired member exists, is ready and the topology converged.
	healthy bool
	// monitor: the MetricsMonitored condition (monitoring.go).
	monitor monitorState
	// lost: the MemberLost condition (lost.go); nil sets none. lostRecheck is how soon
	// to look again for it (a node's grace period ending; 0: no need).
	lost        *lostState
	lostRecheck time.Duration
	// acksRefused: a slot move was refused for replicas that did not acknowledge it; a
	// pass without one ends the run of such passes (ReplicaAckGrace).
	acksRefused bool
}

// run is the reconciler's pass over c, whose status is the last written (the kit's).
func (ctl *Controller) run(ctx context.Context, c *valkeyv1.ValkeyCluster) (reconciler.Result, error) {
	p := &pass{ctl: ctl, c: c, before: *c.Status.DeepCopy(), now: time.Now(), events: reconciler.EventsOf(ctx)}
	wait := p.reconcile(ctx)
	if !p.acksRefused {
		ctl.replicasCaughtUp(c)
	}
	p.writeStatus()
	ctl.observeMetrics(c)
	if wait > 0 {
		return reconciler.Wait(wait), nil
	}
	return reconciler.Done(), nil
}

// reconcile runs the steps in order; each returns false when the rest must wait.
func (p *pass) reconcile(ctx context.Context) time.Duration {
	if !p.infrastructure(ctx) {
		return p.retry()
	}
	recheck := p.monitoring(ctx)
	// spec.bootstrap: nothing is created before the backup is found and checked.
	if !p.restoreBegin(ctx) {
		return min(p.retry(), 5*p.ctl.cfg.Poll)
	}
	shards := p.c.Spec.Shards
	if n := p.restoreShards(); n > 0 {
		// While the backup loads, the cluster has the backup's shards.
		p.c.Spec.Shards = n
		defer func() { p.c.Spec.Shards = shards }()
	}
	nodes, ok := p.nodes(ctx)
	if !ok {
		return p.retry()
	}
	wait := p.withRecheck(p.topology(ctx, nodes), recheck)
	if r := p.lostRecheck; r > 0 && (wait <= 0 || r < wait) {
		wait = r
	}
	if p.restoreEnd(ctx, shards) && wait == 0 {
		wait = time.Second // spec.shards applies now
	}
	// A rolled member restarting, rejoining and resyncing is still the rolling update.
	if p.ctl.isRolling(p.c) && (p.progress == valkeyv1.ReasonAddingNodes || p.progress == valkeyv1.ReasonReconciling) {
		p.progress = valkeyv1.ReasonUpdatingNodes
	}
	return wait
}

// retry is the wait after an infrastructure failure: not an error loop, the cause is in
// the conditions and a watch event usually comes first.
func (p *pass) retry() time.Duration { return 10 * time.Second }

// fail records a failure that stops the pass: the Ready reason and, when given, a Warning
// event (once per transition into that reason).
func (p *pass) fail(reason, event, message string) {
	p.failReason, p.failMessage = reason, message
	if event != "" {
		p.warnOn(valkeyv1.ConditionReady, metav1.ConditionFalse, reason, event, message)
	}
}

func (p *pass) normal(reason, message string) { p.normalAbout(nil, reason, message) }

// normalAbout records an event about the cluster related to one of its objects (a
// ValkeyNode): events of one reason about different nodes stay distinct instead of being
// folded into one series.
func (p *pass) normalAbout(related runtime.Object, reason, message string) {
	p.events.Record(reconciler.Event{Related: related, Type: corev1.EventTypeNormal, Reason: reason, Note: message})
}

func (p *pass) warn(reason, message string) {
	p.events.Record(reconciler.Event{Type: corev1.EventTypeWarning, Reason: reason, Note: message})
}

// normalOn records the Normal event reason once the status written at the end of the
// pass moves condition condType into status and condReason (judged against the status
// last written, so a state is announced once).
func (p *pass) normalOn(condType string, status metav1.ConditionStatus, condReason, reason, message string) {
	p.events.OnTransition(reconciler.Transition{Type: condType, Status: status, Reason: condReason},
		reconciler.Event{Type: corev1.EventTypeNormal, Reason: reason, Note: message})
}

// warnOn is normalOn's Warning.
func (p *pass) warnOn(condType string, status metav1.ConditionStatus, condReason, reason, message string) {
	p.events.OnTransition(reconciler.Transition{Type: condType, Status: status, Reason: condReason},
		reconciler.Event{Type: corev1.EventTypeWarning, Reason: reason, Note: message})
}
