package backupschedule

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/opsuite/suite/shared/conditions"
	"github.com/opsuite/suite/shared/reconciler"
)

// ScheduleConfig is what a schedule controller needs besides the manager and the product.
type ScheduleConfig struct {
	// Name is the controller's name: events come from it.
	Name string
	// Operator names the metrics.
	Operator string
	// Now is the clock (default time.Now); tests may drive it.
	Now func() time.Time
}

type scheduler[S, C, B client.Object] struct {
	cfg     ScheduleConfig
	product Product[S, C, B]
	client  client.Client
	scheme  *runtime.Scheme
}

// SetupSchedule registers a ScheduledBackup controller with mgr: it creates a backup at
// each time of a schedule, named after that time, and sleeps (RequeueAfter) until the next
// one. The caller holds the RBAC markers: list and watch of the schedules, patch of their
// status, create of the backups.
func SetupSchedule[S, C, B client.Object](mgr ctrl.Manager, p Product[S, C, B], cfg ScheduleConfig) error {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	s := &scheduler[S, C, B]{cfg: cfg, product: p, client: mgr.GetClient(), scheme: mgr.GetScheme()}
	r, err := reconciler.New(reconciler.Config[S]{
		Name:       cfg.Operator,
		Client:     mgr.GetClient(),
		Recorder:   mgr.GetEventRecorder(cfg.Name),
		New:        p.NewSchedule,
		Run:        s.run,
		Conditions: func(sb S) []metav1.Condition { return p.ScheduleStatus(sb).Conditions },
		OwnEvents:  true,
		ObserveGeneration: func(sb S, generation int64) {
			p.ScheduleStatus(sb).ObservedGeneration = generation
		},
	})
	if err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(cfg.Name).
		For(p.NewSchedule()).
		Complete(r)
}

func (s *scheduler[S, C, B]) run(ctx context.Context, sb S) (reconciler.Result, error) {
	evs := reconciler.EventsOf(ctx)
	names, spec, st := s.product.Names(), s.product.Schedule(sb), s.product.ScheduleStatus(sb)
	setScheduled := func(status metav1.ConditionStatus, reason, msg string) {
		conditions.Set(&st.Conditions, metav1.Condition{Type: ConditionScheduled, Status: status, Reason: reason, Message: msg}, sb.GetGeneration())
	}
	sched, err := Parse(spec.Schedule)
	if err != nil {
		st.NextScheduleTime = nil
		setScheduled(metav1.ConditionFalse, ReasonInvalidSchedule,
			"spec.schedule names no time the operator can compute (a field out of range, a day the month lacks): fix it; the Warning event says why")
		evs.OnTransition(reconciler.Transition{Type: ConditionScheduled, Status: metav1.ConditionFalse, Reason: ReasonInvalidSchedule},
			reconciler.Event{Type: corev1.EventTypeWarning, Reason: ReasonInvalidSchedule, Note: err.Error()})
		return reconciler.Terminal(err), nil
	}
	if spec.Suspend {
		st.NextScheduleTime = nil
		setScheduled(metav1.ConditionFalse, ReasonSuspended, "spec.suspend is true: no backup is created until it is false")
		return reconciler.Done(), nil
	}
	now := s.cfg.Now()
	var last time.Time
	if st.LastScheduleTime != nil {
		last = st.LastScheduleTime.Time
	}
	plan := Plan(sched, sb.GetCreationTimestamp().Time, last, spec.Immediate, now)
	st.NextScheduleTime = timeOrNil(plan.Next)

	cluster := s.product.NewCluster()
	if err := s.client.Get(ctx, client.ObjectKey{Namespace: sb.GetNamespace(), Name: spec.Cluster}, cluster); err != nil {
		if !apierrors.IsNotFound(err) {
			return reconciler.Result{}, err
		}
		// No backup piles up for a cluster that is not there; the latest time missed
		// runs once it is.
		setScheduled(metav1.ConditionFalse, ReasonClusterNotFound, fmt.Sprintf(
			"the %s named in spec.cluster does not exist; backups start at the first time of the schedule after it does", names.Cluster))
		return waitUntil(plan.Next, now), nil
	}

	if !plan.Due.IsZero() {
		b, err := s.desiredBackup(sb, spec, cluster, plan.Due)
		if err != nil {
			return reconciler.Result{}, err
		}
		switch err := s.client.Create(ctx, b); {
		case err == nil:
			log.FromContext(ctx).Info(names.Schedule+" created a backup", "backup", b.GetName(), "scheduledTime", plan.Due)
			evs.Record(reconciler.Event{Type: corev1.EventTypeNormal, Reason: ReasonBackupCreated, Related: b,
				Note: fmt.Sprintf("Created %s %s for %s.", names.Backup, b.GetName(), plan.Due.Format(time.RFC3339))})
		case apierrors.IsAlreadyExists(err):
			// An earlier pass created it and its status write did not land (or the
			// operator restarted in between): the name is the time's, so this time is done.
		default:
			return reconciler.Result{}, err
		}
		due := metav1.NewTime(plan.Due)
		st.LastScheduleTime, st.LastBackupName = &due, b.GetName()
	}
	setScheduled(metav1.ConditionTrue, ReasonActive, "backups are created at the times of spec.schedule; status.nextScheduleTime is the next one")
	return waitUntil(plan.Next, now), nil
}

// desiredBackup is the backup for scheduled time due.
func (s *scheduler[S, C, B]) desiredBackup(sb S, spec ScheduleSpec, cluster C, due time.Time) (B, error) {
	names := s.product.Names()
	b := s.product.ScheduledBackup(metav1.ObjectMeta{
		Namespace:   sb.GetNamespace(),
		Name:        Name(sb.GetName(), due),
		Labels:      map[string]string{names.LabelScheduledBackup: sb.GetName()},
		Annotations: map[string]string{names.AnnotationScheduledTime: due.UTC().Format(time.RFC3339)},
	}, spec.Cluster)
	var owner client.Object
	switch spec.Owner {
	case OwnerSelf:
		owner = sb
	case OwnerCluster:
		owner = cluster
	default:
		return b, nil
	}
	if err := controllerutil.SetOwnerReference(owner, b, s.scheme); err != nil {
		var none B
		return none, err
	}
	return b, nil
}

// waitUntil waits until next, or is Done when the schedule has no more times. A next time
// already past (a catch-up Plan stopped at MaxCatchUp) is looked at again at once.
func waitUntil(next, now time.Time) reconciler.Result {
	if next.IsZero() {
		return reconciler.Done()
	}
	return reconciler.Wait(max(next.Sub(now), 50*time.Millisecond))
}

func timeOrNil(t time.Time) *metav1.Time {
	if t.IsZero() {
		return nil
	}
	m := metav1.NewTime(t)
	return &m
}
