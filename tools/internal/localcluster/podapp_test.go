package localcluster_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/opsuite/suite/tools/internal/localcluster"
	"github.com/opsuite/suite/tools/internal/podrunner"
)

// podAppImage is mapped to the test binary, which then runs podApp: a container that
// reports what it sees from inside its pod.
const podAppImage = "example.test/podapp"

// podAppRule maps podAppImage to the test binary. Its --listen is a listen flag: the
// runner gives a host-less value the pod's address, as a pod's own network would.
func podAppRule(self string) podrunner.ImageRule {
	return podrunner.ImageRule{Image: podAppImage, Binary: self, ListenFlags: []string{"--listen"}}
}

// podAppReport is what podApp serves on /report.
type podAppReport struct {
	Env         map[string]string `json:"env"`
	Files       map[string]string `json:"files"`
	Hostname    string            `json:"hostname"`
	Resolved    map[string]string `json:"resolved"`
	User        string            `json:"user"`
	UserViaSvc  string            `json:"userViaSvc"`
	ListPodsErr string            `json:"listPodsErr"`
	WroteVolume bool              `json:"wroteVolume"`
	// Listen is the HTTP server's address; UID, GID and Groups the process's credentials;
	// Modes "<mode> <uid>:<gid>" of files; Dev the names in /dev (with PODAPP_LIST_DEV=1).
	Listen string            `json:"listen"`
	UID    int               `json:"uid"`
	GID    int               `json:"gid"`
	Groups []int             `json:"groups"`
	Modes  map[string]string `json:"modes"`
	Dev    []string          `json:"dev"`
}

// podAppFiles are the files podApp reads and reports.
var podAppFiles = []string{"/etc/podapp/config/greeting", "/etc/podapp/secret/password",
	"/var/run/secrets/kubernetes.io/serviceaccount/namespace", "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt",
	"/var/run/secrets/kubernetes.io/serviceaccount/token", "/scratch"}

// podApp serves /readyz (toggled by /toggle), /report and gRPC health on $POD_IP; HTTP
// on --listen when given.
func podApp(args []string) error {
	ip := os.Getenv("POD_IP")
	listen := net.JoinHostPort(ip, "8080")
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--listen="); ok {
			listen = v
		}
	}
	var unready atomic.Bool
	report := func() podAppReport {
		r := podAppReport{Env: map[string]string{}, Files: map[string]string{}, Resolved: map[string]string{},
			Modes: map[string]string{}, Listen: listen, UID: os.Getuid(), GID: os.Getgid()}
		r.Groups, _ = os.Getgroups()
		for _, f := range podAppFiles {
			if st, err := os.Stat(f); err == nil {
				sys := st.Sys().(*syscall.Stat_t)
				r.Modes[f] = fmt.Sprintf("%v %d:%d", st.Mode(), sys.Uid, sys.Gid)
			}
		}
		if os.Getenv("PODAPP_LIST_DEV") == "1" {
			entries, _ := os.ReadDir("/dev")
			for _, e := range entries {
				r.Dev = append(r.Dev, e.Name())
			}
		}
		for _, k := range []string{"POD_IP", "MY_NAME", "FROM_CM", "FROM_SECRET", "CM_greeting", "EXPANDED", "KUBERNETES_SERVICE_HOST"} {
			r.Env[k] = os.Getenv(k)
		}
		for _, f := range []string{"/etc/podapp/config/greeting", "/etc/podapp/secret/password",
			"/var/run/secrets/kubernetes.io/serviceaccount/namespace", "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt"} {
			data, err := os.ReadFile(f)
			if err != nil {
				r.Files[f] = "error: " + err.Error()
			} else {
				r.Files[f] = strings.TrimSpace(string(data))
			}
		}
		r.Hostname, _ = os.Hostname()
		for _, name := range []string{"kubernetes.default.svc.cluster.local", r.Hostname, "redis-headless", "redis-headless.default.svc.cluster.local", "sim-0.sim.default.svc.cluster.local", "objectstore.objectstore.svc"} {
			addrs, err := net.LookupHost(name)
			if err != nil {
				r.Resolved[name] = "error"
			} else {
				r.Resolved[name] = strings.Join(addrs, ",")
			}
		}
		r.WroteVolume = os.WriteFile("/scratch/probe", []byte("x"), 0o644) == nil
		cfg, err := rest.InClusterConfig()
		if err != nil {
			r.User = "error: " + err.Error()
			return r
		}
		client, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			r.User = "error: " + err.Error()
			return r
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		ssr, err := client.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		if err != nil {
			r.User = "error: " + err.Error()
		} else {
			r.User = ssr.Status.UserInfo.Username
		}
		_, err = client.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{})
		if err != nil {
			r.ListPodsErr = err.Error()
		}
		// The same through the "kubernetes" Service name and port 443.
		cfg.Host = "https://kubernetes.default.svc"
		if viaSvc, err := kubernetes.NewForConfig(cfg); err == nil {
			ssr, err := viaSvc.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
			if err != nil {
				r.UserViaSvc = "error: " + err.Error()
			} else {
				r.UserViaSvc = ssr.Status.UserInfo.Username
			}
		}
		return r
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if unready.Load() {
			http.Error(w, "unready", http.StatusServiceUnavailable)
		}
	})
	mux.HandleFunc("/toggle", func(http.ResponseWriter, *http.Request) { unready.Store(!unready.Load()) })
	mux.HandleFunc("/report", func(w http.ResponseWriter, _ *http.Request) { _ = json.NewEncoder(w).Encode(report()) })
	gl, err := net.Listen("tcp", net.JoinHostPort(ip, "9090"))
	if err != nil {
		return err
	}
	gs := grpc.NewServer()
	healthpb.RegisterHealthServer(gs, health.NewServer())
	go func() { _ = gs.Serve(gl) }()
	return http.ListenAndServe(listen, mux) //nolint:gosec // test server
}

