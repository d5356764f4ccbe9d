package validation

import (
	backupv1 "github.com/opsuite/suite/api/backup/v1alpha1"

	"context"
	"testing"

	memgraphv1 "github.com/opsuite/suite/api/memgraph/v1alpha1"
	"github.com/opsuite/suite/shared/testenv"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestScheduleAndRetentionRules: a schedule must be cron in UTC (6 or 5 fields or a
// macro), and a retention policy a count with d, w or m; keepLast is at least 1.
func TestScheduleAndRetentionRules(t *testing.T) {
	ns := testenv.NewNamespace(t, env.Client, "mgsb-")
	ctx := context.Background()
	for schedule, want := range map[string]string{
		"0 0 3 * * *": "", "0 3 * * *": "", "@daily": "",
		"@every 1h": "schedule must be cron in UTC", "CRON_TZ=UTC 0 3 * * *": "schedule must be cron in UTC", "0 3 * *": "schedule must be cron in UTC",
	} {
		sb := &memgraphv1.MemgraphScheduledBackup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "s-"},
			Spec: backupv1.ScheduledBackupSpec{Cluster: backupv1.ClusterReference{Name: "c"}, Schedule: schedule}}
		t.Run("schedule "+schedule, func(t *testing.T) { verdict(t, env.Client.Create(ctx, sb), want) })
	}
	for name, tc := range map[string]struct {
		policy string
		keep   int32
		want   string
	}{
		"30d":        {policy: "30d"},
		"4w and 3":   {policy: "4w", keep: 3},
		"30x":        {policy: "30x", want: "retentionPolicy must be a count"},
		"0d":         {policy: "0d", want: "retentionPolicy must be a count"},
		"keepLast 0": {keep: -1, want: "keepLast"},
	} {
		t.Run("retention "+name, func(t *testing.T) {
			c := minimal(ns)
			c.Spec.Backup = &memgraphv1.BackupConfiguration{RetentionPolicy: tc.policy, KeepLast: tc.keep,
				ObjectStore: backupv1.ObjectStoreSpec{Bucket: "backups", Credentials: backupv1.ObjectStoreCredentials{SecretName: "s3"}}}
			verdict(t, env.Client.Create(ctx, c), tc.want)
		})
	}
}
