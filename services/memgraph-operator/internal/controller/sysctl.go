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

// nodeCheck is a node's last answer.
type nodeCheck struct {
	at          time.Time
	met, failed bool
}

// checkNodes asks the node agent of every node running a pod of the cluster for
// vm.max_map_count >= 262144 (Memgraph needs it; the HA chart sets it with a privileged
// init container, which this operator never runs). An answer is reused for a while, so
// passes do not call the agents each time: a met node for SysctlRecheck, an unmet or
// silent one for SysctlRetry.
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
		chk, ok := p.ctl.lastCheck(node, p.now)
		if !ok {
			chk = nodeCheck{at: p.now}
			cctx, cancel := context.WithTimeout(ctx, nodeCallTimeout)
			rep, err := checker.MaxMapCount(cctx, node, resources.MaxMapCountMinimum)
			cancel()
			switch {
			case err != nil:
				log.FromContext(ctx).Error(err, "Checking vm.max_map_count failed", "node", node)
				chk.failed = true
			case !rep.Met:
				log.FromContext(ctx).Info("vm.max_map_count is too low", "node", node, "value", rep.Value, "minimum", rep.Minimum)
			default:
				if rep.Raised {
					log.FromContext(ctx).Info("Raised vm.max_map_count", "node", node, "value", rep.Value)
				}
				chk.met = true
			}
			p.ctl.rememberNode(node, chk)
		}
		switch {
		case chk.failed:
			p.nodes.failed = append(p.nodes.failed, node)
		case !chk.met:
			p.nodes.unmet = append(p.nodes.unmet, node)
		}
	}
}

// lastCheck is node's last answer while it is fresh enough to reuse.
func (ctl *Controller) lastCheck(node string, now time.Time) (nodeCheck, bool) {
	ctl.mu.Lock()
	defer ctl.mu.Unlock()
	chk, ok := ctl.nodes[node]
	ttl := ctl.cfg.SysctlRetry
	if chk.met {
		ttl = ctl.cfg.SysctlRecheck
	}
	return chk, ok && now.Sub(chk.at) < ttl
}

func (ctl *Controller) rememberNode(node string, chk nodeCheck) {
	ctl.mu.Lock()
	defer ctl.mu.Unlock()
	ctl.nodes[node] = chk
}
