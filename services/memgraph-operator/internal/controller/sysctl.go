package controller

import (
	"context"
	"slices"
	"time"

	"github.com/opsuite/suite/services/memgraph-operator/internal/resources"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// nodeCallTimeout bounds one node agent call, so an agent that hangs does not hold the pass.
const nodeCallTimeout = 10 * time.Second

// nodeFindings are the nodes the cluster's pods run on and how their check went.
type nodeFindings struct {
	checked bool
	nodes   []string
	unmet   []string
	failed  []string
}

// checkNodes asks the node agent of every node running a pod of the cluster for
// vm.max_map_count >= 262144 (Memgraph needs it; the HA chart sets it with a privileged
// init container, which this operator never runs). A node found met is trusted for
// SysctlRecheck; unmet and failed nodes are asked again every pass.
func (p *pass) checkNodes(ctx context.Context) {
	checker := p.ctl.cfg.Sysctls
	if checker == nil {
		return
	}
	var pods corev1.PodList
	if err := p.ctl.client.List(ctx, &pods, client.InNamespace(p.c.Namespace), client.MatchingLabels(resources.ClusterLabels(p.c.Name))); err != nil {
		log.FromContext(ctx).Error(err, "Listing pods to check their nodes failed", "memgraphCluster", p.c.Name)
		return
	}
	for _, pod := range pods.Items {
		if n := pod.Spec.NodeName; n != "" && !slices.Contains(p.nodes.nodes, n) {
			p.nodes.nodes = append(p.nodes.nodes, n)
		}
	}
	slices.Sort(p.nodes.nodes)
	p.nodes.checked = len(p.nodes.nodes) > 0
	for _, node := range p.nodes.nodes {
		if p.ctl.recentlyMet(node, p.now) {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, nodeCallTimeout)
		rep, err := checker.MaxMapCount(cctx, node, resources.MaxMapCountMinimum)
		cancel()
		switch {
		case err != nil:
			log.FromContext(ctx).Error(err, "Checking vm.max_map_count failed", "node", node)
			p.nodes.failed = append(p.nodes.failed, node)
		case !rep.Met:
			p.nodes.unmet = append(p.nodes.unmet, node)
		default:
			if rep.Raised {
				log.FromContext(ctx).Info("Raised vm.max_map_count", "node", node, "value", rep.Value)
			}
			p.ctl.markMet(node, p.now)
		}
	}
}

func (ctl *Controller) recentlyMet(node string, now time.Time) bool {
	ctl.mu.Lock()
	defer ctl.mu.Unlock()
	at, ok := ctl.nodes[node]
	return ok && now.Sub(at) < ctl.cfg.SysctlRecheck
}

func (ctl *Controller) markMet(node string, now time.Time) {
	ctl.mu.Lock()
	defer ctl.mu.Unlock()
	ctl.nodes[node] = now
}
