package podrunner

import (
	"errors"
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// serviceProxy stands in for kube-proxy: it listens on every Service's ClusterIP and TCP
// port (ClusterIPs are in 127.0.0.0/8, so binding needs no set-up) and forwards each
// connection to a ready pod the Service selects. The "kubernetes" Service forwards to the
// apiserver. Webhooks and clients that dial a Service's ClusterIP work through it. It
// listens on a LoadBalancer Service's pool address (loadBalancers) the same way, which is
// how a client outside the cluster reaches it.
type serviceProxy struct {
	r         *Runner
	mu        sync.Mutex
	closed    bool
	listeners map[string]*proxyListener
}

type proxyListener struct {
	ln        net.Listener
	namespace string
	name      string
	port      corev1.ServicePort
	next      atomic.Uint32
}

func newServiceProxy(r *Runner) *serviceProxy {
	return &serviceProxy{r: r, listeners: map[string]*proxyListener{}}
}

// sync opens listeners for new Service ports and closes those of removed ones.
func (p *serviceProxy) sync() {
	services, err := p.r.services.List(labels.Everything())
	if err != nil {
		return
	}
	want := map[string]*proxyListener{}
	for _, svc := range services {
		// The ClusterIP and, for a LoadBalancer, the address the pool gave it.
		ips := p.r.lb.addresses(svc)
		if ip := svc.Spec.ClusterIP; ip != "" && ip != corev1.ClusterIPNone {
			ips = append(ips, ip)
		}
		for _, ip := range ips {
			if parsed := net.ParseIP(ip); parsed == nil || !parsed.IsLoopback() {
				continue // never listen outside 127.0.0.0/8
			}
			for _, port := range svc.Spec.Ports {
				if port.Protocol != "" && port.Protocol != corev1.ProtocolTCP {
					continue
				}
				key := net.JoinHostPort(ip, strconv.Itoa(int(port.Port)))
				want[key] = &proxyListener{namespace: svc.Namespace, name: svc.Name, port: port}
			}
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	// A listener's fields never change after it starts serving (its connections read
	// them without a lock); a changed Service port gets a new listener.
	for key, l := range p.listeners {
		if w, ok := want[key]; !ok || w.namespace != l.namespace || w.name != l.name ||
			w.port.TargetPort != l.port.TargetPort || w.port.Protocol != l.port.Protocol {
			l.ln.Close()
			delete(p.listeners, key)
		}
	}
	for key, l := range want {
		if _, ok := p.listeners[key]; ok {
			continue
		}
		ln, err := net.Listen("tcp", key)
		if err != nil {
			p.r.log.Warn("Failed to listen on a Service address", "service", l.namespace+"/"+l.name, "addr", key, "err", err)
			continue
		}
		l.ln = ln
		p.listeners[key] = l
		go p.serve(l)
	}
}

func (p *serviceProxy) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for key, l := range p.listeners {
		l.ln.Close()
		delete(p.listeners, key)
	}
}

func (p *serviceProxy) serve(l *proxyListener) {
	for {
		conn, err := l.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(50 * time.Millisecond)
			continue
		}
		go p.forward(l, conn)
	}
}

func (p *serviceProxy) forward(l *proxyListener, conn net.Conn) {
	defer conn.Close()
	backends := p.backends(l)
	if len(backends) == 0 {
		return
	}
	start := int(l.next.Add(1))
	var upstream net.Conn
	var err error
	for i := range backends {
		upstream, err = net.DialTimeout("tcp", backends[(start+i)%len(backends)], 2*time.Second)
		if err == nil {
			break
		}
	}
	if upstream == nil {
		return
	}
	defer upstream.Close()
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		if tc, ok := dst.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
		done <- struct{}{}
	}
	go pipe(upstream, conn)
	go pipe(conn, upstream)
	<-done
	<-done
}

// backends lists the addresses of the ready pods behind a Service port.
func (p *serviceProxy) backends(l *proxyListener) []string {
	if l.namespace == "default" && l.name == "kubernetes" {
		return []string{net.JoinHostPort(p.r.cfg.APIServerHost, strconv.Itoa(p.r.cfg.APIServerPort))}
	}
	svc, err := p.r.services.Services(l.namespace).Get(l.name)
	if err != nil || len(svc.Spec.Selector) == 0 {
		return nil
	}
	pods, err := p.r.pods.Pods(l.namespace).List(labels.SelectorFromSet(svc.Spec.Selector))
	if err != nil {
		return nil
	}
	var out []string
	for _, pod := range pods {
		if pod.Status.PodIP == "" || pod.DeletionTimestamp != nil || !isReady(pod) {
			continue
		}
		port, ok := targetPort(pod, l.port)
		if ok {
			out = append(out, net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(port)))
		}
	}
	return out
}

func targetPort(pod *corev1.Pod, sp corev1.ServicePort) (int, bool) {
	tp := sp.TargetPort
	switch {
	case tp.Type == intstr.Int && tp.IntVal != 0:
		return int(tp.IntVal), true
	case tp.Type == intstr.String && tp.StrVal != "":
		for _, c := range pod.Spec.Containers {
			for _, cp := range c.Ports {
				if cp.Name == tp.StrVal {
					return int(cp.ContainerPort), true
				}
			}
		}
		return 0, false
	}
	return int(sp.Port), true
}
