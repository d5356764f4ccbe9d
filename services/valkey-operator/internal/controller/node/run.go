package node

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	valkeyv1 "github.com/opsuite/suite/api/valkey/v1alpha1"
	"github.com/opsuite/suite/services/valkey-operator/internal/resources"
	"github.com/opsuite/suite/services/valkey-operator/internal/valkey"
	"github.com/opsuite/suite/shared/children"
	"github.com/opsuite/suite/shared/conditions"
	"github.com/opsuite/suite/shared/reconciler"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// pass is one reconcile's working state: the node (the kit's copy, whose status this pass
// fills) and the soonest time to look again.
type pass struct {
	n     *valkeyv1.ValkeyNode
	after time.Duration
}

func (p *pass) wait(d time.Duration) {
	if d > 0 && (p.after == 0 || d < p.after) {
		p.after = d
	}
}

func (p *pass) set(c metav1.Condition) {
	conditions.Set(&p.n.Status.Conditions, c, p.n.Generation)
}

func (r *Reconciler) run(ctx context.Context, n *valkeyv1.ValkeyNode) (reconciler.Result, error) {
	p := &pass{n: n}
	objs := resources.NodeWorkload(n, r.cfg.Build)

	// The PVC first, so the pod never waits on a claim that was never asked for. A pending
	// claim does not hold the workload back: with WaitForFirstConsumer binding, the claim
	// binds only once the pod is scheduled.
	var pvcCond *metav1.Condition
	if objs.PVC != nil {
		pvc, refused, blocked, err := r.syncPVC(ctx, n, objs.PVC)
		if err != nil {
			return reconciler.Done(), err
		}
		ready := pvcReady(objs.PVC.Name, pvc)
		if blocked != "" {
			ready.Message = blocked
		}
		p.set(ready)
		p.set(pvcSize(objs.PVC.Name, n.Spec.Persistence.Size, pvc, refused))
		pvcCond = &ready
		if blocked != "" {
			// Someone else's claim under our name: never mount its data.
			p.set(readyCondition(pvcCond, false, "", false, ""))
			p.n.Status.Ready = false
			return reconciler.Wait(r.cfg.RetryMax), nil
		}
		if refused != nil {
			p.wait(r.cfg.RetryMax)
		}
	} else {
		meta.RemoveStatusCondition(&n.Status.Conditions, valkeyv1.NodeConditionPersistentVolumeClaimReady)
		meta.RemoveStatusCondition(&n.Status.Conditions, valkeyv1.NodeConditionPersistentVolumeClaimSizeReady)
	}

	pod, rolled, rollWhy, err := r.syncWorkload(ctx, n, objs)
	var nc *children.NotControlledError
	switch {
	case errors.As(err, &nc):
		p.set(readyCondition(nil, false, fmt.Sprintf("cannot run the node: %v", nc), false, ""))
		n.Status.Ready = false
		return reconciler.Wait(r.cfg.RetryMax), nil
	case err != nil:
		return reconciler.Done(), err
	}

	n.Status.PodName, n.Status.PodIP, n.Status.NodeName = "", "", ""
	if objs.StatefulSet != nil {
		n.Status.PodName = resources.PodName(n.Name)
	}
	if pod != nil {
		n.Status.PodName, n.Status.PodIP, n.Status.NodeName = pod.Name, pod.Status.PodIP, pod.Spec.NodeName
	}
	podOK, podWhy := podReady(pod, n.Status.PodName)
	if podOK && pod.Status.PodIP == "" {
		podOK, podWhy = false, fmt.Sprintf("pod %s has no IP yet", pod.Name)
	}
	ready := readyCondition(pvcCond, podOK, podWhy, rolled, rollWhy)
	p.set(ready)
	n.Status.Ready = ready.Status == metav1.ConditionTrue

	cfg := r.wantConfig(ctx, n)
	if cfg.skip && !cfg.unread {
		// No live keys: the condition is absent, which counts as applied; this clears a
		// failure whose key was removed, whatever the pod's state.
		meta.RemoveStatusCondition(&n.Status.Conditions, valkeyv1.NodeConditionLiveConfigApplied)
		n.Status.AppliedConfigHash = ""
	}
	if podOK {
		r.talk(ctx, p, pod, cfg)
		p.wait(r.cfg.Resync)
	} else {
		p.wait(r.cfg.RequeueAfter)
	}
	return reconciler.Wait(p.after), nil
}

