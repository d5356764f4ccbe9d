package resources

import (
	backupv1 "github.com/opsuite/suite/api/backup/v1alpha1"

	"reflect"
	"slices"
	"testing"

	memgraphv1 "github.com/opsuite/suite/api/memgraph/v1alpha1"
	"github.com/opsuite/suite/services/memgraph-operator/internal/snapshot"
	corev1 "k8s.io/api/core/v1"
)

const testOperatorImage = "registry.example/memgraph-operator:v1"

func withStore(c *memgraphv1.MemgraphCluster) *memgraphv1.MemgraphCluster {
	c.Spec.Backup = &memgraphv1.BackupConfiguration{ObjectStore: backupv1.ObjectStoreSpec{
		Endpoint: "https://minio.example:9000", Bucket: "backups", Region: "eu-1", ForcePathStyle: true,
		Credentials: backupv1.ObjectStoreCredentials{SecretName: "s3", AccessKeyIDKey: "ID"},
		CA:          &backupv1.SecretKeyRef{Name: "s3-ca"},
	}}
	return c
}

// TestWithBackupLeavesOtherClustersAlone: without spec.backup, or without the operator's
// image, the data StatefulSet is exactly the plain one, so an operator upgrade rolls no
// pod of a cluster that does not use backups.
func TestWithBackupLeavesOtherClustersAlone(t *testing.T) {
	for name, tc := range map[string]struct {
		c     *memgraphv1.MemgraphCluster
		image string
	}{
		"no backup": {c: minimal(), image: testOperatorImage},
		"no image":  {c: withStore(minimal())},
	} {
		plain := StatefulSet(tc.c, RoleData, 2)
		got := StatefulSet(tc.c, RoleData, 2)
		WithBackup(got, tc.c, BackupOptions{Image: tc.image, Restore: &RestoreSource{Bucket: "b", Path: "p"}})
		if !reflect.DeepEqual(plain, got) {
			t.Errorf("%s: the StatefulSet changed", name)
		}
	}
}

// TestBackupAgentAndRestoreContainers: spec.backup adds the agent sidecar (the operator's
// binary, the data volume read-only, the token Secret); spec.bootstrap with a verified
// source adds the restore init container of ordinal 0 with the store's settings as flags
// and the keys from the credentials Secret, never in the template itself.
func TestBackupAgentAndRestoreContainers(t *testing.T) {
	c := withStore(minimal())
	sts := StatefulSet(c, RoleData, 3)
	WithBackup(sts, c, BackupOptions{Image: testOperatorImage, Restore: &RestoreSource{Bucket: "backups", Path: "x/b1-1234"}})
	pod := sts.Spec.Template.Spec
	if len(pod.InitContainers) != 0 {
		t.Fatalf("a cluster without spec.bootstrap got %d init containers", len(pod.InitContainers))
	}
	if len(pod.Containers) != 2 || pod.Containers[1].Name != ContainerBackupAgent {
		t.Fatalf("containers %+v", pod.Containers)
	}
	agent := pod.Containers[1]
	if agent.Image != testOperatorImage || !slices.Equal(agent.Command, []string{OperatorEntrypoint, snapshot.CommandAgent}) ||
		!slices.Contains(agent.Args, "--listen=:7690") || agent.Ports[0].ContainerPort != memgraphv1.DefaultBackupAgentPort {
		t.Errorf("agent %+v", agent)
	}
	for _, m := range agent.VolumeMounts {
		if m.Name == VolumeLib && !m.ReadOnly {
			t.Error("the agent mounts the data volume writable")
		}
	}
	if *agent.SecurityContext.ReadOnlyRootFilesystem != true || *agent.SecurityContext.AllowPrivilegeEscalation {
		t.Errorf("agent security context %+v", agent.SecurityContext)
	}

	c.Spec.Bootstrap = &memgraphv1.BootstrapSpec{Backup: memgraphv1.BackupReference{Name: "b1"}}
	sts = StatefulSet(c, RoleData, 3)
	WithBackup(sts, c, BackupOptions{Image: testOperatorImage, Restore: &RestoreSource{Bucket: "backups", Path: "x/b1-1234"}})
	pod = sts.Spec.Template.Spec
	if len(pod.InitContainers) != 1 || pod.InitContainers[0].Name != ContainerRestore {
		t.Fatalf("init containers %+v", pod.InitContainers)
	}
	init := pod.InitContainers[0]
	for _, a := range []string{"--data-dir=/var/lib/memgraph", "--ordinal=0", "--bucket=backups", "--backup-path=x/b1-1234",
		"--endpoint=https://minio.example:9000", "--region=eu-1", "--path-style", "--ca-file=" + RestoreCADir + "/ca.crt"} {
		if !slices.Contains(init.Args, a) {
			t.Errorf("restore args %v lack %s", init.Args, a)
		}
	}
	env := map[string]corev1.EnvVar{}
	for _, e := range init.Env {
		env[e.Name] = e
		if e.Value != "" {
			t.Errorf("%s has a literal value in the template", e.Name)
		}
	}
	if r := env[snapshot.EnvAccessKeyID].ValueFrom.SecretKeyRef; r.Name != "s3" || r.Key != "ID" {
		t.Errorf("access key from %+v", r)
	}
	if r := env[snapshot.EnvSecretAccessKey].ValueFrom.SecretKeyRef; r.Key != "AWS_SECRET_ACCESS_KEY" || *r.Optional {
		t.Errorf("secret key from %+v", r)
	}
	if r := env[snapshot.EnvSessionToken].ValueFrom.SecretKeyRef; !*r.Optional {
		t.Error("the session token is not optional")
	}
	if f := env[snapshot.EnvPodIndex].ValueFrom.FieldRef; f.FieldPath != "metadata.labels['apps.kubernetes.io/pod-index']" {
		t.Errorf("pod index from %+v", f)
	}
	if init.VolumeMounts[0].Name != VolumeLib || init.VolumeMounts[0].ReadOnly {
		t.Errorf("restore mounts %+v", init.VolumeMounts)
	}
	// No source yet (the backup not verified): no init container.
	sts = StatefulSet(c, RoleData, 3)
	WithBackup(sts, c, BackupOptions{Image: testOperatorImage})
	if len(sts.Spec.Template.Spec.InitContainers) != 0 {
		t.Error("an unverified restore got an init container")
	}
}
