package localcluster_test

import (
	"context"
	"strings"
	"testing"

	"github.com/opsuite/suite/tools/internal/localcluster"
	"github.com/opsuite/suite/tools/internal/rbacaudit"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
)

// checkAudit: the API server's audit log records a ServiceAccount's requests, those it was
// refused (403) included, at Metadata level, and leaves the admin's out (tools/e2e's RBAC
// audit reads it).
func checkAudit(ctx context.Context, t *testing.T, client kubernetes.Interface, cfg *rest.Config, o localcluster.Options) {
	const ns, name = "default", "auditee"
	if _, err := client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	tok, err := client.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	saCfg := rest.AnonymousClientConfig(cfg)
	saCfg.BearerToken = tok.Status.Token
	sa := kubernetes.NewForConfigOrDie(saCfg)
	if _, err := sa.CoreV1().Secrets("kube-system").Get(ctx, "anything", metav1.GetOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("the ServiceAccount read a kube-system Secret: %v, want Forbidden", err)
	}
	review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "get", Resource: "pods"}}}
	if _, err := sa.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	events, err := rbacaudit.ReadFile(o.AuditLog())
	if err != nil {
		t.Fatalf("audit log: %v", err)
	}
	use := rbacaudit.UseOf(events, "system:serviceaccount:"+ns+":"+name)
	refusedGet := false
	for _, r := range use.Refused {
		if r.Access == (rbacaudit.Access{Verb: "get", Resource: "secrets"}) && r.Namespace == "kube-system" {
			refusedGet = true
		}
	}
	if !refusedGet {
		t.Errorf("audit log %s lacks the refused get of a kube-system Secret (refused: %v)", o.AuditLog(), use.Refused)
	}
	if use.Used[rbacaudit.Access{Verb: "create", Group: "authorization.k8s.io", Resource: "selfsubjectaccessreviews"}] == 0 {
		t.Errorf("audit log %s lacks the SelfSubjectAccessReview (used: %v)", o.AuditLog(), use.Used)
	}
	for _, e := range events {
		if !strings.HasPrefix(e.User.Username, "system:serviceaccount:") || strings.HasPrefix(e.User.Username, "system:serviceaccount:kube-system:") {
			t.Errorf("audit log records %s %s by %q: only ServiceAccounts outside kube-system belong there", e.Verb, e.RequestURI, e.User.Username)
			break
		}
	}
	t.Logf("audit log: %d events", len(events))
}