// syncPVC creates or updates the node's claim and returns it as it is now. With
// reclaimPolicy Delete the node controls it (the garbage collector deletes it with the
// node); with Retain it has no owner and outlives the node, and a later node of the same
// name adopts it by its labels. refused is the API server's refusal of a resize; blocked
// says why a claim of our name is not ours to use.
func (r *Reconciler) syncPVC(ctx context.Context, n *valkeyv1.ValkeyNode, want *corev1.PersistentVolumeClaim) (pvc *corev1.PersistentVolumeClaim, refused error, blocked string, err error) {
	live := &corev1.PersistentVolumeClaim{}
	switch err := r.client.Get(ctx, client.ObjectKeyFromObject(want), live); {
	case apierrors.IsNotFound(err):
		live = nil
	case err != nil:
		return nil, nil, "", fmt.Errorf("reading PVC %s: %w", want.Name, err)
	}
	if live != nil {
		owner := metav1.GetControllerOf(live)
		switch {
		case owner != nil && owner.UID != n.UID:
			return live, nil, fmt.Sprintf("PVC %s is controlled by %s %s, not by this node", live.Name, owner.Kind, owner.Name), nil
		case owner == nil && live.Labels[resources.LabelNode] != n.Name:
			return live, nil, fmt.Sprintf("PVC %s exists without the label %s=%s; the node does not adopt a claim it did not create", live.Name, resources.LabelNode, n.Name), nil
		}
		// A claim never shrinks: someone may have grown it by hand past the spec.
		if have, ok := live.Spec.Resources.Requests[corev1.ResourceStorage]; ok && have.Cmp(want.Spec.Resources.Requests[corev1.ResourceStorage]) > 0 {
			want.Spec.Resources.Requests[corev1.ResourceStorage] = have
		}
		// The class the API server defaulted is the claim's for good.
		if want.Spec.StorageClassName == nil {
			want.Spec.StorageClassName = live.Spec.StorageClassName
		}
	}
	if n.Spec.Persistence.ReclaimPolicy == valkeyv1.ReclaimDelete {
		if err := controllerutil.SetControllerReference(n, want, r.client.Scheme()); err != nil {
			return nil, nil, "", fmt.Errorf("owner of PVC %s: %w", want.Name, err)
		}
	}
	if live != nil && children.UpToDate(want, live) {
		return live, nil, "", nil
	}
	if err := r.applier.Apply(ctx, want); err != nil {
		if live != nil && (apierrors.IsForbidden(err) || apierrors.IsInvalid(err)) {
			// Most often a class that does not allow expansion; the claim itself is fine.
			return live, apiMessage(err), "", nil
		}
		return nil, nil, "", fmt.Errorf("applying PVC %s: %w", want.Name, err)
	}
	log.FromContext(ctx).Info("Applied PersistentVolumeClaim", "persistentVolumeClaim", want.Name)
	return want, nil, "", nil
}

// apiMessage is the API server's own message, without the client's wrapping.
func apiMessage(err error) error {
	var st apierrors.APIStatus
	if errors.As(err, &st) {
		return errors.New(st.Status().Message)
	}
	return err
}

