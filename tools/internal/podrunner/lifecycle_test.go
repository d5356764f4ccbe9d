package podrunner

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/opsuite/suite/shared/testenv"
)

// mark appends one line to the file at path.
func mark(path, line string) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	fmt.Fprintln(f, line)
	f.Close()
}

// serveLog is a container process: it records its start, then its SIGTERM, and exits.
func serveLog(path string) {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM)
	mark(path, "started")
	<-sig
	mark(path, "sigterm")
	os.Exit(0)
}

// preStopMark is a preStop hook: it records its start with the container's HOOK_MARK
// variable, sleeps for the duration given, and records its end.
func preStopMark(path, sleep string) {
	d, err := time.ParseDuration(sleep)
	if err != nil {
		os.Exit(2)
	}
	mark(path, "prestop start "+os.Getenv("HOOK_MARK"))
	time.Sleep(d)
	mark(path, "prestop end")
	os.Exit(0)
}

// TestRunnerPreStop: deleting a pod runs its container's preStop exec hook inside the
// container (its environment, its volumes: the hook is a binary found through a volume,
// as one an init container copied) before the container gets SIGTERM; a hook that outlives
// terminationGracePeriodSeconds is killed and the container still stopped, as the kubelet
// does.
func TestRunnerPreStop(t *testing.T) {
	needRoot(t, "the runner's mount namespaces")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	client, _ := startRunner(t, "example.test/hooked")

	// The hook binary reaches the container through a volume, as valkey-operator's
	// preStop binary does through the emptyDir its init container filled.
	tools := t.TempDir()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	copyFile(t, self, filepath.Join(tools, "hook"))

	t.Run("hook before SIGTERM", func(t *testing.T) {
		marks := t.TempDir()
		events := filepath.Join(marks, "events")
		pod := hookedPod("hooked", "127.251.0.3", marks, tools, "800ms", 10)
		deleteHooked(ctx, t, client, pod, events)
		got := readLines(t, events)
		want := []string{"started", "prestop start from-the-container", "prestop end", "sigterm"}
		if !slices.Equal(got, want) {
			t.Errorf("events %q, want %q: the hook must run, in the container's environment, and end before SIGTERM", got, want)
		}
	})

	t.Run("hook bounded by the grace period", func(t *testing.T) {
		marks := t.TempDir()
		events := filepath.Join(marks, "events")
		// The grace period leaves the hook (this test binary, started afresh) time to write
		// its first mark on a loaded machine: 2 s did not at load 18 on two cores.
		pod := hookedPod("hanging", "127.251.0.4", marks, tools, "90s", 10)
		took := deleteHooked(ctx, t, client, pod, events)
		got := readLines(t, events)
		want := []string{"started", "prestop start from-the-container", "sigterm"}
		if !slices.Equal(got, want) {
			t.Errorf("events %q, want %q: the hook killed at the grace period, then SIGTERM", got, want)
		}
		// 10 s of grace for the hook, then the container (it exits at once): far from the
		// 90 s the hook would sleep unbounded.
		if took > 45*time.Second {
			t.Errorf("the pod took %s to go with a 10 s grace period: the hook was not bounded by it", took)
		}
	})
}

func hookedPod(name, ip, marks, tools, sleep string, grace int64) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Annotations: map[string]string{"test/ip": ip}},
		Spec: corev1.PodSpec{
			NodeName: "node-a", AutomountServiceAccountToken: ptr.To(false),
			TerminationGracePeriodSeconds: ptr.To(grace),
			Containers: []corev1.Container{{
				Name: "app", Image: "example.test/hooked:1", Args: []string{"serve-log", "/marks/events"},
				Env: []corev1.EnvVar{{Name: "HOOK_MARK", Value: "from-the-container"}},
				VolumeMounts: []corev1.VolumeMount{
					{Name: "marks", MountPath: "/marks"},
					{Name: "tools", MountPath: "/opt/tools", ReadOnly: true},
				},
				Lifecycle: &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{
					Command: []string{"/opt/tools/hook", "prestop", "/marks/events", sleep}}}},
			}},
			Volumes: []corev1.Volume{
				{Name: "marks", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: marks}}},
				{Name: "tools", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: tools}}},
			},
		},
	}
}

// deleteHooked creates pod, waits until its process started, deletes the pod (its own
// grace period) and returns how long the pod object took to go.
func deleteHooked(ctx context.Context, t *testing.T, client kubernetes.Interface, pod *corev1.Pod, events string) time.Duration {
	t.Helper()
	created, err := client.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = client.CoreV1().Pods(pod.Namespace).Delete(context.Background(), pod.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
	})
	ip := pod.Annotations["test/ip"]
	created.Status.PodIP = ip
	created.Status.PodIPs = []corev1.PodIP{{IP: ip}}
	if _, err := client.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "the container started", func() (bool, string) {
		b, _ := os.ReadFile(events)
		return strings.Contains(string(b), "started"), string(b)
	})
	begin := time.Now()
	if err := client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 60*time.Second, "the pod gone", func() (bool, string) {
		_, err := client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	return time.Since(begin)
}

func readLines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestHookArgv(t *testing.T) {
	rule, _ := Rules{{Image: "valkey/valkey*", Binary: "/usr/bin/valkey-server", Commands: []string{"valkey-server", "valkey-cli"}}}.Match("valkey/valkey:8.0")
	c := &corev1.Container{Image: "valkey/valkey:8.0", VolumeMounts: []corev1.VolumeMount{{Name: "hook", MountPath: "/opt/hook/"}}}
	for _, tc := range []struct {
		command []string
		want    []string
	}{
		{[]string{"valkey-cli", "ping"}, []string{"/usr/bin/valkey-server", "ping"}},
		{[]string{"/usr/local/bin/valkey-server", "-v"}, []string{"/usr/bin/valkey-server", "-v"}},
		{[]string{"/opt/hook/prestop", "--timeout", "20"}, []string{"/opt/hook/prestop", "--timeout", "20"}},
		{[]string{"/opt/hook/../etc/passwd"}, nil},
		{[]string{"/opt/hookish/prestop"}, nil},
		{[]string{"sh", "-c", "sleep 1"}, nil},
		{[]string{"prestop"}, nil},
	} {
		got, err := hookArgv(rule, c, tc.command)
		if tc.want == nil {
			if err == nil {
				t.Errorf("%q: ran as %q, want refused (not in the image)", tc.command, got)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("%q: %q, %v; want %q", tc.command, got, err, tc.want)
		}
	}
}