func podAppPod(name string) *corev1.Pod {
	optional := true
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "podapp"}},
		Spec: corev1.PodSpec{
			ServiceAccountName: "podapp",
			Containers: []corev1.Container{{
				Name: "app", Image: podAppImage + ":1", Args: []string{"podapp", "--listen=:8080"},
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
				Env: []corev1.EnvVar{
					{Name: "MY_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
					{Name: "FROM_CM", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
						LocalObjectReference: corev1.LocalObjectReference{Name: "podapp"}, Key: "greeting"}}},
					{Name: "FROM_SECRET", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
						LocalObjectReference: corev1.LocalObjectReference{Name: "podapp"}, Key: "password"}}},
					{Name: "MISSING", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
						LocalObjectReference: corev1.LocalObjectReference{Name: "absent"}, Key: "x", Optional: &optional}}},
					{Name: "EXPANDED", Value: "$(MY_NAME)@$(POD_IP)"},
				},
				EnvFrom: []corev1.EnvFromSource{{Prefix: "CM_", ConfigMapRef: &corev1.ConfigMapEnvSource{
					LocalObjectReference: corev1.LocalObjectReference{Name: "podapp"}}}},
				VolumeMounts: []corev1.VolumeMount{
					{Name: "config", MountPath: "/etc/podapp/config", ReadOnly: true},
					{Name: "secret", MountPath: "/etc/podapp/secret", ReadOnly: true},
					{Name: "scratch", MountPath: "/scratch"},
				},
				ReadinessProbe: &corev1.Probe{
					ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/readyz", Port: intstr.FromString("http")}},
					PeriodSeconds: 1, FailureThreshold: 1,
				},
				LivenessProbe: &corev1.Probe{
					ProbeHandler:  corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: 9090}},
					PeriodSeconds: 1, InitialDelaySeconds: 1,
				},
			}},
			Volumes: []corev1.Volume{
				{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
					LocalObjectReference: corev1.LocalObjectReference{Name: "podapp"}}}},
				{Name: "secret", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "podapp"}}},
				{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			},
		},
	}
}