// syncWorkload applies the StatefulSet or Deployment (pruning one of the other kind) and
// finds the pod; it reports whether the workload is rolled out to the current spec.
func (r *Reconciler) syncWorkload(ctx context.Context, n *valkeyv1.ValkeyNode, objs resources.NodeObjects) (*corev1.Pod, bool, string, error) {
	sel := map[string]string{resources.LabelNode: n.Name}
	stsSet := children.Set[*appsv1.StatefulSet]{Client: r.client, Applier: r.applier, Owner: n, Selector: sel, AllowEmpty: true,
		NewList: func() client.ObjectList { return &appsv1.StatefulSetList{} }}
	depSet := children.Set[*appsv1.Deployment]{Client: r.client, Applier: r.applier, Owner: n, Selector: sel, AllowEmpty: true,
		NewList: func() client.ObjectList { return &appsv1.DeploymentList{} }}

	if objs.StatefulSet != nil {
		if _, err := depSet.Sync(ctx, nil); err != nil {
			return nil, false, "", err
		}
		out, err := stsSet.Sync(ctx, []*appsv1.StatefulSet{objs.StatefulSet})
		if err != nil {
			return nil, false, "", err
		}
		sts := &appsv1.StatefulSet{}
		if len(out.Applied) > 0 {
			sts = out.Applied[0] // fresher than the cache, which has yet to see the write
		} else if err := r.client.Get(ctx, client.ObjectKeyFromObject(objs.StatefulSet), sts); err != nil {
			return nil, false, "", fmt.Errorf("reading StatefulSet %s: %w", objs.StatefulSet.Name, err)
		}
		pod := &corev1.Pod{}
		switch err := r.client.Get(ctx, client.ObjectKey{Namespace: n.Namespace, Name: resources.PodName(n.Name)}, pod); {
		case apierrors.IsNotFound(err):
			pod = nil
		case err != nil:
			return nil, false, "", fmt.Errorf("reading pod %s: %w", resources.PodName(n.Name), err)
		}
		ok, why := statefulSetRolledOut(sts, pod)
		return pod, ok, why, nil
	}

	if _, err := stsSet.Sync(ctx, nil); err != nil {
		return nil, false, "", err
	}
	out, err := depSet.Sync(ctx, []*appsv1.Deployment{objs.Deployment})
	if err != nil {
		return nil, false, "", err
	}
	dep := &appsv1.Deployment{}
	if len(out.Applied) > 0 {
		dep = out.Applied[0]
	} else if err := r.client.Get(ctx, client.ObjectKeyFromObject(objs.Deployment), dep); err != nil {
		return nil, false, "", fmt.Errorf("reading Deployment %s: %w", objs.Deployment.Name, err)
	}
	var pods corev1.PodList
	if err := r.client.List(ctx, &pods, client.InNamespace(n.Namespace), client.MatchingLabels(sel)); err != nil {
		return nil, false, "", fmt.Errorf("listing pods of %s: %w", n.Name, err)
	}
	ok, why := deploymentRolledOut(dep)
	return pickPod(pods.Items), ok, why, nil
}

// pickPod is the Deployment's pod to report: a ready one, else the newest; pods on their
// way out only when nothing else is there.
func pickPod(pods []corev1.Pod) *corev1.Pod {
	rank := func(p *corev1.Pod) int {
		ok, _ := podReady(p, p.Name)
		switch {
		case ok:
			return 2
		case p.DeletionTimestamp.IsZero():
			return 1
		}
		return 0
	}
	var best *corev1.Pod
	for i := range pods {
		p := &pods[i]
		if best == nil || rank(p) > rank(best) ||
			(rank(p) == rank(best) && best.CreationTimestamp.Before(&p.CreationTimestamp)) {
			best = p
		}
	}
	return best
}

// hash names what was applied in status (appliedConfigHash, appliedACLHash): the sha256
// of live.conf (equal to resources.ServerConfig.LiveHash) or of users.acl.
func hash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// incarnation names one run of the server: a new pod, or the container restarted in
// place, loses what CONFIG SET and ACL SETUSER did.
func incarnation(pod *corev1.Pod) string {
	restarts := int32(0)
	for _, s := range pod.Status.ContainerStatuses {
		if s.Name == resources.ServerContainer {
			restarts = s.RestartCount
		}
	}
	return string(pod.UID) + "/" + strconv.Itoa(int(restarts))
}

