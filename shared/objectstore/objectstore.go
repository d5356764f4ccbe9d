// Package objectstore is the S3 client the operators back up to and restore from: one
// bucket and a key prefix per cluster, streamed uploads of unknown length (multipart), and
// the downloads, listings and deletions retention and restore need. It speaks S3 through
// minio-go, so AWS S3, Google Cloud Storage (S3 interoperability, HMAC keys), MinIO and
// versitygw take the same settings; an endpoint with a private CA is trusted through
// Settings.CA. Credentials come from a Secret (CredentialsFromSecret) and never print.
package objectstore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path"
	"strings"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	corev1 "k8s.io/api/core/v1"
)

// DefaultEndpoint is AWS S3's, used when Settings.Endpoint is empty.
const DefaultEndpoint = "https://s3.amazonaws.com"

// DefaultPartSize is the multipart part size of an upload of unknown length: each part is
// buffered once in memory, and S3's 10,000 parts cap one object at 160 GiB with it.
const DefaultPartSize = 16 << 20

// DefaultConcurrency is how many parts an upload holds at once (one filling from the
// stream while the others upload), so Put buffers DefaultConcurrency x PartSize bytes:
// 48 MiB with the default part size.
const DefaultConcurrency = 3

// Secret keys CredentialsFromSecret reads unless told otherwise: the names the AWS tools use.
const (
	DefaultAccessKeyIDKey     = "AWS_ACCESS_KEY_ID"
	DefaultSecretAccessKeyKey = "AWS_SECRET_ACCESS_KEY"
	DefaultSessionTokenKey    = "AWS_SESSION_TOKEN"
)

// Settings say where objects go. Nothing secret is here: Credentials carry the keys.
type Settings struct {
	// Endpoint is the S3 endpoint as a URL: https://s3.amazonaws.com (the default when
	// empty), https://storage.googleapis.com, http://minio.example:9000. Its scheme
	// decides TLS; a path is not allowed.
	Endpoint string
	// Bucket must exist (EnsureBucket creates it where the credentials may).
	Bucket string
	// Prefix is prepended to every key ("clusters/ns/name/"); slashes at either end are
	// normalised away.
	Prefix string
	// Region signs requests; empty lets the client ask the endpoint (us-east-1 where it
	// cannot say).
	Region string
	// CA is PEM certificates trusted besides the system's, for an endpoint signed by a
	// private CA.
	CA []byte
	// PathStyle forces path-style requests (http://host/bucket/key); unset, the client
	// uses virtual-host style only for AWS and Google endpoints.
	PathStyle bool
	// PartSize is the multipart part size (default DefaultPartSize; at least 5 MiB).
	PartSize uint64
	// Concurrency is how many parts of an upload are buffered at once (default
	// DefaultConcurrency; 1 reads and uploads in turn).
	Concurrency int
}

// Credentials are S3 access keys. They print as a redaction so a logged value leaks nothing.
type Credentials struct {
	AccessKeyID     string
	SecretAccessKey string
	// SessionToken is set for temporary credentials only.
	SessionToken string
}

// String hides the keys from fmt and loggers.
func (Credentials) String() string { return "objectstore.Credentials{redacted}" }

// GoString hides the keys from %#v.
func (Credentials) GoString() string { return "objectstore.Credentials{redacted}" }

// SecretKeys name the keys of a Secret that hold Credentials; empty fields take the Default*Key names.
type SecretKeys struct {
	AccessKeyID, SecretAccessKey, SessionToken string
}

// CredentialsFromSecret reads Credentials from s. The error names the Secret and the
// missing key, never a value.
func CredentialsFromSecret(s *corev1.Secret, keys SecretKeys) (Credentials, error) {
	if keys.AccessKeyID == "" {
		keys.AccessKeyID = DefaultAccessKeyIDKey
	}
	if keys.SecretAccessKey == "" {
		keys.SecretAccessKey = DefaultSecretAccessKeyKey
	}
	if keys.SessionToken == "" {
		keys.SessionToken = DefaultSessionTokenKey
	}
	var c Credentials
	for _, k := range []struct {
		key  string
		into *string
	}{{keys.AccessKeyID, &c.AccessKeyID}, {keys.SecretAccessKey, &c.SecretAccessKey}} {
		v := s.Data[k.key]
		if len(v) == 0 {
			return Credentials{}, fmt.Errorf("secret %q has no key %q (or it is empty): add the object store's key under that name", s.Name, k.key)
		}
		*k.into = string(v)
	}
	c.SessionToken = string(s.Data[keys.SessionToken])
	return c, nil
}

