package validation

import (
	backupv1 "github.com/opsuite/suite/api/backup/v1alpha1"

	"context"
	"testing"

	valkeyv1 "github.com/opsuite/suite/api/valkey/v1alpha1"
	"github.com/opsuite/suite/shared/testenv"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
)

// TestBackupAdmission: spec.backup.objectStore refuses an endpoint with a path or another
// scheme and defaults the Secret's key names; a ValkeyBackup's spec cannot change.
func TestBackupAdmission(t *testing.T) {
	ns := testenv.NewNamespace(t, env.Client, "vkb-")
	ctx := context.Background()
	store := func(endpoint string) *valkeyv1.BackupConfiguration {
		return &valkeyv1.BackupConfiguration{ObjectStore: backupv1.ObjectStoreSpec{Endpoint: endpoint, Bucket: "backups",
			Credentials: backupv1.ObjectStoreCredentials{SecretName: "s3"}}}
	}
	for _, tc := range []struct {
		name, endpoint, want string
	}{
		{"AWS by default", "", ""},
		{"MinIO with a port", "http://minio.storage:9000", ""},
		{"GCS", "https://storage.googleapis.com/", ""},
		{"a path", "https://s3.amazonaws.com/my-bucket", "endpoint must be http://<host>[:port]"},
		{"no scheme", "minio:9000", "endpoint must be http://<host>[:port]"},
		{"another scheme", "s3://bucket", "endpoint must be http://<host>[:port]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := validCluster(ns)
			c.Spec.Backup = store(tc.endpoint)
			expectAdmission(t, env.Client.Create(ctx, c), tc.want)
			if tc.want == "" && c.Spec.Backup.ObjectStore.Credentials.AccessKeyIDKey != "AWS_ACCESS_KEY_ID" {
				t.Errorf("credentials defaulted to %+v", c.Spec.Backup.ObjectStore.Credentials)
			}
		})
	}
	c := validCluster(ns)
	c.Spec.Backup = store("")
	c.Spec.Backup.ObjectStore.Bucket = "b"
	expectAdmission(t, env.Client.Create(ctx, c), "spec.backup.objectStore.bucket")

	b := &valkeyv1.ValkeyBackup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "vkb-" + rand.String(5)},
		Spec: valkeyv1.ValkeyBackupSpec{Cluster: backupv1.ClusterReference{Name: "cache"}}}
	expectAdmission(t, env.Client.Create(ctx, b), "")
	b.Spec.Cluster.Name = "other"
	expectAdmission(t, env.Client.Update(ctx, b), "a ValkeyBackup's spec is immutable")
}
