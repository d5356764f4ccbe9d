// Package connect finds how the operator logs in to a cluster's members: as its own ACL
// user, with the password in the cluster's internal Secret.
package connect

import (
	"context"
	"fmt"

	"github.com/opsuite/suite/services/valkey-operator/internal/resources"
	"github.com/opsuite/suite/services/valkey-operator/internal/valkey"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Options reads the credentials of the operator's user in cluster's members.
func Options(ctx context.Context, r client.Reader, namespace, cluster string) (valkey.Options, error) {
	var s corev1.Secret
	key := client.ObjectKey{Namespace: namespace, Name: resources.InternalSecretName(cluster)}
	if err := r.Get(ctx, key, &s); err != nil {
		return valkey.Options{}, fmt.Errorf("reading the operator's password from Secret %s: %w", key, err)
	}
	pw := string(s.Data[resources.SecretKeyOperatorPassword])
	if pw == "" {
		return valkey.Options{}, fmt.Errorf("secret %s has no %s", key, resources.SecretKeyOperatorPassword)
	}
	return valkey.Options{Username: resources.OperatorUser, Password: pw}, nil
}
