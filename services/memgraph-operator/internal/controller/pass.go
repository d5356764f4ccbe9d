package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	memgraphv1 "github.com/opsuite/suite/api/memgraph/v1alpha1"
	"github.com/opsuite/suite/services/memgraph-operator/internal/planner"
	"github.com/opsuite/suite/services/memgraph-operator/internal/resources"
	"github.com/opsuite/suite/shared/children"
	"github.com/opsuite/suite/shared/reconciler"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

var roles = []resources.Role{resources.RoleCoordinator, resources.RoleData}

// pass is one reconcile of one cluster: what it found and did, turned into status at the end.
type pass struct {
	ctl *Controller
	c   *memgraphv1.MemgraphCluster
	now time.Time

	// sts are the role's StatefulSets as last written or read.
	sts map[resources.Role]*appsv1.StatefulSet
	// notReady describes the roles whose pods are not all ready ("" when all are).
	notReady []string
	// reg is the registration pass's report; nil when it did not run.
	reg    *Registration
	regErr error
	// seen is the leader's view read without registering (pods not all ready); nil when
	// the registration ran or nothing could be read.
	seen *Registration
	// steady: the pass registered, found the cluster converged and waits for the resync;
	// the failover watch then reads the coordinators as target says until the next pass.
	steady bool
	target watchTarget
	nodes  nodeFindings
	rolled rollStep
	// authErr is why spec.auth's Secret could not be used ("" when it could or is unset).
	authErr string
	// tlsErr is why spec.tls.bolt's Secret could not be used ("" when it could or is unset).
	tlsErr string
	// creds is what the credentials step found against the MAIN.
	creds credentialsFinding
	// volumes is what the volume resize step found.
	volumes volumeFinding
	// restore is what the bootstrap step found (spec.bootstrap).
	restore restoreFinding
	// monitor is what the monitoring step found (MetricsMonitored).
	monitor monitorFinding
	// external is what the external-access step found (external.go).
	external externalFinding
	// lost is what the lost-member step found and did (lost.go).
	lost lostFinding
}

// run is the reconciler's pass over c.
func (ctl *Controller) run(ctx context.Context, c *memgraphv1.MemgraphCluster) (reconciler.Result, error) {
	p := &pass{ctl: ctl, c: c, now: time.Now(), sts: map[resources.Role]*appsv1.StatefulSet{}}
	key := types.NamespacedName{Namespace: c.Namespace, Name: c.Name}
	mainBefore := c.Status.Main
	wait, err := p.reconcile(ctx)
	if r := p.lost.recheck; r > 0 && (wait <= 0 || r < wait) {
		// A node within its grace period counts as lost then.
		wait = r
	}
	p.writeStatus()
	p.noteMain(key, mainBefore)
	ctl.metrics.SetState(c.Namespace, c.Name, string(c.Status.State))
	if p.steady {
		ctl.watch.track(key, p.target)
	} else {
		ctl.watch.forget(key)
	}
	if err != nil {
		return reconciler.Result{}, err
	}
	return reconciler.Wait(wait), nil
}