// checkPodApp runs podApp in a pod and checks env, volumes, token, names and probes.
func checkPodApp(ctx context.Context, t *testing.T, client kubernetes.Interface, o localcluster.Options) {
	ns := "default"
	mustCreate := func(err error) {
		t.Helper()
		if err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	_, err := client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "podapp"}}, metav1.CreateOptions{})
	mustCreate(err)
	_, err = client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "podapp"},
		Data: map[string]string{"greeting": "hello"}}, metav1.CreateOptions{})
	mustCreate(err)
	_, err = client.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "podapp"},
		StringData: map[string]string{"password": "s3cret"}}, metav1.CreateOptions{})
	mustCreate(err)
	_, err = client.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "redis-headless"},
		Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Selector: map[string]string{"app": "redis"},
			Ports: []corev1.ServicePort{{Name: "redis", Port: 6379}}}}, metav1.CreateOptions{})
	mustCreate(err)
	_, err = client.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "podapp"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "podapp"},
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http")}}}}, metav1.CreateOptions{})
	mustCreate(err)
	_, err = client.CoreV1().Pods(ns).Create(ctx, podAppPod("podapp"), metav1.CreateOptions{})
	mustCreate(err)
	kubeSvc, err := client.CoreV1().Services(ns).Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	redis, err := client.CoreV1().Pods(ns).Get(ctx, "redis", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sim0, err := client.CoreV1().Pods(ns).Get(ctx, "sim-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	var ip string
	waitFor(ctx, t, "podapp Ready", func() (bool, string) {
		p, err := client.CoreV1().Pods(ns).Get(ctx, "podapp", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		ip = p.Status.PodIP
		return podReady(p), fmt.Sprintf("%s %v", p.Status.Phase, p.Status.ContainerStatuses)
	})
	var r podAppReport
	// Names follow EndpointSlices, which may lag the pod's start by a moment.
	waitFor(ctx, t, "podapp resolving the redis service and sim-0", func() (bool, string) {
		resp, err := http.Get("http://" + net.JoinHostPort(ip, "8080") + "/report")
		if err != nil {
			return false, err.Error()
		}
		defer resp.Body.Close()
		r = podAppReport{}
		if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
			return false, err.Error()
		}
		ok := r.Resolved["redis-headless"] == redis.Status.PodIP &&
			r.Resolved["redis-headless.default.svc.cluster.local"] == redis.Status.PodIP &&
			r.Resolved["sim-0.sim.default.svc.cluster.local"] == sim0.Status.PodIP &&
			(!o.ObjectStore || r.Resolved["objectstore.objectstore.svc"] == o.ObjectStoreIP())
		return ok, fmt.Sprintf("resolved %v; want redis %s, sim-0 %s, the object store %s", r.Resolved, redis.Status.PodIP, sim0.Status.PodIP, o.ObjectStoreIP())
	})
	t.Logf("podapp report: %+v", r)
	if r.Listen != net.JoinHostPort(ip, "8080") {
		t.Errorf("--listen=:8080 reached the process as %q, want the pod's address %s:8080", r.Listen, ip)
	}
	want := map[string]string{"POD_IP": ip, "MY_NAME": "podapp", "FROM_CM": "hello", "FROM_SECRET": "s3cret",
		"CM_greeting": "hello", "EXPANDED": "podapp@" + ip, "KUBERNETES_SERVICE_HOST": "127.0.0.1"}
	for k, v := range want {
		if r.Env[k] != v {
			t.Errorf("env %s = %q, want %q", k, r.Env[k], v)
		}
	}
	files := map[string]string{"/etc/podapp/config/greeting": "hello", "/etc/podapp/secret/password": "s3cret",
		"/var/run/secrets/kubernetes.io/serviceaccount/namespace": ns}
	for f, v := range files {
		if r.Files[f] != v {
			t.Errorf("file %s = %q, want %q", f, r.Files[f], v)
		}
	}
	if !strings.Contains(r.Files["/var/run/secrets/kubernetes.io/serviceaccount/ca.crt"], "BEGIN CERTIFICATE") {
		t.Errorf("ca.crt not mounted: %q", r.Files["/var/run/secrets/kubernetes.io/serviceaccount/ca.crt"])
	}
	if r.Hostname != "podapp" {
		t.Errorf("hostname %q, want podapp", r.Hostname)
	}
	if r.Resolved["podapp"] != ip {
		t.Errorf("own hostname resolves to %q, want %s", r.Resolved["podapp"], ip)
	}
	if r.Resolved["kubernetes.default.svc.cluster.local"] != kubeSvc.Spec.ClusterIP {
		t.Errorf("kubernetes.default.svc resolves to %q", r.Resolved["kubernetes.default.svc.cluster.local"])
	}
	if r.User != "system:serviceaccount:default:podapp" {
		t.Errorf("the pod authenticates as %q, want its ServiceAccount", r.User)
	}
	if r.UserViaSvc != r.User {
		t.Errorf("through https://kubernetes.default.svc the pod authenticates as %q", r.UserViaSvc)
	}
	// The Service's ClusterIP forwards to the ready pod's named target port.
	podappSvc, err := client.CoreV1().Services(ns).Get(ctx, "podapp", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(ctx, t, "GET /readyz through the podapp Service's ClusterIP", func() (bool, string) {
		resp, err := http.Get("http://" + net.JoinHostPort(podappSvc.Spec.ClusterIP, "80") + "/readyz")
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, resp.Status
	})
	if !strings.Contains(r.ListPodsErr, "forbidden") {
		t.Errorf("listing pods in kube-system should be forbidden by RBAC, got %q", r.ListPodsErr)
	}
	if !r.WroteVolume {
		t.Error("the emptyDir is not writable")
	}
	if _, err := os.Stat("/etc/podapp"); err == nil {
		// The mount point exists on the host (empty); its content must not.
		if _, err := os.Stat("/etc/podapp/config/greeting"); err == nil {
			t.Error("the ConfigMap volume is visible on the host: mounts leaked out of the pod's namespace")
		}
	}

	// ConfigMap volumes follow changes of the ConfigMap.
	cm, err := client.CoreV1().ConfigMaps(ns).Get(ctx, "podapp", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data["greeting"] = "updated"
	if _, err := client.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(ctx, t, "the ConfigMap change visible in the pod", func() (bool, string) {
		resp, err := http.Get("http://" + net.JoinHostPort(ip, "8080") + "/report")
		if err != nil {
			return false, err.Error()
		}
		defer resp.Body.Close()
		var rr podAppReport
		if err := json.NewDecoder(resp.Body).Decode(&rr); err != nil {
			return false, err.Error()
		}
		got := rr.Files["/etc/podapp/config/greeting"]
		return got == "updated", got
	})

	// Readiness follows the probe both ways.
	toggle := func() {
		resp, err := http.Get("http://" + net.JoinHostPort(ip, "8080") + "/toggle")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	readyIs := func(want bool) func() (bool, string) {
		return func() (bool, string) {
			p, err := client.CoreV1().Pods(ns).Get(ctx, "podapp", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			return podReady(p) == want, fmt.Sprint(p.Status.Conditions)
		}
	}
	toggle()
	waitFor(ctx, t, "podapp not Ready after its readiness probe fails", readyIs(false))
	toggle()
	waitFor(ctx, t, "podapp Ready again", readyIs(true))

	// A killed process restarts in place: the same pod, restartCount 1, the end of the
	// killed run in lastState, Ready again.
	before, err := client.CoreV1().Pods(ns).Get(ctx, "podapp", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pidFile := fmt.Sprintf("%s/pod_default_podapp_app.pid", o.PidDir())
	data, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	var pid int
	if _, err := fmt.Sscan(string(data), &pid); err != nil {
		t.Fatalf("pidfile %s: %v", pidFile, err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(ctx, t, "podapp restarted in place after its process was killed", func() (bool, string) {
		p, err := client.CoreV1().Pods(ns).Get(ctx, "podapp", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		if p.UID != before.UID {
			t.Fatalf("podapp was replaced (uid %s, was %s), not restarted in place", p.UID, before.UID)
		}
		cs := p.Status.ContainerStatuses
		if len(cs) != 1 {
			return false, fmt.Sprint(cs)
		}
		last := cs[0].LastTerminationState.Terminated
		return p.Status.Phase == corev1.PodRunning && podReady(p) && cs[0].RestartCount == 1 && last != nil && last.ExitCode == 137,
			fmt.Sprintf("%s ready=%v restarts=%d last=%v", p.Status.Phase, podReady(p), cs[0].RestartCount, last)
	})
	if err := client.CoreV1().Pods(ns).Delete(ctx, "podapp", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

// checkCrashLoop runs a Deployment whose container exits 3 at once: its one pod restarts
// the container in place with back-off (CrashLoopBackOff between tries), and no Failed pod
// accumulates.
func checkCrashLoop(ctx context.Context, t *testing.T, client kubernetes.Interface) {
	labels := map[string]string{"app": "crasher"}
	replicas := int32(1)
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "crasher"},
		Spec: appsv1.DeploymentSpec{Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: podAppImage + ":1", Args: []string{"podexit"}}}}}},
	}
	if _, err := client.AppsV1().Deployments("default").Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = client.AppsV1().Deployments("default").Delete(ctx, "crasher", metav1.DeleteOptions{}) }()
	var uid types.UID
	sawBackOff := false
	waitFor(ctx, t, "the crasher's container restarted twice in its one pod", func() (bool, string) {
		pods, err := client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=crasher"})
		if err != nil {
			return false, err.Error()
		}
		if len(pods.Items) != 1 {
			return false, fmt.Sprintf("%d pods", len(pods.Items))
		}
		p := pods.Items[0]
		if uid != "" && p.UID != uid {
			t.Fatalf("the crasher's pod was replaced (uid %s, was %s)", p.UID, uid)
		}
		uid = p.UID
		if p.Status.Phase == corev1.PodFailed {
			t.Fatalf("the crasher's pod is Failed: %v", p.Status)
		}
		if len(p.Status.ContainerStatuses) != 1 {
			return false, "no container status"
		}
		cs := p.Status.ContainerStatuses[0]
		if w := cs.State.Waiting; w != nil && w.Reason == "CrashLoopBackOff" {
			sawBackOff = true
		}
		last := cs.LastTerminationState.Terminated
		return cs.RestartCount >= 2 && last != nil && last.ExitCode == 3,
			fmt.Sprintf("restarts %d, state %+v, last %+v", cs.RestartCount, cs.State, last)
	})
	if !sawBackOff {
		t.Error("never saw the container waiting in CrashLoopBackOff between restarts")
	}
	pods, err := client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=crasher"})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 1 {
		t.Errorf("%d crasher pods, want the one restarted in place", len(pods.Items))
	}
}

// checkSecurityContext runs podApp as runAsUser 1000, runAsGroup 2000, fsGroup 3000 and
// expects those credentials and the kubelet's file modes; a runAsNonRoot pod of a root
// image is refused as the kubelet refuses it.
func checkSecurityContext(ctx context.Context, t *testing.T, client kubernetes.Interface) {
	pod := podAppPod("podapp-user")
	pod.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](1000), RunAsGroup: ptr.To[int64](2000),
		FSGroup: ptr.To[int64](3000), RunAsNonRoot: ptr.To(true)}
	pod.Spec.Volumes[1].Secret.DefaultMode = ptr.To[int32](0o400)
	pod.Spec.Containers[0].LivenessProbe = nil
	r := getReport(t, runReady(ctx, t, client, pod))
	if r.UID != 1000 || r.GID != 2000 || !slices.Contains(r.Groups, 3000) {
		t.Errorf("process runs as %d:%d groups %v, want 1000:2000 with group 3000", r.UID, r.GID, r.Groups)
	}
	want := map[string]string{
		// Token: the pod's user alone (and the fsGroup); Secret: defaultMode plus group read.
		"/var/run/secrets/kubernetes.io/serviceaccount/token": "-rw-r----- 1000:3000",
		"/etc/podapp/secret/password":                         "-r--r----- 0:3000",
		"/etc/podapp/config/greeting":                         "-rw-r--r-- 0:3000",
		"/scratch":                                            "dgrwxrwx--- 1000:3000",
	}
	for f, m := range want {
		if r.Modes[f] != m {
			t.Errorf("%s: %q, want %q", f, r.Modes[f], m)
		}
	}
	if r.Files["/etc/podapp/secret/password"] != "s3cret" || r.User != "system:serviceaccount:default:podapp" || !r.WroteVolume {
		t.Errorf("as 1000:2000 the pod reads secret %q, authenticates as %q, writes its emptyDir %v",
			r.Files["/etc/podapp/secret/password"], r.User, r.WroteVolume)
	}

	root := podAppPod("podapp-root")
	root.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true)}
	if _, err := client.CoreV1().Pods("default").Create(ctx, root, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = client.CoreV1().Pods("default").Delete(ctx, root.Name, metav1.DeleteOptions{}) }()
	waitFor(ctx, t, "podapp-root refused: runAsNonRoot, image runs as root", func() (bool, string) {
		p, err := client.CoreV1().Pods("default").Get(ctx, root.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, cs := range p.Status.ContainerStatuses {
			if w := cs.State.Waiting; w != nil && w.Reason == "CreateContainerConfigError" &&
				strings.Contains(w.Message, "runAsNonRoot and image will run as root") {
				return p.Status.Phase == corev1.PodPending, string(p.Status.Phase)
			}
		}
		return false, fmt.Sprintf("%s %v", p.Status.Phase, p.Status.ContainerStatuses)
	})
}

