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
	"github.com/opsuite/suite/shared/conditions"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// nodeState is what the controller remembers of a node between passes: which server
// incarnation got the current config and users (a restarted server must get them again
// although status already records their hash), and the back-off of failing applies. Lost
// on an operator restart, which costs one more, harmless, apply per node; dropped
// through the kit's OnGone when the node is found gone or its name holding a new node.
type nodeState struct {
	config, acl applyState
	// shutdown is the incarnation whose shutdown-on-sigterm was settled (shutdown.go).
	shutdown string
}

// applyState is how far one rendering (live config or users) got on the node's server.
type applyState struct {
	incarnation string // pod UID and server restarts that got hash
	hash        string
	failures    int
	next        time.Time // no retry before
	lastErr     string
}

// stateOf is the remembered state of n (a node re-created under the same name starts
// afresh: the kit's OnGone dropped the old one's before the pass).
func (r *Reconciler) stateOf(n *valkeyv1.ValkeyNode) *nodeState {
	r.mu.Lock()
	defer r.mu.Unlock()
	key := types.NamespacedName{Namespace: n.Namespace, Name: n.Name}
	s, ok := r.state[key]
	if !ok {
		s = &nodeState{}
		r.state[key] = s
	}
	return s
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
func (r *Reconciler) talk(ctx context.Context, p *pass, pod *corev1.Pod, cfg desired, ext external) {
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
		settleShutdown(ctx, conn, st, inc)
		r.announce(ctx, p, conn, ext)
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
