package rbacaudit

import (
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
)

// Lines as the API server writes them at Metadata level (trimmed to the fields read).
const sample = `{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","stage":"ResponseComplete","requestURI":"/api/v1/namespaces/a/secrets?limit=500","verb":"list","user":{"username":"system:serviceaccount:ops:op"},"objectRef":{"resource":"secrets","namespace":"a","apiVersion":"v1"},"responseStatus":{"metadata":{},"code":200}}
{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","stage":"ResponseStarted","requestURI":"/api/v1/namespaces/a/secrets?watch=true","verb":"watch","user":{"username":"system:serviceaccount:ops:op"},"objectRef":{"resource":"secrets","namespace":"a","apiVersion":"v1"},"responseStatus":{"metadata":{},"code":200}}
{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","stage":"ResponseComplete","requestURI":"/apis/apps/v1/namespaces/a/statefulsets/x","verb":"patch","user":{"username":"system:serviceaccount:ops:op"},"objectRef":{"resource":"statefulsets","namespace":"a","name":"x","apiGroup":"apps","apiVersion":"v1"},"responseStatus":{"metadata":{},"code":200}}
{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","stage":"ResponseComplete","requestURI":"/api/v1/namespaces/a/pods/p/status","verb":"patch","user":{"username":"system:serviceaccount:ops:op"},"objectRef":{"resource":"pods","subresource":"status","namespace":"a","name":"p","apiVersion":"v1"},"responseStatus":{"metadata":{},"code":200}}
{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","stage":"ResponseComplete","requestURI":"/api/v1/namespaces/kube-system/secrets/x","verb":"get","user":{"username":"system:serviceaccount:ops:op"},"objectRef":{"resource":"secrets","namespace":"kube-system","name":"x","apiVersion":"v1"},"responseStatus":{"metadata":{},"status":"Failure","reason":"Forbidden","code":403},"annotations":{"authorization.k8s.io/decision":"forbid","authorization.k8s.io/reason":""}}
{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","stage":"ResponseComplete","requestURI":"/apis/events.k8s.io/v1/namespaces/gone/events","verb":"create","user":{"username":"system:serviceaccount:ops:op"},"objectRef":{"resource":"events","namespace":"gone","apiGroup":"events.k8s.io","apiVersion":"v1"},"responseStatus":{"metadata":{},"status":"Failure","message":"unable to create new content in namespace gone because it is being terminated","reason":"Forbidden","code":403},"annotations":{"authorization.k8s.io/decision":"allow","authorization.k8s.io/reason":"RBAC: allowed"}}
{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","stage":"ResponseComplete","requestURI":"/api/v1/namespaces/kube-system/configmaps","verb":"create","user":{"username":"system:serviceaccount:ops:op"},"objectRef":{"resource":"configmaps","namespace":"kube-system","apiVersion":"v1"},"responseStatus":{"metadata":{},"status":"Failure","message":"denied by policy","reason":"Forbidden","code":403},"annotations":{"authorization.k8s.io/decision":"allow","validation.policy.admission.k8s.io/validation_failure":"[{\"message\":\"denied\"}]"}}
{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","stage":"ResponseComplete","requestURI":"/apis/apps/v1/namespaces/a/statefulsets/y?fieldManager=op\u0026force=true","verb":"patch","user":{"username":"system:serviceaccount:ops:op"},"objectRef":{"resource":"statefulsets","namespace":"a","name":"y","apiGroup":"apps","apiVersion":"v1"},"responseStatus":{"metadata":{},"code":201}}
{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","stage":"ResponseComplete","requestURI":"/api/v1/namespaces/a/configmaps/gone","verb":"get","user":{"username":"system:serviceaccount:ops:op"},"objectRef":{"resource":"configmaps","namespace":"a","name":"gone","apiVersion":"v1"},"responseStatus":{"metadata":{},"code":404}}
{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","stage":"ResponseComplete","requestURI":"/apis/apps/v1/namespaces/a/deployments","verb":"list","user":{"username":"system:serviceaccount:ops:other"},"objectRef":{"resource":"deployments","namespace":"a","apiGroup":"apps","apiVersion":"v1"},"responseStatus":{"metadata":{},"code":200}}
{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","stage":"ResponseStarted","requestURI":"/api/v1/namespaces/a/configmaps?allowWatchBookmarks=true\u0026resourceVersionMatch=NotOlderThan\u0026sendInitialEvents=true\u0026watch=true","verb":"watch","user":{"username":"system:serviceaccount:ops:op"},"objectRef":{"resource":"configmaps","namespace":"a","apiVersion":"v1"},"responseStatus":{"metadata":{},"code":200}}
{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","stage":"ResponseComplete","requestURI":"/metrics","verb":"get","user":{"username":"system:serviceaccount:ops:op"},"responseStatus":{"metadata":{},"code":200}}
`

