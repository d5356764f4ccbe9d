package controller

import (
	"context"
	"fmt"

	valdv1 "github.com/opsuite/suite/api/vald/v1"
	"github.com/opsuite/suite/services/vald-operator/internal/resources"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

func nodeMetadata() *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(metav1.SchemeGroupVersion.WithKind("Node"))
	m.APIVersion, m.Kind = "v1", "Node"
	return m
}

// matchNodePools finds which pool types have Nodes labelled for namespace. Only labels are
// read (a metadata-only watch), so the cache stays small on large clusters.
func (r *Reconciler) matchNodePools(ctx context.Context, namespace string) (resources.NodePools, error) {
	cfg := r.Options.Build
	nodes := &metav1.PartialObjectMetadataList{}
	nodes.APIVersion, nodes.Kind = "v1", "NodeList"
	if err := r.Client.List(ctx, nodes, client.MatchingLabels{cfg.NodeLabelKey("namespace"): namespace}); err != nil {
		return nil, fmt.Errorf("listing Nodes: %w", err)
	}
	pools := resources.NodePools{}
	for _, n := range nodes.Items {
		switch t := valdv1.NodePoolType(n.Labels[cfg.NodeLabelKey("type")]); t {
		case valdv1.NodePoolTypeGeneral, valdv1.NodePoolTypeValdAgent:
			pools[t] = true
		}
	}
	return pools, nil
}

// nodePoolHandler reconciles the releases of the namespace a Node's pool label names.
func nodePoolHandler(c client.Client, cfg resources.Config) handler.EventHandler {
	return handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, obj client.Object) []reconcile.Request {
		ns := obj.GetLabels()[cfg.NodeLabelKey("namespace")]
		if ns == "" {
			return nil
		}
		list := &valdv1.ValdOperatorReleaseList{}
		if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
			return nil
		}
		reqs := make([]reconcile.Request, 0, len(list.Items))
		for _, v := range list.Items {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: v.Namespace, Name: v.Name}})
		}
		return reqs
	})
}
