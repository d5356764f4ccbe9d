// Package restore starts a cluster from a ValkeyBackup: it reads and checks a backup's
// manifest, verifies every shard's object against its SHA-256 before anything is created,
// and is the init container (the operator binary's restore-rdb subcommand) that puts a
// shard's RDB into an empty data directory before the server starts. The manifest's
// format is defined here, the backup controller writes it.
package restore

import (
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"regexp"
	"time"

	"github.com/opsuite/suite/services/valkey-operator/internal/valkey"
)

// ManifestName is the manifest's name in a backup's folder. It is written last: a folder
// without it is a partial backup, never restorable.
const ManifestName = "manifest.json"

// ManifestFormat is the manifest's format version; a restore refuses one it does not know.
const ManifestFormat = 1

// MaxManifestSize bounds the manifest read (1000 shards of ranges fit well within it).
const MaxManifestSize = 8 << 20

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

var (
	sha256Hex  = regexp.MustCompile(`^[0-9a-f]{64}$`)
	objectName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)
)

// ParseManifest decodes a manifest and checks that it can be restored: a known format,
// shards listed in order with a plain object name and a SHA-256 each, and their slot
// ranges covering every slot exactly once.
func ParseManifest(raw []byte) (Manifest, error) {
	var m Manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		return m, fmt.Errorf("the manifest is not JSON: %w", err)
	}
	if m.Format != ManifestFormat {
		return m, fmt.Errorf("manifest format %d, this operator restores format %d", m.Format, ManifestFormat)
	}
	if len(m.Shards) == 0 || m.ShardCount != len(m.Shards) {
		return m, fmt.Errorf("the manifest lists %d shards but says shardCount %d", len(m.Shards), m.ShardCount)
	}
	var owner [valkey.SlotCount]int
	for i, sh := range m.Shards {
		if sh.Index != i {
			return m, fmt.Errorf("shard %d is listed at position %d", sh.Index, i)
		}
		if !objectName.MatchString(sh.Object) || path.Base(sh.Object) != sh.Object {
			return m, fmt.Errorf("shard %d's object %q is not a plain name in the backup's folder", i, sh.Object)
		}
		if !sha256Hex.MatchString(sh.SHA256) || sh.Size <= 0 {
			return m, fmt.Errorf("shard %d has no SHA-256 or size", i)
		}
		for _, r := range sh.Slots {
			if r.Start < 0 || r.End >= valkey.SlotCount || r.Start > r.End {
				return m, fmt.Errorf("shard %d's slot range %d-%d is out of 0-16383", i, r.Start, r.End)
			}
			for s := r.Start; s <= r.End; s++ {
				if owner[s] != 0 {
					return m, fmt.Errorf("slot %d is in shards %d and %d", s, owner[s]-1, i)
				}
				owner[s] = i + 1
			}
		}
	}
	for s, o := range owner {
		if o == 0 {
			return m, fmt.Errorf("slot %d is in no shard", s)
		}
	}
	return m, nil
}

// ErrNoManifest: the folder holds no manifest.json (a partial or running backup).
var ErrNoManifest = errors.New("the backup has no manifest: it is partial or still running, and a partial backup is never restored")
