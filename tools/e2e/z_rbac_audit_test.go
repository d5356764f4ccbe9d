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

// TestRBACMatchesUse reads the API server's audit log after every product's scenario (the
// file sorts after them and before z_uninstall_test.go) and compares, for each operator's
// ServiceAccount, the verbs and resources its bindings grant with those it used. It fails on
// any request RBAC or a ValidatingAdmissionPolicy refused (beyond expectedRefusals). The
// grants never used over the suite are listed, not yet failed on: a get the informer cache
// serves, an update the operator does as a patch, a delete only a rarer path takes leave many
// grants unexercised (about a third of each operator's, measured on one run) that the
// operators may still need, and each must be decided in the operators' markers first.
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
			use := rbacaudit.UseOf(events, user)
			t.Logf("%s: %d accesses granted by %s; %d used over the suite", user, len(granted), strings.Join(bindings, ", "), len(use.Used))
			var unused []string
			for _, a := range rbacaudit.Unused(granted, use) {
				if !slices.Contains(skippedGroups, a.Group) {
					unused = append(unused, a.String())
				}
			}
			if len(unused) > 0 {
				t.Logf("%s is granted and never used over the suite:\n  %s", user, strings.Join(unused, "\n  "))
			}
			seen := map[string]bool{}
			var refused []string
			for _, r := range use.Refused {
				if why, ok := expectedRefusals[s.name][r.Namespace]; ok {
					t.Logf("refused on purpose (%s): %s in %s", why, r.String(), r.Namespace)
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
