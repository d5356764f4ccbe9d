package restore

import (
	"encoding/json"
	"fmt"

	"github.com/opsuite/suite/services/valkey-operator/internal/valkey"
	"github.com/opsuite/suite/shared/objectstore"
)

// The restore Secret (<cluster>-restore) the members' init containers read, one optional
// key per shard plus the store's keys; the cluster deletes it once the restore completed.
const (
	// SecretKeyAccessKeyID, SecretKeySecretAccessKey and SecretKeySessionToken hold the
	// store's keys, SecretKeyCA a private CA (each optional in the pod).
	SecretKeyAccessKeyID     = objectstore.DefaultAccessKeyIDKey
	SecretKeySecretAccessKey = objectstore.DefaultSecretAccessKeyKey
	SecretKeySessionToken    = objectstore.DefaultSessionTokenKey
	SecretKeyCA              = "ca.crt"
)

// SecretKeyShard is the key of shard i's Source in the restore Secret.
func SecretKeyShard(i int) string { return fmt.Sprintf("shard-%03d", i) }

// Source is what one shard's init container downloads: the object, its checksum and the
// store's settings (the keys come apart, from the same Secret).
type Source struct {
	Endpoint  string `json:"endpoint,omitempty"`
	Bucket    string `json:"bucket"`
	Region    string `json:"region,omitempty"`
	PathStyle bool   `json:"pathStyle,omitempty"`
	// Object is the RDB's whole key in the bucket.
	Object string `json:"object"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
	// Slots are the shard's slot ranges and Keys its key count, as the manifest has them
	// (the operator assigns the slots; the init container does not use them).
	Slots []valkey.SlotRange `json:"slots,omitempty"`
	Keys  int64              `json:"keys,omitempty"`
	// Restore identifies the restore (the cluster's UID and the backup's folder): a data
	// directory it already filled is left alone when the pod starts again.
	Restore string `json:"restore"`
}

// Encode is s as the Secret's value.
func (s Source) Encode() []byte {
	b, _ := json.Marshal(s) // a struct of strings and numbers always encodes
	return b
}

// DecodeSource parses a Secret value.
func DecodeSource(b []byte) (Source, error) {
	var s Source
	if err := json.Unmarshal(b, &s); err != nil {
		return s, fmt.Errorf("restore source: %w", err)
	}
	if s.Bucket == "" || s.Object == "" || s.SHA256 == "" || s.Size <= 0 || s.Restore == "" {
		return s, fmt.Errorf("restore source lacks bucket, object, size, sha256 or restore")
	}
	return s, nil
}

// Settings are s's store settings with ca.
func (s Source) Settings(ca []byte) objectstore.Settings {
	return objectstore.Settings{Endpoint: s.Endpoint, Bucket: s.Bucket, Region: s.Region, PathStyle: s.PathStyle, CA: ca}
}
