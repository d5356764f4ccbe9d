package node

import (
	"errors"
	"reflect"
	"testing"
	"time"

	valkeyv1 "github.com/opsuite/suite/api/valkey/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func bound(capacity string, mutate func(*corev1.PersistentVolumeClaim)) *corev1.PersistentVolumeClaim {
	p := &corev1.PersistentVolumeClaim{Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound}}
	if capacity != "" {
		p.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(capacity)}
	}
	if mutate != nil {
		mutate(p)
	}
	return p
}

func pvcCond(t corev1.PersistentVolumeClaimConditionType, msg string) func(*corev1.PersistentVolumeClaim) {
	return func(p *corev1.PersistentVolumeClaim) {
		p.Status.Conditions = append(p.Status.Conditions, corev1.PersistentVolumeClaimCondition{Type: t, Status: corev1.ConditionTrue, Message: msg})
	}
}

func allocated(s corev1.ClaimResourceStatus) func(*corev1.PersistentVolumeClaim) {
	return func(p *corev1.PersistentVolumeClaim) {
		p.Status.AllocatedResourceStatuses = map[corev1.ResourceName]corev1.ClaimResourceStatus{corev1.ResourceStorage: s}
	}
}

func TestPVCSize(t *testing.T) {
	want := resource.MustParse("2Gi")
	for _, tc := range []struct {
		name    string
		pvc     *corev1.PersistentVolumeClaim
		refused error
		status  metav1.ConditionStatus
		reason  string
		msg     string
	}{
		{"missing", nil, nil, metav1.ConditionFalse, valkeyv1.NodeReasonPersistentVolumeClaimResizePending, "waiting for PVC d to be bound"},
		{"pending", &corev1.PersistentVolumeClaim{}, nil, metav1.ConditionFalse, valkeyv1.NodeReasonPersistentVolumeClaimResizePending, "waiting for PVC d to be bound"},
		{"satisfied", bound("2Gi", nil), nil, metav1.ConditionTrue, valkeyv1.NodeReasonPersistentVolumeClaimSizeSatisfied, "PVC d has 2Gi, at least the requested 2Gi"},
		{"larger", bound("3Gi", nil), nil, metav1.ConditionTrue, valkeyv1.NodeReasonPersistentVolumeClaimSizeSatisfied, "PVC d has 3Gi, at least the requested 2Gi"},
		{"not started", bound("1Gi", nil), nil, metav1.ConditionFalse, valkeyv1.NodeReasonPersistentVolumeClaimResizePending, "PVC d waits for its resize from 1Gi to 2Gi to start"},
		{"refused", bound("1Gi", nil), errors.New("only dynamically provisioned pvc can be resized"), metav1.ConditionFalse, valkeyv1.NodeReasonPersistentVolumeClaimResizeInfeasible, "PVC d cannot grow from 1Gi to 2Gi: only dynamically provisioned pvc can be resized"},
		{"resizing", bound("1Gi", pvcCond(corev1.PersistentVolumeClaimResizing, "")), nil, metav1.ConditionFalse, valkeyv1.NodeReasonPersistentVolumeClaimResizeInProgress, "PVC d is growing from 1Gi to 2Gi: the storage provider is expanding the volume"},
		{"fs pending", bound("1Gi", pvcCond(corev1.PersistentVolumeClaimFileSystemResizePending, "")), nil, metav1.ConditionFalse, valkeyv1.NodeReasonPersistentVolumeClaimResizePending, "PVC d waits for the node to grow the file system from 1Gi to 2Gi"},
		{"controller error", bound("1Gi", pvcCond(corev1.PersistentVolumeClaimControllerResizeError, "quota exceeded")), nil, metav1.ConditionFalse, valkeyv1.NodeReasonPersistentVolumeClaimResizeInfeasible, "PVC d cannot grow from 1Gi to 2Gi: quota exceeded"},
		{"node error", bound("1Gi", pvcCond(corev1.PersistentVolumeClaimNodeResizeError, "")), nil, metav1.ConditionFalse, valkeyv1.NodeReasonPersistentVolumeClaimResizeInfeasible, "PVC d cannot grow from 1Gi to 2Gi: NodeResizeError"},
		{"controller in progress", bound("1Gi", allocated(corev1.PersistentVolumeClaimControllerResizeInProgress)), nil, metav1.ConditionFalse, valkeyv1.NodeReasonPersistentVolumeClaimResizeInProgress, "PVC d is growing from 1Gi to 2Gi: the storage provider is expanding the volume"},
		{"controller infeasible", bound("1Gi", allocated(corev1.PersistentVolumeClaimControllerResizeInfeasible)), nil, metav1.ConditionFalse, valkeyv1.NodeReasonPersistentVolumeClaimResizeInfeasible, "PVC d cannot grow from 1Gi to 2Gi: the storage provider refused the new size"},
		{"node pending", bound("1Gi", allocated(corev1.PersistentVolumeClaimNodeResizePending)), nil, metav1.ConditionFalse, valkeyv1.NodeReasonPersistentVolumeClaimResizePending, "PVC d waits for the node to grow the file system from 1Gi to 2Gi"},
		{"node in progress", bound("1Gi", allocated(corev1.PersistentVolumeClaimNodeResizeInProgress)), nil, metav1.ConditionFalse, valkeyv1.NodeReasonPersistentVolumeClaimResizeInProgress, "PVC d is growing from 1Gi to 2Gi: the node is growing the file system"},
		{"node infeasible", bound("1Gi", allocated(corev1.PersistentVolumeClaimNodeResizeInfeasible)), nil, metav1.ConditionFalse, valkeyv1.NodeReasonPersistentVolumeClaimResizeInfeasible, "PVC d cannot grow from 1Gi to 2Gi: the node cannot grow the file system"},
		{"no capacity", bound("", nil), nil, metav1.ConditionFalse, valkeyv1.NodeReasonPersistentVolumeClaimResizePending, "PVC d waits for its resize from no capacity yet to 2Gi to start"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := pvcSize("d", want, tc.pvc, tc.refused)
			if c.Type != valkeyv1.NodeConditionPersistentVolumeClaimSizeReady || c.Status != tc.status || c.Reason != tc.reason || c.Message != tc.msg {
				t.Errorf("got %s=%s/%s %q\nwant %s/%s %q", c.Type, c.Status, c.Reason, c.Message, tc.status, tc.reason, tc.msg)
			}
		})
	}
}

