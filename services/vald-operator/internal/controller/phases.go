package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	valdv1 "github.com/opsuite/suite/api/vald/v1"
	"github.com/opsuite/suite/services/vald-operator/internal/lifecycle"
	"github.com/opsuite/suite/services/vald-operator/internal/resources"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// passState is what one pass's phases learn beyond their conditions.
type passState struct {
	// applied are the ValdReleases written in this pass, as the API server answered.
	applied map[client.ObjectKey]client.Object
	// hold is the grace of entries whose node-pool match was lost; zero when none is held.
	hold heldEntries
	// matched is true once the pass has judged the node-pool match (hold is then current).
	matched bool
	// switchover is the blue/green switch the pass found; nil until the build ran.
	switchover *switchover
	// kept are the ValdReleases of entries no longer active kept during a switch: not
	// judged by the phase (they are going away), only left in place.
	kept map[client.ObjectKey]bool
}

// phases is the lifecycle of one release, bound to this pass.
func (r *Reconciler) phases(vor *valdv1.ValdOperatorRelease, st *passState) lifecycle.Phases {
	applied := st.applied
	return lifecycle.Phases{
		{
			Type:    valdv1.ConditionWaitingClusterCreate,
			Desired: lifecycle.Prop{Check: func() lifecycle.Result { return clustersCreated(vor) }},
			Seed:    "Checking that every cluster has an id and a name.",
		},
		{
			Type: valdv1.ConditionWaitingCreateVrs,
			Desired: &lifecycle.Resource{
				Builder: func(ctx context.Context) ([]client.Object, lifecycle.Result, error) {
					return r.desiredValdReleases(ctx, vor, st)
				},
				Sync: func(ctx context.Context, objs []client.Object) (lifecycle.Result, error) {
					return r.syncValdReleases(ctx, vor, objs, applied)
				},
				Reader: appliedReader{Reader: r.Client, applied: applied},
				Check: func(want, got client.Object) lifecycle.Result {
					if st.kept[client.ObjectKeyFromObject(want)] {
						return lifecycle.Succeeded("")
					}
					return r.valdReleaseReady(want, got)
				},
				Missing: "Waiting for the ValdReleases to appear.",
				Ready:   r.readyMessage(),
			},
			Seed: "Creating the ValdReleases.",
		},
		{
			Type: valdv1.ConditionCompleted,
			Seed: "Every phase succeeded.",
		},
	}
}

// clustersCreated is the WaitingClusterCreate check: what is structurally missing fails,
// what an external system has yet to fill in (ids, names) is Pending. Clusters of inactive
// entries may still be provisioning; they do not hold the active ones back.
func clustersCreated(vor *valdv1.ValdOperatorRelease) lifecycle.Result {
	infra := vor.Spec.Infrastructure
	if len(infra) == 0 {
		return lifecycle.Failed("spec.infrastructure is empty: add an entry with the clusters to release Vald to.")
	}
	for _, entry := range infra {
		if len(entry.Clusters) == 0 {
			return lifecycle.Failed(fmt.Sprintf("Infrastructure entry %q has no clusters: add at least one cluster.", entry.Role))
		}
	}
	var noID, noName int
	for _, entry := range infra {
		if !entry.IsActive() {
			continue
		}
		for _, cl := range entry.Clusters {
			if cl.ID == "" {
				noID++
			}
			if cl.Name == "" {
				noName++
			}
		}
	}
	if noID > 0 || noName > 0 {
		return lifecycle.Pending(fmt.Sprintf("Waiting for an external system to set %d cluster id(s) and %d cluster name(s) of the active infrastructure entries.", noID, noName))
	}
	return lifecycle.Succeeded("Every cluster of the active infrastructure entries has an id and a name.")
}

// desiredValdReleases builds the ValdReleases; a build that cannot succeed (an empty
// render, a name too long) fails the phase before anything is written or pruned. With the
// node-pool match on, the ValdReleases of entries whose match was lost are kept as they are
// for the grace (see holdUnmatched).
func (r *Reconciler) desiredValdReleases(ctx context.Context, vor *valdv1.ValdOperatorRelease, st *passState) ([]client.Object, lifecycle.Result, error) {
	legacy, err := r.legacyNamed(ctx, vor)
	if meta.IsNoMatchError(err) {
		return nil, lifecycle.Pending(crdMissing), nil
	}
	if err != nil {
		return nil, lifecycle.Result{}, err
	}
	in := resources.Input{Release: vor, Legacy: legacy}
	if r.Options.RequireNodePoolMatch {
		pools, err := r.matchNodePools(ctx, vor.Namespace)
		if err != nil {
			return nil, lifecycle.Result{}, err
		}
		in.Nodes = pools
	}
	vrs, err := resources.DesiredValdReleases(in, r.Options.Build)
	var buildErr *resources.Error
	if errors.As(err, &buildErr) {
		return nil, lifecycle.Failed(buildErr.Message), nil
	}
	if err != nil {
		return nil, lifecycle.Result{}, err
	}
	msg, err := r.sharedObjectClash(ctx, vor, vrs, legacy)
	if err != nil {
		return nil, lifecycle.Result{}, err
	}
	if msg != "" {
		return nil, lifecycle.Pending(msg), nil
	}
	objs := make([]client.Object, 0, len(vrs))
	for _, vr := range vrs {
		stampValuesHash(vr)
		objs = append(objs, vr)
	}
	held, err := r.holdUnmatched(ctx, vor, resources.Unmatched(in), time.Now(), st)
	var kept []client.Object
	if err == nil {
		kept, err = r.keepOutgoing(ctx, vor, vrs, st)
	}
	if meta.IsNoMatchError(err) {
		return nil, lifecycle.Pending(crdMissing), nil
	}
	if err != nil {
		return nil, lifecycle.Result{}, err
	}
	st.matched = true
	return append(append(objs, held...), kept...), lifecycle.Succeeded(""), nil
}

// valdReleaseReady accepts a ValdRelease once it carries the generation it was built from,
// is not being deleted (one held by a finalizer is going away, whatever its labels say;
// its deletion event brings the pass that creates it again) and, with RequireDeployed,
// the Vald Helm Operator reports it Deployed.
func (r *Reconciler) valdReleaseReady(want, got client.Object) lifecycle.Result {
	if !got.GetDeletionTimestamp().IsZero() {
		return lifecycle.Progressing(fmt.Sprintf("ValdRelease %q is being deleted; it is created again once it is gone.", got.GetName()))
	}
	if got.GetLabels()[valdv1.LabelManagedGeneration] != want.GetLabels()[valdv1.LabelManagedGeneration] {
		return lifecycle.Progressing("Waiting for the ValdReleases to show the current generation.")
	}
	vr, ok := got.(*valdv1.ValdRelease)
	if !r.Options.RequireDeployed || !ok {
		return lifecycle.Succeeded("")
	}
	return deployment(vr, time.Now(), r.Options.HelmStatusWait)
}

func (r *Reconciler) readyMessage() string {
	if r.Options.RequireDeployed {
		return "Every ValdRelease exists with the current generation and the Vald Helm Operator deployed it."
	}
	return "Every ValdRelease exists with the current generation."
}
