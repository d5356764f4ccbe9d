package cluster

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"reflect"

	valkeyv1 "github.com/opsuite/suite/api/valkey/v1alpha1"
	"github.com/opsuite/suite/services/valkey-operator/internal/resources"
	"github.com/opsuite/suite/shared/children"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
)

// applied says what applyOwned did.
type applied int

const (
	unchanged applied = iota
	created
	updated
)

// applyOwned writes want (controlled by c) unless the live object already holds it. It
// never writes over an object c does not control.
func (p *pass) applyOwned(ctx context.Context, want client.Object) (applied, client.Object, error) {
	if err := controllerutil.SetControllerReference(p.c, want, p.ctl.client.Scheme()); err != nil {
		return unchanged, nil, err
	}
	live := reflect.New(reflect.TypeOf(want).Elem()).Interface().(client.Object)
	// Through the API server when the cache misses: an object of that name without our
	// label is either ours (label removed by hand: adopted, the apply restores the label)
	// or someone else's (refused below), never absent.
	err := p.ctl.reader.Get(ctx, client.ObjectKeyFromObject(want), live)
	switch {
	case apierrors.IsNotFound(err):
		if err := p.ctl.apply.Apply(ctx, want); err != nil {
			return unchanged, nil, err
		}
		return created, want, nil
	case err != nil:
		return unchanged, nil, err
	}
	if owner := metav1.GetControllerOf(live); owner == nil || owner.UID != p.c.UID {
		return unchanged, live, &children.NotControlledError{Kind: reflect.TypeOf(want).Elem().Name(), Key: client.ObjectKeyFromObject(want), Controller: owner}
	}
	if children.UpToDate(want, live) {
		return unchanged, live, nil
	}
	if err := p.ctl.apply.Apply(ctx, want); err != nil {
		return unchanged, live, err
	}
	return updated, want, nil
}

// infrastructure writes the Service, the Secrets, the ConfigMap and the PDB. It returns
// false when the pass cannot go on (the failure is in the conditions).
func (p *pass) infrastructure(ctx context.Context) bool {
	c := p.c
	// Service.
	if what, _, err := p.applyOwned(ctx, resources.Service(c)); err != nil {
		p.fail(valkeyv1.ReasonServiceError, valkeyv1.EventServiceUpdateFailed, fmt.Sprintf("Failed to write headless Service %s: %v", resources.ServiceName(c.Name), err))
		return false
	} else if what == created {
		p.normal(valkeyv1.EventServiceCreated, "Created headless Service")
	}

	// The operator's and the replication user's passwords, generated once.
	internal, ok := p.internalSecret(ctx)
	if !ok {
		return false
	}
	// The metrics exporter's own password, generated once too.
	if internal.Exporter, ok = p.exporterSecret(ctx); !ok {
		return false
	}
	p.internal = internal

	// TLS material the operator generates when asked to.
	if !p.tlsSecret(ctx) {
		return false
	}

	// ACL file and replication credentials.
	passwords, err := p.userPasswords(ctx)
	if err != nil {
		p.fail(valkeyv1.ReasonUsersACLError, "", err.Error())
		return false
	}
	files, err := resources.RenderACL(c, passwords, internal)
	if errors.Is(err, resources.ErrInternalPasswords) {
		p.fail(valkeyv1.ReasonSystemUsersACLError, "", err.Error())
		return false
	}
	if err != nil {
		p.fail(valkeyv1.ReasonUsersACLError, "", err.Error())
		return false
	}
	acl := resources.Secret(c, resources.ACLSecretName(c.Name), map[string][]byte{
		resources.ACLKeyUsers: []byte(files.Users),
		resources.ACLKeyAuth:  []byte(files.Auth),
	})
	if _, _, err := p.applyOwned(ctx, acl); err != nil {
		p.fail(valkeyv1.ReasonSystemUsersACLError, valkeyv1.ReasonSystemUsersACLError, fmt.Sprintf("Failed to write ACL Secret %s: %v", acl.Name, err))
		return false
	}

	// Server config.
	p.config = resources.RenderConfig(c)
	if what, _, err := p.applyOwned(ctx, resources.ConfigMap(c, p.config.Server, p.config.Live)); err != nil {
		p.fail(valkeyv1.ReasonConfigMapError, valkeyv1.EventConfigMapUpdateFailed, fmt.Sprintf("Failed to write ConfigMap %s: %v", resources.ConfigMapName(c.Name), err))
		return false
	} else if what == created {
		p.normal(valkeyv1.EventConfigMapCreated, "Created ConfigMap with configuration")
	}

	return p.pdb(ctx)
}

