package chartcheck

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// install runs `helm install` against the test control plane.
// It returns helm's output (with the NOTES).
func (h helm) install(t *testing.T, kubeconfig, release, chart, namespace string, sets ...string) string {
	t.Helper()
	args := []string{"install", release, chart, "--kubeconfig", kubeconfig, "--namespace", namespace, "--create-namespace"}
	for _, s := range sets {
		args = append(args, "--set", s)
	}
	begin := time.Now()
	out, err := h.run(args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("helm install %s %s -n %s: %s", release, filepath.Base(chart), namespace, time.Since(begin).Round(time.Millisecond))
	return out
}

// From a fresh checkout, a plain `helm install` (no --set, no `helm dependency build`) of every
// chart succeeds against the real API server, which validates every object; the node agent
// goes first, as its callers' RoleBindings live in its namespace.
func TestChartsInstallFromAFreshCheckout(t *testing.T) {
	h := newHelm(t)
	env, kubeconfig := controlPlane(t)
	tree := checkout(t, h.root, "charts")
	h.install(t, kubeconfig, "node-agent", filepath.Join(tree, "charts", "node-agent"), "node-agent")
	for _, c := range operators {
		out := h.install(t, kubeconfig, c, filepath.Join(tree, "charts", c), c)
		const calls = "The operator calls the node agent node-agent in namespace node-agent"
		if slices.Contains(agentCallers, c) != strings.Contains(out, calls) {
			t.Errorf("%s NOTES (nodeAgent.enabled %v):\n%s", c, slices.Contains(agentCallers, c), out)
		}
		var dep appsv1.Deployment
		if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: c, Name: c}, &dep); err != nil {
			t.Errorf("after helm install %s: %v", c, err)
		}
	}
}

// probe is one request the operator's ServiceAccount might make.
type probe struct {
	namespace, verb, group, resource, subresource, name string
}

func (p probe) String() string {
	r := p.resource
	if p.group != "" {
		r += "." + p.group
	}
	if p.subresource != "" {
		r += "/" + p.subresource
	}
	if p.name != "" {
		r += " " + p.name
	}
	ns := p.namespace
	if ns == "" {
		ns = "(cluster)"
	}
	return fmt.Sprintf("%s %s in %s", p.verb, r, ns)
}

// allowed asks the API server's authorizer (SubjectAccessReview) whether the ServiceAccount
// may make the request.
func allowed(ctx context.Context, c client.Client, namespace, sa string, p probe) (bool, error) {
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:   "system:serviceaccount:" + namespace + ":" + sa,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: p.namespace, Verb: p.verb, Group: p.group, Resource: p.resource, Subresource: p.subresource, Name: p.name,
		},
	}}
	if err := c.Create(ctx, sar); err != nil {
		return false, err
	}
	return sar.Status.Allowed, nil
}

