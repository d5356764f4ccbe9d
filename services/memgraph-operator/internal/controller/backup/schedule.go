package backup

import (
	"context"
	"fmt"
	"time"

	memgraphv1 "github.com/opsuite/suite/api/memgraph/v1alpha1"
	"github.com/opsuite/suite/shared/backupschedule"
	"github.com/opsuite/suite/shared/conditions"
	"github.com/opsuite/suite/shared/reconciler"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// ScheduleName is the MemgraphScheduledBackup controller's name: events come from it.
const ScheduleName = "memgraphscheduledbackup-controller"

// +kubebuilder:rbac:groups=memgraph.com,resources=memgraphscheduledbackups,verbs=list;watch
// +kubebuilder:rbac:groups=memgraph.com,resources=memgraphscheduledbackups/status,verbs=patch
// +kubebuilder:rbac:groups=memgraph.com,resources=memgraphbackups,verbs=create

// ScheduleConfig is what the schedule controller needs besides the manager.
type ScheduleConfig struct {
	// Operator names the metrics.
	Operator string
	// Now is the clock (default time.Now); tests may drive it.
	Now func() time.Time
}

type scheduler struct {
	cfg    ScheduleConfig
	client client.Client
	scheme *runtime.Scheme
}

// SetupSchedule registers the MemgraphScheduledBackup controller with mgr: it creates a
// MemgraphBackup at each time of a schedule, named after that time, and sleeps (RequeueAfter)
// until the next one.
func SetupSchedule(mgr ctrl.Manager, cfg ScheduleConfig) error {
	if cfg.Operator == "" {
		cfg.Operator = "memgraph-operator"
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	s := &scheduler{cfg: cfg, client: mgr.GetClient(), scheme: mgr.GetScheme()}
	r, err := reconciler.New(reconciler.Config[*memgraphv1.MemgraphScheduledBackup]{
		Name:       cfg.Operator,
		Client:     mgr.GetClient(),
		Recorder:   mgr.GetEventRecorder(ScheduleName),
		New:        func() *memgraphv1.MemgraphScheduledBackup { return &memgraphv1.MemgraphScheduledBackup{} },
		Run:        s.run,
		Conditions: func(sb *memgraphv1.MemgraphScheduledBackup) []metav1.Condition { return sb.Status.Conditions },
		OwnEvents:  true,
		ObserveGeneration: func(sb *memgraphv1.MemgraphScheduledBackup, generation int64) {
			sb.Status.ObservedGeneration = generation
		},
	})
	if err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(ScheduleName).
		For(&memgraphv1.MemgraphScheduledBackup{}).
		Complete(r)
}

func (s *scheduler) run(ctx context.Context, sb *memgraphv1.MemgraphScheduledBackup) (reconciler.Result, error) {
	evs := reconciler.EventsOf(ctx)
	sched, err := backupschedule.Parse(sb.Spec.Schedule)
	if err != nil {
		sb.Status.NextScheduleTime = nil
		setScheduled(sb, metav1.ConditionFalse, memgraphv1.ScheduledBackupReasonInvalidSchedule,
			"spec.schedule names no time the operator can compute (a field out of range, a day the month lacks): fix it; the Warning event says why")
		evs.OnTransition(reconciler.Transition{Type: memgraphv1.ScheduledBackupConditionScheduled, Status: metav1.ConditionFalse, Reason: memgraphv1.ScheduledBackupReasonInvalidSchedule},
			reconciler.Event{Type: corev1.EventTypeWarning, Reason: memgraphv1.ScheduledBackupReasonInvalidSchedule, Note: err.Error()})
		return reconciler.Terminal(err), nil
	}
	if sb.Spec.Suspend {
		sb.Status.NextScheduleTime = nil
		setScheduled(sb, metav1.ConditionFalse, memgraphv1.ScheduledBackupReasonSuspended,
			"spec.suspend is true: no backup is created until it is false")
		return reconciler.Done(), nil
	}
	now := s.cfg.Now()
	var last time.Time
	if sb.Status.LastScheduleTime != nil {
		last = sb.Status.LastScheduleTime.Time
	}
	plan := backupschedule.Plan(sched, sb.CreationTimestamp.Time, last, sb.Spec.Immediate, now)
	sb.Status.NextScheduleTime = timeOrNil(plan.Next)

	var vc memgraphv1.MemgraphCluster
	if err := s.client.Get(ctx, client.ObjectKey{Namespace: sb.Namespace, Name: sb.Spec.Cluster.Name}, &vc); err != nil {
		if !apierrors.IsNotFound(err) {
			return reconciler.Result{}, err
		}
		// No backup piles up for a cluster that is not there; the latest time missed
		// runs once it is.
		setScheduled(sb, metav1.ConditionFalse, memgraphv1.ScheduledBackupReasonClusterNotFound,
			"the MemgraphCluster named in spec.cluster does not exist; backups start at the first time of the schedule after it does")
		return waitUntil(plan.Next, now), nil
	}

	if !plan.Due.IsZero() {
		b, err := s.desiredBackup(sb, &vc, plan.Due)
		if err != nil {
			return reconciler.Result{}, err
		}
		switch err := s.client.Create(ctx, b); {
		case err == nil:
			log.FromContext(ctx).Info("MemgraphScheduledBackup created a backup", "backup", b.Name, "scheduledTime", plan.Due)
			evs.Record(reconciler.Event{Type: corev1.EventTypeNormal, Reason: memgraphv1.ScheduledBackupReasonBackupCreated, Related: b,
				Note: fmt.Sprintf("Created MemgraphBackup %s for %s.", b.Name, plan.Due.Format(time.RFC3339))})
		case apierrors.IsAlreadyExists(err):
			// An earlier pass created it and its status write did not land (or the
			// operator restarted in between): the name is the time's, so this time is done.
		default:
			return reconciler.Result{}, err
		}
		due := metav1.NewTime(plan.Due)
		sb.Status.LastScheduleTime, sb.Status.LastBackupName = &due, b.Name
	}
	setScheduled(sb, metav1.ConditionTrue, memgraphv1.ScheduledBackupReasonActive,
		"backups are created at the times of spec.schedule; status.nextScheduleTime is the next one")
	return waitUntil(plan.Next, now), nil
}

// desiredBackup is the MemgraphBackup for scheduled time due.
func (s *scheduler) desiredBackup(sb *memgraphv1.MemgraphScheduledBackup, vc *memgraphv1.MemgraphCluster, due time.Time) (*memgraphv1.MemgraphBackup, error) {
	b := &memgraphv1.MemgraphBackup{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:   sb.Namespace,
			Name:        backupschedule.Name(sb.Name, due),
			Labels:      map[string]string{memgraphv1.LabelScheduledBackup: sb.Name},
			Annotations: map[string]string{memgraphv1.AnnotationScheduledTime: due.UTC().Format(time.RFC3339)},
		},
		Spec: memgraphv1.MemgraphBackupSpec{Cluster: sb.Spec.Cluster},
	}
	var owner client.Object
	switch sb.Spec.BackupOwnerReference {
	case memgraphv1.BackupOwnerSelf:
		owner = sb
	case memgraphv1.BackupOwnerCluster:
		owner = vc
	default:
		return b, nil
	}
	if err := controllerutil.SetOwnerReference(owner, b, s.scheme); err != nil {
		return nil, err
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

func setScheduled(sb *memgraphv1.MemgraphScheduledBackup, status metav1.ConditionStatus, reason, msg string) {
	conditions.Set(&sb.Status.Conditions, metav1.Condition{Type: memgraphv1.ScheduledBackupConditionScheduled, Status: status, Reason: reason, Message: msg}, sb.Generation)
}