func TestPVCReady(t *testing.T) {
	for _, tc := range []struct {
		pvc    *corev1.PersistentVolumeClaim
		ok     bool
		reason string
		msg    string
	}{
		{nil, false, valkeyv1.NodeReasonPersistentVolumeClaimPending, "PVC d does not exist yet"},
		{&corev1.PersistentVolumeClaim{}, false, valkeyv1.NodeReasonPersistentVolumeClaimPending, "PVC d is Pending"},
		{&corev1.PersistentVolumeClaim{Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimLost}}, false, valkeyv1.NodeReasonPersistentVolumeClaimPending, "PVC d is Lost"},
		{bound("1Gi", nil), true, valkeyv1.NodeReasonPersistentVolumeClaimBound, "PVC d is bound"},
	} {
		c := pvcReady("d", tc.pvc)
		if (c.Status == metav1.ConditionTrue) != tc.ok || c.Reason != tc.reason || c.Message != tc.msg {
			t.Errorf("%+v: got %s/%s %q", tc.pvc, c.Status, c.Reason, c.Message)
		}
	}
}

func TestReadiness(t *testing.T) {
	running := func(ready corev1.ConditionStatus, rev string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "n-0", Labels: map[string]string{appsv1.ControllerRevisionHashLabelKey: rev}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning,
				Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: ready}}},
		}
	}
	sts := func(gen, observed int64, current, update string) *appsv1.StatefulSet {
		return &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "n", Generation: gen},
			Status: appsv1.StatefulSetStatus{ObservedGeneration: observed, CurrentRevision: current, UpdateRevision: update}}
	}
	pending := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "n-0"}}
	unschedulable := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "n-0"}, Status: corev1.PodStatus{Phase: corev1.PodPending,
		Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
			Message: "0/4 nodes are available: 4 node(s) didn't match pod topology spread constraints."}}}}
	pulling := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "n-0"}, Status: corev1.PodStatus{Phase: corev1.PodPending,
		ContainerStatuses: []corev1.ContainerStatus{{Name: "valkey", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff"}}}}}}
	crashing := running(corev1.ConditionFalse, "r1")
	crashing.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "valkey", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}}}
	gone := running(corev1.ConditionTrue, "r1")
	gone.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	unbound := pvcReady("n-data", nil)
	boundCond := pvcReady("n-data", bound("1Gi", nil))

	for _, tc := range []struct {
		name   string
		pvc    *metav1.Condition
		pod    *corev1.Pod
		sts    *appsv1.StatefulSet
		want   string
		reason string
	}{
		{"no pod", nil, nil, sts(1, 1, "r1", "r1"), "pod n-0 does not exist yet", valkeyv1.NodeReasonPodNotReady},
		{"pvc first", &unbound, nil, sts(1, 1, "r1", "r1"), "PVC n-data does not exist yet", valkeyv1.NodeReasonPersistentVolumeClaimPending},
		{"pending pod", &boundCond, pending, sts(1, 1, "r1", "r1"), "pod n-0 is Pending", valkeyv1.NodeReasonPodNotReady},
		{"unschedulable", nil, unschedulable, sts(1, 1, "r1", "r1"), "pod n-0 is unschedulable: 0/4 nodes are available: 4 node(s) didn't match pod topology spread constraints.", valkeyv1.NodeReasonPodNotReady},
		{"image pull", nil, pulling, sts(1, 1, "r1", "r1"), "pod n-0 is Pending (valkey: ImagePullBackOff)", valkeyv1.NodeReasonPodNotReady},
		{"crash loop", nil, crashing, sts(1, 1, "r1", "r1"), "pod n-0 is running but not ready (valkey: CrashLoopBackOff)", valkeyv1.NodeReasonPodNotReady},
		{"terminating", nil, gone, sts(1, 1, "r1", "r1"), "pod n-0 is terminating", valkeyv1.NodeReasonPodNotReady},
		{"not ready", nil, running(corev1.ConditionFalse, "r1"), sts(1, 1, "r1", "r1"), "pod n-0 is running but not ready", valkeyv1.NodeReasonPodNotReady},
		{"unobserved", nil, running(corev1.ConditionTrue, "r1"), sts(2, 1, "r1", "r1"), "StatefulSet n has not observed generation 2 yet", valkeyv1.NodeReasonPodNotReady},
		{"rolling", nil, running(corev1.ConditionTrue, "r1"), sts(2, 2, "r1", "r2"), "StatefulSet n is rolling out revision r2", valkeyv1.NodeReasonPodNotReady},
		{"old pod", nil, running(corev1.ConditionTrue, "r1"), sts(2, 2, "r2", "r2"), "pod n-0 is of revision r1, not r2", valkeyv1.NodeReasonPodNotReady},
		{"ready", &boundCond, running(corev1.ConditionTrue, "r2"), sts(2, 2, "r2", "r2"), "pod is running and ready, and the workload is rolled out", valkeyv1.NodeReasonPodRunning},
	} {
		t.Run(tc.name, func(t *testing.T) {
			podOK, podWhy := podReady(tc.pod, "n-0")
			rolled, rollWhy := statefulSetRolledOut(tc.sts, tc.pod)
			c := readyCondition(tc.pvc, podOK, podWhy, rolled, rollWhy)
			if c.Message != tc.want || c.Reason != tc.reason || (c.Status == metav1.ConditionTrue) != (tc.reason == valkeyv1.NodeReasonPodRunning) {
				t.Errorf("got %s/%s %q, want %s %q", c.Status, c.Reason, c.Message, tc.reason, tc.want)
			}
		})
	}
}

