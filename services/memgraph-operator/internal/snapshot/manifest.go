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

// ManifestFormat is the manifest format this operator writes. Format 1 (a snapshot
// only, no epoch) is still read and restored.
const ManifestFormat = 2

// ErrManifestInvalid says a manifest is not one this operator restores: an unknown
// format, or files, timestamps or epochs that do not agree with each other.
var ErrManifestInvalid = errors.New("backup manifest invalid")

// Ref names an object by namespace, name and UID.
type Ref struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	UID       string `json:"uid"`
}

// ManifestFile is one stored durability file.
type ManifestFile struct {
	// Name is the file's path in the data directory ("snapshots/<file>", "wal/<file>"),
	// also its object's name in the backup's folder.
	Name   string `json:"name"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
	// Format is Info.Format of the file when the agent read its content ("" when only its
	// name was read); then Epoch, Prev and Timestamp are what the file says of itself
	// (Info), which a restore checks again: a snapshot's epoch and commit timestamp, a WAL
	// file's commits (Prev, Timestamp] and the epoch of the last.
	Format    string `json:"format,omitempty"`
	Epoch     string `json:"epoch,omitempty"`
	Prev      uint64 `json:"prev,omitempty"`
	Timestamp uint64 `json:"timestamp,omitempty"`
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
	// Role its role then: a replica caught up with the MAIN, or the MAIN itself. Main is
	// the MAIN when the backup ran.
	Instance string `json:"instance"`
	Role     string `json:"role"`
	Main     string `json:"main,omitempty"`
	// Epoch is the MAIN's epoch as the snapshot records it (Memgraph's epoch id, which no
	// query shows; the simulator's epoch number); "" when the agent could not read the
	// snapshot's format.
	Epoch string `json:"epoch,omitempty"`
	// Snapshot is the snapshot file restored from; SnapshotTimestamp its commit
	// timestamp (Memgraph's <time>_timestamp_<ts>).
	Snapshot          string `json:"snapshot"`
	SnapshotTimestamp uint64 `json:"snapshotTimestamp"`
	// Timestamp is the last commit the backup holds: the snapshot's, or the last one of
	// the WAL files written after it, which a restore replays.
	Timestamp uint64 `json:"timestamp,omitempty"`
	// Files are every stored file: the snapshot, then the WAL files that hold the commits
	// after it, in the order they were written.
	Files     []ManifestFile `json:"files"`
	Size      int64          `json:"size"`
	StartedAt time.Time      `json:"startedAt"`
	StoppedAt time.Time      `json:"stoppedAt"`
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrManifestInvalid, fmt.Sprintf(format, args...))
}

// Check refuses a manifest this operator cannot restore: its files must be durability
// files, named once each, with a size and a SHA-256 adding up to its size; one of them
// the snapshot; the WAL files whose content was read must hold one unbroken run of
// commits from the snapshot on, up to the manifest's timestamp.
func (m *Manifest) Check() error {
	if m.Format != 1 && m.Format != ManifestFormat {
		return invalid("manifest format %d is not one of 1 and %d", m.Format, ManifestFormat)
	}
	if m.Snapshot == "" || len(m.Files) == 0 {
		return invalid("the manifest names no snapshot")
	}
	seen := map[string]bool{}
	var total int64
	var snap *ManifestFile
	var wal []ManifestFile
	for i, f := range m.Files {
		dir, base, ok := strings.Cut(f.Name, "/")
		if _, err := fileName(dir, base); !ok || err != nil {
			return invalid("the manifest names %q, not a file of %s/ or %s/", f.Name, SnapshotsDir, WALDir)
		}
		if seen[f.Name] {
			return invalid("the manifest names %q twice", f.Name)
		}
		seen[f.Name] = true
		if len(f.SHA256) != 64 || f.Size < 0 {
			return invalid("the manifest's entry for %q has no SHA-256 or size", f.Name)
		}
		total += f.Size
		switch {
		case dir == SnapshotsDir && snap != nil:
			return invalid("the manifest names two snapshots, %q and %q", snap.Name, f.Name)
		case dir == SnapshotsDir:
			snap = &m.Files[i]
		default:
			wal = append(wal, f)
		}
	}
	if snap == nil || snap.Name != m.Snapshot {
		return invalid("the manifest's snapshot %q is not among its files", m.Snapshot)
	}
	if m.Format == 1 {
		if len(wal) > 0 {
			return invalid("a format 1 manifest names WAL files")
		}
		return nil
	}
	if total != m.Size {
		return invalid("the manifest's files add up to %d bytes, it says %d", total, m.Size)
	}
	if snap.Format != "" && (snap.Timestamp != m.SnapshotTimestamp || snap.Epoch != m.Epoch) {
		return invalid("the snapshot %q is of timestamp %d and epoch %q, the manifest says %d and %q",
			snap.Name, snap.Timestamp, snap.Epoch, m.SnapshotTimestamp, m.Epoch)
	}
	last, first := m.SnapshotTimestamp, true
	for _, f := range wal {
		if f.Format == "" {
			continue
		}
		switch {
		case f.Timestamp <= last:
			return invalid("the WAL file %q ends at commit %d, which the files before it hold already (%d)", f.Name, f.Timestamp, last)
		case first && f.Prev > last:
			return invalid("the WAL file %q starts after commit %d, the snapshot is of %d: commits in between are missing", f.Name, f.Prev, last)
		case !first && f.Prev != last:
			return invalid("the WAL file %q follows commit %d, the file before it ends at %d", f.Name, f.Prev, last)
		}
		last, first = f.Timestamp, false
	}
	if m.Timestamp != max(last, m.SnapshotTimestamp) {
		return invalid("the manifest's timestamp %d is not where its snapshot and WAL files end (%d)", m.Timestamp, max(last, m.SnapshotTimestamp))
	}
	return nil
}

// ParseManifest reads and checks a manifest.
func ParseManifest(b []byte) (Manifest, error) {
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return m, invalid("the manifest is not JSON: %v", err)
	}
	return m, m.Check()
}

// IsManifestInvalid reports whether err is a refusal of the manifest itself.
func IsManifestInvalid(err error) bool { return errors.Is(err, ErrManifestInvalid) }

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