// talk reads the server's role and id and applies the live config and the users, on one
// connection. Failures here never fail the pass: they are reported (condition, event) and
// retried with back-off.
func (r *Reconciler) talk(ctx context.Context, p *pass, pod *corev1.Pod, cfg desired) {
	n := p.n
	st := r.stateOf(n)
	inc := incarnation(pod)
	ctx, cancel := context.WithTimeout(ctx, r.cfg.CommandTimeout)
	defer cancel()

	acl := r.wantACL(ctx, n)

	// One connection per pass, dialled once: a server that does not answer costs one
	// timeout, and its error is what every apply of the pass reports.
	var (
		conn    valkey.NodeAdmin
		dialed  bool
		dialErr error
	)
	dial := func() error {
		if dialed {
			return dialErr
		}
		dialed = true
		o, err := r.cfg.Options(ctx, n)
		if err != nil {
			dialErr = err
			return err
		}
		conn, dialErr = r.cfg.Dial(r.cfg.Addr(n), o)
		return dialErr
	}
	defer func() {
		if conn != nil {
			conn.Close()
		}
	}()

	if err := dial(); err == nil {
		if role, err := conn.ReplicationRole(ctx); err == nil {
			switch role {
			case "master":
				n.Status.Role = valkeyv1.RolePrimary
			case "slave":
				n.Status.Role = valkeyv1.RoleReplica
			}
		} else {
			log.FromContext(ctx).Info("Reading the replication role failed", "error", err.Error())
		}
		if id, err := conn.MyID(ctx); err == nil {
			n.Status.ValkeyNodeID = id
		} else {
			log.FromContext(ctx).Info("Reading CLUSTER MYID failed", "error", err.Error())
		}
	} else {
		log.FromContext(ctx).Info("Connecting to the server failed", "address", r.cfg.Addr(n), "error", err.Error())
	}

	now := time.Now()
	if !cfg.skip {
		r.applyConfig(p, &st.config, inc, cfg, dial, func() error { return conn.ConfigSet(ctx, cfg.pairs) }, now)
	}
	if !acl.skip {
		r.applyACL(ctx, p, &st.acl, inc, acl, dial, func() error { return applyUsers(ctx, conn, acl.users) }, now)
	}
}

// desired is one rendering to apply (live config or users) as read from its object.
type desired struct {
	skip   bool // nothing to apply
	unread bool // its object could not be read: nothing known, nothing changed
	hash   string
	pairs  [][2]string
	users  []resources.ACLUser
}

func (r *Reconciler) wantConfig(ctx context.Context, n *valkeyv1.ValkeyNode) desired {
	name := n.Spec.ServerConfigMapName
	if name == "" {
		return desired{skip: true}
	}
	var cm corev1.ConfigMap
	if err := r.client.Get(ctx, client.ObjectKey{Namespace: n.Namespace, Name: name}, &cm); err != nil {
		// The pod could not have started without it; a missing one is a race with the
		// cluster controller, whose write brings the next event.
		return desired{skip: true, unread: true}
	}
	text := cm.Data[resources.ConfigKeyLive]
	var pairs [][2]string
	for _, l := range resources.ParseLiveConfig(text) {
		pairs = append(pairs, [2]string{l.Key, l.Value})
	}
	if len(pairs) == 0 {
		return desired{skip: true}
	}
	return desired{hash: hash(text), pairs: pairs}
}

func (r *Reconciler) wantACL(ctx context.Context, n *valkeyv1.ValkeyNode) desired {
	name := n.Spec.UsersACLSecretName
	if name == "" {
		return desired{skip: true}
	}
	var s corev1.Secret
	if err := r.client.Get(ctx, client.ObjectKey{Namespace: n.Namespace, Name: name}, &s); err != nil {
		return desired{skip: true, unread: true}
	}
	text := string(s.Data[resources.ACLKeyUsers])
	users := resources.ParseUsersACL(text)
	if len(users) == 0 {
		// An empty file would delete every user but ours: refuse rather than lock clients out.
		return desired{skip: true}
	}
	return desired{hash: hash(text), users: users}
}

// due reports whether want must be applied now, and if not because of back-off, after how
// long. What was applied is remembered per server incarnation, not read from status: the
// cache may not show the last status write yet, and a new server lost what the old one got.
func due(s *applyState, inc string, want desired, now time.Time) (bool, time.Duration) {
	if s.hash == want.hash && s.incarnation == inc {
		if s.failures == 0 {
			return false, 0
		}
		if now.Before(s.next) {
			return false, s.next.Sub(now)
		}
	}
	return true, 0
}

func (r *Reconciler) failed(s *applyState, inc, h string, err error, now time.Time) (time.Duration, bool) {
	if s.hash != h || s.incarnation != inc {
		s.failures = 0
	}
	s.failures++
	s.hash, s.incarnation = h, inc
	d := backoff(s.failures, r.cfg.RetryBase, r.cfg.RetryMax)
	s.next = now.Add(d)
	changed := s.lastErr != err.Error()
	s.lastErr = err.Error()
	return d, changed
}

func succeeded(s *applyState, inc, h string) {
	*s = applyState{incarnation: inc, hash: h}
}

