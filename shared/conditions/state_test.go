package conditions

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestStateOf(t *testing.T) {
	const (
		T = metav1.ConditionTrue
		F = metav1.ConditionFalse
		U = metav1.ConditionUnknown
	)
	// Each product's options, as its controller passes them.
	memgraph := []StateOption{Settling("Converged", "Updated"),
		InProgress("WorkloadsNotReady", "RegistrationInProgress", "RetirementInProgress"),
		DegradedReasons("NoCoordinatorLeader", "NoMain")}
	veltrix := []StateOption{PartlyServing("ReplicationFactorMet")}
	for _, tc := range []struct {
		name       string
		conds      []metav1.Condition
		opts       []StateOption
		want       State
		wantReason string
	}{
		{"no conditions", nil, nil, StateInitializing, ""},
		{"no Ready yet", []metav1.Condition{cond("Progressing", T, "AddingNodes")}, nil, StateInitializing, ""},
		{"ready", []metav1.Condition{cond("Ready", T, "ClusterHealthy"), cond("Progressing", F, "ReconcileComplete")}, nil, StateReady, "ClusterHealthy"},
		// The ValkeyCluster document's order: Degraded, Ready, Progressing, else Failed.
		{"degraded wins over ready", []metav1.Condition{cond("Ready", T, "ClusterHealthy"), cond("Degraded", T, "NodeAddFailed")}, nil, StateDegraded, "NodeAddFailed"},
		{"degraded false is healthy", []metav1.Condition{cond("Ready", T, "ClusterHealthy"), cond("Degraded", F, "AsExpected")}, nil, StateReady, "ClusterHealthy"},
		{"ready wins over progressing", []metav1.Condition{cond("Ready", T, "ClusterHealthy"), cond("Progressing", T, "RebalancingSlots")}, nil, StateReady, "ClusterHealthy"},
		{"progressing while not ready", []metav1.Condition{cond("Ready", F, "MissingShards"), cond("Progressing", T, "AddingNodes")}, nil, StateReconciling, "AddingNodes"},
		{"not ready, nothing under way", []metav1.Condition{cond("Ready", F, "ServiceError"), cond("Progressing", F, "ServiceError")}, nil, StateFailed, "ServiceError"},
		{"a warning is not degraded", []metav1.Condition{cond("Ready", T, "ClusterHealthy"), cond(TypeConfigurationWarning, T, "TooFewShards")}, nil, StateReady, "ClusterHealthy"},
		{"ready unknown", []metav1.Condition{cond("Ready", U, "Scaling")}, nil, StateReconciling, "Scaling"},
		{"own degraded type", []metav1.Condition{cond("Ready", T, "Ready"), cond("Impaired", T, "DiskLost")}, []StateOption{DegradedTypes("Impaired")}, StateDegraded, "DiskLost"},
		{"own progressing type", []metav1.Condition{cond("Ready", F, "Waiting"), cond("Rolling", T, "Rolling")}, []StateOption{ProgressingTypes("Rolling")}, StateReconciling, "Rolling"},
		// Memgraph: serving while a change is in flight, pods starting, outages.
		{"serving, converged, updated", []metav1.Condition{cond("Ready", T, "Ready"), cond("Converged", T, "Converged"), cond("Updated", T, "Updated")}, memgraph, StateReady, "Ready"},
		{"serving, retiring", []metav1.Condition{cond("Ready", T, "Ready"), cond("Converged", F, "RetirementInProgress"), cond("Updated", T, "Updated")}, memgraph, StateReconciling, "RetirementInProgress"},
		{"serving, update pending", []metav1.Condition{cond("Ready", T, "Ready"), cond("Converged", T, "Converged"), cond("Updated", F, "UpdatePending")}, memgraph, StateReconciling, "UpdatePending"},
		{"settling type absent", []metav1.Condition{cond("Ready", T, "Ready")}, memgraph, StateReady, "Ready"},
		{"pods starting", []metav1.Condition{cond("Ready", F, "WorkloadsNotReady"), cond("Converged", F, "WorkloadsNotReady")}, memgraph, StateReconciling, "WorkloadsNotReady"},
		{"registering, no MAIN yet", []metav1.Condition{cond("Ready", F, "NoMain"), cond("Converged", F, "RegistrationInProgress")}, memgraph, StateReconciling, "RegistrationInProgress"},
		{"no leader", []metav1.Condition{cond("Ready", F, "NoCoordinatorLeader"), cond("Converged", F, "NoCoordinatorLeader")}, memgraph, StateDegraded, "NoCoordinatorLeader"},
		{"memgraph failure", []metav1.Condition{cond("Ready", F, "TLSVerificationFailed")}, memgraph, StateFailed, "TLSVerificationFailed"},
		// VeltrixDB: Ready False reads Degraded while the replication factor is met.
		{"removal refused, enough members", []metav1.Condition{cond("Ready", F, "RemovalRefused"), cond("ReplicationFactorMet", T, "ReplicationFactorMet")}, veltrix, StateDegraded, "RemovalRefused"},
		{"no disks, no members", []metav1.Condition{cond("Ready", F, "DisksNotPrepared"), cond("ReplicationFactorMet", F, "BelowReplicationFactor")}, veltrix, StateFailed, "DisksNotPrepared"},
		{"upgrading", []metav1.Condition{cond("Ready", U, "Upgrading"), cond("ReplicationFactorMet", T, "ReplicationFactorMet")}, veltrix, StateReconciling, "Upgrading"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, why := StateOf(tc.conds, tc.opts...)
			if got != tc.want || why.Reason != tc.wantReason {
				t.Fatalf("StateOf = %s (%q), want %s (%q)", got, why.Reason, tc.want, tc.wantReason)
			}
		})
	}
}