// internalSecret reads or creates the Secret with the internal users' passwords.
func (p *pass) internalSecret(ctx context.Context) (resources.InternalPasswords, bool) {
	c := p.c
	key := client.ObjectKey{Namespace: c.Namespace, Name: resources.InternalSecretName(c.Name)}
	var live corev1.Secret
	// The cache holds our labelled Secrets only: one whose label was removed by hand is
	// read from the API server and adopted with its passwords, never generated again (the
	// members would keep the old ones until the ACL file reached them, the exporters and
	// any client using them would be locked out).
	err := p.ctl.reader.Get(ctx, key, &live)
	switch {
	case err == nil:
		if owner := metav1.GetControllerOf(&live); owner == nil || owner.UID != c.UID {
			msg := fmt.Sprintf("Secret %s exists and is not owned by this cluster; delete it or rename the cluster", key.Name)
			p.fail(valkeyv1.ReasonSystemUsersACLError, valkeyv1.EventInternalSecretsCreationFailed, msg)
			return resources.InternalPasswords{}, false
		}
		pw := resources.InternalPasswords{
			Operator:    string(live.Data[resources.SecretKeyOperatorPassword]),
			Replication: string(live.Data[resources.SecretKeyReplicationPassword]),
		}
		if pw.Operator != "" && pw.Replication != "" {
			if live.Labels[resources.LabelManagedBy] == resources.ManagedBy {
				return pw, true
			}
			if _, _, err = p.applyOwned(ctx, internalSecret(c, pw)); err != nil {
				p.fail(valkeyv1.ReasonSystemUsersACLError, valkeyv1.EventInternalSecretsUpdateFailed, fmt.Sprintf("Failed to update Secret %s: %v", key.Name, err))
				return pw, false
			}
			p.normal(valkeyv1.EventInternalSecretsUpdated, fmt.Sprintf("Adopted Secret %s (its labels were removed): restored the labels, kept the passwords", key.Name))
			return pw, true
		}
		// A key was removed by hand: put a new password in its place (the members get
		// it with the ACL file, and the operator logs in with it from then on).
		if pw.Operator == "" {
			if pw.Operator, err = resources.GeneratePassword(); err != nil {
				break
			}
		}
		if pw.Replication == "" {
			if pw.Replication, err = resources.GeneratePassword(); err != nil {
				break
			}
		}
		if _, _, err = p.applyOwned(ctx, internalSecret(c, pw)); err != nil {
			p.fail(valkeyv1.ReasonSystemUsersACLError, valkeyv1.EventInternalSecretsUpdateFailed, fmt.Sprintf("Failed to update Secret %s: %v", key.Name, err))
			return pw, false
		}
		p.normal(valkeyv1.EventInternalSecretsUpdated, fmt.Sprintf("Restored the missing internal passwords in Secret %s", key.Name))
		return pw, true
	case apierrors.IsNotFound(err):
		var pw resources.InternalPasswords
		if pw.Operator, err = resources.GeneratePassword(); err != nil {
			break
		}
		if pw.Replication, err = resources.GeneratePassword(); err != nil {
			break
		}
		if _, _, err = p.applyOwned(ctx, internalSecret(c, pw)); err != nil {
			break
		}
		p.normal(valkeyv1.EventInternalSecretsCreated, fmt.Sprintf("Created Secret %s with the internal users' passwords", key.Name))
		return pw, true
	}
	p.fail(valkeyv1.ReasonSystemUsersACLError, valkeyv1.EventInternalSecretsCreationFailed, fmt.Sprintf("Failed to create Secret %s: %v", key.Name, err))
	return resources.InternalPasswords{}, false
}

