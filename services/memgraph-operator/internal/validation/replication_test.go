package validation

import (
	"context"
	"testing"

	memgraphv1 "github.com/opsuite/suite/api/memgraph/v1alpha1"
	"github.com/opsuite/suite/shared/testenv"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestReplicationRules: the replication modes Memgraph accepts together are admitted, a
// SYNC and STRICT_SYNC mix is refused with what to change, and so is an ASYNC cluster
// whose failover could promote nobody; the coordinator settings are bounded.
func TestReplicationRules(t *testing.T) {
	ns := testenv.NewNamespace(t, env.Client, "mgc-")
	type mgc = memgraphv1.MemgraphCluster
	const (
		sync, async, strict = memgraphv1.ReplicationSync, memgraphv1.ReplicationAsync, memgraphv1.ReplicationStrictSync
		mix                 = "replication mixes SYNC and STRICT_SYNC, which Memgraph refuses in one cluster: make every replication.instances[].mode ASYNC or equal to replication.mode"
		noCandidate         = "replication.mode ASYNC with coordinatorSettings.syncFailoverOnly true leaves an automatic failover no replica it may promote"
	)
	over := func(mode memgraphv1.ReplicationMode, inst ...memgraphv1.InstanceReplication) func(*mgc) {
		return func(c *mgc) { c.Spec.Replication = memgraphv1.ReplicationSpec{Mode: mode, Instances: inst} }
	}
	at := func(o int32, m memgraphv1.ReplicationMode) memgraphv1.InstanceReplication {
		return memgraphv1.InstanceReplication{Ordinal: o, Mode: m}
	}
	cases := []struct {
		name   string
		mutate func(*mgc)
		want   string
	}{
		{name: "strict sync", mutate: over(strict)},
		{name: "sync with an async instance", mutate: over(sync, at(1, async))},
		{name: "strict sync with an async instance", mutate: over(strict, at(2, async))},
		{name: "async with one sync instance", mutate: over(async, at(0, sync))},
		{name: "async without sync failover only", mutate: func(c *mgc) {
			c.Spec.Replication.Mode = async
			c.Spec.CoordinatorSettings.SyncFailoverOnly = ptr.To(false)
		}},
		{name: "async with sync failover only", mutate: over(async), want: noCandidate},
		{name: "async, only async instances", mutate: over(async, at(0, async)), want: noCandidate},
		{name: "sync with a strict sync instance", mutate: over(sync, at(1, strict)), want: mix},
		{name: "strict sync with a sync instance", mutate: over(strict, at(0, sync)), want: mix},
		{name: "async with both", mutate: over(async, at(0, sync), at(1, strict)), want: mix},
		{name: "unknown mode", mutate: over("SEMI_SYNC"), want: "Unsupported value"},
		{name: "ordinal out of range", mutate: over(sync, at(64, async)), want: "should be less than or equal to 63"},
		{name: "down timeout below the check period", mutate: func(c *mgc) {
			c.Spec.CoordinatorSettings = memgraphv1.CoordinatorSettings{InstanceDownTimeoutSec: 2, InstanceHealthCheckFrequencySec: 3}
		}, want: "coordinatorSettings.instanceDownTimeoutSec must be at least instanceHealthCheckFrequencySec"},
		{name: "down timeout equal to the check period", mutate: func(c *mgc) {
			c.Spec.CoordinatorSettings = memgraphv1.CoordinatorSettings{InstanceDownTimeoutSec: 3, InstanceHealthCheckFrequencySec: 3}
		}},
		{name: "zero check period", mutate: func(c *mgc) { c.Spec.CoordinatorSettings.InstanceHealthCheckFrequencySec = -1 },
			want: "should be greater than or equal to 1"},
		{name: "down timeout too long", mutate: func(c *mgc) { c.Spec.CoordinatorSettings.InstanceDownTimeoutSec = 3601 },
			want: "should be less than or equal to 3600"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := minimal(ns)
			tc.mutate(c)
			verdict(t, env.Client.Create(context.Background(), c), tc.want)
		})
	}
}

// TestReplicationModeEdit: a live cluster's mode may change (the operator re-registers),
// but not into a mix.
func TestReplicationModeEdit(t *testing.T) {
	ctx := context.Background()
	c := minimal(testenv.NewNamespace(t, env.Client, "mgc-"))
	if err := env.Client.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	c.Spec.Replication.Mode = memgraphv1.ReplicationStrictSync
	verdict(t, env.Client.Update(ctx, c), "")
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(c), c); err != nil {
		t.Fatal(err)
	}
	c.Spec.Replication.Instances = []memgraphv1.InstanceReplication{{Ordinal: 0, Mode: memgraphv1.ReplicationSync}}
	verdict(t, env.Client.Update(ctx, c), "replication mixes SYNC and STRICT_SYNC")
}
