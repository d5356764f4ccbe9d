package localcluster_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"github.com/opsuite/suite/tools/internal/localcluster"
)

// podEcho serves TCP on --listen: each connection first reads the pod's hostname (its
// name), then gets back every line it sends.
func podEcho(args []string) error {
	listen := ":7000"
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--listen="); ok {
			listen = v
		}
	}
	host, _ := os.Hostname()
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	for {
		c, err := ln.Accept()
		if err != nil {
			return err
		}
		go func() {
			defer c.Close()
			if _, err := fmt.Fprintln(c, host); err == nil {
				_, _ = io.Copy(c, c)
			}
		}()
	}
}

func echoPod(name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "echo"}},
		Spec: corev1.PodSpec{
			AutomountServiceAccountToken: ptr.To(false),
			Containers: []corev1.Container{{
				Name: "echo", Image: podAppImage + ":1", Args: []string{"podecho", "--listen=:7000"},
				Ports: []corev1.ContainerPort{{Name: "echo", ContainerPort: 7000}},
				ReadinessProbe: &corev1.Probe{
					ProbeHandler:  corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromString("echo")}},
					PeriodSeconds: 1,
				},
			}},
		},
	}
}

func loadBalancerService(name string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeLoadBalancer,
			Selector: map[string]string{"app": "echo"},
			Ports:    []corev1.ServicePort{{Name: "echo", Port: 7100, TargetPort: intstr.FromString("echo")}},
		},
	}
}

// echoThrough connects to addr as a client outside the cluster would and returns the
// name of the pod that answered, after checking that a line makes the round trip.
func echoThrough(addr string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(3 * time.Second))
	r := bufio.NewReader(c)
	pod, err := r.ReadString('\n')
	if err != nil {
		return "", fmt.Errorf("reading the pod's name: %w", err)
	}
	if _, err := fmt.Fprintln(c, "ping"); err != nil {
		return "", err
	}
	back, err := r.ReadString('\n')
	if err != nil {
		return "", fmt.Errorf("reading the echo: %w", err)
	}
	if back != "ping\n" {
		return "", fmt.Errorf("echo %q, want %q", back, "ping\n")
	}
	return strings.TrimSpace(pod), nil
}

