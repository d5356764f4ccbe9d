package controller

import (
	"context"
	"time"

	veltrixv1 "github.com/opsuite/suite/api/veltrix/v1alpha1"
	"github.com/opsuite/suite/services/veltrix-operator/internal/disks"
	"github.com/opsuite/suite/services/veltrix-operator/internal/planner"
	"github.com/opsuite/suite/services/veltrix-operator/internal/veltrix"
	"github.com/opsuite/suite/shared/reconciler"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// pass is one reconcile of one cluster: what it observed and decided, turned into status at
// the end (one write, by the reconciler kit).
type pass struct {
	ctl *Controller
	c   *veltrixv1.VeltrixCluster
	mem *memory
	now time.Time

	// prepared is the node agents' answer; nil before disks were asked for.
	prepared *disks.Result
	// env is the engine's environment this pass (engineEnv).
	env map[string]string
	// movedVolumes are Block volumes whose raw partition now has another device path.
	movedVolumes []string
	// childrenErr is a failed write of a namespaced child (reason ChildrenFailed).
	childrenErr string
	// serviceMonitorMissing: the ServiceMonitor CRD is not installed; serviceMonitorFailed:
	// writing it failed otherwise (the cause is in the log).
	serviceMonitorMissing, serviceMonitorFailed bool
	// tokenMissing: the spec's admin token Secret or key does not exist.
	tokenMissing string
	admin        veltrix.Admin

	sts      *appsv1.StatefulSet
	pods     []corev1.Pod
	ready    int32
	decision *planner.Decision
	stepErr  error
	topology *veltrix.Cluster
	// versionUnsupported: spec.version is older than online membership; nothing is written.
	versionUnsupported bool
	// lost is the lost-member decision (nil before it was made).
	lost *planner.LostDecision
}

// run is the reconciler's pass over c.
func (ctl *Controller) run(ctx context.Context, c *veltrixv1.VeltrixCluster) (reconciler.Result, error) {
	p := &pass{ctl: ctl, c: c, mem: ctl.memoryOf(c), now: time.Now()}
	wait, err := p.reconcile(ctx)
	p.updateStatus()
	ctl.observeMetrics(c)
	if err != nil {
		return reconciler.Done(), err
	}
	return reconciler.Wait(wait), nil
}

// reconcile runs the steps in the order the cluster needs its children; a step that cannot
// go on ends the pass with the wait its cause deserves (the cause is in the conditions).
func (p *pass) reconcile(ctx context.Context) (time.Duration, error) {
	logger := log.FromContext(ctx)
	if veltrixv1.VersionBelowMin(p.c.Spec.Version) {
		// Pods of such a version know no --join: rolling them to it would break the
		// cluster. A spec change brings the next pass; the resync only re-reports.
		p.versionUnsupported = true
		return p.ctl.cfg.Resync, nil
	}
	if p.ctl.cfg.Agents == nil {
		return p.ctl.cfg.MaxBackoff, nil
	}
	if err := p.storageClass(ctx); err != nil {
		return 0, err
	}
	live, err := p.statefulSet(ctx)
	if err != nil {
		return 0, err
	}
	p.sts = live
	if err := p.observeLost(ctx); err != nil {
		return 0, err
	}
	if err := p.prepareDisks(ctx); err != nil {
		return 0, err
	}
	if err := p.persistentVolumes(ctx); err != nil {
		return 0, err
	}
	usable := len(p.prepared.Usable(p.c.Spec.IndexMapFallback))
	agentTrouble := usable < p.prepared.Wanted && p.prepared.Problems()
	if agentTrouble {
		p.mem.failures++
	} else {
		p.mem.failures = 0
	}
	// A new cluster waits for its disks; a running one goes on with the nodes it has.
	if p.sts == nil && usable == 0 {
		return p.backoff(), nil
	}
	if !p.namespacedChildren(ctx) {
		return p.ctl.cfg.Backoff, nil
	}
	if err := p.replaceLost(ctx); err != nil {
		return 0, err
	}
	if err := p.members(ctx); err != nil {
		return 0, err
	}
	if p.stepErr != nil {
		logger.Info("Could not ask the members", "err", p.stepErr.Error())
	}
	switch {
	case agentTrouble:
		return p.backoff(), nil
	case p.settled():
		return p.ctl.cfg.Resync, nil
	default:
		return p.ctl.cfg.Poll, nil
	}
}

// backoff is the wait after a pass with a node agent problem: doubled per failing pass.
func (p *pass) backoff() time.Duration {
	d := p.ctl.cfg.Backoff
	for i := 1; i < p.mem.failures && d < p.ctl.cfg.MaxBackoff; i++ {
		d *= 2
	}
	return min(d, p.ctl.cfg.MaxBackoff)
}
