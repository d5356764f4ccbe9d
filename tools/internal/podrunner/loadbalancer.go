package podrunner

import (
	"context"
	"net/netip"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// loadBalancers stands in for a cloud provider's load-balancer controller: every Service
// of type LoadBalancer without a loadBalancerClass gets an address of the pool in
// status.loadBalancer.ingress, and the service proxy listens on that address and the
// Service's ports, forwarding to its ready pods as it does for ClusterIPs. An address
// goes back to the pool when its Service is deleted or stops being a LoadBalancer.
//
// The Services' status is the record of which address is whose, so a restarted runner
// hands out the same addresses and needs no finalizer: a Service deleted while the runner
// was down simply no longer holds its address.
type loadBalancers struct {
	r    *Runner
	pool netip.Prefix

	mu        sync.Mutex
	exhausted bool // logged once per exhaustion
	// pending holds addresses given out whose status write the informer has not shown
	// yet, so that the next pass does not give them out again.
	pending map[types.UID]netip.Addr
}

func newLoadBalancers(r *Runner, pool netip.Prefix) *loadBalancers {
	return &loadBalancers{r: r, pool: pool.Masked(), pending: map[types.UID]netip.Addr{}}
}

// lbStatusWrite is one Service whose status.loadBalancer must become ingress (nil clears it).
type lbStatusWrite struct {
	svc     *corev1.Service
	ingress []corev1.LoadBalancerIngress
}

// managedLoadBalancer reports whether the pool serves svc: a LoadBalancer Service that
// names no other implementation.
func managedLoadBalancer(svc *corev1.Service) bool {
	return svc.Spec.Type == corev1.ServiceTypeLoadBalancer && svc.Spec.LoadBalancerClass == nil
}

// planLoadBalancers decides every managed Service's address and the status writes that
// get there. An address a Service's status already holds stays its own (the older Service
// wins a duplicate); then pending ones; then the Service's spec.loadBalancerIP when it is
// a free pool address; else the lowest free one. A Service that is no LoadBalancer any
// more loses a pool address from its status. It returns the addresses of the managed
// Services and the writes, in a stable order.
func planLoadBalancers(pool netip.Prefix, services []*corev1.Service, pending map[types.UID]netip.Addr) (map[types.UID]netip.Addr, []lbStatusWrite) {
	services = slices.Clone(services)
	slices.SortFunc(services, func(a, b *corev1.Service) int {
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	inPool := func(s string) (netip.Addr, bool) {
		a, err := netip.ParseAddr(s)
		return a, err == nil && pool.Contains(a)
	}
	owner := map[netip.Addr]types.UID{}
	assigned := map[types.UID]netip.Addr{}
	claim := func(uid types.UID, a netip.Addr) bool {
		if _, taken := owner[a]; taken || !a.IsValid() {
			return false
		}
		owner[a], assigned[uid] = uid, a
		return true
	}
	var managed []*corev1.Service
	var writes []lbStatusWrite
	for _, svc := range services {
		if managedLoadBalancer(svc) {
			managed = append(managed, svc)
			for _, ing := range svc.Status.LoadBalancer.Ingress {
				if a, ok := inPool(ing.IP); ok && claim(svc.UID, a) {
					break
				}
			}
			continue
		}
		if svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
			for _, ing := range svc.Status.LoadBalancer.Ingress {
				if _, ok := inPool(ing.IP); ok {
					writes = append(writes, lbStatusWrite{svc: svc})
					break
				}
			}
		}
	}
	for _, svc := range managed {
		if _, ok := assigned[svc.UID]; !ok {
			claim(svc.UID, pending[svc.UID])
		}
	}
	next := pool.Addr().Next() // the prefix's own address is no host's
	for _, svc := range managed {
		if _, ok := assigned[svc.UID]; !ok {
			if a, ok := inPool(svc.Spec.LoadBalancerIP); !ok || !claim(svc.UID, a) {
				for ; pool.Contains(next) && !claim(svc.UID, next); next = next.Next() {
				}
			}
		}
		a, ok := assigned[svc.UID]
		if !ok {
			continue // the pool is exhausted
		}
		want := []corev1.LoadBalancerIngress{{IP: a.String(), IPMode: ptr.To(corev1.LoadBalancerIPModeVIP)}}
		if ing := svc.Status.LoadBalancer.Ingress; len(ing) != 1 || ing[0].IP != want[0].IP || ing[0].IPMode == nil || *ing[0].IPMode != *want[0].IPMode {
			writes = append(writes, lbStatusWrite{svc: svc, ingress: want})
		}
	}
	return assigned, writes
}

// sync brings the Services' status in line with the plan. It reports false when a write
// failed, so that the caller tries again.
func (lb *loadBalancers) sync(ctx context.Context) bool {
	services, err := lb.r.services.List(labels.Everything())
	if err != nil {
		return false
	}
	lb.mu.Lock()
	defer lb.mu.Unlock()
	assigned, writes := planLoadBalancers(lb.pool, services, lb.pending)
	lb.pending = assigned
	ok := true
	for _, w := range writes {
		svc := w.svc.DeepCopy()
		svc.Status.LoadBalancer = corev1.LoadBalancerStatus{Ingress: w.ingress}
		_, err := lb.r.cfg.Client.CoreV1().Services(svc.Namespace).UpdateStatus(ctx, svc, metav1.UpdateOptions{})
		switch {
		case apierrors.IsNotFound(err), apierrors.IsConflict(err):
			// Gone, or changed since the cache saw it: the informer's event brings the
			// newer version and another pass.
		case err != nil:
			ok = false
			lb.r.log.Warn("Failed to write a Service's load-balancer address", "service", svc.Namespace+"/"+svc.Name, "err", err)
		case len(w.ingress) == 0:
			lb.r.log.Info("Released a Service's load-balancer address", "service", svc.Namespace+"/"+svc.Name)
		default:
			lb.r.log.Info("Gave a Service a load-balancer address", "service", svc.Namespace+"/"+svc.Name, "ip", w.ingress[0].IP)
		}
	}
	exhausted := len(assigned) < countManaged(services)
	if exhausted && !lb.exhausted {
		lb.r.log.Warn("Load-balancer pool exhausted: Services wait for an address", "pool", lb.pool.String())
	}
	lb.exhausted = exhausted
	return ok
}

func countManaged(services []*corev1.Service) int {
	n := 0
	for _, svc := range services {
		if managedLoadBalancer(svc) {
			n++
		}
	}
	return n
}

// addresses lists the pool addresses svc's status holds, which the proxy listens on.
func (lb *loadBalancers) addresses(svc *corev1.Service) []string {
	if lb == nil || !managedLoadBalancer(svc) {
		return nil
	}
	var out []string
	for _, ing := range svc.Status.LoadBalancer.Ingress {
		if a, err := netip.ParseAddr(ing.IP); err == nil && lb.pool.Contains(a) && a.IsLoopback() {
			out = append(out, a.String())
		}
	}
	return out
}
