package objectstore

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// DefaultCAKey is the key of the CA Secret read when a Ref names none.
const DefaultCAKey = "ca.crt"

// Ref is a store as a cluster's spec.backup.objectStore names it: the settings, and the
// Secrets (in the cluster's namespace) of its keys and of a private CA.
type Ref struct {
	// Settings are where objects go; their CA is read from CASecret.
	Settings Settings
	// CredentialsSecret holds the keys under Keys' names.
	CredentialsSecret string
	Keys              SecretKeys
	// CASecret, when set, holds PEM certificates under CAKey (default DefaultCAKey).
	CASecret, CAKey string
}

// Load reads ref's Secrets in namespace: the settings with their CA, and the credentials.
// The error names a Secret or a key, never a value.
func Load(ctx context.Context, secrets client.Reader, namespace string, ref Ref) (Settings, Credentials, error) {
	var sec corev1.Secret
	if err := secrets.Get(ctx, client.ObjectKey{Namespace: namespace, Name: ref.CredentialsSecret}, &sec); err != nil {
		return Settings{}, Credentials{}, fmt.Errorf("reading the object store credentials Secret %q: %w", ref.CredentialsSecret, err)
	}
	cred, err := CredentialsFromSecret(&sec, ref.Keys)
	if err != nil {
		return Settings{}, Credentials{}, err
	}
	s := ref.Settings
	if ref.CASecret != "" {
		var ca corev1.Secret
		if err := secrets.Get(ctx, client.ObjectKey{Namespace: namespace, Name: ref.CASecret}, &ca); err != nil {
			return Settings{}, Credentials{}, fmt.Errorf("reading the object store CA Secret %q: %w", ref.CASecret, err)
		}
		key := ref.CAKey
		if key == "" {
			key = DefaultCAKey
		}
		if s.CA = ca.Data[key]; len(s.CA) == 0 {
			return Settings{}, Credentials{}, fmt.Errorf("secret %q has no key %q", ref.CASecret, key)
		}
	}
	return s, cred, nil
}

// Open is Load, then New.
func Open(ctx context.Context, secrets client.Reader, namespace string, ref Ref) (*Store, error) {
	s, cred, err := Load(ctx, secrets, namespace, ref)
	if err != nil {
		return nil, err
	}
	return New(s, cred)
}