// An operator chart with nodeAgent.enabled lets its ServiceAccount do what calling the agent
// takes, and nothing more: every other request is decided as for the same chart with
// nodeAgent.enabled=false. The agent's chart is installed for real, so the roles bound are
// its roles.
func TestNodeAgentCallerAccess(t *testing.T) {
	h := newHelm(t)
	env, kubeconfig := controlPlane(t)
	ctx := t.Context()
	const agentNS, agentRelease, agent = "access-agents", "na", "na-node-agent"
	h.install(t, kubeconfig, agentRelease, filepath.Join(h.root, "charts", "node-agent"), agentNS)

	for _, chart := range agentCallers {
		t.Run(chart, func(t *testing.T) {
			short := strings.TrimSuffix(chart, "-operator")
			ns, baseNS := "access-"+short, "access-"+short+"-off"
			h.install(t, kubeconfig, "on", filepath.Join(h.root, "charts", chart), ns,
				"nodeAgent.release="+agentRelease, "nodeAgent.namespace="+agentNS)
			h.install(t, kubeconfig, "off", filepath.Join(h.root, "charts", chart), baseNS,
				"nodeAgent.release="+agentRelease, "nodeAgent.namespace="+agentNS, "nodeAgent.enabled=false")
			sa, baseSA := "on-"+chart, "off-"+chart
			for _, name := range []struct{ ns, sa string }{{ns, sa}, {baseNS, baseSA}} {
				var obj corev1.ServiceAccount
				if err := env.Client.Get(ctx, client.ObjectKey{Namespace: name.ns, Name: name.sa}, &obj); err != nil {
					t.Fatalf("the chart's ServiceAccount: %v", err)
				}
			}

			// What calling the agent takes. viaAgentOnly: no operator role grants it otherwise.
			want := []struct {
				probe
				viaAgentOnly bool
			}{
				{probe{ns, "create", "", "serviceaccounts", "token", sa}, true},
				{probe{agentNS, "get", "", "configmaps", "", agent + "-ca"}, true},
				{probe{agentNS, "list", "", "pods", "", ""}, false},
				{probe{agentNS, "watch", "", "pods", "", ""}, false},
				{probe{"", "get", "nodeagent.opsuite.io", "nodes", "", "node-1"}, true},
				{probe{"", "update", "nodeagent.opsuite.io", "nodes", "sysctls", "node-1"}, true},
			}
			// Disks only for an operator bound to the preparer role; the Memgraph operator
			// (role sysctls) raises sysctls and may never prepare or release a disk.
			disks := probe{"", "update", "nodeagent.opsuite.io", "nodes", "disks", "node-1"}
			var denied []probe
			if agentRole[chart] == "preparer" {
				want = append(want, struct {
					probe
					viaAgentOnly bool
				}{disks, true})
			} else {
				denied = append(denied, disks)
			}
			// Nearby requests the wiring must not open up.
			beyond := []probe{
				{ns, "create", "", "serviceaccounts", "token", "default"},
				{ns, "create", "", "serviceaccounts", "token", ""},
				{agentNS, "create", "", "serviceaccounts", "token", agent},
				{agentNS, "create", "", "serviceaccounts", "token", sa},
				{ns, "get", "", "serviceaccounts", "token", sa},
				{ns, "create", "", "serviceaccounts", "", ""},
				{ns, "update", "", "serviceaccounts", "", sa},
				{agentNS, "get", "", "configmaps", "", "other"},
				{agentNS, "watch", "", "configmaps", "", agent + "-ca"},
				{agentNS, "get", "", "pods", "", ""},
				{agentNS, "list", "", "configmaps", "", ""},
				{agentNS, "update", "", "configmaps", "", agent + "-ca"},
				{agentNS, "delete", "", "configmaps", "", agent + "-ca"},
				{ns, "get", "", "configmaps", "", agent + "-ca"},
				{"kube-system", "get", "", "configmaps", "", agent + "-ca"},
				{agentNS, "get", "", "secrets", "", agent + "-tls"},
				{agentNS, "list", "", "secrets", "", ""},
				{agentNS, "create", "", "pods", "", ""},
				{agentNS, "delete", "", "pods", "", ""},
				{agentNS, "create", "", "pods", "exec", ""},
				{agentNS, "update", "apps", "daemonsets", "", agent},
				{"kube-system", "list", "", "pods", "", ""},
				{"default", "watch", "", "pods", "", ""},
				{"", "list", "", "pods", "", ""},
				{"", "create", "nodeagent.opsuite.io", "nodes", "", ""},
				{"", "update", "nodeagent.opsuite.io", "nodes", "", "node-1"},
				{"", "delete", "nodeagent.opsuite.io", "nodes", "disks", "node-1"},
				{"", "patch", "nodeagent.opsuite.io", "nodes", "disks", "node-1"},
				{"", "update", "nodeagent.opsuite.io", "nodes", "other", "node-1"},
				{"", "update", "rbac.authorization.k8s.io", "clusterroles", "", agent + "-preparer"},
				{agentNS, "create", "rbac.authorization.k8s.io", "rolebindings", "", ""},
				{ns, "create", "rbac.authorization.k8s.io", "rolebindings", "", ""},
				{"", "update", "", "nodes", "", "node-1"},
			}

			// RBAC reaches the authorizer through its informers: wait until both releases'
			// bindings count before comparing.
			err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
				for _, w := range want {
					if ok, err := allowed(ctx, env.Client, ns, sa, w.probe); err != nil || !ok {
						return false, err
					}
				}
				return allowed(ctx, env.Client, baseNS, baseSA, probe{baseNS, "update", "coordination.k8s.io", "leases", "", ""})
			})
			if err != nil {
				for _, w := range want {
					ok, err := allowed(ctx, env.Client, ns, sa, w.probe)
					if err != nil {
						t.Fatal(err)
					}
					if !ok {
						t.Errorf("%s/%s may not %s", ns, sa, w.probe)
					}
				}
				t.Fatalf("waiting for the operator's access: %v", err)
			}
			// The same requests, for the release without the wiring (in its namespace).
			rebase := func(p probe) probe {
				if p.namespace == ns {
					p.namespace = baseNS
				}
				if p.name == sa {
					p.name = baseSA
				}
				return p
			}
			for _, w := range want {
				if !w.viaAgentOnly {
					continue
				}
				// An operator that manages that kind of object everywhere (the VeltrixDB
				// operator writes ConfigMaps in every cluster's namespace) holds this right
				// through its own ClusterRole: the same request on an unrelated object in an
				// unrelated namespace tells.
				unrelated := rebase(w.probe)
				unrelated.namespace, unrelated.name = "kube-public", "unrelated"
				if ok, err := allowed(ctx, env.Client, baseNS, baseSA, unrelated); err != nil {
					t.Fatal(err)
				} else if ok && w.resource != "serviceaccounts" && w.group == "" {
					continue
				}
				if ok, err := allowed(ctx, env.Client, baseNS, baseSA, rebase(w.probe)); err != nil {
					t.Fatal(err)
				} else if ok {
					t.Errorf("with nodeAgent.enabled=false, %s/%s may still %s", baseNS, baseSA, rebase(w.probe))
				}
			}
			for _, p := range denied {
				if ok, err := allowed(ctx, env.Client, ns, sa, p); err != nil {
					t.Fatal(err)
				} else if ok {
					t.Errorf("%s/%s (nodeAgent.role %s) may %s", ns, sa, agentRole[chart], p)
				}
			}
			for _, p := range beyond {
				on, err := allowed(ctx, env.Client, ns, sa, p)
				if err != nil {
					t.Fatal(err)
				}
				off, err := allowed(ctx, env.Client, baseNS, baseSA, rebase(p))
				if err != nil {
					t.Fatal(err)
				}
				if on != off {
					t.Errorf("%s: allowed %v with nodeAgent on, %v with it off: the wiring grants more than calling the agent takes", p, on, off)
				}
			}
			t.Logf("%s: %d requests allowed, %d refused, %d nearby ones decided as without the wiring", chart, len(want), len(denied), len(beyond))
		})
	}
}