// Store is one bucket and prefix of an S3 endpoint.
type Store struct {
	c           *minio.Client
	bucket      string
	prefix      string
	partSize    uint64
	concurrency int
}

// Object is one stored object; Name is its key without the store's prefix.
type Object struct {
	Name string
	Size int64
}

// Uploaded describes an object Put wrote.
type Uploaded struct {
	// Key is the full object key, prefix included.
	Key  string
	Size int64
	// SHA256 is the hex SHA-256 of the bytes read from the upload's reader.
	SHA256 string
}

// New checks s and returns a Store; it does not contact the endpoint.
func New(s Settings, cred Credentials) (*Store, error) {
	if s.Bucket == "" {
		return nil, errors.New("objectstore: a bucket is required")
	}
	if s.Endpoint == "" {
		s.Endpoint = DefaultEndpoint
	}
	u, err := url.Parse(s.Endpoint)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, fmt.Errorf("objectstore: endpoint %q must be an http:// or https:// URL with a host", s.Endpoint)
	}
	if strings.Trim(u.Path, "/") != "" || u.RawQuery != "" {
		return nil, fmt.Errorf("objectstore: endpoint %q must not have a path or query: put the bucket in bucket and folders in prefix", s.Endpoint)
	}
	secure := u.Scheme == "https"
	if len(s.CA) > 0 && !secure {
		return nil, fmt.Errorf("objectstore: a CA is set but endpoint %q is not https", s.Endpoint)
	}
	if s.PartSize == 0 {
		s.PartSize = DefaultPartSize
	}
	if s.PartSize < 5<<20 {
		return nil, fmt.Errorf("objectstore: part size %d is below S3's minimum of 5 MiB", s.PartSize)
	}
	if s.Concurrency == 0 {
		s.Concurrency = DefaultConcurrency
	}
	if s.Concurrency < 1 || s.Concurrency > 64 {
		return nil, fmt.Errorf("objectstore: concurrency %d is outside 1 to 64", s.Concurrency)
	}
	transport, err := minio.DefaultTransport(secure)
	if err != nil {
		return nil, err
	}
	if len(s.CA) > 0 {
		pool, err := x509.SystemCertPool()
		if err != nil || pool == nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(s.CA) {
			return nil, errors.New("objectstore: the CA holds no PEM certificate")
		}
		transport.TLSClientConfig.RootCAs = pool
	}
	lookup := minio.BucketLookupAuto
	if s.PathStyle {
		lookup = minio.BucketLookupPath
	}
	c, err := minio.New(u.Host, &minio.Options{
		Creds:        credentials.NewStaticV4(cred.AccessKeyID, cred.SecretAccessKey, cred.SessionToken),
		Secure:       secure,
		Region:       s.Region,
		Transport:    http.RoundTripper(transport),
		BucketLookup: lookup,
	})
	if err != nil {
		return nil, fmt.Errorf("objectstore: %w", err)
	}
	return &Store{c: c, bucket: s.Bucket, prefix: cleanPrefix(s.Prefix), partSize: s.PartSize, concurrency: s.Concurrency}, nil
}

func cleanPrefix(p string) string {
	p = strings.Trim(p, "/")
	if p == "" {
		return ""
	}
	return path.Clean(p) + "/"
}

// Key is the full object key of name.
func (s *Store) Key(name string) string { return s.prefix + strings.TrimPrefix(name, "/") }

// Bucket is the store's bucket.
func (s *Store) Bucket() string { return s.bucket }

// EnsureBucket creates the bucket when it does not exist.
func (s *Store) EnsureBucket(ctx context.Context) error {
	ok, err := s.c.BucketExists(ctx, s.bucket)
	if err != nil {
		return fmt.Errorf("objectstore: bucket %q: %w", s.bucket, err)
	}
	if ok {
		return nil
	}
	if err := s.c.MakeBucket(ctx, s.bucket, minio.MakeBucketOptions{}); err != nil {
		return fmt.Errorf("objectstore: creating bucket %q: %w", s.bucket, err)
	}
	return nil
}

// CheckBucket reports an error when the bucket cannot be reached or does not exist.
func (s *Store) CheckBucket(ctx context.Context) error {
	ok, err := s.c.BucketExists(ctx, s.bucket)
	if err != nil {
		return fmt.Errorf("objectstore: bucket %q: %w", s.bucket, err)
	}
	if !ok {
		return fmt.Errorf("objectstore: bucket %q does not exist", s.bucket)
	}
	return nil
}

