package chartcheck

import (
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// upgrade runs `helm upgrade` against the test control plane and returns its output (with the
// NOTES).
func (h helm) upgrade(t *testing.T, kubeconfig, release, chart, namespace string, args ...string) string {
	t.Helper()
	out, err := h.run(append([]string{"upgrade", release, chart, "--kubeconfig", kubeconfig, "--namespace", namespace}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// A plain `helm install` of an operator that calls the node agent works on a cluster without
// the agent: the RoleBinding that would go into the agent's missing namespace is left out (a
// lookup decides), the NOTES say so, and a `helm upgrade` once the agent is installed binds
// it. A release installed after the agent is bound at once.
func TestOperatorInstallsBeforeTheAgent(t *testing.T) {
	h := newHelm(t)
	env, kubeconfig := controlPlane(t)
	ctx := t.Context()
	const agentNS, agentRelease = "late-agents", "late"
	sets := []string{"nodeAgent.release=" + agentRelease, "nodeAgent.namespace=" + agentNS}
	const notFound = "NODE AGENT NOT FOUND: namespace " + agentNS + " does not exist"
	clientBinding := func(fullname string) (*rbacv1.RoleBinding, error) {
		var rb rbacv1.RoleBinding
		err := env.Client.Get(ctx, client.ObjectKey{Namespace: agentNS, Name: fullname + "-node-agent-client"}, &rb)
		return &rb, err
	}
	short := func(chart string) string { return strings.TrimSuffix(chart, "-operator") }

	for _, chart := range agentCallers {
		release, ns, full := "early", "early-"+short(chart), "early-"+chart
		out := h.install(t, kubeconfig, release, filepath.Join(h.root, "charts", chart), ns, sets...)
		upgrade := "helm upgrade " + release + " <this chart> -n " + ns + " --reuse-values"
		if !strings.Contains(out, notFound) || !strings.Contains(out, upgrade) {
			t.Errorf("%s installed without the agent's namespace: NOTES lack %q and %q:\n%s", chart, notFound, upgrade, out)
		}
		// Everything else is installed, the rest of the wiring included.
		for _, o := range []struct {
			obj client.Object
			key client.ObjectKey
		}{
			{&appsv1.Deployment{}, client.ObjectKey{Namespace: ns, Name: full}},
			{&rbacv1.Role{}, client.ObjectKey{Namespace: ns, Name: full + "-node-agent-token"}},
			{&rbacv1.RoleBinding{}, client.ObjectKey{Namespace: ns, Name: full + "-node-agent-token"}},
			{&rbacv1.ClusterRoleBinding{}, client.ObjectKey{Name: full + "-node-agent-" + agentRole[chart]}},
		} {
			if err := env.Client.Get(ctx, o.key, o.obj); err != nil {
				t.Errorf("%s installed without the agent's namespace: %T %s: %v", chart, o.obj, o.key, err)
			}
		}
		if _, err := clientBinding(full); !apierrors.IsNotFound(err) {
			t.Errorf("%s: RoleBinding %s/%s-node-agent-client: %v, want NotFound", chart, agentNS, full, err)
		}
	}

	// The agent arrives; an upgrade binds each operator to it.
	h.install(t, kubeconfig, agentRelease, filepath.Join(h.root, "charts", "node-agent"), agentNS)
	agent := agentRelease + "-node-agent"
	for _, chart := range agentCallers {
		ns, full := "early-"+short(chart), "early-"+chart
		out := h.upgrade(t, kubeconfig, "early", filepath.Join(h.root, "charts", chart), ns, "--reuse-values")
		if strings.Contains(out, "NOT FOUND") {
			t.Errorf("%s upgraded with the agent installed, NOTES still say it is missing:\n%s", chart, out)
		}
		rb, err := clientBinding(full)
		if err != nil {
			t.Fatalf("%s after helm upgrade: %v", chart, err)
		}
		checkBinding(t, rb.RoleRef, rb.Subjects, "ClusterRole", agent+"-client", full, ns)
	}

	// Installed after the agent: bound at once.
	const release, ns = "after", "after-veltrix"
	out := h.install(t, kubeconfig, release, filepath.Join(h.root, "charts", "veltrix-operator"), ns, sets...)
	if strings.Contains(out, "NOT FOUND") {
		t.Errorf("installed after the agent, NOTES say it is missing:\n%s", out)
	}
	rb, err := clientBinding(release + "-veltrix-operator")
	if err != nil {
		t.Fatalf("installed after the agent: %v", err)
	}
	checkBinding(t, rb.RoleRef, rb.Subjects, "ClusterRole", agent+"-client", release+"-veltrix-operator", ns)
}
