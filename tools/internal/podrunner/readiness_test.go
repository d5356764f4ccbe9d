package podrunner

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/opsuite/suite/shared/testenv"
)

func TestPodReadyCondition(t *testing.T) {
	gates := []corev1.PodReadinessGate{{ConditionType: "example.test/a"}, {ConditionType: "example.test/b"}}
	ready := containersReadyCondition(corev1.PodRunning, nil)
	cond := func(typ string, s corev1.ConditionStatus) corev1.PodCondition {
		return corev1.PodCondition{Type: corev1.PodConditionType(typ), Status: s}
	}
	for _, tc := range []struct {
		name       string
		gates      []corev1.PodReadinessGate
		conditions []corev1.PodCondition
		containers corev1.PodCondition
		want       corev1.PodCondition
	}{{
		name: "no gates, containers ready", containers: ready,
		want: corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue},
	}, {
		name: "containers not ready: their reason, gates not looked at", gates: gates,
		conditions: []corev1.PodCondition{cond("example.test/a", corev1.ConditionTrue), cond("example.test/b", corev1.ConditionTrue)},
		containers: containersReadyCondition(corev1.PodRunning, []string{"app", "side"}),
		want: corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: "ContainersNotReady",
			Message: "containers with unready status: [app side]"},
	}, {
		name: "succeeded pod", containers: containersReadyCondition(corev1.PodSucceeded, nil),
		want: corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: "PodCompleted"},
	}, {
		name: "failed pod", containers: containersReadyCondition(corev1.PodFailed, []string{"app"}),
		want: corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: "PodFailed"},
	}, {
		name: "a gate's condition missing, the other false", gates: gates, containers: ready,
		conditions: []corev1.PodCondition{cond("Ready", corev1.ConditionTrue), cond("example.test/b", corev1.ConditionFalse)},
		want: corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: "ReadinessGatesNotReady",
			Message: `corresponding condition of pod readiness gate "example.test/a" does not exist., the status of pod readiness gate "example.test/b" is not "True", but False`},
	}, {
		name: "a gate unknown", gates: gates[:1], containers: ready,
		conditions: []corev1.PodCondition{cond("example.test/a", corev1.ConditionUnknown)},
		want: corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: "ReadinessGatesNotReady",
			Message: `the status of pod readiness gate "example.test/a" is not "True", but Unknown`},
	}, {
		name: "every gate true", gates: gates, containers: ready,
		conditions: []corev1.PodCondition{cond("example.test/b", corev1.ConditionTrue), cond("example.test/a", corev1.ConditionTrue)},
		want:       corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			if got := podReadyCondition(tc.gates, tc.conditions, tc.containers); got != tc.want {
				t.Errorf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

// TestRunnerReadinessGates: a running pod with a readiness gate stays Ready=False (with
// ContainersReady=True) until someone else patches the gate's condition True through
// pods/status, then becomes Ready, and goes back to not Ready when the gate goes False; the
// runner never writes the gate's condition. A pod without gates becomes Ready as before.
func TestRunnerReadinessGates(t *testing.T) {
	needRoot(t, "the runner's mount namespaces and credentials")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	client, _ := startRunner(t, "example.test/server")
	const gate = "example.test/warm"
	gated := runServer(ctx, t, client, "gated", "127.251.0.3", []corev1.PodReadinessGate{{ConditionType: gate}})
	plain := runServer(ctx, t, client, "plain", "127.251.0.4", nil)

	waitReady(ctx, t, client, plain, corev1.ConditionTrue, "", "")
	// The node lifecycle controller marks a node's pods NotReady when its lease lapses (a
	// control-plane outage); its containers still ready, the runner reports Ready again,
	// as the kubelet's status manager does.
	setGate(ctx, t, client, plain, string(corev1.PodReady), corev1.ConditionFalse, "NodeNotReady")
	waitReady(ctx, t, client, plain, corev1.ConditionTrue, "", "")
	waitReady(ctx, t, client, gated, corev1.ConditionFalse, "ReadinessGatesNotReady",
		`corresponding condition of pod readiness gate "example.test/warm" does not exist.`)
	// Held: the container runs and is ready, yet Ready stays False while the gate is missing.
	for range 8 {
		time.Sleep(250 * time.Millisecond)
		p := getPod(ctx, t, client, gated)
		if c := findCondition(p, corev1.PodReady); c == nil || c.Status != corev1.ConditionFalse {
			t.Fatalf("pod with a missing gate condition: Ready %+v", c)
		}
	}

	setGate(ctx, t, client, gated, gate, corev1.ConditionFalse, "Warming")
	waitReady(ctx, t, client, gated, corev1.ConditionFalse, "ReadinessGatesNotReady",
		`the status of pod readiness gate "example.test/warm" is not "True", but False`)

	setGate(ctx, t, client, gated, gate, corev1.ConditionTrue, "Warm")
	p := waitReady(ctx, t, client, gated, corev1.ConditionTrue, "", "")
	if c := findCondition(p, gate); c == nil || c.Status != corev1.ConditionTrue || c.Reason != "Warm" {
		t.Errorf("the gate's condition after Ready: %+v, want True with the reason its writer set", c)
	}

	setGate(ctx, t, client, gated, gate, corev1.ConditionFalse, "Rebuilding")
	p = waitReady(ctx, t, client, gated, corev1.ConditionFalse, "ReadinessGatesNotReady",
		`the status of pod readiness gate "example.test/warm" is not "True", but False`)
	if c := findCondition(p, corev1.ContainersReady); c == nil || c.Status != corev1.ConditionTrue {
		t.Errorf("ContainersReady with the gate False: %+v, want True", c)
	}
	// The runner's later status patches (every tick) leave the gate as its writer set it.
	time.Sleep(time.Second)
	if c := findCondition(getPod(ctx, t, client, gated), gate); c == nil || c.Status != corev1.ConditionFalse || c.Reason != "Rebuilding" {
		t.Errorf("the gate's condition: %+v, want False Rebuilding as set", c)
	}
}

// runServer creates a pod on node-a whose container runs until stopped, with kwok's part
// (an address) done by hand.
func runServer(ctx context.Context, t *testing.T, client kubernetes.Interface, name, ip string, gates []corev1.PodReadinessGate) string {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PodSpec{
			NodeName: "node-a", AutomountServiceAccountToken: ptr.To(false), ReadinessGates: gates,
			Containers: []corev1.Container{{Name: "app", Image: "example.test/server:1", Args: []string{"serve"}}},
		},
	}
	created, err := client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = client.CoreV1().Pods("default").Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
	})
	created.Status.PodIP = ip
	if _, err := client.CoreV1().Pods("default").UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	return name
}