func TestUnusedAndDenied(t *testing.T) {
	events, err := Read(strings.NewReader(sample))
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != 12 {
		t.Fatalf("read %d events, want 12", len(events))
	}
	u := UseOf(events, "system:serviceaccount:ops:op")
	rules := []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"secrets", "configmaps"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"apps"}, Resources: []string{"statefulsets", "deployments"}, Verbs: []string{"patch", "create"}},
		{APIGroups: []string{""}, Resources: []string{"pods/status"}, Verbs: []string{"patch"}},
		{APIGroups: []string{"*"}, Resources: []string{"things"}, Verbs: []string{"get"}},
		{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}},
	}
	granted, wildcards := Granted(rules)
	if len(granted) != 11 || len(wildcards) != 1 {
		t.Errorf("granted %v, wildcards %v: want 11 accesses and 1 wildcard rule", granted, wildcards)
	}
	var got []string
	for _, a := range Unused(granted, u) {
		got = append(got, a.String())
	}
	// The 404 of get configmaps got past RBAC: used; the watch-list of configmaps uses list
	// and watch; the apply answered 201 created a StatefulSet. Refusals are RBAC's and the
	// policy's 403s only.
	want := []string{"get secrets", "patch deployments.apps", "create deployments.apps"}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("unused %v, want %v", got, want)
	}
	var refused []string
	for _, r := range u.Refused {
		refused = append(refused, r.By+": "+r.String()+" in "+r.Namespace)
	}
	wantRefused := []string{"RBAC: get secrets in kube-system", "ValidatingAdmissionPolicy: create configmaps in kube-system"}
	if !slices.Equal(refused, wantRefused) {
		t.Errorf("refused %q, want %q", refused, wantRefused)
	}
	if u.Used[Access{"create", "events.k8s.io", "events"}] != 1 || u.Used[Access{"create", "apps", "statefulsets"}] != 1 {
		t.Errorf("used %v lacks the create of an event in a namespace being deleted (RBAC allowed it) or the apply that created", u.Used)
	}
	if u.Used[Access{"watch", "", "secrets"}] != 1 || u.Used[Access{"patch", "", "pods/status"}] != 1 {
		t.Errorf("used %v lacks the watch or the subresource patch", u.Used)
	}
}

func TestReadRefusesGarbage(t *testing.T) {
	if _, err := Read(strings.NewReader("{\"stage\":\"ResponseComplete\"}\nnot json\n")); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("err = %v, want line 2", err)
	}
}

func TestCompare(t *testing.T) {
	events, err := Read(strings.NewReader(sample))
	if err != nil {
		t.Fatal(err)
	}
	u := UseOf(events, "system:serviceaccount:ops:op")
	granted, _ := Granted([]rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"secrets", "configmaps"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"patch", "delete"}},
	})
	excused := map[Access]string{
		{"delete", "apps", "deployments"}:   "pruning a child",
		{"watch", "", "secrets"}:            "used anyway: no harm",
		{"update", "apps", "statefulsets"}:  "granted no more",
		{"delete", "", "persistentvolumes"}: "granted no more",
	}
	unexplained, stale := Compare(granted, u, excused)
	str := func(as []Access) []string {
		var out []string
		for _, a := range as {
			out = append(out, a.String())
		}
		return out
	}
	// get secrets and patch deployments are granted and unused without an excuse; the
	// excused delete is not reported; the two excuses of grants no rule makes are stale.
	if got, want := str(unexplained), []string{"get secrets", "patch deployments.apps"}; !slices.Equal(got, want) {
		t.Errorf("unexplained %q, want %q", got, want)
	}
	if got, want := str(stale), []string{"delete persistentvolumes", "update statefulsets.apps"}; !slices.Equal(got, want) {
		t.Errorf("stale %q, want %q", got, want)
	}
	if unexplained, stale := Compare(granted[:0], u, nil); unexplained != nil || stale != nil {
		t.Errorf("nothing granted, nothing excused: unexplained %v, stale %v", unexplained, stale)
	}
}