// reconcile runs the steps in order and says when to look again.
func (p *pass) reconcile(ctx context.Context) (time.Duration, error) {
	cfg := p.ctl.cfg
	if err := p.applyChildren(ctx); err != nil {
		return 0, err
	}
	if p.restoreBlocked() {
		// Nothing is created until the backup is there and checked (Restored says why).
		return cfg.Poll, nil
	}
	if p.volumes.replacing {
		// A StatefulSet is being replaced for its claim templates: act on a complete
		// cluster again once it is back.
		return cfg.Poll, nil
	}
	p.checkNodes(ctx)
	for _, r := range roles {
		msg := notReady(p.sts[r], r)
		if msg != "" && r == resources.RoleData {
			// Data pods are not Ready before the registration gives them a role
			// (rolegate.go): that they run is what the registration waits for.
			var err error
			if msg, err = p.dataPodsRunning(ctx); err != nil {
				return 0, err
			}
		}
		if msg != "" {
			p.notReady = append(p.notReady, msg)
		}
	}
	creds, err := p.credentials(ctx)
	var ae authError
	switch {
	case errors.As(err, &ae):
		// Nothing to dial with (and the pods cannot start): the condition says what to
		// create or fix; the Secret's change starts the next pass (secretwatch.go).
		p.authErr = ae.msg
		return cfg.Resync, nil
	case err != nil:
		return 0, err
	}
	bt, err := p.boltTLS(ctx)
	var te tlsError
	switch {
	case errors.As(err, &te):
		// As for spec.auth: nothing the operator could verify the pods with.
		p.tlsErr = te.msg
		return cfg.Resync, nil
	case err != nil:
		return 0, err
	}
	// Every dial of this pass (registration, credentials) verifies with this CA.
	ctx = WithBoltTLS(ctx, bt)
	want := resources.Advertise(p.c, resources.DesiredMembership(p.c, *p.sts[resources.RoleCoordinator].Spec.Replicas, *p.sts[resources.RoleData].Spec.Replicas), p.external.addrs)
	p.target = watchTarget{creds: creds, tls: bt, want: want}
	if err := p.lostMembers(ctx, creds, want); err != nil {
		return 0, err
	}
	if p.lost.released {
		// Pods and claims were deleted this pass: the counts read before are stale, and
		// the registration waits for the pods the StatefulSets make anew.
		p.notReady = append(p.notReady, "the pods of members on lost nodes are made anew")
		p.observe(ctx, creds, want)
		return cfg.Poll, nil
	}
	// The gate is strict, retiring pods included: the registration acts on a fully known
	// cluster or not at all.
	if len(p.notReady) > 0 || cfg.Registrar == nil {
		// The coordinators fail over while a pod is away: the status follows them.
		p.observe(ctx, creds, want)
		return cfg.Poll, nil
	}
	if err := p.planRoll(ctx, &want); err != nil {
		return 0, err
	}
	reg, err := cfg.Registrar.Register(ctx, p.c, creds, want)
	p.ctl.metrics.Add(p.c.Namespace, p.c.Name, counterRegistrations, len(reg.Executed))
	p.ctl.mains.promoted(types.NamespacedName{Namespace: p.c.Namespace, Name: p.c.Name}, want, reg.Executed)
	if err != nil {
		// The data plane refused or failed a command: observe again soon; not an error
		// loop, the condition says it and the log has the cause.
		p.regErr = err
		log.FromContext(ctx).Error(err, "Registration failed", "memgraphCluster", p.c.Name)
		return cfg.Poll, nil
	}
	p.reg = &reg
	if err := p.roleGates(ctx); err != nil {
		return 0, err
	}
	if err := p.syncCredentials(ctx, creds); err != nil {
		return 0, err
	}
	if err := p.shrink(ctx); err != nil {
		return 0, err
	}
	if len(reg.Executed) > 0 {
		reason := reg.Reason
		if reason == "" {
			reason = memgraphv1.ReasonRegistrationInProgress
		}
		p.normal(reason, "Ran "+commandSummary(reg.Executed))
	}
	if !reg.Converged || p.retiring() {
		return cfg.Poll, nil
	}
	if err := p.roll(ctx); err != nil {
		return 0, err
	}
	if p.rolled.active || reloadedTLS(reg.Executed) {
		// A member reloaded before the kubelet rewrote its files still serves the old
		// certificate: look again soon rather than at the resync.
		return cfg.Poll, nil
	}
	p.steady, p.target.view = true, reg.View
	return cfg.Resync, nil
}

// observe reads the leader's view without registering, where the Registrar can.
func (p *pass) observe(ctx context.Context, creds Credentials, want planner.Desired) {
	o, ok := p.ctl.cfg.Registrar.(Observer)
	if !ok {
		return
	}
	seen, err := o.Observe(ctx, p.c, creds, want)
	if err != nil {
		log.FromContext(ctx).V(1).Info("Failed to observe MemgraphCluster", "memgraphCluster", p.c.Name, "error", err.Error())
		return
	}
	p.seen = &seen
}