func TestDeploymentRolledOut(t *testing.T) {
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "n", Generation: 3}}
	if ok, why := deploymentRolledOut(d); ok || why != "Deployment n has not observed generation 3 yet" {
		t.Errorf("unobserved: %v %q", ok, why)
	}
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: 3, Replicas: 2, UpdatedReplicas: 1}
	if ok, why := deploymentRolledOut(d); ok || why != "Deployment n is rolling out (1 of 2 pods updated)" {
		t.Errorf("old pod left: %v %q", ok, why)
	}
	d.Status.Replicas = 1
	if ok, _ := deploymentRolledOut(d); !ok {
		t.Error("one updated pod is rolled out")
	}
}

func TestBackoff(t *testing.T) {
	var got []time.Duration
	for f := 1; f <= 6; f++ {
		got = append(got, backoff(f, time.Second, 10*time.Second))
	}
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 10 * time.Second, 10 * time.Second}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("backoff = %v, want %v", got, want)
	}
}

func TestDue(t *testing.T) {
	now := time.Now()
	want := desired{hash: "h2"}
	var s applyState
	if ok, _ := due(&s, "pod/0", want, now); !ok {
		t.Error("nothing remembered (an operator that restarted): due once more")
	}
	succeeded(&s, "pod/0", "h2")
	if ok, _ := due(&s, "pod/0", want, now); ok {
		t.Error("applied to this incarnation: not due")
	}
	if ok, _ := due(&s, "pod/1", want, now); !ok {
		t.Error("a restarted server lost the config: due")
	}
	if ok, _ := due(&s, "pod/0", desired{hash: "h3"}, now); !ok {
		t.Error("changed content: due")
	}
	r := &Reconciler{cfg: Config{RetryBase: time.Second, RetryMax: time.Minute}}
	d, first := r.failed(&s, "pod/0", "h3", errors.New("boom"), now)
	if d != time.Second || !first {
		t.Errorf("first failure: %s %v", d, first)
	}
	if ok, wait := due(&s, "pod/0", desired{hash: "h3"}, now.Add(500*time.Millisecond)); ok || wait != 500*time.Millisecond {
		t.Errorf("inside back-off: %v %s", ok, wait)
	}
	if ok, _ := due(&s, "pod/0", desired{hash: "h3"}, now.Add(time.Second)); !ok {
		t.Error("back-off over: due")
	}
	if d, again := r.failed(&s, "pod/0", "h3", errors.New("boom"), now); d != 2*time.Second || again {
		t.Errorf("second failure: %s, new error %v", d, again)
	}
	if ok, _ := due(&s, "pod/0", desired{hash: "h4"}, now); !ok {
		t.Error("changed content during back-off: due at once")
	}
}
