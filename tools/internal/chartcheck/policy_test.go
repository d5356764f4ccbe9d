package chartcheck

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

// managedBy is the app.kubernetes.io/managed-by value each operator's resources builders put
// on what it creates (services/<operator>/internal/resources), and ownerGroup the API group of
// its own kinds.
var managedBy = map[string]struct{ label, ownerGroup string }{
	"vald-operator":     {"vald-operator", "vald.vdaas.org"},
	"veltrix-operator":  {"veltrix-operator", "veltrix.io"},
	"valkey-operator":   {"valkey-operator", "valkey.io"},
	"memgraph-operator": {"memgraph-operator", "memgraph.com"},
}

const managedByKey = "app.kubernetes.io/managed-by"

// operatorClient acts as the operator's ServiceAccount (impersonated by the admin), so each
// request meets the API server's authorizer and admission chain (ValidatingAdmissionPolicy
// included) as it would from the operator's pod.
func operatorClient(t *testing.T, cfg *rest.Config, namespace, sa string) kubernetes.Interface {
	t.Helper()
	cfg = rest.CopyConfig(cfg)
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:" + namespace + ":" + sa,
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
	}
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func adminClient(t *testing.T, cfg *rest.Config) kubernetes.Interface {
	t.Helper()
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func createNamespace(t *testing.T, c kubernetes.Interface, name string) {
	t.Helper()
	_, err := c.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// refusedBy checks that err is the API server's 403 and, when policy is set, that the
// ValidatingAdmissionPolicy of that name refused it (not RBAC).
func refusedBy(err error, policy string) string {
	switch {
	case err == nil:
		return "allowed"
	case !apierrors.IsForbidden(err):
		return fmt.Sprintf("failed with %v, want 403 Forbidden", err)
	case policy != "" && !strings.Contains(err.Error(), policy):
		return fmt.Sprintf("refused by something else than the policy %s: %v", policy, err)
	}
	return ""
}

// managedObject is a Secret, ConfigMap or ServiceAccount the operator writes. relabel
// changes the object with a JSON merge patch (an UPDATE to admission, as an apply or an
// update is): it sets the managed-by label to value (removes it when nil) and changes a field.
type managedObject struct {
	resource string
	create   func(ctx context.Context, c kubernetes.Interface, ns, name string, labels map[string]string) error
	change   string // the field the patch changes, beside the label
}

func (o managedObject) relabel(ctx context.Context, c kubernetes.Interface, ns, name string, value *string) error {
	v := "null"
	if value != nil {
		v = strconv.Quote(*value)
	}
	patch := []byte(fmt.Sprintf(`{"metadata":{"labels":{%q:%s}},%s}`, managedByKey, v, o.change))
	var err error
	switch o.resource {
	case "secrets":
		_, err = c.CoreV1().Secrets(ns).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
	case "configmaps":
		_, err = c.CoreV1().ConfigMaps(ns).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
	default:
		_, err = c.CoreV1().ServiceAccounts(ns).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
	}
	return err
}

func (o managedObject) delete(ctx context.Context, c kubernetes.Interface, ns, name string) error {
	switch o.resource {
	case "secrets":
		return c.CoreV1().Secrets(ns).Delete(ctx, name, metav1.DeleteOptions{})
	case "configmaps":
		return c.CoreV1().ConfigMaps(ns).Delete(ctx, name, metav1.DeleteOptions{})
	default:
		return c.CoreV1().ServiceAccounts(ns).Delete(ctx, name, metav1.DeleteOptions{})
	}
}

var managedObjects = []managedObject{
	{
		resource: "secrets",
		create: func(ctx context.Context, c kubernetes.Interface, ns, name string, labels map[string]string) error {
			_, err := c.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
				Type: corev1.SecretTypeOpaque, Data: map[string][]byte{"k": []byte("v")}}, metav1.CreateOptions{})
			return err
		},
		change: `"data":{"k":"Y2hhbmdlZA=="}`,
	},
	{
		resource: "configmaps",
		create: func(ctx context.Context, c kubernetes.Interface, ns, name string, labels map[string]string) error {
			_, err := c.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
				Data: map[string]string{"k": "v"}}, metav1.CreateOptions{})
			return err
		},
		change: `"data":{"k":"changed"}`,
	},
	{
		resource: "serviceaccounts",
		create: func(ctx context.Context, c kubernetes.Interface, ns, name string, labels map[string]string) error {
			_, err := c.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, metav1.CreateOptions{})
			return err
		},
		change: `"automountServiceAccountToken":true`,
	},
}