// TestLoadBalancer brings a cluster up on its own ports and address ranges and checks
// LoadBalancer Services as a client on the host sees them: an address from the pool in
// status.loadBalancer.ingress, TCP through it to the ready pods, following the pods as
// they change, and the address released when the Service is deleted or becomes a
// ClusterIP Service.
func TestLoadBalancer(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("the local cluster's process runner needs root (private mount namespaces per pod); run the tests as root, as CI does")
	}
	root := repoRoot(t)
	o := localcluster.InstanceOptions(root, freeInstance(t))
	o.Dir = filepath.Join(t.TempDir(), "cluster")
	o.Nodes = localcluster.DefaultNodes("default", 2, 0, o.NodeIPPrefix)
	o.DisksPerNode = 0
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	o.ImageRules = append(o.ImageRules, podAppRule(self))
	pool, err := netip.ParsePrefix(o.LoadBalancerCIDR)
	if err != nil {
		t.Fatalf("default load-balancer CIDR %q: %v", o.LoadBalancerCIDR, err)
	}
	for _, other := range []string{o.PodCIDR, o.ServiceCIDR, o.NodeIPPrefix + "0/24"} {
		if netip.MustParsePrefix(other).Overlaps(pool) {
			t.Fatalf("load-balancer pool %s overlaps %s", pool, other)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var out strings.Builder
	begin := time.Now()
	if err := localcluster.Up(ctx, o, self, &out); err != nil {
		t.Fatalf("up: %v\n%s", err, out.String())
	}
	t.Logf("up: %s", time.Since(begin).Round(10*time.Millisecond))
	t.Cleanup(func() {
		if t.Failed() {
			dumpLogs(t, o)
		}
		if err := localcluster.Down(o, false, &out); err != nil {
			t.Errorf("down: %v", err)
		}
	})
	cfg, err := clientcmd.BuildConfigFromFlags("", o.Kubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	client := kubernetes.NewForConfigOrDie(cfg)
	services := client.CoreV1().Services("default")

	runReady(ctx, t, client, echoPod("echo-a"))
	if _, err := services.Create(ctx, loadBalancerService("echo"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	begin = time.Now()
	ip := waitIngress(ctx, t, client, "echo", pool)
	t.Logf("Service echo got %s after %s", ip, time.Since(begin).Round(10*time.Millisecond))
	addr := net.JoinHostPort(ip, "7100")
	waitFor(ctx, t, "echo-a answering through "+addr, func() (bool, string) {
		pod, err := echoThrough(addr)
		return pod == "echo-a", fmt.Sprintf("%q, %v", pod, err)
	})

	// A second ready pod joins the Service; once the first is deleted, every connection
	// reaches the second.
	runReady(ctx, t, client, echoPod("echo-b"))
	seen := map[string]bool{}
	waitFor(ctx, t, "both pods answering through "+addr, func() (bool, string) {
		pod, err := echoThrough(addr)
		seen[pod] = true
		return seen["echo-a"] && seen["echo-b"], fmt.Sprintf("seen %v, last %v", seen, err)
	})
	if err := client.CoreV1().Pods("default").Delete(ctx, "echo-a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(ctx, t, "echo-a gone", func() (bool, string) {
		_, err := client.CoreV1().Pods("default").Get(ctx, "echo-a", metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	for i := range 6 {
		if pod, err := echoThrough(addr); err != nil || pod != "echo-b" {
			t.Errorf("connection %d after echo-a's deletion: answered by %q (%v), want echo-b", i, pod, err)
		}
	}

	// A second LoadBalancer gets an address of its own; turned into a ClusterIP Service
	// it loses it, and nothing listens there any more.
	if _, err := services.Create(ctx, loadBalancerService("echo2"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ip2 := waitIngress(ctx, t, client, "echo2", pool)
	if ip2 == ip {
		t.Fatalf("echo2 got echo's address %s", ip)
	}
	addr2 := net.JoinHostPort(ip2, "7100")
	waitFor(ctx, t, "echo-b answering through "+addr2, func() (bool, string) {
		pod, err := echoThrough(addr2)
		return pod == "echo-b", fmt.Sprintf("%q, %v", pod, err)
	})
	toClusterIP := []byte(`{"spec":{"type":"ClusterIP"}}`)
	if _, err := services.Patch(ctx, "echo2", types.MergePatchType, toClusterIP, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(ctx, t, "echo2's address released", func() (bool, string) {
		svc, err := services.Get(ctx, "echo2", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return len(svc.Status.LoadBalancer.Ingress) == 0, fmt.Sprint(svc.Status.LoadBalancer.Ingress)
	})
	waitRefused(ctx, t, addr2)

	// Deleting echo releases its address: nothing listens there, and the next
	// LoadBalancer Service gets it (the pool gives out its lowest free address).
	if err := services.Delete(ctx, "echo", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitRefused(ctx, t, addr)
	if _, err := services.Create(ctx, loadBalancerService("echo3"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if ip3 := waitIngress(ctx, t, client, "echo3", pool); ip3 != ip {
		t.Errorf("echo3 got %s, want the address echo released, %s", ip3, ip)
	}
	waitFor(ctx, t, "echo-b answering through "+addr+" for echo3", func() (bool, string) {
		pod, err := echoThrough(addr)
		return pod == "echo-b", fmt.Sprintf("%q, %v", pod, err)
	})
}

// waitIngress waits for the Service's load-balancer address and checks it lies in pool.
func waitIngress(ctx context.Context, t *testing.T, client kubernetes.Interface, name string, pool netip.Prefix) string {
	t.Helper()
	var ip string
	waitFor(ctx, t, "Service "+name+"'s load-balancer address", func() (bool, string) {
		svc, err := client.CoreV1().Services("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		ing := svc.Status.LoadBalancer.Ingress
		if len(ing) == 0 {
			return false, "no ingress"
		}
		ip = ing[0].IP
		return true, ""
	})
	svc, err := client.CoreV1().Services("default").Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ing := svc.Status.LoadBalancer.Ingress
	if a, err := netip.ParseAddr(ip); err != nil || !pool.Contains(a) || len(ing) != 1 {
		t.Fatalf("Service %s: ingress %v, want one address in %s", name, ing, pool)
	}
	if ing[0].IPMode == nil || *ing[0].IPMode != corev1.LoadBalancerIPModeVIP {
		t.Errorf("Service %s: ingress ipMode %v, want VIP", name, ing[0].IPMode)
	}
	return ip
}

// waitRefused waits until nothing listens on addr.
func waitRefused(ctx context.Context, t *testing.T, addr string) {
	t.Helper()
	waitFor(ctx, t, "connections to "+addr+" refused", func() (bool, string) {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return false, "still accepted"
		}
		return errors.Is(err, syscall.ECONNREFUSED), err.Error()
	})
}
