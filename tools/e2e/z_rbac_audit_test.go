package e2e

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/opsuite/suite/tools/internal/rbacaudit"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// expectedRefusals are the refusals the suite provokes on purpose, per operator and namespace.
var expectedRefusals = map[string]map[string]string{
	"vald-operator": {"e2e-vald-rbac": "TestValdForbiddenWrites takes create and patch on ValdReleases out of the ClusterRole"},
}

// skippedGroups are granted to be checked by someone else than the API server: the node agent
// authorizes each call with a SubjectAccessReview on nodes.nodeagent.opsuite.io, a request of
// the agent, never one of the operator.
var skippedGroups = []string{"nodeagent.opsuite.io"}

// excuse is a grant an operator needs on a path the suite does not take: verbs on one
// resource, and that path.
type excuse struct {
	resource, group string
	verbs           []string
	why             string
}

// unexercised are, per operator, the grants needed on paths the suite does not take. Keep it
// short: a grant no path uses is pruned from the markers, and a path the suite can take cheaply
// is taken (TestValdSample prunes a ValdRelease) rather than listed here. An entry no rule
// grants any more fails the test, so none outlives its grant.
var unexercised = map[string][]excuse{
	"vald-operator": {
		{"nodes", "", []string{"list", "watch"}, "--require-node-pool-match (off in the suite) watches the Nodes' labels (reconciler.go SetupWithManager, nodepools.go)"},
	},
	"veltrix-operator": {
		{"servicemonitors", "monitoring.coreos.com", []string{"get", "list", "watch", "create", "patch", "delete"}, "the suite's cluster has no ServiceMonitor CRD, so children.go serviceMonitor only finds it missing; with the Prometheus Operator it syncs the ServiceMonitor as a child (cache and live get, apply, prune)"},
		{"secrets", "", []string{"delete"}, "spec.adminTokenSecret set on a cluster that ran with a generated token prunes the generated Secret (children.go adminToken)"},
		{"configmaps", "", []string{"delete"}, "shared/children prunes a child the cluster controls and no longer wants (a name an earlier operator version used; children.go set)"},
		{"services", "", []string{"delete"}, "as configmaps"},
		{"serviceaccounts", "", []string{"delete"}, "as configmaps"},
	},
	"valkey-operator": {
		{"deployments", "apps", []string{"create", "patch", "delete"}, "a ValkeyNode of workloadType Deployment runs as a Deployment, and a switch of the type prunes the other workload (node/children.go); the suite's nodes run as StatefulSets"},
		{"statefulsets", "apps", []string{"delete"}, "as deployments: a node switched to workloadType Deployment loses its StatefulSet"},
		{"poddisruptionbudgets", "policy", []string{"delete"}, "the PDB policy Disabled deletes the cluster's PodDisruptionBudget (cluster/infra.go pdb)"},
		{"pods", "", []string{"delete"}, "a member on a lost node whose pod is still there has it deleted with its claim (cluster/lost.go replaceLost); in TestValkeyLostNode the local cluster's runner deletes a deleted node's pods first, as the pod garbage collector would"},
		{"services", "", []string{"delete"}, "removing networking.external prunes each member's own Service (node/external.go syncExternal)"},
		{"servicemonitors", "monitoring.coreos.com", []string{"get", "create", "patch", "delete"}, "the suite's cluster has no ServiceMonitor CRD, so cluster/monitoring.go only finds it missing; TestServiceMonitor installs the CRD against the API server and writes, reads and deletes one"},
	},
	"memgraph-operator": {
		{"services", "", []string{"delete"}, "shared/children prunes a Service the cluster controls and no longer wants (a name an earlier operator version used; pass.go childrenOf)"},
		{"poddisruptionbudgets", "policy", []string{"delete"}, "as services, for a PodDisruptionBudget"},
		{"servicemonitors", "monitoring.coreos.com", []string{"list", "watch", "create", "patch", "delete"}, "the suite's cluster has no ServiceMonitor CRD, so monitoring.go only finds it missing; TestServiceMonitor installs the CRD against the API server and syncs one"},
		{"memgraphclusters", "memgraph.com", []string{"get", "update"}, "the start-up migration (internal/migrate) rewrites clusters stored by the previous version (spec.license, an object retentionPolicy) and re-reads one on a conflict; the suite stores none in the old shape, TestUpgradeKeepsLicenseAndRetention covers it against the API server"},
	},
}

