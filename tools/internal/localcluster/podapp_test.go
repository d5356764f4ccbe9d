package localcluster_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/opsuite/suite/tools/internal/localcluster"
	"github.com/opsuite/suite/tools/internal/podrunner"
)

// podAppImage is mapped to the test binary, which then runs podApp: a container that
// reports what it sees from inside its pod.
const podAppImage = "example.test/podapp"

func podAppRule(self string) podrunner.ImageRule {
	return podrunner.ImageRule{Image: podAppImage, Binary: self}
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
}

// podApp serves /readyz (toggled by /toggle), /report and gRPC health on $POD_IP.
func podApp() error {
	ip := os.Getenv("POD_IP")
	var unready atomic.Bool
	report := func() podAppReport {
		r := podAppReport{Env: map[string]string{}, Files: map[string]string{}, Resolved: map[string]string{}}
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
		for _, name := range []string{"kubernetes.default.svc.cluster.local", r.Hostname, "redis-headless", "redis-headless.default.svc.cluster.local", "sim-0.sim.default.svc.cluster.local"} {
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
	return http.ListenAndServe(net.JoinHostPort(ip, "8080"), mux) //nolint:gosec // test server
}

func podAppPod(name string) *corev1.Pod {
	optional := true
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "podapp"}},
		Spec: corev1.PodSpec{
			ServiceAccountName: "podapp",
			Containers: []corev1.Container{{
				Name: "app", Image: podAppImage + ":1", Args: []string{"podapp"},
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
			r.Resolved["sim-0.sim.default.svc.cluster.local"] == sim0.Status.PodIP
		return ok, fmt.Sprintf("resolved %v; want redis %s, sim-0 %s", r.Resolved, redis.Status.PodIP, sim0.Status.PodIP)
	})
	t.Logf("podapp report: %+v", r)
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

	// A killed process fails the pod.
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
	waitFor(ctx, t, "podapp Failed after its process was killed", func() (bool, string) {
		p, err := client.CoreV1().Pods(ns).Get(ctx, "podapp", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return p.Status.Phase == corev1.PodFailed && !podReady(p), string(p.Status.Phase)
	})
	if err := client.CoreV1().Pods(ns).Delete(ctx, "podapp", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
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