// maxEventNote keeps an event's note under the events API's 1 kB limit.
const maxEventNote = 1000

// commandSummary lists commands without their address configs (which the status and
// SHOW INSTANCES hold), within an event note's limit.
func commandSummary(cmds []string) string {
	var b strings.Builder
	for i, c := range cmds {
		if before, _, ok := strings.Cut(c, " WITH CONFIG"); ok {
			c = before
		}
		part := c
		if i > 0 {
			part = "; " + c
		}
		if b.Len()+len(part) > maxEventNote-40 {
			fmt.Fprintf(&b, "; and %d more", len(cmds)-i)
			break
		}
		b.WriteString(part)
	}
	return b.String()
}

// applyChildren writes every child by server-side apply and prunes the ones no longer
// wanted. The StatefulSets keep their live size while shrinking (heldReplicas).
func (p *pass) applyChildren(ctx context.Context) error {
	c := p.c
	live := map[resources.Role]*appsv1.StatefulSet{}
	for _, r := range roles {
		sts := &appsv1.StatefulSet{}
		err := p.ctl.client.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: resources.StatefulSetName(c.Name, r)}, sts)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return fmt.Errorf("reading StatefulSet: %w", err)
		default:
			live[r] = sts
		}
	}
	if err := p.bootstrap(ctx, live[resources.RoleData]); err != nil {
		return err
	}
	if p.restoreBlocked() {
		return nil
	}
	if err := p.ensureAgentToken(ctx); err != nil {
		return err
	}
	if err := p.resizeVolumes(ctx, live); err != nil {
		return err
	}
	if p.volumes.replacing {
		// Never apply over a StatefulSet in deletion (nor prune it): the orphan deletion
		// finishes first, then the next pass creates it with the new claim templates.
		for _, r := range roles {
			if live[r] != nil {
				p.sts[r] = live[r]
			}
		}
		return nil
	}
	var desired []*appsv1.StatefulSet
	for _, r := range roles {
		var liveReplicas *int32
		if l := live[r]; l != nil {
			liveReplicas = l.Spec.Replicas
		}
		desired = append(desired, p.desiredStatefulSet(r, heldReplicas(declared(c, r), liveReplicas), live[r]))
	}
	stsOut, err := childrenOf[*appsv1.StatefulSet](p, func() client.ObjectList { return &appsv1.StatefulSetList{} }).Sync(ctx, desired)
	if err != nil {
		return err
	}
	for i, r := range roles {
		p.sts[r] = live[r]
		for _, a := range stsOut.Applied {
			if a.Name == desired[i].Name {
				p.sts[r] = a
			}
		}
	}
	svcs := []*corev1.Service{
		resources.HeadlessService(c, resources.RoleCoordinator), resources.HeadlessService(c, resources.RoleData), resources.ClientService(c),
	}
	svcs = append(svcs, resources.ExternalServices(c, *p.sts[resources.RoleCoordinator].Spec.Replicas, *p.sts[resources.RoleData].Spec.Replicas)...)
	svcOut, err := childrenOf[*corev1.Service](p, func() client.ObjectList { return &corev1.ServiceList{} }).Sync(ctx, svcs)
	if err != nil {
		return err
	}
	if err := p.externalAddresses(ctx, svcOut.Applied); err != nil {
		return err
	}
	pdbs := []*policyv1.PodDisruptionBudget{
		resources.PodDisruptionBudget(c, resources.RoleCoordinator), resources.PodDisruptionBudget(c, resources.RoleData),
	}
	if _, err = childrenOf[*policyv1.PodDisruptionBudget](p, func() client.ObjectList { return &policyv1.PodDisruptionBudgetList{} }).Sync(ctx, pdbs); err != nil {
		return err
	}
	p.monitoring(ctx)
	return nil
}

