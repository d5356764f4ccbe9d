package validation

import (
	backupv1 "github.com/opsuite/suite/api/backup/v1alpha1"

	"context"
	"fmt"
	"strings"
	"testing"

	valkeyv1 "github.com/opsuite/suite/api/valkey/v1alpha1"
	"github.com/opsuite/suite/shared/backupschedule"
	"github.com/opsuite/suite/shared/testenv"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
)

// TestScheduledBackupAdmission: spec.schedule refuses what is not cron in UTC (a time zone,
// @every, too few or too many fields) with a message giving the forms; every schedule the
// API server accepts that the operator cannot compute is one Parse refuses, and every one
// Parse reads the API server accepts. backupOwnerReference defaults to none; a name too
// long for its backups' names is refused.
func TestScheduledBackupAdmission(t *testing.T) {
	ns := testenv.NewNamespace(t, env.Client, "vksb-")
	ctx := context.Background()
	const cronMsg = "schedule must be cron in UTC"
	for _, tc := range []struct {
		schedule string
		want     string // "" accepts
		parses   bool   // whether backupschedule.Parse reads it
	}{
		{"0 0 3 * * *", "", true},
		{"0 3 * * *", "", true},
		{"*/5 * * * * *", "", true},
		{"0 0 0 * * SUN", "", true},
		{"0 30 2 1-7,15 JAN-MAR ?", "", true},
		{"@daily", "", true},
		{"@hourly", "", true},
		// Accepted by the API server, refused by the operator with InvalidSchedule.
		{"61 * * * * *", "", false},
		{"0 0 0 30 2 *", "", false},
		{"* * * *", cronMsg, false},
		{"* * * * * * *", cronMsg, false},
		{"CRON_TZ=UTC 0 3 * * *", cronMsg, false},
		{"@every 5s", cronMsg, false},
		{" 0 3 * * *", cronMsg, true},
		{"0 3 * * *\n", cronMsg, true},
		{"", "spec.schedule", false},
	} {
		t.Run(tc.schedule, func(t *testing.T) {
			sb := &valkeyv1.ValkeyScheduledBackup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "vksb-" + rand.String(5)},
				Spec: backupv1.ScheduledBackupSpec{Cluster: backupv1.ClusterReference{Name: "cache"}, Schedule: tc.schedule}}
			err := env.Client.Create(ctx, sb)
			expectAdmission(t, err, tc.want)
			if _, perr := backupschedule.Parse(tc.schedule); (perr == nil) != tc.parses {
				t.Errorf("Parse: %v, want parses=%v", perr, tc.parses)
			}
			if err == nil && sb.Spec.BackupOwnerReference != backupv1.BackupOwnerNone {
				t.Errorf("backupOwnerReference defaulted to %q, want none", sb.Spec.BackupOwnerReference)
			}
		})
	}
	sb := &valkeyv1.ValkeyScheduledBackup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: strings.Repeat("a", 239)},
		Spec: backupv1.ScheduledBackupSpec{Cluster: backupv1.ClusterReference{Name: "cache"}, Schedule: "@daily"}}
	expectAdmission(t, env.Client.Create(ctx, sb), "at most 238 characters")
	sb.Name = strings.Repeat("a", 238)
	expectAdmission(t, env.Client.Create(ctx, sb), "")
	sb.Spec.BackupOwnerReference = "parent"
	expectAdmission(t, env.Client.Update(ctx, sb), "spec.backupOwnerReference")
}

// TestRetentionAdmission: spec.backup.retentionPolicy takes CloudNativePG's form (count and
// d, w or m) and says so otherwise; keepLast is at least 1. Every window the API server
// accepts, backupschedule.ParseWindow reads.
func TestRetentionAdmission(t *testing.T) {
	ns := testenv.NewNamespace(t, env.Client, "vkc-")
	ctx := context.Background()
	for _, tc := range []struct {
		policy   string
		keepLast int32
		want     string
	}{
		{"30d", 0, ""},
		{"4w", 7, ""},
		{"12m", 0, ""},
		{"9999d", 0, ""},
		{"", 3, ""},
		{"30", 0, "retentionPolicy must be a count (1-9999) and a unit"},
		{"0d", 0, "retentionPolicy must be a count (1-9999) and a unit"},
		{"30h", 0, "retentionPolicy must be a count (1-9999) and a unit"},
		{"1y", 0, "retentionPolicy must be a count (1-9999) and a unit"},
		{"", -1, "spec.backup.keepLast"},
	} {
		t.Run(fmt.Sprintf("%q/%d", tc.policy, tc.keepLast), func(t *testing.T) {
			c := validCluster(ns)
			c.Spec.Backup = &valkeyv1.BackupConfiguration{ObjectStore: backupv1.ObjectStoreSpec{Bucket: "backups",
				Credentials: backupv1.ObjectStoreCredentials{SecretName: "s3"}}, RetentionPolicy: tc.policy, KeepLast: tc.keepLast}
			expectAdmission(t, env.Client.Create(ctx, c), tc.want)
			if _, err := backupschedule.ParseWindow(tc.policy); tc.want == "" && err != nil {
				t.Errorf("the API server accepted %q, ParseWindow refuses it: %v", tc.policy, err)
			}
		})
	}
}
