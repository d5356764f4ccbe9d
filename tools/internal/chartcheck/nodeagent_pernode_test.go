package chartcheck

import (
	"maps"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"
)

// TestNodeAgentChartPerNodeIdentity renders the default, tls.mode perNode: the CA key is in a
// Secret only the signer Deployment mounts, the agents get --tls-signer-name and no key pair,
// the CA ConfigMap tells clients to verify "*.<serverName>", and each side has the rights the
// CSR flow needs (services/node-agent/internal/certs), nothing of the other's. The weaker
// shared mode is there only when asked for by name.
func TestNodeAgentChartPerNodeIdentity(t *testing.T) {
	h := newHelm(t)
	out, err := h.template("na", "charts/node-agent", "--namespace", "nodes")
	if err != nil {
		t.Fatal(err)
	}
	objs := decode(t, out)
	const full, serverName = "na-node-agent", "na-node-agent.nodes.svc"

	ds := into[appsv1.DaemonSet](t, mustFind(t, objs, "DaemonSet", full))
	agent := ds.Spec.Template.Spec
	args := agent.Containers[0].Args
	if !slices.Contains(args, "--tls-signer-name="+serverName) || !slices.Contains(args, "--tls-signer-ttl=24h") {
		t.Errorf("agent args %q lack --tls-signer-name=%s and its ttl", args, serverName)
	}
	if slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--tls-cert") || strings.HasPrefix(a, "--tls-key") }) {
		t.Errorf("agent args %q still name a shared key pair", args)
	}
	for _, v := range agent.Volumes {
		if v.Secret != nil {
			t.Errorf("the agents mount Secret %s: no key may reach the nodes", v.Secret.SecretName)
		}
	}
	if _, ok := find(objs, "Secret", full+"-tls"); ok {
		t.Error("a shared key pair is still rendered")
	}

	ca := into[corev1.Secret](t, mustFind(t, objs, "Secret", full+"-signer-ca"))
	if len(ca.Data["tls.crt"]) == 0 || len(ca.Data["tls.key"]) == 0 {
		t.Errorf("signer CA Secret keys %v", slices.Sorted(maps.Keys(ca.Data)))
	}
	cm := into[corev1.ConfigMap](t, mustFind(t, objs, "ConfigMap", full+"-ca"))
	if cm.Data["serverName"] != "*."+serverName || strings.TrimSpace(cm.Data["ca.crt"]) != strings.TrimSpace(string(ca.Data["tls.crt"])) {
		t.Errorf("CA ConfigMap serverName %q (want *.%s), ca.crt the signer's: %v", cm.Data["serverName"], serverName,
			strings.TrimSpace(cm.Data["ca.crt"]) == strings.TrimSpace(string(ca.Data["tls.crt"])))
	}

	dep := into[appsv1.Deployment](t, mustFind(t, objs, "Deployment", full+"-signer"))
	signer := dep.Spec.Template.Spec
	sargs := signer.Containers[0].Args
	for _, want := range []string{"--agent-service-account=nodes/" + agent.ServiceAccountName, "--name=" + serverName} {
		if !slices.Contains(sargs, want) {
			t.Errorf("signer args %q lack %s", sargs, want)
		}
	}
	if len(sargs) == 0 || sargs[0] != "signer" {
		t.Errorf("signer args %q do not start with the signer subcommand", sargs)
	}
	var mountsCA bool
	for _, v := range signer.Volumes {
		if v.Secret != nil && v.Secret.SecretName == ca.Name {
			mountsCA = true
			// Non-root reads root's Secret files through its group.
			if sc := signer.SecurityContext; sc == nil || sc.FSGroup == nil || sc.RunAsUser == nil || *sc.FSGroup != *sc.RunAsUser ||
				v.Secret.DefaultMode == nil || *v.Secret.DefaultMode&0o040 == 0 {
				t.Errorf("the signer (runAsUser, fsGroup of %+v) cannot read the CA Secret (mode %#o)", sc, ptr.Deref(v.Secret.DefaultMode, 0))
			}
		}
	}
	if !mountsCA {
		t.Error("the signer does not mount the CA Secret")
	}
	if sel := labels.SelectorFromSet(ds.Spec.Selector.MatchLabels); sel.Matches(labels.Set(dep.Spec.Template.Labels)) {
		t.Errorf("the agents' selector %v matches the signer's pods %v: Services and resolvers would take it for an agent", sel, dep.Spec.Template.Labels)
	}
	if signer.ServiceAccountName == agent.ServiceAccountName {
		t.Error("the signer runs as the agents' ServiceAccount")
	}

	sr := into[rbacv1.ClusterRole](t, mustFind(t, objs, "ClusterRole", full+"-signer"))
	for _, want := range [][2]string{{"certificatesigningrequests", "list"}, {"certificatesigningrequests/approval", "update"}, {"certificatesigningrequests/status", "update"}, {"signers", "approve"}, {"signers", "sign"}} {
		if !hasRule(sr.Rules, "certificates.k8s.io", want[0], want[1]) {
			t.Errorf("signer ClusterRole lacks %s %s", want[0], want[1])
		}
	}
	for _, r := range sr.Rules {
		if slices.Contains(r.Resources, "signers") && !slices.Equal(r.ResourceNames, []string{"nodeagent.opsuite.io/serving"}) {
			t.Errorf("the signer may act for signers %v, want nodeagent.opsuite.io/serving alone", r.ResourceNames)
		}
	}
	crb := into[rbacv1.ClusterRoleBinding](t, mustFind(t, objs, "ClusterRoleBinding", full+"-signer"))
	checkBinding(t, crb.RoleRef, crb.Subjects, "ClusterRole", full+"-signer", signer.ServiceAccountName, "nodes")
	csr := into[rbacv1.ClusterRole](t, mustFind(t, objs, "ClusterRole", full+"-csr"))
	if !hasRule(csr.Rules, "certificates.k8s.io", "certificatesigningrequests", "create") || hasRule(csr.Rules, "certificates.k8s.io", "signers", "sign") {
		t.Errorf("agent CSR ClusterRole rules %+v", csr.Rules)
	}
	acrb := into[rbacv1.ClusterRoleBinding](t, mustFind(t, objs, "ClusterRoleBinding", full+"-csr"))
	checkBinding(t, acrb.RoleRef, acrb.Subjects, "ClusterRole", full+"-csr", agent.ServiceAccountName, "nodes")

	// tls.mode shared: one generated pair mounted by every agent, the shared name, no signer.
	out, err = h.template("na", "charts/node-agent", "--namespace", "nodes", "--set", "tls.mode=shared")
	if err != nil {
		t.Fatal(err)
	}
	objs = decode(t, out)
	checkSharedPair(t, objs, full, full+"-tls", serverName)
	secret := into[corev1.Secret](t, mustFind(t, objs, "Secret", full+"-tls"))
	if secret.Type != corev1.SecretTypeTLS || len(secret.Data["tls.crt"]) == 0 || len(secret.Data["tls.key"]) == 0 || len(secret.Data["ca.crt"]) == 0 {
		t.Errorf("TLS Secret type %s keys %v", secret.Type, slices.Sorted(maps.Keys(secret.Data)))
	}
	// A given Secret is a shared pair too: only with tls.mode=shared, said in so many words.
	if _, err := h.template("na", "charts/node-agent", "--set", "tls.existingSecret=mine"); err == nil ||
		!strings.Contains(err.Error(), "tls.mode=shared, which is weaker") {
		t.Errorf("existingSecret in perNode mode: %v", err)
	}
	out, err = h.template("na", "charts/node-agent", "--namespace", "nodes", "--set", "tls.mode=shared", "--set", "tls.existingSecret=mine")
	if err != nil {
		t.Fatal(err)
	}
	objs = decode(t, out)
	checkSharedPair(t, objs, full, "mine", serverName)
	if _, ok := find(objs, "Secret", full+"-tls"); ok {
		t.Error("a pair is generated beside tls.existingSecret")
	}
	if _, err := h.template("na", "charts/node-agent", "--set", "tls.mode=perNodes"); err == nil {
		t.Error("tls.mode perNodes accepted")
	}
}

