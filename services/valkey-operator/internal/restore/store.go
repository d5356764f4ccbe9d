package restore

import (
	backupv1 "github.com/opsuite/suite/api/backup/v1alpha1"

	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"path"

	"github.com/opsuite/suite/shared/objectstore"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Access is an object store's settings and keys as read from the cluster's namespace.
// The prefix is always empty: a restore names objects by their whole key.
type Access struct {
	Settings    objectstore.Settings
	Credentials objectstore.Credentials
}

// ReadAccess reads spec's credentials (and CA) Secrets from namespace ns.
func ReadAccess(ctx context.Context, secrets client.Reader, ns string, spec *backupv1.ObjectStoreSpec) (Access, error) {
	var sec corev1.Secret
	if err := secrets.Get(ctx, client.ObjectKey{Namespace: ns, Name: spec.Credentials.SecretName}, &sec); err != nil {
		return Access{}, fmt.Errorf("reading the object store credentials: %w", err)
	}
	cred, err := objectstore.CredentialsFromSecret(&sec, objectstore.SecretKeys{AccessKeyID: spec.Credentials.AccessKeyIDKey,
		SecretAccessKey: spec.Credentials.SecretAccessKeyKey, SessionToken: spec.Credentials.SessionTokenKey})
	if err != nil {
		return Access{}, err
	}
	s := objectstore.Settings{Endpoint: spec.Endpoint, Bucket: spec.Bucket, Region: spec.Region, PathStyle: spec.ForcePathStyle}
	if spec.CA != nil {
		var ca corev1.Secret
		if err := secrets.Get(ctx, client.ObjectKey{Namespace: ns, Name: spec.CA.Name}, &ca); err != nil {
			return Access{}, fmt.Errorf("reading the object store CA: %w", err)
		}
		key := spec.CA.Key
		if key == "" {
			key = "ca.crt"
		}
		if s.CA = ca.Data[key]; len(s.CA) == 0 {
			return Access{}, fmt.Errorf("secret %q has no key %q", spec.CA.Name, key)
		}
	}
	return Access{Settings: s, Credentials: cred}, nil
}

// Open returns the store a.Settings name.
func (a Access) Open() (*objectstore.Store, error) { return objectstore.New(a.Settings, a.Credentials) }

// ReadManifest reads and checks the manifest of the backup in folder dir.
func ReadManifest(ctx context.Context, store *objectstore.Store, dir string) (Manifest, error) {
	raw, err := store.GetBytes(ctx, path.Join(dir, ManifestName), MaxManifestSize)
	if err != nil {
		if objectstore.IsNotFound(err) {
			return Manifest{}, ErrNoManifest
		}
		return Manifest{}, err
	}
	return ParseManifest(raw)
}

// CorruptError says which shard's object does not match the manifest.
type CorruptError struct {
	Shard int
	// Why is "missing", "size" or "sha256".
	Why string
}

func (e *CorruptError) Error() string {
	switch e.Why {
	case "missing":
		return fmt.Sprintf("shard %d's object is missing", e.Shard)
	case "size":
		return fmt.Sprintf("shard %d's object differs in size from the manifest", e.Shard)
	default:
		return fmt.Sprintf("shard %d's object does not match the manifest's SHA-256", e.Shard)
	}
}

// Verify reads every shard's object of the backup in dir and compares its size and
// SHA-256 with the manifest's, streaming (nothing is kept). A mismatch is a
// *CorruptError; other errors are the store's.
func Verify(ctx context.Context, store *objectstore.Store, dir string, m Manifest) error {
	for _, sh := range m.Shards {
		r, err := store.Get(ctx, path.Join(dir, sh.Object))
		if err != nil {
			if objectstore.IsNotFound(err) {
				return &CorruptError{Shard: sh.Index, Why: "missing"}
			}
			return err
		}
		err = check(r, sh.Size, sh.SHA256, io.Discard)
		_ = r.Close()
		var ce *CorruptError
		if errors.As(err, &ce) {
			ce.Shard = sh.Index
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// check copies r into w, hashing it, and compares with size and sum.
func check(r io.Reader, size int64, sum string, w io.Writer) error {
	h := sha256.New()
	// One byte past size tells a longer object from a matching one without reading it all.
	n, err := io.Copy(io.MultiWriter(w, h), io.LimitReader(r, size+1))
	if err != nil {
		return err
	}
	if n != size {
		return &CorruptError{Why: "size"}
	}
	if hex.EncodeToString(h.Sum(nil)) != sum {
		return &CorruptError{Why: "sha256"}
	}
	return nil
}
