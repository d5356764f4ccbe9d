package backup

import (
	"time"

	"github.com/opsuite/suite/services/valkey-operator/internal/valkey"
)

// ManifestName is the manifest's name in a backup's folder. It is written last: a folder
// without it is a partial backup, never restorable.
const ManifestName = "manifest.json"

// ManifestFormat is the manifest's format version; a restore refuses one it does not know.
const ManifestFormat = 1

// Manifest describes one stored backup: what a restore needs to rebuild the cluster's
// layout and check every RDB before loading it.
type Manifest struct {
	Format  int    `json:"format"`
	Kind    string `json:"kind"`
	Cluster Ref    `json:"cluster"`
	Backup  Ref    `json:"backup"`
	// ServerVersion is the version of the first shard's member (members differ only mid-upgrade).
	ServerVersion string    `json:"serverVersion"`
	StartedAt     time.Time `json:"startedAt"`
	StoppedAt     time.Time `json:"stoppedAt"`
	// ShardCount is len(Shards).
	ShardCount int             `json:"shardCount"`
	Size       int64           `json:"size"`
	Keys       int64           `json:"keys"`
	Shards     []ManifestShard `json:"shards"`
}

// Ref names an object.
type Ref struct {
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	UID       string `json:"uid"`
}

// ManifestShard is one shard's RDB.
type ManifestShard struct {
	Index int                `json:"index"`
	Slots []valkey.SlotRange `json:"slots"`
	// Object is the RDB's name in the backup's folder.
	Object string `json:"object"`
	Size   int64  `json:"size"`
	// Keys is the count the RDB declares, -1 when it does not say.
	Keys   int64  `json:"keys"`
	SHA256 string `json:"sha256"`
	// Role is the member read: replica or primary.
	Role string `json:"role"`
	// PrimaryID is the shard's primary when the backup was taken.
	PrimaryID     string `json:"primaryID"`
	ServerVersion string `json:"serverVersion"`
}