// checkSharedPair: the agents serve the pair in Secret secret, mounted, and no signer runs.
func checkSharedPair(t *testing.T, objs []object, full, secret, serverName string) {
	t.Helper()
	agent := into[appsv1.DaemonSet](t, mustFind(t, objs, "DaemonSet", full)).Spec.Template.Spec
	if args := agent.Containers[0].Args; !slices.Contains(args, "--tls-cert=/etc/node-agent/tls/tls.crt") ||
		slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--tls-signer") }) {
		t.Errorf("shared mode agent args %q", args)
	}
	if !slices.ContainsFunc(agent.Volumes, func(v corev1.Volume) bool { return v.Secret != nil && v.Secret.SecretName == secret }) {
		t.Errorf("the agents do not mount Secret %s", secret)
	}
	for _, kind := range []string{"Deployment", "Secret", "ClusterRole"} {
		if _, ok := find(objs, kind, full+"-signer"+map[string]string{"Secret": "-ca"}[kind]); ok {
			t.Errorf("shared mode renders the signer's %s", kind)
		}
	}
	// A given Secret's CA is published once the Secret exists (lookup, not in helm template).
	if _, ok := find(objs, "ConfigMap", full+"-ca"); ok || secret == full+"-tls" {
		if got := into[corev1.ConfigMap](t, mustFind(t, objs, "ConfigMap", full+"-ca")).Data["serverName"]; got != serverName {
			t.Errorf("shared mode serverName %q, want %s", got, serverName)
		}
	}
}
