package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
)

// service is one chart: released under its own name into namespace e2e-<name>.
type service struct {
	name      string
	daemonSet bool
}

var services = []service{
	{name: "vald-operator"},
	{name: "veltrix-operator"},
	{name: "valkey-operator"},
	{name: "memgraph-operator"},
	{name: "node-agent", daemonSet: true},
}

func (s service) namespace() string { return "e2e-" + s.name }

func operators() []service {
	var out []service
	for _, s := range services {
		if !s.daemonSet {
			out = append(out, s)
		}
	}
	return out
}

func serviceByName(name string) service {
	for _, s := range services {
		if s.name == name {
			return s
		}
	}
	panic("unknown service " + name)
}

// installed records the releases TestInstall made, so later tests fail with a reason
// instead of timing out on a release that is not there.
var installed sync.Map

func needInstalled(t *testing.T, names ...string) {
	t.Helper()
	needCluster(t)
	for _, n := range names {
		if _, ok := installed.Load(n); !ok {
			t.Fatalf("release %s was not installed (see TestInstall)", n)
		}
	}
}

func selector(release string) string {
	return "app.kubernetes.io/instance=" + release
}

// poll waits with a bounded, generous interval; it logs how long the wait took.
func poll(ctx context.Context, t *testing.T, what string, timeout time.Duration, cond func(ctx context.Context) (bool, error)) error {
	t.Helper()
	begin := time.Now()
	err := wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, cond)
	if err != nil {
		return fmt.Errorf("%s: not within %s: %w", what, timeout, err)
	}
	t.Logf("%s: %s", what, since(begin))
	return nil
}

// controllerDeployment returns the one Deployment of a release.
func controllerDeployment(ctx context.Context, s service) (*appsv1.Deployment, error) {
	list, err := env.client.AppsV1().Deployments(s.namespace()).List(ctx, metav1.ListOptions{LabelSelector: selector(s.name)})
	if err != nil {
		return nil, err
	}
	if len(list.Items) != 1 {
		return nil, fmt.Errorf("release %s has %d Deployments, want 1", s.name, len(list.Items))
	}
	return &list.Items[0], nil
}

// deploymentReady reports whether the rollout finished: the current generation seen, every
// replica updated, ready and available, and no old pods left.
func deploymentReady(d *appsv1.Deployment) bool {
	want := ptr.Deref(d.Spec.Replicas, 1)
	st := d.Status
	return st.ObservedGeneration >= d.Generation && st.UpdatedReplicas == want && st.ReadyReplicas == want &&
		st.AvailableReplicas == want && st.Replicas == want
}