// exporterSecret reads, adopts or creates the Secret with the exporter user's password,
// by the rules of internalSecret: read through the API server when the cache misses,
// adopted when the cluster controls it, refused (never written over) otherwise.
func (p *pass) exporterSecret(ctx context.Context) (string, bool) {
	c := p.c
	key := client.ObjectKey{Namespace: c.Namespace, Name: resources.ExporterSecretName(c.Name)}
	var live corev1.Secret
	err := p.ctl.reader.Get(ctx, key, &live)
	pw := ""
	switch {
	case err == nil:
		if owner := metav1.GetControllerOf(&live); owner == nil || owner.UID != c.UID {
			msg := fmt.Sprintf("Secret %s exists and is not owned by this cluster; delete it or rename the cluster", key.Name)
			p.fail(valkeyv1.ReasonSystemUsersACLError, valkeyv1.EventInternalSecretsCreationFailed, msg)
			return "", false
		}
		pw = string(live.Data[resources.SecretKeyExporterPassword])
		if pw != "" && live.Labels[resources.LabelManagedBy] == resources.ManagedBy {
			return pw, true
		}
	case !apierrors.IsNotFound(err):
		p.fail(valkeyv1.ReasonSystemUsersACLError, valkeyv1.EventInternalSecretsCreationFailed, fmt.Sprintf("Failed to read Secret %s: %v", key.Name, err))
		return "", false
	}
	what, msg := valkeyv1.EventInternalSecretsUpdated, fmt.Sprintf("Adopted Secret %s (its labels were removed): restored the labels, kept the password", key.Name)
	if pw == "" {
		if pw, err = resources.GeneratePassword(); err != nil {
			p.fail(valkeyv1.ReasonSystemUsersACLError, valkeyv1.EventInternalSecretsCreationFailed, fmt.Sprintf("Failed to create Secret %s: %v", key.Name, err))
			return "", false
		}
		what, msg = valkeyv1.EventInternalSecretsCreated, fmt.Sprintf("Created Secret %s with the metrics exporter user's password", key.Name)
	}
	s := resources.Secret(c, key.Name, map[string][]byte{resources.SecretKeyExporterPassword: []byte(pw)})
	if _, _, err := p.applyOwned(ctx, s); err != nil {
		p.fail(valkeyv1.ReasonSystemUsersACLError, valkeyv1.EventInternalSecretsUpdateFailed, fmt.Sprintf("Failed to write Secret %s: %v", key.Name, err))
		return "", false
	}
	p.normal(what, msg)
	return pw, true
}

func internalSecret(c *valkeyv1.ValkeyCluster, pw resources.InternalPasswords) *corev1.Secret {
	return resources.Secret(c, resources.InternalSecretName(c.Name), map[string][]byte{
		resources.SecretKeyOperatorPassword:    []byte(pw.Operator),
		resources.SecretKeyReplicationPassword: []byte(pw.Replication),
	})
}

// userPasswords reads the Secrets holding the spec users' passwords; a missing Secret is
// left out, and RenderACL names the user it leaves without a password.
func (p *pass) userPasswords(ctx context.Context) (map[string][]string, error) {
	data := map[string]map[string][]byte{}
	for _, name := range resources.PasswordSecretNames(p.c) {
		var s corev1.Secret
		switch err := p.ctl.reader.Get(ctx, client.ObjectKey{Namespace: p.c.Namespace, Name: name}, &s); {
		case apierrors.IsNotFound(err):
		case err != nil:
			return nil, fmt.Errorf("reading password Secret %s: %w", name, err)
		default:
			data[name] = s.Data
		}
	}
	return resources.UserPasswords(p.c, data), nil
}

// pdb writes the PodDisruptionBudget, or deletes it when the policy is Disabled.
func (p *pass) pdb(ctx context.Context) bool {
	c := p.c
	if c.Spec.PDBMode() == valkeyv1.PDBModeDisabled {
		var live policyv1.PodDisruptionBudget
		err := p.ctl.reader.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: resources.PDBName(c.Name)}, &live)
		if apierrors.IsNotFound(err) {
			return true
		}
		if err == nil {
			if owner := metav1.GetControllerOf(&live); owner == nil || owner.UID != c.UID {
				return true // not ours: left alone
			}
			uid := live.UID
			err = p.ctl.client.Delete(ctx, &live, client.Preconditions{UID: &uid})
		}
		if err != nil && !apierrors.IsNotFound(err) {
			p.fail(valkeyv1.ReasonPodDisruptionBudgetError, valkeyv1.ReasonPodDisruptionBudgetError, fmt.Sprintf("Failed to delete PodDisruptionBudget %s: %v", live.Name, err))
			return false
		}
		p.normal(valkeyv1.EventPodDisruptionBudgetDeleted, "Deleted PodDisruptionBudget (policy Disabled)")
		return true
	}
	switch what, _, err := p.applyOwned(ctx, resources.PodDisruptionBudget(c)); {
	case err != nil:
		p.fail(valkeyv1.ReasonPodDisruptionBudgetError, valkeyv1.ReasonPodDisruptionBudgetError, fmt.Sprintf("Failed to write PodDisruptionBudget %s: %v", resources.PDBName(c.Name), err))
		return false
	case what == created:
		p.normal(valkeyv1.EventPodDisruptionBudgetCreated, "Created PodDisruptionBudget")
	case what == updated:
		p.normal(valkeyv1.EventPodDisruptionBudgetUpdated, "Updated PodDisruptionBudget")
	}
	return true
}

