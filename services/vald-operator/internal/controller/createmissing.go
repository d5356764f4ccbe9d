package controller

import (
	"context"
	"sync"

	valdv1 "github.com/opsuite/suite/api/vald/v1"
	"github.com/opsuite/suite/services/vald-operator/internal/resources"
	"github.com/opsuite/suite/shared/children"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// createMissing creates a new release's ValdReleases all at once, when the cache holds
// none of them, before the kit's Sync compares and applies one after another. A new release's
// pass is then two round trips to the API server (its ValdReleases together, then its
// status) rather than one per ValdRelease and the status: with the workers all waiting on
// the API server while many releases converge, that is a third less time per pass. The
// create is typed (the spec's JSON passes through as it is) rather than the applier's
// unstructured round trip, which parsed and re-encoded every spec four times.
//
// A release with any of its ValdReleases in place is left to Sync alone, which writes them
// in order (so the first refused write it reports is the first in order, as before).
//
// What was created goes into applied, where Sync's reads (freshClient) find it up to date
// and the phase's check finds the API server's answer. A name the cache did not hold but
// the API server does (the cache behind) is left to Sync, which applies to it as before.
// Any other refusal is the error Sync would have returned for it.
func (r *Reconciler) createMissing(ctx context.Context, vor *valdv1.ValdOperatorRelease, desired []*valdv1.ValdRelease, applied map[client.ObjectKey]client.Object) error {
	var missing []*valdv1.ValdRelease
	for _, want := range desired {
		key := client.ObjectKeyFromObject(want)
		if _, adopted := applied[key]; adopted {
			return nil
		}
		if err := r.Client.Get(ctx, key, &valdv1.ValdRelease{}); !apierrors.IsNotFound(err) {
			return nil // in place, or unreadable: Sync judges it
		}
		missing = append(missing, want)
	}
	if len(missing) < 2 {
		return nil // nothing to gain over Sync
	}
	created := make([]*valdv1.ValdRelease, len(missing))
	errs := make([]error, len(missing))
	create := func(i int) {
		vr := missing[i].DeepCopy()
		if err := r.Client.Create(ctx, vr, client.FieldOwner(resources.FieldManager)); err != nil {
			errs[i] = err
			return
		}
		created[i] = vr
	}
	var wg sync.WaitGroup
	for i := range missing {
		wg.Go(func() { create(i) })
	}
	wg.Wait()
	var first error
	for i, want := range missing {
		key := client.ObjectKeyFromObject(want)
		switch err := errs[i]; {
		case err == nil:
			applied[key] = created[i]
			r.metrics.countWrite("apply")
			log.FromContext(ctx).Info("Applied ValdRelease", "valdRelease", key.Name, "generation", vor.Generation)
		case apierrors.IsAlreadyExists(err):
			// The cache was behind: Sync applies to it.
		case first == nil:
			first = &children.ApplyError{Kind: "ValdRelease", Key: key, Err: err}
		}
	}
	return first
}
