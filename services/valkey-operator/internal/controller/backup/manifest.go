package backup

import "github.com/opsuite/suite/services/valkey-operator/internal/restore"

// The manifest's format is restore's, which reads it back.
const (
	// ManifestName is the manifest's name in a backup's folder, written last.
	ManifestName = restore.ManifestName
	// ManifestFormat is the format version written.
	ManifestFormat = restore.ManifestFormat
)

type (
	// Manifest describes one stored backup.
	Manifest = restore.Manifest
	// Ref names an object.
	Ref = restore.Ref
	// ManifestShard is one shard's RDB.
	ManifestShard = restore.ManifestShard
)
