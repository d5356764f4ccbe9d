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
{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","stage":"ResponseComplete","requestURI":"/api/v1/namespaces/kube-system/secrets/x","verb":"get","user":{"username":"system:serviceaccount:ops:op"},"objectRef":{"resource":"secrets","namespace":"kube-system","name":"x","apiVersion":"v1"},"responseStatus":{"metadata":{},"status":"Failure","reason":"Forbidden","code":403}}
{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","stage":"ResponseComplete","requestURI":"/api/v1/namespaces/a/configmaps/gone","verb":"get","user":{"username":"system:serviceaccount:ops:op"},"objectRef":{"resource":"configmaps","namespace":"a","name":"gone","apiVersion":"v1"},"responseStatus":{"metadata":{},"code":404}}
{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","stage":"ResponseComplete","requestURI":"/apis/apps/v1/namespaces/a/deployments","verb":"list","user":{"username":"system:serviceaccount:ops:other"},"objectRef":{"resource":"deployments","namespace":"a","apiGroup":"apps","apiVersion":"v1"},"responseStatus":{"metadata":{},"code":200}}
{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","stage":"ResponseComplete","requestURI":"/metrics","verb":"get","user":{"username":"system:serviceaccount:ops:op"},"responseStatus":{"metadata":{},"code":200}}
`

func TestUnusedAndDenied(t *testing.T) {
	events, err := Read(strings.NewReader(sample))
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != 8 {
		t.Fatalf("read %d events, want 8", len(events))
	}
	u := UseOf(events, "system:serviceaccount:ops:op")
	rules := []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"secrets", "configmaps"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"apps"}, Resources: []string{"statefulsets", "deployments"}, Verbs: []string{"patch"}},
		{APIGroups: []string{""}, Resources: []string{"pods/status"}, Verbs: []string{"patch"}},
		{APIGroups: []string{"*"}, Resources: []string{"things"}, Verbs: []string{"get"}},
		{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}},
	}
	granted, wildcards := Granted(rules)
	if len(granted) != 9 || len(wildcards) != 1 {
		t.Errorf("granted %v, wildcards %v: want 9 accesses and 1 wildcard rule", granted, wildcards)
	}
	var got []string
	for _, a := range Unused(granted, u) {
		got = append(got, a.String())
	}
	// The 404 of get configmaps got past RBAC: used. Only 403s are denials.
	want := []string{"list configmaps", "watch configmaps", "get secrets", "patch deployments.apps"}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("unused %v, want %v", got, want)
	}
	if len(u.Denied) != 1 || u.Denied[Access{"get", "", "secrets"}] == "" {
		t.Errorf("denied %v, want get secrets", u.Denied)
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
