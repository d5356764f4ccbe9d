// Package v1alpha1 holds the backup types the Valkey and Memgraph APIs share: where a
// cluster's backups are stored (an S3-compatible object store and the Secret of its keys)
// and the shape of a scheduled backup. It is no API group of its own: each group's
// ValkeyBackup, MemgraphScheduledBackup, ... carries these types.
// +kubebuilder:object:generate=true
package v1alpha1