// tlsSecret generates (and renews, under the same CA) the self-signed certificate when
// asked to, and checks that a user's certificate Secret exists otherwise. The certificate
// joins the members' config hash: a renewed or replaced certificate rolls them one at a
// time (the server reads its certificate files at start).
func (p *pass) tlsSecret(ctx context.Context) bool {
	c := p.c
	t := c.Spec.EffectiveTLS()
	if !t.Enabled {
		return true
	}
	if t.SecretName != "" {
		var s corev1.Secret
		if err := p.ctl.reader.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: t.SecretName}, &s); err != nil {
			p.fail(valkeyv1.ReasonConfigMapError, "", fmt.Sprintf("TLS certificate Secret %s: %v; create it (keys %s, %s, %s) or change spec.tls", t.SecretName, err, resources.TLSKeyCA, resources.TLSKeyCert, resources.TLSKeyKey))
			return false
		}
		p.certHash = hashBytes(s.Data[resources.TLSKeyCert])
		return true
	}
	name := resources.SelfSignedTLSSecretName(c.Name)
	var live corev1.Secret
	err := p.ctl.reader.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: name}, &live)
	if err == nil && !resources.NeedsRenewal(live.Data[resources.TLSKeyCert], p.now) {
		if err := p.adopt(ctx, &live); err != nil {
			p.fail(valkeyv1.ReasonConfigMapError, valkeyv1.ReasonConfigMapError, fmt.Sprintf("Writing TLS Secret %s: %v", name, err))
			return false
		}
		p.certHash = hashBytes(live.Data[resources.TLSKeyCert])
		return true
	}
	if err != nil && !apierrors.IsNotFound(err) {
		p.fail(valkeyv1.ReasonConfigMapError, "", fmt.Sprintf("Reading TLS Secret %s: %v", name, err))
		return false
	}
	// The CA's key lives in a Secret of its own that no pod mounts.
	caName := resources.SelfSignedCASecretName(c.Name)
	var caSecret corev1.Secret
	caPEM, caKey := []byte(nil), []byte(nil)
	switch err := p.ctl.reader.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: caName}, &caSecret); {
	case err == nil && !resources.NeedsRenewal(caSecret.Data[resources.TLSKeyCA], p.now):
		if err := p.adopt(ctx, &caSecret); err != nil {
			p.fail(valkeyv1.ReasonConfigMapError, valkeyv1.ReasonConfigMapError, fmt.Sprintf("Writing CA Secret %s: %v", caName, err))
			return false
		}
		caPEM, caKey = caSecret.Data[resources.TLSKeyCA], caSecret.Data[resources.TLSKeyCAKey]
	case err != nil && !apierrors.IsNotFound(err):
		p.fail(valkeyv1.ReasonConfigMapError, "", fmt.Sprintf("Reading CA Secret %s: %v", caName, err))
		return false
	}
	if len(caPEM) == 0 || len(caKey) == 0 {
		if caPEM, caKey, err = resources.NewCA(c.Name, c.Namespace, p.now); err != nil {
			p.fail(valkeyv1.ReasonConfigMapError, "", fmt.Sprintf("Generating the TLS CA: %v", err))
			return false
		}
		ca := resources.Secret(c, caName, map[string][]byte{resources.TLSKeyCA: caPEM, resources.TLSKeyCAKey: caKey})
		if _, _, err := p.applyOwned(ctx, ca); err != nil {
			p.fail(valkeyv1.ReasonConfigMapError, valkeyv1.ReasonConfigMapError, fmt.Sprintf("Writing CA Secret %s: %v", caName, err))
			return false
		}
	}
	cert, key, err := resources.IssueCert(caPEM, caKey, c.Name, c.Namespace, resources.TLSDNSNames(c.Name, c.Namespace, c.Spec.ClusterDomain()), nil, p.now)
	if err != nil {
		p.fail(valkeyv1.ReasonConfigMapError, "", fmt.Sprintf("Issuing the TLS certificate: %v", err))
		return false
	}
	s := resources.Secret(c, name, map[string][]byte{resources.TLSKeyCA: caPEM, resources.TLSKeyCert: cert, resources.TLSKeyKey: key})
	if _, _, err := p.applyOwned(ctx, s); err != nil {
		p.fail(valkeyv1.ReasonConfigMapError, valkeyv1.ReasonConfigMapError, fmt.Sprintf("Writing TLS Secret %s: %v", name, err))
		return false
	}
	p.certHash = hashBytes(cert)
	return true
}

// adopt puts the cluster's labels back on one of its generated Secrets that lost them,
// keeping its data; a Secret the cluster does not control is refused (NotControlledError)
// and left as it is.
func (p *pass) adopt(ctx context.Context, live *corev1.Secret) error {
	if live.Labels[resources.LabelManagedBy] == resources.ManagedBy {
		return nil
	}
	_, _, err := p.applyOwned(ctx, resources.Secret(p.c, live.Name, live.Data))
	return err
}

func hashBytes(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}