// Put streams r to name until EOF, in parts of the store's part size, and returns the
// object's size and the SHA-256 of what it read. Reading and uploading overlap: while
// parts upload, the next fills from r (at most the store's concurrency of parts in
// memory), so a stream that produces slowly, a member's snapshot, is not paused by each
// part's upload. Nothing is visible under name unless the whole stream was stored: a
// failed upload is aborted.
func (s *Store) Put(ctx context.Context, name string, r io.Reader, contentType string) (Uploaded, error) {
	h := sha256.New()
	cr := &countingReader{r: io.TeeReader(r, h)}
	key := s.Key(name)
	info, err := s.c.PutObject(ctx, s.bucket, key, cr, -1, minio.PutObjectOptions{
		ContentType:           contentType,
		PartSize:              s.partSize,
		NumThreads:            uint(s.concurrency),
		ConcurrentStreamParts: s.concurrency > 1,
	})
	if err != nil {
		return Uploaded{}, fmt.Errorf("objectstore: uploading %s: %w", key, err)
	}
	if info.Size != cr.n {
		return Uploaded{}, fmt.Errorf("objectstore: uploading %s: stored %d bytes of %d read", key, info.Size, cr.n)
	}
	return Uploaded{Key: key, Size: cr.n, SHA256: hex.EncodeToString(h.Sum(nil))}, nil
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// PutBytes stores b under name in one request.
func (s *Store) PutBytes(ctx context.Context, name string, b []byte, contentType string) error {
	key := s.Key(name)
	if _, err := s.c.PutObject(ctx, s.bucket, key, bytes.NewReader(b), int64(len(b)), minio.PutObjectOptions{ContentType: contentType}); err != nil {
		return fmt.Errorf("objectstore: uploading %s: %w", key, err)
	}
	return nil
}

// Get opens name for reading; the caller closes it. A missing object is an error
// IsNotFound recognises, reported here rather than at the first Read.
func (s *Store) Get(ctx context.Context, name string) (io.ReadCloser, error) {
	key := s.Key(name)
	o, err := s.c.GetObject(ctx, s.bucket, key, minio.GetObjectOptions{})
	if err != nil {
		return nil, fmt.Errorf("objectstore: downloading %s: %w", key, err)
	}
	if _, err := o.Stat(); err != nil {
		_ = o.Close()
		return nil, fmt.Errorf("objectstore: downloading %s: %w", key, err)
	}
	return o, nil
}

// GetBytes reads name whole, refusing one larger than limit bytes.
func (s *Store) GetBytes(ctx context.Context, name string, limit int64) ([]byte, error) {
	r, err := s.Get(ctx, name)
	if err != nil {
		return nil, err
	}
	defer func() { _ = r.Close() }()
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, fmt.Errorf("objectstore: downloading %s: %w", s.Key(name), err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("objectstore: %s is larger than %d bytes", s.Key(name), limit)
	}
	return b, nil
}

// List returns the objects under dir (a name prefix relative to the store's prefix; ""
// for all), recursively, in key order.
func (s *Store) List(ctx context.Context, dir string) ([]Object, error) {
	var out []Object
	for o := range s.c.ListObjects(ctx, s.bucket, minio.ListObjectsOptions{Prefix: s.Key(dir), Recursive: true}) {
		if o.Err != nil {
			return nil, fmt.Errorf("objectstore: listing %s: %w", s.Key(dir), o.Err)
		}
		out = append(out, Object{Name: strings.TrimPrefix(o.Key, s.prefix), Size: o.Size})
	}
	return out, nil
}

// Delete removes name; a missing object is no error.
func (s *Store) Delete(ctx context.Context, name string) error {
	key := s.Key(name)
	if err := s.c.RemoveObject(ctx, s.bucket, key, minio.RemoveObjectOptions{}); err != nil && !IsNotFound(err) {
		return fmt.Errorf("objectstore: deleting %s: %w", key, err)
	}
	return nil
}

// DeleteAll removes every object under dir and returns how many it removed.
func (s *Store) DeleteAll(ctx context.Context, dir string) (int, error) {
	objs, err := s.List(ctx, dir)
	if err != nil {
		return 0, err
	}
	for i, o := range objs {
		if err := s.Delete(ctx, o.Name); err != nil {
			return i, err
		}
	}
	return len(objs), nil
}

// IsNotFound reports whether err says the object or bucket does not exist.
func IsNotFound(err error) bool {
	var r minio.ErrorResponse
	if !errors.As(err, &r) {
		return false
	}
	return r.StatusCode == http.StatusNotFound || r.Code == "NoSuchKey" || r.Code == "NoSuchBucket"
}