// checkNodeDev runs podApp on a node with hostPath /dev at /dev: it sees that node's loop
// devices and the basic ones, nothing else of the host's /dev.
func checkNodeDev(ctx context.Context, t *testing.T, client kubernetes.Interface, o localcluster.Options) {
	disks, err := localcluster.NodeDisks(o)
	if err != nil {
		t.Fatal(err)
	}
	node := o.Nodes[0].Name
	if len(disks[node]) != o.DisksPerNode || o.DisksPerNode == 0 {
		t.Fatalf("node %s has disks %v, want %d", node, disks[node], o.DisksPerNode)
	}
	pod := podAppPod("podapp-dev")
	pod.Spec.NodeName = node
	pod.Spec.Containers[0].Env = append(pod.Spec.Containers[0].Env, corev1.EnvVar{Name: "PODAPP_LIST_DEV", Value: "1"})
	pod.Spec.Containers[0].VolumeMounts = append(pod.Spec.Containers[0].VolumeMounts, corev1.VolumeMount{Name: "dev", MountPath: "/dev"})
	pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: "dev", VolumeSource: corev1.VolumeSource{
		HostPath: &corev1.HostPathVolumeSource{Path: "/dev", Type: ptr.To(corev1.HostPathDirectory)}}})
	r := getReport(t, runReady(ctx, t, client, pod))
	var loops []string
	for _, name := range r.Dev {
		if strings.HasPrefix(name, "loop") || strings.HasPrefix(name, "sd") || strings.HasPrefix(name, "vd") || strings.HasPrefix(name, "nvme") {
			loops = append(loops, "/dev/"+name)
		}
	}
	slices.Sort(loops)
	want := slices.Sorted(slices.Values(disks[node]))
	if !slices.Equal(loops, want) {
		t.Errorf("the pod on %s sees disks %v in /dev, want its node's %v (all: %v)", node, loops, want, r.Dev)
	}
	if !slices.Contains(r.Dev, "null") || !slices.Contains(r.Dev, "urandom") {
		t.Errorf("/dev lacks null or urandom: %v", r.Dev)
	}
}