// Each operator chart's ValidatingAdmissionPolicy holds the operator's ServiceAccount to the
// Secrets, ConfigMaps and ServiceAccounts it manages, on a real API server: with the identity
// of the ServiceAccount the chart installs, a labelled object is created, and an unlabelled
// one, a Secret of type service-account-token (which the token controller would fill with a
// token of kube-system's ServiceAccount), a change or deletion of kube-system's objects (even
// one adding the label), a label removed, and a token for a kube-system ServiceAccount are
// refused. What RBAC already refuses (the vald operator writes none of these) is refused
// too. An unlabelled Secret controlled by the operator's own kind may be labelled again
// (adoption), one controlled by another kind may not.
func TestOperatorWritesOnlyWhatItManages(t *testing.T) {
	h := newHelm(t)
	env, kubeconfig := controlPlane(t)
	ctx := t.Context()
	admin := adminClient(t, env.Config)

	// kube-system's objects the operators must leave alone, made by the admin.
	const victim = "victim"
	for _, o := range managedObjects {
		if err := o.create(ctx, admin, "kube-system", victim, nil); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("kube-system %s %s: %v", o.resource, victim, err)
		}
	}

	for _, chart := range operators {
		t.Run(chart, func(t *testing.T) {
			short := strings.TrimSuffix(chart, "-operator")
			ns, app := "pol-"+short, "pol-"+short+"-app"
			createNamespace(t, admin, app)
			h.install(t, kubeconfig, "pol", filepath.Join(h.root, "charts", chart), ns)
			sa, policy := "pol-"+chart, "pol-"+chart+"-managed-objects"
			op := operatorClient(t, env.Config, ns, sa)
			label := managedBy[chart].label
			mine := map[string]string{managedByKey: label}
			others := map[string]string{managedByKey: "someone-else"}
			can := func(verb, resource, namespace string) bool {
				t.Helper()
				ok, err := allowed(ctx, env.Client, ns, sa, probe{namespace, verb, "", resource, "", ""})
				if err != nil {
					t.Fatal(err)
				}
				return ok
			}
			// RBAC and the policy reach the API server through informers: wait until a
			// labelled Secret (or ConfigMap) the operator may create goes through and an
			// unlabelled one is refused by the policy.
			var probeObj *managedObject
			for i := range managedObjects {
				if probeObj == nil && can("create", managedObjects[i].resource, app) {
					probeObj = &managedObjects[i]
				}
			}
			if probeObj != nil {
				n := 0
				err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
					n++
					name := fmt.Sprintf("settle-%d", n)
					// Forbidden until RBAC settles: not an error, try again.
					if refusedBy(probeObj.create(ctx, op, app, name+"-l", mine), "") != "allowed" {
						return false, nil
					}
					return refusedBy(probeObj.create(ctx, op, app, name+"-u", nil), policy) == "", nil
				})
				if err != nil {
					t.Errorf("waiting for RBAC and the policy %s to take effect: %v", policy, err)
				}
			}

			checked := 0
			expect := func(what string, err error, policy string) {
				t.Helper()
				checked++
				if why := refusedBy(err, policy); why != "" {
					t.Errorf("%s: %s", what, why)
				}
			}
			for _, o := range managedObjects {
				creates, patches, deletes := can("create", o.resource, app), can("patch", o.resource, app), can("delete", o.resource, app)
				// Whatever RBAC already refuses is refused, whatever the labels.
				pol := func(rbac bool) string {
					if rbac {
						return policy
					}
					return ""
				}
				if creates {
					if err := o.create(ctx, op, app, "labelled", mine); err != nil {
						t.Errorf("creating a labelled %s in %s: %v", o.resource, app, err)
					}
				} else {
					expect("creating a labelled "+o.resource+" (RBAC)", o.create(ctx, op, app, "labelled", mine), "")
				}
				expect("creating an unlabelled "+o.resource, o.create(ctx, op, app, "unlabelled", nil), pol(creates))
				expect("creating a "+o.resource+" labelled for another manager", o.create(ctx, op, app, "others", others), pol(creates))
				expect("creating a labelled "+o.resource+" in kube-system", o.create(ctx, op, "kube-system", "labelled-"+short, mine), pol(can("create", o.resource, "kube-system")))
				expect("changing kube-system's "+o.resource+" and adding the label", o.relabel(ctx, op, "kube-system", victim, &label), pol(can("patch", o.resource, "kube-system")))
				expect("deleting kube-system's "+o.resource, o.delete(ctx, op, "kube-system", victim), pol(can("delete", o.resource, "kube-system")))
				if creates && patches {
					expect("removing the label of a managed "+o.resource, o.relabel(ctx, op, app, "labelled", nil), policy)
					if err := o.relabel(ctx, op, app, "labelled", &label); err != nil {
						t.Errorf("changing a labelled %s: %v", o.resource, err)
					}
				}
				if creates && deletes {
					if err := o.delete(ctx, op, app, "labelled"); err != nil {
						t.Errorf("deleting a labelled %s: %v", o.resource, err)
					}
				}
				if err := o.create(ctx, admin, app, "users", nil); err != nil {
					t.Fatal(err)
				}
				expect("changing a user's "+o.resource+" in a cluster's namespace", o.relabel(ctx, op, app, "users", &label), pol(patches))
				expect("deleting a user's "+o.resource+" in a cluster's namespace", o.delete(ctx, op, app, "users"), pol(deletes))
			}

			// A Secret of type service-account-token makes the token controller write a token of
			// the ServiceAccount it names into it: kube-system's, here.
			tokenSecret := func(ns string) *corev1.Secret {
				return &corev1.Secret{
					ObjectMeta: metav1.ObjectMeta{Name: "sa-token", Labels: mine, Annotations: map[string]string{corev1.ServiceAccountNameKey: victim}},
					Type:       corev1.SecretTypeServiceAccountToken,
				}
			}
			for _, where := range []string{app, "kube-system"} {
				_, err := op.CoreV1().Secrets(where).Create(ctx, tokenSecret(where), metav1.CreateOptions{})
				rbac := can("create", "secrets", where)
				expect("creating a labelled service-account-token Secret in "+where, err, map[bool]string{true: policy}[rbac])
			}

			// Tokens: never for kube-system's ServiceAccount; for its own, as the node-agent
			// wiring needs (nodeAgent.enabled), the policy does not stand in the way.
			tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)}}
			_, err := op.CoreV1().ServiceAccounts("kube-system").CreateToken(ctx, victim, tr, metav1.CreateOptions{})
			expect("requesting a token for kube-system/"+victim, err, "")
			if slices.Contains(agentCallers, chart) {
				if _, err := op.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, tr, metav1.CreateOptions{}); err != nil {
					t.Errorf("requesting a token for its own ServiceAccount %s/%s: %v", ns, sa, err)
				}
			}

			// Adoption: an unlabelled Secret controlled by one of the operator's own kinds may
			// get its label back; one controlled by another kind may not.
			if can("patch", "secrets", app) {
				for _, tc := range []struct {
					group string
					ok    bool
				}{{managedBy[chart].ownerGroup, true}, {"apps", false}} {
					name := "owned-by-" + strings.ReplaceAll(tc.group, ".", "-")
					s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, OwnerReferences: []metav1.OwnerReference{{
						APIVersion: tc.group + "/v1", Kind: "Owner", Name: "owner", UID: "00000000-0000-0000-0000-000000000001", Controller: ptr.To(true),
					}}}}
					if _, err := admin.CoreV1().Secrets(app).Create(ctx, s, metav1.CreateOptions{}); err != nil {
						t.Fatal(err)
					}
					err := managedObjects[0].relabel(ctx, op, app, name, &label)
					if tc.ok && err != nil {
						t.Errorf("labelling again a Secret controlled by %s: %v", tc.group, err)
					}
					if !tc.ok {
						expect("labelling a Secret controlled by "+tc.group, err, policy)
					}
				}
			}
			t.Logf("%s: %d refusals checked", chart, checked)
		})
	}
}

