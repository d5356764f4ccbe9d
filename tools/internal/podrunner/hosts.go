package podrunner

import (
	"fmt"
	"net"
	"os"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// hostEntry is one address and the names that resolve to it; short names only resolve
// for pods in the same namespace (as the search path would make them).
type hostEntry struct {
	ip        string
	ns        string
	fqdns     []string // <name>.<ns>.svc.<domain> and the like
	relatives []string // names relative to ns
}

// hostsTable answers name resolution for the pods the runner starts, instead of cluster
// DNS: services resolve to their ready pods (there is no kube-proxy, so a Service's
// ClusterIP would answer nothing), pods with hostname and subdomain to their own address.
func (r *Runner) hostsTable() []hostEntry {
	domain := r.cfg.ClusterDomain
	// First entry: the apiserver, until the "kubernetes" Service is seen.
	var table []hostEntry
	table = append(table, hostEntry{ip: r.cfg.APIServerHost, ns: "default",
		fqdns:     []string{"kubernetes.default.svc." + domain, "kubernetes.default.svc", "kubernetes.default"},
		relatives: []string{"kubernetes"}})
	pods, _ := r.pods.List(labels.Everything())
	for _, p := range pods {
		if p.Status.PodIP == "" || p.DeletionTimestamp != nil || p.Spec.Subdomain == "" {
			continue
		}
		base := fmt.Sprintf("%s.%s.%s", podHostname(p), p.Spec.Subdomain, p.Namespace)
		table = append(table, hostEntry{ip: p.Status.PodIP, ns: p.Namespace,
			fqdns:     []string{base + ".svc." + domain, base + ".svc", base},
			relatives: []string{podHostname(p) + "." + p.Spec.Subdomain}})
	}
	// Services with a ClusterIP resolve to it (the runner's proxy listens there); headless
	// ones to the pods their selector picks, as the EndpointSlice controller would choose
	// them: ready pods, or all with publishNotReadyAddresses. (EndpointSlices themselves
	// cannot hold loopback addresses: API validation rejects them.)
	services, _ := r.services.List(labels.Everything())
	for _, svc := range services {
		base := svc.Name + "." + svc.Namespace
		entry := func(ip string) hostEntry {
			return hostEntry{ip: ip, ns: svc.Namespace,
				fqdns: []string{base + ".svc." + domain, base + ".svc", base}, relatives: []string{svc.Name}}
		}
		if ip := net.ParseIP(svc.Spec.ClusterIP); ip != nil && ip.IsLoopback() {
			table = append(table, entry(svc.Spec.ClusterIP))
			if svc.Namespace == "default" && svc.Name == "kubernetes" {
				table = table[1:] // drop the fallback entry
			}
			continue
		}
		if len(svc.Spec.Selector) == 0 {
			continue
		}
		sel := labels.SelectorFromSet(svc.Spec.Selector)
		for _, p := range pods {
			if p.Namespace != svc.Namespace || p.Status.PodIP == "" || p.DeletionTimestamp != nil ||
				!sel.Matches(labels.Set(p.Labels)) || (!svc.Spec.PublishNotReadyAddresses && !isReady(p)) {
				continue
			}
			table = append(table, entry(p.Status.PodIP))
		}
	}
	sort.SliceStable(table, func(i, j int) bool { return table[i].fqdns[0] < table[j].fqdns[0] })
	return table
}

// hostsFile renders /etc/hosts for pod.
func hostsFile(pod *corev1.Pod, domain string, table []hostEntry) []byte {
	var b strings.Builder
	b.WriteString("# Written by the localcluster process runner.\n")
	// In its own network namespace a container reaches the pod's other containers on
	// localhost; here every pod shares the host's, and the pod's servers listen on the
	// pod's address, so localhost names it. A client verifying a server certificate
	// against "localhost" (redis_exporter over TLS) then dials the name the certificate
	// holds.
	localhost := "127.0.0.1"
	if pod.Status.PodIP != "" {
		localhost = pod.Status.PodIP
	}
	fmt.Fprintf(&b, "%s\tlocalhost\n::1\tip6-localhost ip6-loopback\n", localhost)
	own := []string{podHostname(pod)}
	if pod.Spec.Subdomain != "" {
		base := fmt.Sprintf("%s.%s.%s", podHostname(pod), pod.Spec.Subdomain, pod.Namespace)
		own = []string{base + ".svc." + domain, podHostname(pod)}
	}
	fmt.Fprintf(&b, "%s\t%s\n", pod.Status.PodIP, strings.Join(own, " "))
	seen := map[string]bool{}
	for _, e := range table {
		names := e.fqdns
		if e.ns == pod.Namespace {
			names = append([]string{}, e.fqdns...)
			for _, rel := range e.relatives {
				// The pod's own hostname stays its own, as /etc/hosts wins over DNS.
				if rel != podHostname(pod) {
					names = append(names, rel)
				}
			}
		}
		line := fmt.Sprintf("%s\t%s\n", e.ip, strings.Join(names, " "))
		if !seen[line] {
			seen[line] = true
			b.WriteString(line)
		}
	}
	return []byte(b.String())
}

// writeHosts rewrites the pod's hosts file in place: it is bind-mounted over /etc/hosts
// as a file, so it must keep its inode.
func (w *podWorker) writeHosts(table []hostEntry) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.hostsPath == "" {
		return
	}
	data := hostsFile(w.pod, w.r.cfg.ClusterDomain, table)
	if string(data) == w.hostsData {
		return
	}
	f, err := os.OpenFile(w.hostsPath, os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	if _, err := f.WriteAt(data, 0); err == nil {
		_ = f.Truncate(int64(len(data)))
		w.hostsData = string(data)
	}
}

func podHostname(pod *corev1.Pod) string {
	h := pod.Spec.Hostname
	if h == "" {
		h = pod.Name
	}
	if len(h) > 63 {
		h = h[:63]
	}
	return h
}

func isReady(p *corev1.Pod) bool {
	if p.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
