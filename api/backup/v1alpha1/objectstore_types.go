package v1alpha1

// ObjectStoreSpec is an S3-compatible object store: AWS S3, Google Cloud Storage (its S3
// interoperability endpoint with HMAC keys), MinIO, versitygw. Each operator keeps a
// cluster's keys in a folder of that cluster's below prefix (the README's Backups section
// names it), so two clusters sharing a bucket never overwrite each other.
type ObjectStoreSpec struct {
	// Endpoint is the store's URL: https://s3.amazonaws.com when unset,
	// https://storage.googleapis.com for GCS, http(s)://<host>:<port> for MinIO or
	// versitygw. Its scheme decides TLS.
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule="self.matches('^https?://[^/?#]+/?$')",message="endpoint must be http://<host>[:port] or https://<host>[:port] with no path: put folders in prefix"
	// +optional
	Endpoint string `json:"endpoint,omitempty"`

	// Bucket must exist; the operator does not create it.
	// +kubebuilder:validation:MinLength=3
	// +kubebuilder:validation:MaxLength=63
	// +required
	Bucket string `json:"bucket"`

	// Prefix is a folder in the bucket above the per-cluster folders.
	// +kubebuilder:validation:MaxLength=256
	// +optional
	Prefix string `json:"prefix,omitempty"`

	// Region of the bucket; unset asks the endpoint (us-east-1 where it cannot say).
	// +kubebuilder:validation:MaxLength=64
	// +optional
	Region string `json:"region,omitempty"`

	// ForcePathStyle sends path-style requests (https://host/bucket/key), which MinIO
	// and most self-hosted stores need; unset uses virtual-host style for AWS and Google
	// only.
	// +optional
	ForcePathStyle bool `json:"forcePathStyle,omitempty"`

	// Credentials name the Secret in the cluster's namespace holding the access keys.
	// +required
	Credentials ObjectStoreCredentials `json:"credentials"`

	// CA names a Secret key holding PEM certificates to trust for an https endpoint signed
	// by a private CA (besides the system's).
	// +optional
	CA *SecretKeyRef `json:"ca,omitempty"`
}

// ObjectStoreCredentials name the keys of a Secret that hold S3 access keys. They are read
// by the operator when a backup runs, and by a restore's init container from its
// environment; they are never copied into a spec, a status, a log line or an event.
type ObjectStoreCredentials struct {
	// SecretName is a Secret in the cluster's namespace.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	SecretName string `json:"secretName"`
	// AccessKeyIDKey is the key holding the access key id.
	// +kubebuilder:default=AWS_ACCESS_KEY_ID
	// +optional
	AccessKeyIDKey string `json:"accessKeyIDKey,omitempty"`
	// SecretAccessKeyKey is the key holding the secret access key.
	// +kubebuilder:default=AWS_SECRET_ACCESS_KEY
	// +optional
	SecretAccessKeyKey string `json:"secretAccessKeyKey,omitempty"`
	// SessionTokenKey is the key holding a session token, read when present.
	// +kubebuilder:default=AWS_SESSION_TOKEN
	// +optional
	SessionTokenKey string `json:"sessionTokenKey,omitempty"`
}

// SecretKeyRef is one key of a Secret in the object's namespace.
type SecretKeyRef struct {
	// Name of the Secret.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	Name string `json:"name"`
	// Key in the Secret.
	// +kubebuilder:default=ca.crt
	// +optional
	Key string `json:"key,omitempty"`
}

// ClusterReference names the cluster, in the same namespace, an object is about.
type ClusterReference struct {
	// Name of the cluster.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +required
	Name string `json:"name"`
}