// desiredStatefulSet is the role's StatefulSet with replicas pods. Claim templates are
// immutable in a StatefulSet, so a live one keeps its own here; a grown size replaces the
// StatefulSet (resizeVolumes) and reaches it when it is created again.
func (p *pass) desiredStatefulSet(r resources.Role, replicas int32, live *appsv1.StatefulSet) *appsv1.StatefulSet {
	sts := resources.StatefulSet(p.c, r, replicas)
	resources.WithMetricsExporter(sts, p.c, p.ctl.cfg.OperatorImage)
	if r == resources.RoleData {
		resources.WithBackup(sts, p.c, resources.BackupOptions{Image: p.ctl.cfg.OperatorImage, Restore: p.restore.source})
	}
	if live != nil {
		sts.Spec.VolumeClaimTemplates = nil
		for _, t := range live.Spec.VolumeClaimTemplates {
			t = *t.DeepCopy()
			t.Status = corev1.PersistentVolumeClaimStatus{}
			sts.Spec.VolumeClaimTemplates = append(sts.Spec.VolumeClaimTemplates, t)
		}
	}
	return sts
}

// shrink lowers each shrinking StatefulSet past the members the registration retired.
func (p *pass) shrink(ctx context.Context) error {
	c := p.c
	for _, r := range roles {
		sts := p.sts[r]
		current := *sts.Spec.Replicas
		first := int32(0)
		retired := func(ordinal int32) bool {
			return slices.Contains(p.reg.RetiredData, resources.DataInstanceName(c.Name, ordinal))
		}
		if r == resources.RoleCoordinator {
			first = resources.FirstCoordinatorOrdinal
			retired = func(ordinal int32) bool { return slices.Contains(p.reg.RetiredCoordinators, int(ordinal)) }
		}
		n := shrunkReplicas(declared(c, r), current, first, retired)
		if n == current {
			continue
		}
		want := p.desiredStatefulSet(r, n, sts)
		if err := controllerutil.SetControllerReference(c, want, p.ctl.client.Scheme()); err != nil {
			return err
		}
		if err := p.ctl.apply.Apply(ctx, want); err != nil {
			return fmt.Errorf("shrinking StatefulSet %s: %w", want.Name, err)
		}
		p.sts[r] = want
		p.normal(memgraphv1.ReasonRetirementInProgress, fmt.Sprintf("Scaled StatefulSet %s from %d to %d: the retired members left the cluster", want.Name, current, n))
	}
	return nil
}

// retiring reports whether a StatefulSet still runs more pods than declared.
func (p *pass) retiring() bool {
	for _, r := range roles {
		if sts := p.sts[r]; sts != nil && *sts.Spec.Replicas > declared(p.c, r) {
			return true
		}
	}
	return false
}

func declared(c *memgraphv1.MemgraphCluster, r resources.Role) int32 {
	if r == resources.RoleCoordinator {
		return resources.Coordinators(c)
	}
	return resources.DataInstances(c)
}

// notReady describes a StatefulSet whose pods are not all there and ready; "" when they are.
func notReady(sts *appsv1.StatefulSet, r resources.Role) string {
	want := *sts.Spec.Replicas
	s := sts.Status
	if s.ObservedGeneration < sts.Generation || s.Replicas != want || s.ReadyReplicas != want {
		return fmt.Sprintf("%d of %d %s pods ready", s.ReadyReplicas, want, r)
	}
	return ""
}

func (p *pass) normal(reason, message string) {
	p.ctl.recorder.Eventf(p.c, nil, corev1.EventTypeNormal, reason, reason, "%s", message)
}

// childrenOf is the cluster's children of one kind, pruned by the cluster's labels.
func childrenOf[O client.Object](p *pass, newList func() client.ObjectList) children.Set[O] {
	return children.Set[O]{
		Client: p.ctl.client, Applier: p.ctl.apply, Owner: p.c,
		NewList: newList, Selector: resources.ClusterLabels(p.c.Name),
	}
}
