package controller

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	veltrixv1 "github.com/opsuite/suite/api/veltrix/v1alpha1"
	"github.com/opsuite/suite/services/veltrix-operator/internal/executor"
	"github.com/opsuite/suite/services/veltrix-operator/internal/planner"
	"github.com/opsuite/suite/services/veltrix-operator/internal/resources"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// members sets the pods' readiness gates, runs one membership step, writes the StatefulSet
// with the replicas it decided and reads the topology for the status.
func (p *pass) members(ctx context.Context) error {
	c := p.c
	var pods corev1.PodList
	if err := p.ctl.client.List(ctx, &pods, client.InNamespace(c.Namespace), client.MatchingLabels(resources.SelectorLabels(c))); err != nil {
		return fmt.Errorf("listing pods: %w", err)
	}
	p.pods = pods.Items
	sort.Slice(p.pods, func(i, j int) bool { return ordinal(c, &p.pods[i]) < ordinal(c, &p.pods[j]) })
	if err := p.searchReadyGates(ctx); err != nil {
		return err
	}
	var admins []planner.Endpoint
	for i := range p.pods {
		pod := &p.pods[i]
		if serving(pod) {
			p.ready++
			if a := p.ctl.cfg.AdminAddr(c, pod); a != "" {
				admins = append(admins, planner.Endpoint{Pod: pod.Name, Addr: a})
			}
		}
	}
	var current int32
	if p.sts != nil && p.sts.Spec.Replicas != nil {
		current = *p.sts.Spec.Replicas
	}
	in := planner.Input{
		SpecSize: c.Spec.Size, ReplicationFactor: c.Spec.ReplicationFactor,
		StatefulSetReplicas: current, ReadyPods: p.ready,
		PodName: func(o int32) string { return resources.PodName(c, o) },
		// A member removed by hand (or whose removal raced a raise of spec.size) while its
		// pod stays is added back at the address its pod advertises (--advertise-addr).
		MemberAddr: func(o int32) string { return p.ctl.cfg.MemberAddr(c, resources.PodName(c, o)) },
		Admins:     admins,
		// The removal record lives in the status: RemovalStuck counts from the DELETE,
		// not from this process's start.
		Removal: removalFromStatus(c.Status.MemberRemoval), Now: p.now, StuckAfter: p.ctl.cfg.RemovalStuckAfter,
	}
	var d planner.Decision
	if current == 0 {
		// Nothing runs yet: no member to ask; the StatefulSet starts at full size.
		d = planner.Plan(in)
	} else {
		d, p.stepErr = executor.Step(ctx, p.admin, in)
		if d.Remove != "" && d.Leaving == d.Remove {
			// The server accepted the DELETE (executor.Step's RemovalAccepted).
			p.ctl.metrics.Add(c.Namespace, c.Name, counterMemberRemovals, 1)
		}
	}
	p.decision = &d
	c.Status.MemberRemoval = removalToStatus(d.Removal)
	if d.Reason == planner.ReasonRemovalRefused && d.Detail != "" {
		log.FromContext(ctx).Info("The server refused to remove a member", "member", d.Remove, "detail", d.Detail)
	}
	if d.Replicas != current && current != 0 {
		now := metav1.NewTime(p.now)
		c.Status.LastScaleTime = &now
	}
	if err := p.writeStatefulSet(ctx, d.Replicas); err != nil {
		return err
	}
	p.readTopology(ctx, admins, d.Unreachable)
	return nil
}

func removalFromStatus(r *veltrixv1.MemberRemoval) planner.Removal {
	if r == nil {
		return planner.Removal{}
	}
	return planner.Removal{Member: r.Member, Since: r.StartedAt.Time}
}

// removalToStatus is the status record of r; its time is kept to the second the API
// stores, so the record read back next pass is the one written.
func removalToStatus(r planner.Removal) *veltrixv1.MemberRemoval {
	if r.IsZero() {
		return nil
	}
	return &veltrixv1.MemberRemoval{Member: r.Member, StartedAt: metav1.NewTime(r.Since.Truncate(time.Second))}
}

// ordinal is a member pod's ordinal (its name's suffix), -1 for a name that has none.
func ordinal(c *veltrixv1.VeltrixCluster, pod *corev1.Pod) int {
	n, err := strconv.Atoi(strings.TrimPrefix(pod.Name, resources.StatefulSetName(c)+"-"))
	if err != nil {
		return -1
	}
	return n
}

