package backup

import (
	"context"

	memgraphv1 "github.com/opsuite/suite/api/memgraph/v1alpha1"
	"github.com/opsuite/suite/services/memgraph-operator/internal/memgraph"
	"github.com/opsuite/suite/services/memgraph-operator/internal/resources"
	"github.com/opsuite/suite/shared/objectstore"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// OpenStore reads the cluster's object store settings and Secrets; the error names a
// Secret or key, never a value.
func OpenStore(ctx context.Context, secrets client.Reader, c *memgraphv1.MemgraphCluster) (*objectstore.Store, error) {
	s, cred, err := StoreSettings(ctx, secrets, c)
	if err != nil {
		return nil, err
	}
	return objectstore.New(s, cred)
}

// StoreSettings are the cluster's object store settings and credentials.
func StoreSettings(ctx context.Context, secrets client.Reader, c *memgraphv1.MemgraphCluster) (objectstore.Settings, objectstore.Credentials, error) {
	spec := c.Spec.Backup.ObjectStore
	ref := objectstore.Ref{
		Settings:          objectstore.Settings{Endpoint: spec.Endpoint, Bucket: spec.Bucket, Prefix: spec.Prefix, Region: spec.Region, PathStyle: spec.ForcePathStyle},
		CredentialsSecret: spec.Credentials.SecretName,
		Keys: objectstore.SecretKeys{AccessKeyID: spec.Credentials.AccessKeyIDKey, SecretAccessKey: spec.Credentials.SecretAccessKeyKey,
			SessionToken: spec.Credentials.SessionTokenKey},
		CAKey: resources.TLSCAKey,
	}
	if spec.CA != nil {
		ref.CASecret = spec.CA.Name
		if spec.CA.Key != "" {
			ref.CAKey = spec.CA.Key
		}
	}
	return objectstore.Load(ctx, secrets, c.Namespace, ref)
}

// defaultDialer logs in as the operator does: with the credentials it last logged in to
// the MAIN with (the cluster controller's record), else spec.auth's, verifying Bolt TLS
// with spec.tls.bolt's CA.
func defaultDialer(ctx context.Context, secrets client.Reader, c *memgraphv1.MemgraphCluster, resolve func(string) string) (memgraph.Dialer, error) {
	o := memgraph.Options{Resolve: resolve, Timeout: memgraph.DefaultTimeout}
	var rec corev1.Secret
	err := secrets.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: c.Name + "-operator-credentials"}, &rec)
	switch {
	case err == nil && len(rec.Data["username"]) > 0:
		o.Username, o.Password = string(rec.Data["username"]), string(rec.Data["password"])
	case err != nil && !apierrors.IsNotFound(err):
		return nil, err
	case c.Spec.Auth != nil:
		var a corev1.Secret
		if err := secrets.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: c.Spec.Auth.SecretName}, &a); err != nil {
			return nil, err
		}
		uk, pk := c.Spec.Auth.UserKey, c.Spec.Auth.PasswordKey
		if uk == "" {
			uk = memgraphv1.DefaultAuthUserKey
		}
		if pk == "" {
			pk = memgraphv1.DefaultAuthPasswordKey
		}
		o.Username, o.Password = string(a.Data[uk]), string(a.Data[pk])
	}
	if c.Spec.TLS != nil {
		var t corev1.Secret
		if err := secrets.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: c.Spec.TLS.Bolt.SecretName}, &t); err != nil {
			return nil, err
		}
		o.CA = t.Data[resources.TLSCAKey]
	}
	return memgraph.NewDialer(o), nil
}
