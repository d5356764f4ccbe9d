package validation

import (
	backupv1 "github.com/opsuite/suite/api/backup/v1alpha1"

	"context"
	"testing"

	memgraphv1 "github.com/opsuite/suite/api/memgraph/v1alpha1"
	"github.com/opsuite/suite/shared/testenv"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestBackupRules: spec.backup's endpoint takes no path; spec.bootstrap needs spec.backup,
// is set at creation only and never changes (a restore into a live cluster would
// overwrite its data); a MemgraphBackup's spec never changes.
func TestBackupRules(t *testing.T) {
	ns := testenv.NewNamespace(t, env.Client, "mgb-")
	ctx := context.Background()
	store := func(endpoint string) *memgraphv1.BackupConfiguration {
		return &memgraphv1.BackupConfiguration{ObjectStore: backupv1.ObjectStoreSpec{Endpoint: endpoint, Bucket: "backups",
			Credentials: backupv1.ObjectStoreCredentials{SecretName: "s3"}}}
	}
	boot := func(name string) *memgraphv1.BootstrapSpec {
		return &memgraphv1.BootstrapSpec{Backup: memgraphv1.BackupReference{Name: name}}
	}
	for name, tc := range map[string]struct {
		backup    *memgraphv1.BackupConfiguration
		bootstrap *memgraphv1.BootstrapSpec
		want      string
	}{
		"a store":                {backup: store("http://127.0.0.1:7070")},
		"a store with a path":    {backup: store("http://127.0.0.1:7070/bucket"), want: "endpoint must be http://<host>[:port]"},
		"bootstrap with a store": {backup: store(""), bootstrap: boot("b1")},
		"bootstrap alone":        {bootstrap: boot("b1"), want: "spec.bootstrap needs spec.backup.objectStore"},
	} {
		t.Run("create/"+name, func(t *testing.T) {
			c := minimal(ns)
			c.Spec.Backup, c.Spec.Bootstrap = tc.backup, tc.bootstrap
			verdict(t, env.Client.Create(ctx, c), tc.want)
		})
	}
	t.Run("bootstrap added to a live cluster", func(t *testing.T) {
		c := minimal(ns)
		c.Spec.Backup = store("")
		if err := env.Client.Create(ctx, c); err != nil {
			t.Fatal(err)
		}
		c.Spec.Bootstrap = boot("b1")
		verdict(t, env.Client.Update(ctx, c), "spec.bootstrap is set when a cluster is created")
	})
	t.Run("bootstrap changed or removed", func(t *testing.T) {
		c := minimal(ns)
		c.Spec.Backup, c.Spec.Bootstrap = store(""), boot("b1")
		if err := env.Client.Create(ctx, c); err != nil {
			t.Fatal(err)
		}
		c.Spec.Bootstrap = boot("b2")
		verdict(t, env.Client.Update(ctx, c), "spec.bootstrap is immutable")
		c.Spec.Bootstrap = nil
		verdict(t, env.Client.Update(ctx, c), "spec.bootstrap is set when a cluster is created")
	})
	t.Run("backup spec immutable", func(t *testing.T) {
		b := &memgraphv1.MemgraphBackup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "b-"},
			Spec: memgraphv1.MemgraphBackupSpec{Cluster: backupv1.ClusterReference{Name: "one"}}}
		if err := env.Client.Create(ctx, b); err != nil {
			t.Fatal(err)
		}
		b.Spec.Cluster.Name = "two"
		verdict(t, env.Client.Update(ctx, b), "a MemgraphBackup's spec is immutable")
	})
}