// setGate patches one condition through pods/status as an operator does: a strategic
// merge keyed by condition type.
func setGate(ctx context.Context, t *testing.T, client kubernetes.Interface, name, gate string, status corev1.ConditionStatus, reason string) {
	t.Helper()
	patch := fmt.Sprintf(`{"status":{"conditions":[{"type":%q,"status":%q,"reason":%q,"lastTransitionTime":%q}]}}`,
		gate, status, reason, time.Now().UTC().Format(time.RFC3339))
	if _, err := client.CoreV1().Pods("default").Patch(ctx, name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}, "status"); err != nil {
		t.Fatal(err)
	}
}

// waitReady waits for the pod's Ready condition to be exactly status, reason and message
// (an empty reason or message must be absent).
func waitReady(ctx context.Context, t *testing.T, client kubernetes.Interface, name string, status corev1.ConditionStatus, reason, message string) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	testenv.Eventually(t, 60*time.Second, fmt.Sprintf("pod %s Ready=%s %s", name, status, reason), func() (bool, string) {
		pod = getPod(ctx, t, client, name)
		c := findCondition(pod, corev1.PodReady)
		if c == nil {
			return false, "no Ready condition"
		}
		return c.Status == status && c.Reason == reason && c.Message == message, fmt.Sprintf("Ready=%s %s: %s", c.Status, c.Reason, c.Message)
	})
	return pod
}

func getPod(ctx context.Context, t *testing.T, client kubernetes.Interface, name string) *corev1.Pod {
	t.Helper()
	p, err := client.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func findCondition(p *corev1.Pod, typ corev1.PodConditionType) *corev1.PodCondition {
	return conditionOf(p.Status.Conditions, typ)
}