// roleRules reads the controller's ClusterRole rules from charts/<chart>/files/role.yaml.
func roleRules(t *testing.T, root, chart string) []rbacv1.PolicyRule {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "charts", chart, "files", "role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var rules []rbacv1.PolicyRule
	for _, doc := range strings.Split(string(b), "\n---") {
		var cr rbacv1.ClusterRole
		if err := yaml.Unmarshal([]byte(doc), &cr); err != nil {
			t.Fatal(err)
		}
		if cr.Kind == "ClusterRole" {
			rules = append(rules, cr.Rules...)
		}
	}
	if len(rules) == 0 {
		t.Fatalf("charts/%s/files/role.yaml has no rules", chart)
	}
	return rules
}

// With watchNamespaces, the operator's rights on namespaced resources hold in those
// namespaces only, and its rights on cluster-scoped ones stay: checked for every rule of the
// controller's role with SubjectAccessReviews, the scope of each resource as the API
// server's discovery reports it, and with real requests of the operator's identity.
func TestWatchNamespacesLimitTheOperator(t *testing.T) {
	h := newHelm(t)
	env, kubeconfig := controlPlane(t)
	ctx := t.Context()
	admin := adminClient(t, env.Config)
	// Scope of every resource the API server serves; kinds it lacks (servicemonitors
	// without prometheus-operator) are namespaced, as the chart takes them.
	clusterScoped := map[schema.GroupResource]bool{}
	lists, err := admin.Discovery().ServerPreferredResources()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range l.APIResources {
			if !r.Namespaced {
				clusterScoped[schema.GroupResource{Group: gv.Group, Resource: r.Name}] = true
			}
		}
	}
	clusterScoped[schema.GroupResource{Group: "nodeagent.opsuite.io", Resource: "nodes"}] = true

	for _, chart := range operators {
		t.Run(chart, func(t *testing.T) {
			short := strings.TrimSuffix(chart, "-operator")
			ns := "wn-" + short
			watched := []string{ns + "-a", ns + "-b"}
			outside := ns + "-other"
			for _, n := range append(slices.Clone(watched), outside) {
				createNamespace(t, admin, n)
			}
			h.install(t, kubeconfig, "wn", filepath.Join(h.root, "charts", chart), ns, "watchNamespaces={"+strings.Join(watched, ",")+"}")
			sa := "wn-" + chart
			decide := func(p probe) bool {
				t.Helper()
				ok, err := allowed(ctx, env.Client, ns, sa, p)
				if err != nil {
					t.Fatal(err)
				}
				return ok
			}
			rules := roleRules(t, h.root, chart)
			first := rules[0]
			settle := probe{verb: first.Verbs[0], group: first.APIGroups[0], resource: first.Resources[0]}
			if !clusterScoped[schema.GroupResource{Group: settle.group, Resource: strings.Split(settle.resource, "/")[0]}] {
				settle.namespace = watched[1]
			}
			if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
				return decide(settle), nil
			}); err != nil {
				t.Fatalf("%s never allowed: %v", settle, err)
			}
			var granted, withheld int
			for _, r := range rules {
				for _, g := range r.APIGroups {
					for _, res := range r.Resources {
						resource, sub, _ := strings.Cut(res, "/")
						for _, verb := range r.Verbs {
							p := probe{verb: verb, group: g, resource: resource, subresource: sub}
							if clusterScoped[schema.GroupResource{Group: g, Resource: resource}] {
								if !decide(p) {
									t.Errorf("cluster-scoped %s withheld", p)
								}
								granted++
								continue
							}
							for _, n := range watched {
								p.namespace = n
								if !decide(p) {
									t.Errorf("%s withheld in a watched namespace", p)
								}
								granted++
							}
							for _, n := range []string{outside, "kube-system", ""} {
								p.namespace = n
								if decide(p) {
									t.Errorf("%s allowed outside the watched namespaces", p)
								}
								withheld++
							}
						}
					}
				}
			}

			// The operator's own requests.
			op := operatorClient(t, env.Config, ns, sa)
			mine := map[string]string{managedByKey: managedBy[chart].label}
			if decide(probe{watched[0], "create", "", "secrets", "", ""}) {
				if err := managedObjects[0].create(ctx, op, watched[0], "labelled", mine); err != nil {
					t.Errorf("creating a labelled Secret in watched %s: %v", watched[0], err)
				}
			}
			if why := refusedBy(managedObjects[0].create(ctx, op, outside, "labelled", mine), ""); why != "" {
				t.Errorf("creating a labelled Secret in %s: %s", outside, why)
			}
			_, err := op.CoreV1().Secrets("").List(ctx, metav1.ListOptions{})
			if why := refusedBy(err, ""); why != "" {
				t.Errorf("listing the Secrets of every namespace: %s", why)
			}
			_, err = op.CoreV1().Secrets("kube-system").Get(ctx, "victim", metav1.GetOptions{})
			if why := refusedBy(err, ""); why != "" {
				t.Errorf("reading a Secret of kube-system: %s", why)
			}
			t.Logf("%s: %d requests granted where they should be, %d withheld outside %v", chart, granted, withheld, watched)
		})
	}
}
