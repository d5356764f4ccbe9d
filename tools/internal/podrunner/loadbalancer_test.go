package podrunner

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// lbWorld is the Services a planner sees, with the writes of each pass applied, as the
// informer would show them on the next pass.
type lbWorld struct {
	pool     netip.Prefix
	services []*corev1.Service
	pending  map[types.UID]netip.Addr
	created  int
}

func (w *lbWorld) add(name string, typ corev1.ServiceType, mutate ...func(*corev1.Service)) *corev1.Service {
	w.created++
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name),
			CreationTimestamp: metav1.NewTime(time.Unix(int64(w.created), 0))},
		Spec: corev1.ServiceSpec{Type: typ},
	}
	for _, m := range mutate {
		m(svc)
	}
	w.services = append(w.services, svc)
	return svc
}

func (w *lbWorld) remove(name string) {
	w.services = slices.DeleteFunc(w.services, func(s *corev1.Service) bool { return s.Name == name })
}

func (w *lbWorld) get(name string) *corev1.Service {
	for _, s := range w.services {
		if s.Name == name {
			return s
		}
	}
	return nil
}

// pass plans once, applies the writes and returns them as "name=ip" ("name=" clears).
func (w *lbWorld) pass(apply bool) []string {
	assigned, writes := planLoadBalancers(w.pool, w.services, w.pending)
	w.pending = assigned
	var out []string
	for _, wr := range writes {
		ip := ""
		if len(wr.ingress) > 0 {
			ip = wr.ingress[0].IP
		}
		out = append(out, wr.svc.Name+"="+ip)
		if apply {
			wr.svc.Status.LoadBalancer.Ingress = wr.ingress
		}
	}
	return out
}

// addresses lists "name=ip" of every Service's status, in creation order.
func (w *lbWorld) addresses() string {
	var out []string
	for _, s := range w.services {
		for _, ing := range s.Status.LoadBalancer.Ingress {
			out = append(out, s.Name+"="+ing.IP)
		}
	}
	return strings.Join(out, " ")
}

func TestPlanLoadBalancers(t *testing.T) {
	w := &lbWorld{pool: netip.MustParsePrefix("127.4.0.0/30")} // 127.4.0.1-3 to give out
	check := func(step string, got []string, want ...string) {
		t.Helper()
		if !slices.Equal(got, want) {
			t.Errorf("%s: writes %v, want %v (status now: %s)", step, got, want, w.addresses())
		}
	}
	lb := corev1.ServiceTypeLoadBalancer

	w.add("a", lb)
	w.add("plain", corev1.ServiceTypeClusterIP)
	w.add("b", lb)
	w.add("other-class", lb, func(s *corev1.Service) { s.Spec.LoadBalancerClass = ptr.To("example.com/lb") })
	check("first pass", w.pass(true), "a=127.4.0.1", "b=127.4.0.2")
	check("second pass changes nothing", w.pass(true))

	// A write the informer has not shown yet: the address stays promised, not handed out
	// twice (the write is repeated until the status shows it).
	w.add("c", lb)
	check("c planned", w.pass(false), "c=127.4.0.3")
	w.add("d", lb)
	check("c pending, d waits for a free address", w.pass(true), "c=127.4.0.3")
	if got := w.get("d").Status.LoadBalancer.Ingress; len(got) != 0 {
		t.Errorf("d got %v from an exhausted pool", got)
	}

	// Deleting a releases its address to d, the next in line.
	w.remove("a")
	check("a deleted", w.pass(true), "d=127.4.0.1")

	// b stops being a LoadBalancer: its status loses the address, which is free again.
	w.get("b").Spec.Type = corev1.ServiceTypeClusterIP
	check("b now ClusterIP", w.pass(true), "b=")
	w.add("e", lb, func(s *corev1.Service) { s.Spec.LoadBalancerIP = "127.4.0.3" }) // taken: ignored
	check("e gets b's address", w.pass(true), "e=127.4.0.2")
	check("steady", w.pass(true))
	if got, want := w.addresses(), "c=127.4.0.3 d=127.4.0.1 e=127.4.0.2"; got != want {
		t.Errorf("addresses %q, want %q", got, want)
	}

	// Two Services claim one address (state restored from elsewhere): the older keeps it.
	w = &lbWorld{pool: netip.MustParsePrefix("127.8.0.0/24")}
	for _, name := range []string{"old", "new"} {
		w.add(name, lb, func(s *corev1.Service) {
			s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "127.8.0.7", IPMode: ptr.To(corev1.LoadBalancerIPModeVIP)}}
		})
	}
	w.add("outside", lb, func(s *corev1.Service) {
		s.Spec.LoadBalancerIP = "127.8.0.9"
		s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "10.0.0.1"}}
	})
	check("duplicate and an address outside the pool", w.pass(true), "new=127.8.0.1", "outside=127.8.0.9")

	// The restarted runner starts with no pending addresses and reads them back from status.
	w.pending = nil
	check("restart", w.pass(true))
}

// TestPlanLoadBalancersManyPasses churns Services and checks after every pass that no two
// hold one address and every LoadBalancer holds one once the pool allows.
func TestPlanLoadBalancersManyPasses(t *testing.T) {
	w := &lbWorld{pool: netip.MustParsePrefix("127.4.0.0/28")} // 15 addresses
	for i := range 200 {
		switch i % 5 {
		case 0, 1, 2:
			w.add(fmt.Sprintf("s%d", i), corev1.ServiceTypeLoadBalancer)
		case 3:
			w.remove(w.services[(i*7)%len(w.services)].Name)
		case 4:
			s := w.services[(i*3)%len(w.services)]
			s.Spec.Type = corev1.ServiceTypeNodePort
		}
		w.pass(i%4 != 0) // every fourth pass's writes are lost
		seen := map[string]string{}
		waiting := 0
		for _, s := range w.services {
			for _, ing := range s.Status.LoadBalancer.Ingress {
				if other, dup := seen[ing.IP]; dup {
					t.Fatalf("pass %d: %s and %s both hold %s", i, other, s.Name, ing.IP)
				}
				seen[ing.IP] = s.Name
				if s.Spec.Type != corev1.ServiceTypeLoadBalancer && i%4 != 0 {
					t.Fatalf("pass %d: %s is %s and still holds %s", i, s.Name, s.Spec.Type, ing.IP)
				}
			}
			if s.Spec.Type == corev1.ServiceTypeLoadBalancer && len(s.Status.LoadBalancer.Ingress) == 0 {
				waiting++
			}
		}
		if i%4 != 0 && waiting > 0 && len(seen) < 15 {
			t.Fatalf("pass %d: %d Services wait while only %d of 15 addresses are used: %s", i, waiting, len(seen), w.addresses())
		}
	}
}