// attempt applies want when it is due. ok says want holds on this server (applied now or
// before); otherwise err is the failure, new now (fresh: worth an event) or remembered
// while the retry waits its back-off.
func (r *Reconciler) attempt(p *pass, s *applyState, inc string, want desired, dial, apply func() error, now time.Time) (ok, fresh bool, err error) {
	if run, wait := due(s, inc, want, now); !run {
		if s.failures == 0 {
			return true, false, nil
		}
		p.wait(wait)
		return false, false, errors.New(s.lastErr)
	}
	err = dial()
	if err == nil {
		err = apply()
	}
	if err == nil {
		succeeded(s, inc, want.hash)
		return true, false, nil
	}
	d, fresh := r.failed(s, inc, want.hash, err, now)
	p.wait(d)
	return false, fresh, err
}

// applyConfig CONFIG SETs live.conf and reports it in LiveConfigApplied and
// appliedConfigHash; both are set on every pass, so a status write lost to a conflict is
// made again.
func (r *Reconciler) applyConfig(p *pass, s *applyState, inc string, want desired, dial, set func() error, now time.Time) {
	n := p.n
	prev := conditions.Get(n.Status.Conditions, valkeyv1.NodeConditionLiveConfigApplied)
	ok, fresh, err := r.attempt(p, s, inc, want, dial, set, now)
	if ok {
		n.Status.AppliedConfigHash = want.hash
		p.set(cond(valkeyv1.NodeConditionLiveConfigApplied, true, valkeyv1.NodeReasonApplied,
			fmt.Sprintf("applied %d live config keys", len(want.pairs))))
		return
	}
	msg := err.Error()
	// One event as a failure starts or its error changes, not per retry: the condition
	// holds the current error. Both the remembered error (the cache may not show the last
	// status write yet) and the condition (an operator restart forgets) must call it new.
	if fresh && (prev == nil || prev.Status != metav1.ConditionFalse || prev.Message != msg) {
		r.recorder.Eventf(n, clusterRef(n), corev1.EventTypeWarning, valkeyv1.EventLiveConfigApplyFailed,
			"ConfigSet", "CONFIG SET failed on %s: %s", n.Name, msg)
	}
	p.set(cond(valkeyv1.NodeConditionLiveConfigApplied, false, valkeyv1.NodeReasonApplyFailed, msg))
}

// applyACL sets the users of users.acl and records appliedACLHash; a failure is a Warning
// event (the document gives nodes no condition for it) and a retry with back-off.
func (r *Reconciler) applyACL(ctx context.Context, p *pass, s *applyState, inc string, want desired, dial, apply func() error, now time.Time) {
	n := p.n
	ok, fresh, err := r.attempt(p, s, inc, want, dial, apply, now)
	if ok {
		n.Status.AppliedACLHash = want.hash
		return
	}
	if fresh {
		log.FromContext(ctx).Info("Applying ACL users failed", "error", err.Error())
		r.recorder.Eventf(n, clusterRef(n), corev1.EventTypeWarning, EventUsersACLApplyFailed,
			"ACLSetUser", "applying ACL users on %s failed: %s", n.Name, err.Error())
	}
}

// protected users are never deleted: the server's default user, the operator's own (the
// connection doing the work) and the replication user (replicas would stop syncing).
var protected = []string{"default", resources.OperatorUser, resources.ReplicationUser}

// applyUsers sets every listed user (the operator's own last, so a mistake in its line
// cannot stop the others) and deletes the server's users no longer listed.
func applyUsers(ctx context.Context, c valkey.NodeAdmin, users []resources.ACLUser) error {
	listed := map[string]bool{}
	var own *resources.ACLUser
	for i, u := range users {
		listed[u.Name] = true
		if u.Name == resources.OperatorUser {
			own = &users[i]
			continue
		}
		if err := c.ACLSetUser(ctx, u.Name, append([]string{"reset"}, u.Rules...)); err != nil {
			return err
		}
	}
	if own != nil {
		if err := c.ACLSetUser(ctx, own.Name, append([]string{"reset"}, own.Rules...)); err != nil {
			return err
		}
	}
	have, err := c.ACLUsers(ctx)
	if err != nil {
		return err
	}
	var gone []string
	for _, u := range have {
		if !listed[u] && !slices.Contains(protected, u) {
			gone = append(gone, u)
		}
	}
	return c.ACLDelUser(ctx, gone...)
}