// excusedForAll explains the grants every operator needs and no suite can be sure to use.
func excusedForAll(a rbacaudit.Access) bool {
	switch {
	case a.Verb == "update" && strings.HasSuffix(a.Resource, "/finalizers"):
		// Never a request of the operator's: the OwnerReferencesPermissionEnforcement
		// admission plugin (on in many clusters, not in the suite's) authorizes it within
		// the create of every child whose owner reference blocks its owner's deletion, as
		// controllerutil.SetControllerReference sets it.
		return true
	case a.Verb == "patch" && a.Group == "events.k8s.io" && a.Resource == "events":
		// client-go's events recorder patches an Event's series when the same event
		// recurs within minutes: whether one does in a run is a matter of timing.
		return true
	}
	return false
}

// TestRBACMatchesUse reads the API server's audit log after every product's scenario (the
// file sorts after them and before z_uninstall_test.go) and compares, for each operator's
// ServiceAccount, the verbs and resources its bindings grant with those it used. It fails on
// any request RBAC or a ValidatingAdmissionPolicy refused (beyond expectedRefusals), and on
// any grant never used over the suite that neither unexercised nor excusedForAll explains:
// the operators' +kubebuilder:rbac markers and chart templates grant what they use, no more.
func TestRBACMatchesUse(t *testing.T) {
	needCluster(t)
	path := os.Getenv("E2E_AUDIT_LOG")
	if path == "" {
		if env.local == nil {
			t.Fatal("no audit log: the suite runs on E2E_KUBECONFIG's cluster; set E2E_AUDIT_LOG to its API server's audit log (JSON, Metadata level for ServiceAccounts)")
		}
		path = env.local.AuditLog()
	}
	events, err := rbacaudit.ReadFile(path)
	if err != nil {
		t.Fatalf("reading the audit log: %v", err)
	}
	ctx := t.Context()
	crbs, err := env.client.RbacV1().ClusterRoleBindings().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rbs, err := env.client.RbacV1().RoleBindings("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range operators() {
		if !audited(s.name) {
			// Not silent: the other shard's cluster runs this operator's scenarios and audits it.
			t.Logf("%s: audited by the other shard (this is shard %s)", s.name, current.name)
			continue
		}
		t.Run(s.name, func(t *testing.T) {
			needInstalled(t, s.name)
			// Release <name> in e2e-<name>: the chart's fullname, and so its ServiceAccount, is
			// the release name.
			ns, sa := s.namespace(), s.name
			user := "system:serviceaccount:" + ns + ":" + sa
			isSubject := func(subjects []rbacv1.Subject) bool {
				return slices.ContainsFunc(subjects, func(x rbacv1.Subject) bool {
					return x.Kind == rbacv1.ServiceAccountKind && x.Name == sa && x.Namespace == ns
				})
			}
			var rules []rbacv1.PolicyRule
			var bindings []string
			roleRules := func(ref rbacv1.RoleRef, namespace string) {
				t.Helper()
				switch ref.Kind {
				case "ClusterRole":
					cr, err := env.client.RbacV1().ClusterRoles().Get(ctx, ref.Name, metav1.GetOptions{})
					if err != nil {
						t.Fatalf("ClusterRole %s: %v", ref.Name, err)
					}
					rules = append(rules, cr.Rules...)
				case "Role":
					r, err := env.client.RbacV1().Roles(namespace).Get(ctx, ref.Name, metav1.GetOptions{})
					if err != nil {
						t.Fatalf("Role %s/%s: %v", namespace, ref.Name, err)
					}
					rules = append(rules, r.Rules...)
				}
			}
			for _, b := range crbs.Items {
				if isSubject(b.Subjects) {
					roleRules(b.RoleRef, "")
					bindings = append(bindings, "ClusterRoleBinding/"+b.Name)
				}
			}
			for _, b := range rbs.Items {
				if isSubject(b.Subjects) {
					roleRules(b.RoleRef, b.Namespace)
					bindings = append(bindings, "RoleBinding/"+b.Namespace+"/"+b.Name)
				}
			}
			if len(rules) == 0 {
				t.Fatalf("no binding grants %s anything", user)
			}
			granted, wildcards := rbacaudit.Granted(rules)
			for _, w := range wildcards {
				t.Errorf("a wildcard rule is bound to %s: %+v", user, w)
			}
			granted = slices.DeleteFunc(granted, func(a rbacaudit.Access) bool { return slices.Contains(skippedGroups, a.Group) })
			use := rbacaudit.UseOf(events, user)
			excused := map[rbacaudit.Access]string{}
			for _, e := range unexercised[s.name] {
				for _, v := range e.verbs {
					excused[rbacaudit.Access{Verb: v, Group: e.group, Resource: e.resource}] = e.why
				}
			}
			for _, a := range granted {
				if excusedForAll(a) {
					excused[a] = "excusedForAll"
				}
			}
			unexplained, stale := rbacaudit.Compare(granted, use, excused)
			t.Logf("%s: %d accesses granted by %s; %d used over the suite; %d unused and excused",
				user, len(granted), strings.Join(bindings, ", "), len(granted)-len(rbacaudit.Unused(granted, use)), len(rbacaudit.Unused(granted, use))-len(unexplained))
			for _, a := range rbacaudit.Unused(granted, use) {
				if why, ok := excused[a]; ok {
					t.Logf("unused and excused: %s (%s)", a, why)
				}
			}
			if len(unexplained) > 0 {
				var lines []string
				for _, a := range unexplained {
					lines = append(lines, a.String())
				}
				t.Errorf("%s is granted and never used over the suite, with no path in unexercised that needs it: prune the +kubebuilder:rbac marker or chart rule (and `make generate`), or take the path in the suite:\n  %s", user, strings.Join(lines, "\n  "))
			}
			for _, a := range stale {
				t.Errorf("unexercised excuses %s for %s, which no rule grants any more: remove the entry", a, s.name)
			}
			seen := map[string]bool{}
			var refused []string
			for _, r := range use.Refused {
				if why, ok := expectedRefusals[s.name][r.Namespace]; ok {
					t.Logf("refused on purpose (%s): %s in %s", why, r.String(), r.Namespace)
					continue
				}
				// The suite stops the control plane (outage_test.go): a kube-apiserver just
				// started authorizes before its RBAC informers have synced and refuses, for a
				// moment, what every role grants: the leader-election lease every operator
				// holds a Role for, or any request whose refusal finds not even the
				// bootstrap ClusterRole system:discovery (always there once synced).
				if (r.Group == "coordination.k8s.io" && r.Resource == "leases" && r.Namespace == s.namespace()) ||
					strings.Contains(r.Message, `clusterrole.rbac.authorization.k8s.io "system:discovery" not found`) {
					t.Logf("refused while the restarted API server's RBAC cache filled: %s in %s", r.String(), r.Namespace)
					continue
				}
				line := r.By + " refused " + r.String() + " in " + r.Namespace + ": " + r.Message
				if !seen[line] {
					seen[line] = true
					refused = append(refused, line)
				}
			}
			if len(refused) > 0 {
				t.Errorf("%s was refused rights it needs over the suite:\n  %s", user, strings.Join(refused, "\n  "))
			}
		})
	}
}