// runReady creates pod in "default", deletes it when the test ends, waits until it is
// Ready and returns its address.
func runReady(ctx context.Context, t *testing.T, client kubernetes.Interface, pod *corev1.Pod) string {
	t.Helper()
	if _, err := client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = client.CoreV1().Pods("default").Delete(context.Background(), pod.Name, metav1.DeleteOptions{})
	})
	var ip string
	waitFor(ctx, t, pod.Name+" Ready", func() (bool, string) {
		p, err := client.CoreV1().Pods("default").Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		ip = p.Status.PodIP
		return podReady(p), fmt.Sprintf("%s %v", p.Status.Phase, p.Status.ContainerStatuses)
	})
	return ip
}

func getReport(t *testing.T, ip string) podAppReport {
	t.Helper()
	resp, err := http.Get("http://" + net.JoinHostPort(ip, "8080") + "/report")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r podAppReport
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		t.Fatal(err)
	}
	return r
}

// checkNodeDeletion deletes a node and expects its runner pod stopped and removed.
func checkNodeDeletion(ctx context.Context, t *testing.T, client kubernetes.Interface, node string) {
	pod := podAppPod("podapp-pinned")
	pod.Spec.NodeName = node
	if _, err := client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var ip string
	waitFor(ctx, t, "pinned podapp Ready", func() (bool, string) {
		p, err := client.CoreV1().Pods("default").Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		ip = p.Status.PodIP
		return podReady(p), string(p.Status.Phase)
	})
	if err := client.CoreV1().Nodes().Delete(ctx, node, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(ctx, t, "the deleted node's pod removed and its process stopped", func() (bool, string) {
		_, err := client.CoreV1().Pods("default").Get(ctx, pod.Name, metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			return false, fmt.Sprintf("pod still there (%v)", err)
		}
		c, err := net.DialTimeout("tcp", net.JoinHostPort(ip, "8080"), time.Second)
		if err == nil {
			c.Close()
			return false, "process still answers"
		}
		return true, ""
	})
}
