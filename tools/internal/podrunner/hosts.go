package podrunner

import (
	"fmt"
	"os"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
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
// DNS: services resolve to their ready endpoints (there is no kube-proxy, so a Service's
// ClusterIP would answer nothing), pods with hostname and subdomain to their own address.
func (r *Runner) hostsTable() []hostEntry {
	domain := r.cfg.ClusterDomain
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
	slices, _ := r.slices.List(labels.Everything())
	for _, s := range slices {
		svc := s.Labels[discoveryv1.LabelServiceName]
		if svc == "" || s.AddressType != discoveryv1.AddressTypeIPv4 {
			continue
		}
		base := svc + "." + s.Namespace
		for _, ep := range s.Endpoints {
			if ep.Conditions.Ready != nil && !*ep.Conditions.Ready {
				continue
			}
			for _, ip := range ep.Addresses {
				table = append(table, hostEntry{ip: ip, ns: s.Namespace,
					fqdns: []string{base + ".svc." + domain, base + ".svc", base}, relatives: []string{svc}})
				if ep.Hostname != nil {
					hb := *ep.Hostname + "." + base
					table = append(table, hostEntry{ip: ip, ns: s.Namespace,
						fqdns: []string{hb + ".svc." + domain, hb + ".svc", hb}, relatives: []string{*ep.Hostname + "." + svc}})
				}
			}
		}
	}
	sort.SliceStable(table, func(i, j int) bool { return table[i].fqdns[0] < table[j].fqdns[0] })
	return table
}

// hostsFile renders /etc/hosts for pod.
func hostsFile(pod *corev1.Pod, domain string, table []hostEntry) []byte {
	var b strings.Builder
	b.WriteString("# Written by the localcluster process runner.\n127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n")
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
			names = append(append([]string{}, e.fqdns...), e.relatives...)
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