func podReady(p *corev1.Pod) bool {
	if p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func pods(ctx context.Context, s service) ([]corev1.Pod, error) {
	list, err := env.client.CoreV1().Pods(s.namespace()).List(ctx, metav1.ListOptions{LabelSelector: selector(s.name)})
	if err != nil {
		return nil, err
	}
	return list.Items, nil
}

func readyPods(ctx context.Context, s service) ([]corev1.Pod, error) {
	all, err := pods(ctx, s)
	var out []corev1.Pod
	for i := range all {
		if podReady(&all[i]) {
			out = append(out, all[i])
		}
	}
	return out, err
}

func describePods(ctx context.Context, s service) string {
	all, err := pods(ctx, s)
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, p := range all {
		ready := "unready"
		if podReady(&p) {
			ready = "ready"
		}
		fmt.Fprintf(&b, "  %s uid=%s node=%s ip=%s phase=%s %s", p.Name, p.UID, p.Spec.NodeName, p.Status.PodIP, p.Status.Phase, ready)
		for _, c := range p.Status.ContainerStatuses {
			fmt.Fprintf(&b, " [%s restarts=%d id=%s]", c.Name, c.RestartCount, c.ContainerID)
		}
		b.WriteString("\n")
	}
	if b.Len() == 0 {
		return "  (no pods)\n"
	}
	return b.String()
}

// podLogTail returns the end of a pod's container log the local runner wrote.
func podLogTail(p *corev1.Pod, n int) string {
	if env.local == nil {
		return ""
	}
	var b strings.Builder
	for _, c := range p.Spec.Containers {
		path := filepath.Join(env.local.LogDir(), fmt.Sprintf("%s_%s_%s.log", p.Namespace, p.Name, c.Name))
		data, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		if len(lines) > n {
			lines = lines[len(lines)-n:]
		}
		fmt.Fprintf(&b, "--- %s\n%s\n", path, strings.Join(lines, "\n"))
	}
	return b.String()
}

func diagnose(ctx context.Context, t *testing.T, s service) {
	t.Helper()
	t.Logf("pods of %s:\n%s", s.name, describePods(ctx, s))
	all, _ := pods(ctx, s)
	for i := range all {
		if tail := podLogTail(&all[i], 15); tail != "" {
			t.Logf("%s", tail)
		}
	}
	evs, err := env.client.CoreV1().Events(s.namespace()).List(ctx, metav1.ListOptions{})
	if err == nil {
		var lines []string
		for _, e := range evs.Items {
			if e.Type != corev1.EventTypeNormal {
				lines = append(lines, fmt.Sprintf("  %s %s/%s: %s", e.Reason, e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Message))
			}
		}
		sort.Strings(lines)
		if len(lines) > 20 {
			lines = lines[len(lines)-20:]
		}
		if len(lines) > 0 {
			t.Logf("warning events in %s:\n%s", s.namespace(), strings.Join(lines, "\n"))
		}
	}
}

// argValue returns the value of --name=value among a container's args.
func argValue(args []string, name string) string {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v
		}
	}
	return ""
}

// saToken requests a short-lived token for a ServiceAccount (TokenRequest).
func saToken(ctx context.Context, ns, sa string) (string, error) {
	tr, err := env.client.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", err
	}
	return tr.Status.Token, nil
}

// direct reports whether the suite reaches a pod at its address: on the local cluster
// (pods are host processes on 127.x; the apiserver refuses to proxy to loopback).
func direct(p *corev1.Pod) bool {
	ip := net.ParseIP(p.Status.PodIP)
	return env.local != nil || (ip != nil && ip.IsLoopback())
}

// scrape fetches a pod's metrics: straight from the pod address when direct, through the
// apiserver's pod proxy elsewhere.
func scrape(ctx context.Context, p *corev1.Pod, port int, token string) (int, string, error) {
	if direct(p) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("https://%s/metrics", net.JoinHostPort(p.Status.PodIP, fmt.Sprint(port))), nil)
		if err != nil {
			return 0, "", err
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		// The operators serve metrics with a self-signed certificate; what is checked here
		// is who may read them.
		c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
			TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // self-signed by design
		}}
		resp, err := c.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body), err
	}
	body, err := env.client.CoreV1().Pods(p.Namespace).ProxyGet("https", p.Name, fmt.Sprint(port), "metrics", nil).DoRaw(ctx)
	if err != nil {
		return 0, string(body), err
	}
	return http.StatusOK, string(body), nil
}

func podUIDs(ctx context.Context) (map[string]string, error) {
	out := map[string]string{}
	for _, s := range services {
		ps, err := pods(ctx, s)
		if err != nil {
			return nil, err
		}
		for _, p := range ps {
			if p.DeletionTimestamp == nil {
				out[s.namespace()+"/"+p.Name] = string(p.UID)
			}
		}
	}
	return out, nil
}

// scenarioContext is the test's context, ending a minute before the suite's deadline: every
// wait of a scenario is bounded by it, so a stuck step fails with its diagnosis (and the
// cleanups still run) instead of the binary being killed.
func scenarioContext(t *testing.T) context.Context {
	t.Helper()
	ctx := t.Context()
	if d, ok := t.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, d.Add(-time.Minute))
		t.Cleanup(cancel)
	}
	return ctx
}
