package podrunner

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/opsuite/suite/shared/testenv"
)

var env *testenv.Env

// The test binary is also the runner's helper (podexec) and the container's process
// ("crash" exits 1 at once, "serve" runs until stopped, "serve-log" records its start and
// its SIGTERM, "prestop" is a lifecycle hook recording its start and end), as the localcluster command and a stand-in binary would be.
func TestMain(m *testing.M) {
	if len(os.Args) > 2 && os.Args[1] == HelperCommand {
		if os.Getenv(churnEnv) != "" {
			churn()
		}
		if err := ExecInNamespace(os.Args[2]); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	if len(os.Args) > 1 && os.Args[1] == "serve" {
		// Runs until the runner's SIGTERM ends it.
		select {}
	}
	if len(os.Args) > 2 && os.Args[1] == "serve-log" {
		serveLog(os.Args[2])
	}
	if len(os.Args) > 3 && os.Args[1] == "prestop" {
		preStopMark(os.Args[2], os.Args[3])
	}
	if len(os.Args) > 1 && os.Args[1] == "whoami" {
		status, _ := os.ReadFile("/proc/self/status")
		fmt.Print(string(status))
		os.Exit(0)
	}
	if len(os.Args) > 1 && os.Args[1] == "crash" {
		fmt.Printf("crashing as %d:%d\n", os.Getuid(), os.Getgid())
		os.Exit(1)
	}
	testenv.Main(m, &env)
}

// TestRunnerRestartsInPlace runs the runner in this process (so -race sees the worker)
// against a real apiserver: a pod whose container exits 1 restarts in place with back-off
// while the pod object changes under the worker; it never becomes Failed, and the files
// the process gets belong to its user.
func TestRunnerRestartsInPlace(t *testing.T) {
	needRoot(t, "the runner's mount namespaces and credentials")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	client, state := startRunner(t, "example.test/crasher")
	ns := "default"
	if _, err := client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "crasher"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "crasher", Namespace: ns},
		Spec: corev1.PodSpec{
			NodeName: "node-a", ServiceAccountName: "crasher", AutomountServiceAccountToken: ptr.To(false),
			SecurityContext: &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](1000), RunAsGroup: ptr.To[int64](1000)},
			Containers: []corev1.Container{{Name: "app", Image: "example.test/crasher:1", Args: []string{"crash"},
				VolumeMounts: []corev1.VolumeMount{{Name: "token", MountPath: "/srv"}}}},
			Volumes: []corev1.Volume{{Name: "token", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
				DefaultMode: ptr.To[int32](0o644),
				Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{
					Audience: "crasher", ExpirationSeconds: ptr.To[int64](3600), Path: "token"}}}}}}},
		},
	}
	created, err := client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = client.CoreV1().Pods(ns).Delete(context.Background(), pod.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
	})
	// kwok's part: an address.
	created.Status.PodIP = "127.251.0.1"
	created.Status.PodIPs = []corev1.PodIP{{IP: "127.251.0.1"}}
	if _, err := client.CoreV1().Pods(ns).UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The pod object keeps changing while the worker starts and restarts the container.
	churned := make(chan struct{})
	go func() {
		defer close(churned)
		for i := range 40 {
			patch := fmt.Sprintf(`{"metadata":{"labels":{"churn":"%d"}}}`, i)
			_, _ = client.CoreV1().Pods(ns).Patch(ctx, pod.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
			time.Sleep(50 * time.Millisecond)
		}
	}()
	sawBackOff := false
	testenv.Eventually(t, 90*time.Second, "the container restarted twice in place", func() (bool, string) {
		p, err := client.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		if p.UID != created.UID || p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded {
			t.Fatalf("pod %s (uid %s) phase %s: want the same pod, running", p.Name, p.UID, p.Status.Phase)
		}
		if len(p.Status.ContainerStatuses) != 1 {
			return false, "no container status"
		}
		cs := p.Status.ContainerStatuses[0]
		if w := cs.State.Waiting; w != nil && w.Reason == "CrashLoopBackOff" {
			sawBackOff = true
		}
		last := cs.LastTerminationState.Terminated
		return cs.RestartCount >= 2 && last != nil && last.ExitCode == 1, fmt.Sprintf("restarts %d, state %+v, last %+v", cs.RestartCount, cs.State, last)
	})
	<-churned
	if !sawBackOff {
		t.Error("never saw CrashLoopBackOff between restarts")
	}
	log, err := os.ReadFile(filepath.Join(state, "default_crasher_app.log"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "crashing as 1000:1000"; !slices.Contains(strings.Split(string(log), "\n"), want) {
		t.Errorf("container log lacks %q:\n%s", want, log)
	}
	checkInitCrashLoop(ctx, t, client)

	st, err := os.Stat(filepath.Join(state, "pods", string(created.UID), "volumes", "token", "token"))
	if err != nil {
		t.Fatal(err)
	}
	if sys := st.Sys().(*syscall.Stat_t); st.Mode().Perm() != 0o600 || sys.Uid != 1000 {
		t.Errorf("token %v owned by %d, want 0600 of the pod's user 1000", st.Mode(), sys.Uid)
	}
}

// startRunner runs a runner in this process against the test apiserver, with one rule that
// maps image to this test binary; it stops when the test ends. It returns the client and
// the runner's state directory (pods under pods/, container logs at the top).
func startRunner(t *testing.T, image string) (kubernetes.Interface, string) {
	t.Helper()
	client, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(env.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	port, _ := strconv.Atoi(u.Port())
	state := t.TempDir()
	r, err := New(Config{
		Client: client, Rules: []ImageRule{{Image: image, Binary: self}},
		StateDir: filepath.Join(state, "pods"), LogDir: state, HelperBinary: self,
		APIServerHost: u.Hostname(), APIServerPort: port,
		Log: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(context.Background())
	synced, stopped := make(chan struct{}), make(chan error, 1)
	go func() { stopped <- r.Run(runCtx, synced) }()
	t.Cleanup(func() {
		stop()
		if err := <-stopped; err != nil {
			t.Errorf("runner: %v", err)
		}
	})
	<-synced
	return client, state
}

// checkInitCrashLoop: an init container that exits 1 is retried with back-off; the pod
// stays Pending with the init container in CrashLoopBackOff and the others waiting in
// PodInitializing, as a kubelet shows it.
func checkInitCrashLoop(ctx context.Context, t *testing.T, client kubernetes.Interface) {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "init-crasher", Namespace: "default"},
		Spec: corev1.PodSpec{
			NodeName: "node-a", AutomountServiceAccountToken: ptr.To(false),
			InitContainers: []corev1.Container{{Name: "init", Image: "example.test/crasher:1", Args: []string{"crash"}}},
			Containers:     []corev1.Container{{Name: "app", Image: "example.test/crasher:1", Args: []string{"crash"}}},
		},
	}
	created, err := client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = client.CoreV1().Pods("default").Delete(context.Background(), pod.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
	})
	created.Status.PodIP = "127.251.0.2"
	if _, err := client.CoreV1().Pods("default").UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 60*time.Second, "the init container in CrashLoopBackOff", func() (bool, string) {
		p, err := client.CoreV1().Pods("default").Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		if len(p.Status.InitContainerStatuses) != 1 || len(p.Status.ContainerStatuses) != 1 {
			return false, fmt.Sprintf("statuses %+v %+v", p.Status.InitContainerStatuses, p.Status.ContainerStatuses)
		}
		ics, cs := p.Status.InitContainerStatuses[0], p.Status.ContainerStatuses[0]
		last := ics.LastTerminationState.Terminated
		ok := p.Status.Phase == corev1.PodPending && ics.RestartCount >= 1 && last != nil && last.ExitCode == 1 &&
			ics.State.Waiting != nil && ics.State.Waiting.Reason == "CrashLoopBackOff" &&
			cs.State.Waiting != nil && cs.State.Waiting.Reason == "PodInitializing"
		return ok, fmt.Sprintf("%s init %+v, app %+v", p.Status.Phase, ics, cs.State)
	})
}
