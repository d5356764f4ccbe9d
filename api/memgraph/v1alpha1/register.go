package v1alpha1

import "k8s.io/apimachinery/pkg/runtime"

func knownTypes() []runtime.Object {
	return []runtime.Object{
		&MemgraphCluster{}, &MemgraphClusterList{},
		&MemgraphBackup{}, &MemgraphBackupList{},
		&MemgraphScheduledBackup{}, &MemgraphScheduledBackupList{},
	}
}
