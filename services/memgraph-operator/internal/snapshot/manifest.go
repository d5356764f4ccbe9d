package snapshot

import (
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"
	"time"
)

// ManifestName is the manifest's object in a backup's folder. It is written last: a folder
// without one is a partial backup and never restored.
const ManifestName = "manifest.json"

// ManifestFormat is the manifest format this operator writes and reads.
const ManifestFormat = 1

// Ref names an object by namespace, name and UID.
type Ref struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	UID       string `json:"uid"`
}

// ManifestFile is one stored durability file.
type ManifestFile struct {
	// Name is the file's path in the data directory ("snapshots/<file>"), also its
	// object's name in the backup's folder.
	Name   string `json:"name"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// Manifest describes one complete backup.
type Manifest struct {
	Format  int    `json:"format"`
	Kind    string `json:"kind"`
	Cluster Ref    `json:"cluster"`
	Backup  Ref    `json:"backup"`
	// ServerVersion is what SHOW VERSION answered on the instance ("" if it did not).
	ServerVersion string `json:"serverVersion,omitempty"`
	// Instance is the registered name of the data instance the snapshot was taken on, and
	// Role its role then (main).
	Instance string `json:"instance"`
	Role     string `json:"role"`
	// Snapshot is the snapshot file restored from; SnapshotTimestamp the commit timestamp
	// its name carries (Memgraph's <time>_timestamp_<ts>).
	Snapshot          string `json:"snapshot"`
	SnapshotTimestamp uint64 `json:"snapshotTimestamp"`
	// Files are every stored file: the snapshot, and the WAL files written after it
	// (none when the snapshot was just taken, as Memgraph's backup guide says).
	Files     []ManifestFile `json:"files"`
	Size      int64          `json:"size"`
	StartedAt time.Time      `json:"startedAt"`
	StoppedAt time.Time      `json:"stoppedAt"`
}

// Check refuses a manifest this operator cannot restore.
func (m *Manifest) Check() error {
	if m.Format != ManifestFormat {
		return fmt.Errorf("manifest format %d is not %d", m.Format, ManifestFormat)
	}
	if m.Snapshot == "" || len(m.Files) == 0 {
		return errors.New("the manifest names no snapshot")
	}
	seen := false
	for _, f := range m.Files {
		dir, base, ok := strings.Cut(f.Name, "/")
		if _, err := fileName(dir, base); !ok || err != nil {
			return fmt.Errorf("the manifest names %q, not a file of %s/ or %s/", f.Name, SnapshotsDir, WALDir)
		}
		if len(f.SHA256) != 64 || f.Size < 0 {
			return fmt.Errorf("the manifest's entry for %q has no SHA-256 or size", f.Name)
		}
		seen = seen || f.Name == m.Snapshot
	}
	if !seen {
		return fmt.Errorf("the manifest's snapshot %q is not among its files", m.Snapshot)
	}
	return nil
}

// ParseManifest reads and checks a manifest.
func ParseManifest(b []byte) (Manifest, error) {
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return m, fmt.Errorf("the manifest is not JSON: %w", err)
	}
	return m, m.Check()
}

// SnapshotTimestamp is the commit timestamp in a snapshot file's name (0 when it has none).
func SnapshotTimestamp(name string) uint64 {
	base := path.Base(name)
	i := strings.LastIndex(base, "_timestamp_")
	if i < 0 {
		return 0
	}
	ts, _ := strconv.ParseUint(base[i+len("_timestamp_"):], 10, 64)
	return ts
}
