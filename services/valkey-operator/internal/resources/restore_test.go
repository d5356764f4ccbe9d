package resources

import (
	"testing"

	valkeyv1 "github.com/opsuite/suite/api/valkey/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Only a bootstrapped cluster's first member of each shard gets the restore-rdb init
// container: the operator's image, the data and config volumes, and every variable from
// the restore Secret with optional: true (so the Secret's deletion turns it off without a
// pod template change); the same node's template does not change once restored.
func TestRestoreInitContainer(t *testing.T) {
	c := &valkeyv1.ValkeyCluster{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns"}, Spec: valkeyv1.ValkeyClusterSpec{Shards: 3, Replicas: 1,
		Bootstrap: &valkeyv1.BootstrapConfiguration{Recovery: &valkeyv1.BootstrapRecovery{Backup: &valkeyv1.BackupReference{Name: "b"}}}}}
	o := NodeOptions{HandoverImage: "ghcr.io/opsuite/valkey-operator:1"}
	find := func(n *valkeyv1.ValkeyNode, o NodeOptions) (int, *int) {
		tmpl := NodeWorkload(n, o).Template()
		for i, ic := range tmpl.Spec.InitContainers {
			if ic.Name == RestoreContainer {
				return len(tmpl.Spec.InitContainers), &i
			}
		}
		return len(tmpl.Spec.InitContainers), nil
	}
	primary := ValkeyNode(c, Position{Shard: 2, Index: 0}, "h")
	if primary.Spec.RestoreSecretName != "c-restore" {
		t.Fatalf("restoreSecretName %q", primary.Spec.RestoreSecretName)
	}
	_, at := find(primary, o)
	if at == nil {
		t.Fatal("no restore-rdb init container on a bootstrapped primary")
	}
	ic := NodeWorkload(primary, o).Template().Spec.InitContainers[*at]
	if ic.Image != o.HandoverImage || ic.Command[0] != OperatorEntrypoint || ic.Command[1] != "restore-rdb" {
		t.Fatalf("init container %v %v", ic.Image, ic.Command)
	}
	if ic.Env[0].Name != "RESTORE_SOURCE" || ic.Env[0].ValueFrom.SecretKeyRef.Key != "shard-002" {
		t.Fatalf("source from %+v", ic.Env[0].ValueFrom.SecretKeyRef)
	}
	for _, e := range ic.Env {
		ref := e.ValueFrom.SecretKeyRef
		if ref == nil || ref.Name != "c-restore" || ref.Optional == nil || !*ref.Optional {
			t.Fatalf("%s is not an optional key of c-restore: %+v", e.Name, e.ValueFrom)
		}
	}
	mounts := map[string]bool{}
	for _, m := range ic.VolumeMounts {
		mounts[m.MountPath] = m.ReadOnly
	}
	if ro, ok := mounts[DataDir]; !ok || ro {
		t.Fatalf("data volume not mounted writable: %v", mounts)
	}
	if ro, ok := mounts[ConfigDir]; !ok || !ro {
		t.Fatalf("config volume not mounted read-only: %v", mounts)
	}
	if _, at := find(ValkeyNode(c, Position{Shard: 2, Index: 1}, "h"), o); at != nil {
		t.Fatal("a replica has the restore-rdb init container")
	}
	if _, at := find(primary, NodeOptions{}); at != nil {
		t.Fatal("an init container without the operator's image")
	}
	c.Spec.Bootstrap = nil
	if _, at := find(ValkeyNode(c, Position{Shard: 2, Index: 0}, "h"), o); at != nil {
		t.Fatal("a cluster without spec.bootstrap has the restore-rdb init container")
	}
}
