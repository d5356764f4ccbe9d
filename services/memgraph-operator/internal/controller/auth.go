package controller

import (
	"context"
	"fmt"

	memgraphv1 "github.com/opsuite/suite/api/memgraph/v1alpha1"
	"github.com/opsuite/suite/services/memgraph-operator/internal/executor"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
)

// +kubebuilder:rbac:groups="",resources=secrets,verbs=get

// Credentials are the admin user the operator logs in with; zero means no Bolt auth.
type Credentials = executor.Credentials

// ReasonAuthSecretUnavailable: spec.auth names a Secret or key that is not there, so the
// pods cannot start and the operator cannot log in.
const ReasonAuthSecretUnavailable = "AuthSecretUnavailable"

// authError is a spec.auth Secret the pass could not use; its message is stable (names,
// never values) and says what to create.
type authError struct{ msg string }

func (e authError) Error() string { return e.msg }

// credentials reads spec.auth's Secret on every pass, so a changed password is used by the
// next dial without touching any pod. A missing Secret or key is an authError (a condition,
// not an error loop); any other read failure is returned.
func (p *pass) credentials(ctx context.Context) (Credentials, error) {
	a := p.c.Spec.Auth
	if a == nil {
		return Credentials{}, nil
	}
	userKey, passKey := a.UserKey, a.PasswordKey
	if userKey == "" {
		userKey = memgraphv1.DefaultAuthUserKey
	}
	if passKey == "" {
		passKey = memgraphv1.DefaultAuthPasswordKey
	}
	var s corev1.Secret
	if err := p.ctl.secrets.Get(ctx, types.NamespacedName{Namespace: p.c.Namespace, Name: a.SecretName}, &s); err != nil {
		if apierrors.IsNotFound(err) {
			return Credentials{}, authError{fmt.Sprintf("Secret %q named by spec.auth does not exist: create it with keys %q and %q", a.SecretName, userKey, passKey)}
		}
		return Credentials{}, fmt.Errorf("read auth Secret %s: %w", a.SecretName, err)
	}
	user, pass := string(s.Data[userKey]), string(s.Data[passKey])
	switch {
	case user == "":
		return Credentials{}, authError{fmt.Sprintf("Secret %q named by spec.auth has no non-empty key %q: add it or set spec.auth.userKey", a.SecretName, userKey)}
	case pass == "":
		return Credentials{}, authError{fmt.Sprintf("Secret %q named by spec.auth has no non-empty key %q: add it or set spec.auth.passwordKey", a.SecretName, passKey)}
	case !executor.UserNamePattern.MatchString(user):
		return Credentials{}, authError{fmt.Sprintf("Secret %q named by spec.auth holds a user name Memgraph refuses under key %q: use letters, digits and _ . + - @ only", a.SecretName, userKey)}
	}
	return Credentials{Username: user, Password: pass}, nil
}