func podCondition(pod *corev1.Pod, t corev1.PodConditionType) *corev1.PodCondition {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == t {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}

func isTrue(pod *corev1.Pod, t corev1.PodConditionType) bool {
	cond := podCondition(pod, t)
	return cond != nil && cond.Status == corev1.ConditionTrue
}

// serving: the pod is Ready and search-ready. The gate is checked on its own too, since a
// kubelet stand-in may not fold readiness gates into Ready.
func serving(pod *corev1.Pod) bool {
	return pod.DeletionTimestamp.IsZero() && isTrue(pod, corev1.PodReady) && isTrue(pod, veltrixv1.SearchReadyGate)
}

// searchReadyGates sets each running pod's veltrix.io/search-ready condition from INFO's
// search_ready: only then does the pod count as Ready, so a rolling update waits for the
// search index and not just for /readyz. An unanswered INFO leaves a True gate as it is
// and never sets it True: the operator's failure to reach a member (a partition between
// them) does not take a serving member out of service. Every pod is asked at once, each
// within the client's timeout.
func (p *pass) searchReadyGates(ctx context.Context) error {
	type probe struct {
		ok  bool
		err error
	}
	probes := make([]probe, len(p.pods))
	var wg sync.WaitGroup
	for i := range p.pods {
		pod := &p.pods[i]
		addr := p.ctl.cfg.TextAddr(p.c, pod)
		if !pod.DeletionTimestamp.IsZero() || pod.Status.Phase != corev1.PodRunning || addr == "" || !isTrue(pod, corev1.ContainersReady) {
			continue
		}
		wg.Go(func() {
			ok, err := executor.SearchReady(ctx, p.admin, addr)
			probes[i] = probe{ok: ok, err: err}
		})
	}
	wg.Wait()
	for i := range p.pods {
		pod := &p.pods[i]
		if !pod.DeletionTimestamp.IsZero() || pod.Status.Phase != corev1.PodRunning {
			continue
		}
		addr := p.ctl.cfg.TextAddr(p.c, pod)
		want := corev1.ConditionFalse
		reason, message := "IndexRebuilding", "INFO reports search_ready=0"
		switch pr := probes[i]; {
		case addr == "" || !isTrue(pod, corev1.ContainersReady):
			reason, message = "NotRunning", "the server has not opened its data yet"
		case pr.err != nil && isTrue(pod, veltrixv1.SearchReadyGate):
			continue
		case pr.err != nil:
			reason, message = "InfoUnanswered", "INFO did not answer"
		case pr.ok:
			want, reason, message = corev1.ConditionTrue, "SearchReady", "INFO reports search_ready=1"
		}
		if cur := podCondition(pod, veltrixv1.SearchReadyGate); cur != nil && cur.Status == want && cur.Reason == reason {
			continue
		}
		before := pod.DeepCopy()
		cond := corev1.PodCondition{Type: veltrixv1.SearchReadyGate, Status: want, Reason: reason, Message: message, LastTransitionTime: metav1.NewTime(p.now)}
		if cur := podCondition(pod, veltrixv1.SearchReadyGate); cur != nil {
			if cur.Status == want {
				cond.LastTransitionTime = cur.LastTransitionTime
			}
			*cur = cond
		} else {
			pod.Status.Conditions = append(pod.Status.Conditions, cond)
		}
		// A strategic merge keyed by condition type leaves the kubelet's conditions alone.
		err := p.ctl.client.Status().Patch(ctx, pod, client.StrategicMergeFrom(before))
		switch {
		case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
			// The pod went or changed meanwhile: its watch event brings the next pass.
			*pod = *before
		case err != nil:
			return fmt.Errorf("setting %s on pod %s: %w", veltrixv1.SearchReadyGate, pod.Name, err)
		}
	}
	return nil
}

// readTopology reads /admin/cluster from the first serving member that answers, for the
// status, skipping those that did not answer the member list this pass.
func (p *pass) readTopology(ctx context.Context, admins []planner.Endpoint, unreachable []string) {
	for _, a := range admins {
		if slices.Contains(unreachable, a.Pod) {
			continue
		}
		t, err := p.admin.Cluster(ctx, a.Addr)
		if err == nil {
			p.topology = t
			return
		}
	}
}
