package node

import (
	"context"
	"fmt"
	"strings"
	"testing"

	valkeyv1 "github.com/opsuite/suite/api/valkey/v1alpha1"
	"github.com/opsuite/suite/services/valkey-operator/internal/resources"
	"github.com/opsuite/suite/shared/testenv"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// cfgGet reads one parameter through the admin connection (an empty value too).
func cfgGet(t *testing.T, s server, key string) string {
	t.Helper()
	c, err := s.admin()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	v, ok, err := c.ConfigGet(context.Background(), key)
	if err != nil || !ok {
		t.Fatalf("CONFIG GET %s: %q %v %v", key, v, ok, err)
	}
	return v
}

func externalCond(n *valkeyv1.ValkeyNode) string {
	c := condOf(n, valkeyv1.NodeConditionExternalAddressAnnounced)
	if c.Type == "" {
		return "absent"
	}
	return fmt.Sprintf("%s/%s", c.Status, c.Reason)
}

// TestExternalAnnounce: with spec.external mode LoadBalancer the node gets its own Service
// and waits for its address; once the load balancer (played here) writes one, the real
// server announces it (cluster-announce-hostname, then cluster-preferred-endpoint-type
// hostname, as it knows every member's: it is alone), again after a restart, and withdraws
// it when spec.external goes, with the Service. NodePort needs a client port apart from
// the server's, which the server is asked about.
func TestExternalAnnounce(t *testing.T) {
	h := start(t)
	srv := startServer(t)
	h.serve("c-0-0", srv)
	h.create(h.configMap(""))
	n := h.node("c-0-0", func(n *valkeyv1.ValkeyNode) {
		n.Spec.External = &valkeyv1.ExternalSpec{Mode: valkeyv1.ExternalModeLoadBalancer, ServiceAnnotations: map[string]string{"a": "b"}}
	})
	h.create(n)
	sts := h.statefulSet("c-0-0")
	pod := h.runPod("c-0-0-0", sts.Spec.Template, "rev1", true)
	h.rollOut("c-0-0", "rev1")

	got := h.waitNode("c-0-0", "waits for an address", func(n *valkeyv1.ValkeyNode) bool { return externalCond(n) == "False/AddressPending" })
	if got.Status.ExternalAddress != "" {
		t.Errorf("externalAddress %q before the load balancer gave one", got.Status.ExternalAddress)
	}
	svc := &corev1.Service{}
	if err := env.Client.Get(context.Background(), h.key("c-0-0-external"), svc); err != nil {
		t.Fatal(err)
	}
	if svc.Spec.Type != corev1.ServiceTypeLoadBalancer || svc.Spec.Selector[resources.LabelNode] != "c-0-0" || svc.Annotations["a"] != "b" ||
		len(svc.OwnerReferences) != 1 || svc.OwnerReferences[0].Name != "c-0-0" {
		t.Fatalf("Service %+v", svc)
	}
	if v := cfgGet(t, srv, "cluster-announce-hostname"); v != "" {
		t.Fatalf("announced %q before there was an address", v)
	}

	updateStatus(h, svc, func(s *corev1.Service) {
		s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "127.4.0.9"}}
	})
	got = h.waitNode("c-0-0", "announces its address", func(n *valkeyv1.ValkeyNode) bool { return externalCond(n) == "True/Announced" })
	if got.Status.ExternalAddress != "127.4.0.9:6379" {
		t.Errorf("externalAddress %q, want 127.4.0.9:6379", got.Status.ExternalAddress)
	}
	if h, p := cfgGet(t, srv, "cluster-announce-hostname"), cfgGet(t, srv, "cluster-preferred-endpoint-type"); h != "127.4.0.9" || p != "hostname" {
		t.Fatalf("server announces hostname %q, preferred endpoint %q", h, p)
	}
	// The server's own answer to clients now names the address.
	c, err := srv.admin()
	if err != nil {
		t.Fatal(err)
	}
	view, err := c.ClusterNodes(context.Background())
	c.Close()
	if me, _ := view.Myself(); err != nil || me.Hostname != "127.4.0.9" {
		t.Fatalf("CLUSTER NODES myself %+v (%v)", me, err)
	}

	// A restart loses what CONFIG SET did: it is announced again.
	srv.Restart()
	h.setPodStatus(pod, true, 1)
	testenv.WaitFor(t, "the address announced again after a restart", func() bool {
		return cfgGet(t, srv, "cluster-announce-hostname") == "127.4.0.9" && cfgGet(t, srv, "cluster-preferred-endpoint-type") == "hostname"
	})

	// NodePort: the node port differs from 6379, so only a server with
	// cluster-announce-client-port can announce it.
	host := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}}
	if err := env.Client.Create(context.Background(), host); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	updateStatus(h, host, func(n *corev1.Node) {
		n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.3.0.9"}}
	})
	admin, err := srv.admin()
	if err != nil {
		t.Fatal(err)
	}
	_, clientPort, err := admin.ConfigGet(context.Background(), resources.KeyAnnounceClientPort)
	admin.Close()
	if err != nil {
		t.Fatal(err)
	}
	update(h, h.node("c-0-0", nil), func(n *valkeyv1.ValkeyNode) {
		n.Spec.External = &valkeyv1.ExternalSpec{Mode: valkeyv1.ExternalModeNodePort}
	})
	if clientPort {
		got = h.waitNode("c-0-0", "announces its node port", func(n *valkeyv1.ValkeyNode) bool { return externalCond(n) == "True/Announced" })
		if h := cfgGet(t, srv, "cluster-announce-hostname"); h != "127.3.0.9" {
			t.Errorf("NodePort: announced hostname %q", h)
		}
		t.Logf("NodePort announced as %s (the server has %s)", got.Status.ExternalAddress, resources.KeyAnnounceClientPort)
	} else {
		got = h.waitNode("c-0-0", "refuses NodePort", func(n *valkeyv1.ValkeyNode) bool { return externalCond(n) == "False/AnnounceUnsupported" })
		t.Logf("NodePort on a server without %s: %s", resources.KeyAnnounceClientPort, condOf(got, valkeyv1.NodeConditionExternalAddressAnnounced).Message)
		if got.Status.ExternalAddress != "" {
			t.Errorf("externalAddress %q while the node port cannot be announced", got.Status.ExternalAddress)
		}
	}

	// spec.external removed: the Service goes, the server withdraws what it announced.
	update(h, h.node("c-0-0", nil), func(n *valkeyv1.ValkeyNode) { n.Spec.External = nil })
	got = h.waitNode("c-0-0", "withdraws its address", func(n *valkeyv1.ValkeyNode) bool { return externalCond(n) == "absent" })
	if got.Status.ExternalAddress != "" {
		t.Errorf("externalAddress %q after spec.external was removed", got.Status.ExternalAddress)
	}
	if h, p := cfgGet(t, srv, "cluster-announce-hostname"), cfgGet(t, srv, "cluster-preferred-endpoint-type"); h != "" || p != "ip" {
		t.Errorf("after withdrawal the server announces hostname %q, preferred endpoint %q", h, p)
	}
	testenv.WaitFor(t, "the Service deleted", func() bool {
		return apierrors.IsNotFound(env.Client.Get(context.Background(), h.key("c-0-0-external"), &corev1.Service{}))
	})
}

// TestExternalServiceRefused: a Service the API server refuses (here an annotation key it
// does not accept) is said in ExternalAddressAnnounced; the node still reports its pod.
func TestExternalServiceRefused(t *testing.T) {
	h := start(t)
	srv := startServer(t)
	h.serve("c-0-0", srv)
	h.create(h.configMap(""))
	h.create(h.node("c-0-0", func(n *valkeyv1.ValkeyNode) {
		n.Spec.External = &valkeyv1.ExternalSpec{Mode: valkeyv1.ExternalModeLoadBalancer, ServiceAnnotations: map[string]string{"not a key": "x"}}
	}))
	sts := h.statefulSet("c-0-0")
	h.runPod("c-0-0-0", sts.Spec.Template, "rev1", true)
	h.rollOut("c-0-0", "rev1")
	got := h.waitNode("c-0-0", "says the Service was refused", func(n *valkeyv1.ValkeyNode) bool {
		return externalCond(n) == "False/AddressPending" && n.Status.Ready
	})
	if m := condOf(got, valkeyv1.NodeConditionExternalAddressAnnounced).Message; !strings.Contains(m, "the API server refused its Service") {
		t.Errorf("message %q", m)
	}
}
