// Package disks prepares a VeltrixCluster's disks through the node agents: it picks the
// candidate nodes (nodeSelector, tolerations, schedulable), asks each agent to prepare the
// disks the spec's selector matches (XFS, or the XFS/raw split for rawVLog) under the
// cluster's PV path, and to ensure vm.max_map_count, and turns the answers into the
// resources.Disk values the PersistentVolumes are built from. An answer is untrusted input
// (CheckReply): one that lies is refused whole, as AgentReplyInvalid. Failures are
// classified into stable reasons (unreachable, permission denied, no matching disks,
// refused, invalid reply) so the controller reports what is wrong without raw, changing
// error text.
package disks

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	veltrixv1 "github.com/opsuite/suite/api/veltrix/v1alpha1"
	nodeagentv1 "github.com/opsuite/suite/proto/nodeagent/v1"
	"github.com/opsuite/suite/services/veltrix-operator/internal/resources"
	"github.com/opsuite/suite/shared/nodeagent"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/klog/v2"
)

// MaxMapCount is the sysctl the native index needs, and its minimum.
const (
	MaxMapCount        = "vm.max_map_count"
	MinMaxMapCount     = 262144
	noMatchingDisksMsg = "eligible devices match the selector"
)

// Agent is one node's agent; *nodeagent.Client implements it.
type Agent interface {
	PrepareDisks(ctx context.Context, req *nodeagentv1.PrepareDisksRequest) (*nodeagentv1.PrepareDisksResponse, error)
	ReleaseDisks(ctx context.Context, req *nodeagentv1.ReleaseDisksRequest) (*nodeagentv1.ReleaseDisksResponse, error)
	EnsureSysctl(ctx context.Context, req *nodeagentv1.EnsureSysctlRequest) (*nodeagentv1.EnsureSysctlResponse, error)
	GetNodeReport(ctx context.Context, req *nodeagentv1.GetNodeReportRequest) (*nodeagentv1.GetNodeReportResponse, error)
}

// Agents hands out the agent of a node.
type Agents interface {
	Node(name string) Agent
}

// PoolAgents are the agents of a shared/nodeagent Pool.
type PoolAgents struct{ Pool *nodeagent.Pool }

// Node implements Agents.
func (p PoolAgents) Node(name string) Agent { return p.Pool.Node(name) }

// PVRoot is the PV root of a node's agent (its --pv-root).
type PVRoot func(node string) string

// NodeNameVar in a PV root stands for the node's name, as in the node-agent chart's
// extraArgs (--pv-root=/srv/pv/$(NODE_NAME)), for agents whose roots differ per node.
const NodeNameVar = "$(NODE_NAME)"

// SamePVRoot is the PV root of agents that all run with the same --pv-root; NodeNameVar in it
// is replaced by each node's name.
func SamePVRoot(root string) PVRoot {
	return func(node string) string { return strings.ReplaceAll(root, NodeNameVar, node) }
}

// Problem is why a node's agent did not give its disks or its sysctl; the values are the
// condition reasons.
type Problem string

// Problems, from what the agent answered.
const (
	ProblemNone Problem = ""
	// ProblemUnreachable: no agent pod on the node, or it did not answer.
	ProblemUnreachable Problem = "AgentUnreachable"
	// ProblemPermissionDenied: the agent refused the operator's token or its RBAC.
	ProblemPermissionDenied Problem = "AgentPermissionDenied"
	// ProblemNoMatchingDisks: too few blank devices match the disk selector.
	ProblemNoMatchingDisks Problem = "NoMatchingDisks"
	// ProblemRefused: the agent refused the request (a device holding data, a PV path
	// prepared with other settings, too small for XFS, a node lent to another namespace).
	ProblemRefused Problem = "DisksRefused"
	// ProblemBadReply: the agent answered what no honest agent answers (CheckReply); nothing
	// of its answer is used.
	ProblemBadReply Problem = "AgentReplyInvalid"
	// ProblemAgentError: any other failure of the agent.
	ProblemAgentError Problem = "AgentError"
)

// Classify maps an agent call's error to a Problem and a stable message: the agent's own
// message for its refusals (it names devices and sizes, which do not change from pass to
// pass), a fixed text where the error would carry addresses or timings.
func Classify(err error) (Problem, string) {
	if err == nil {
		return ProblemNone, ""
	}
	if errors.Is(err, nodeagent.ErrNoAgent) {
		return ProblemUnreachable, "no ready node-agent pod on the node"
	}
	st, _ := status.FromError(err)
	switch st.Code() {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled:
		return ProblemUnreachable, "the node agent did not answer"
	case codes.PermissionDenied:
		// The agent's authorizer says "<user> may not <verb> <resource>": the operator's RBAC.
		// Any other denial is the agent's own rule (a node lent to another namespace).
		if strings.Contains(st.Message(), " may not ") {
			return ProblemPermissionDenied, "the node agent denied the operator (bind the operator to the agent's preparer ClusterRole)"
		}
		return ProblemRefused, st.Message()
	case codes.Unauthenticated:
		return ProblemPermissionDenied, "the node agent did not accept the operator's token"
	case codes.FailedPrecondition:
		if strings.Contains(st.Message(), noMatchingDisksMsg) {
			return ProblemNoMatchingDisks, st.Message()
		}
		return ProblemRefused, st.Message()
	case codes.InvalidArgument, codes.NotFound:
		return ProblemRefused, st.Message()
	}
	return ProblemAgentError, fmt.Sprintf("the node agent failed (%s)", st.Code())
}

// PrepareRequest is what a node's agent is asked for: disksPerNode devices matching the
// selector, split for rawVLog, bind-mounted under the cluster's PV path, for the cluster's
// namespace (an agent whose node is lent to another namespace refuses).
func PrepareRequest(c *veltrixv1.VeltrixCluster, pvRoot string) *nodeagentv1.PrepareDisksRequest {
	sel := &nodeagentv1.DeviceSelector{
		Model:    c.Spec.DiskSelector.Model,
		NvmeOnly: c.Spec.DiskSelector.NVMeOnlyOrDefault(),
		Count:    uint32(max(c.Spec.DisksPerNode, 1)),
	}
	if q := c.Spec.DiskSelector.MinSize; q != nil {
		sel.MinSizeBytes = q.Value()
	}
	if q := c.Spec.DiskSelector.MaxSize; q != nil {
		sel.MaxSizeBytes = q.Value()
	}
	return &nodeagentv1.PrepareDisksRequest{Selector: sel, XfsPercent: c.Spec.XFSPercent(), PvPath: resources.PVPath(pvRoot, c, 0), Namespace: c.Namespace}
}

// ReleaseRequest releases every disk prepared for the cluster on a node, wiping it when
// the data is to go; the namespace keeps it to the cluster's own disks.
func ReleaseRequest(c *veltrixv1.VeltrixCluster, pvRoot string, wipe bool) *nodeagentv1.ReleaseDisksRequest {
	return &nodeagentv1.ReleaseDisksRequest{PvPath: resources.PVPath(pvRoot, c, 0), Wipe: wipe, Namespace: c.Namespace}
}

// FromAgent turns the agent's answer to req into resources.Disk values, indexed by
// filesystem UUID order (never by kernel name). The answer is checked first (CheckReply): a
// lie is a *BadReply. A disk not ready (preparing, missing) makes the answer incomplete: it
// returns an error naming it.
func FromAgent(node string, req *nodeagentv1.PrepareDisksRequest, prepared []*nodeagentv1.PreparedDisk) ([]resources.Disk, error) {
	if err := CheckReply(req, prepared); err != nil {
		return nil, err
	}
	sorted := append([]*nodeagentv1.PreparedDisk(nil), prepared...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].GetFilesystemUuid() < sorted[j].GetFilesystemUuid() })
	out := make([]resources.Disk, 0, len(sorted))
	for i, p := range sorted {
		if p.GetState() != "ready" {
			return nil, fmt.Errorf("disk %s is %s", p.GetFilesystemUuid(), p.GetState())
		}
		out = append(out, resources.Disk{
			Node: node, Index: int32(i),
			FilesystemUUID: p.GetFilesystemUuid(), DiskGUID: p.GetDiskGuid(), WWN: p.GetWwn(), Serial: p.GetSerial(),
			PVPath: p.GetPvPath(), XFSBytes: p.GetXfsSizeBytes(),
			RawDevice: p.GetRawDevice(), RawPartitionUUID: p.GetRawPartitionUuid(), RawBytes: p.GetRawSizeBytes(),
		})
	}
	return out, nil
}

// NodeResult is what one node's agent answered.
type NodeResult struct {
	Node string
	// Disks are the prepared disks; nil when Problem is set.
	Disks   []resources.Disk
	Problem Problem
	Message string
	// MaxMapCountLow: vm.max_map_count is below the minimum and the agent may not raise it.
	MaxMapCountLow bool
	// SysctlProblem is set when the sysctl could not even be read.
	SysctlProblem Problem
	SysctlMessage string
}

// Usable reports whether the node can run a member: its disks are prepared, and its
// vm.max_map_count is met (or the map index may stand in).
func (r NodeResult) Usable(indexMapFallback bool) bool {
	return r.Problem == ProblemNone && r.SysctlProblem == ProblemNone && (!r.MaxMapCountLow || indexMapFallback)
}

// Result is one preparation pass over the nodes.
type Result struct {
	// Nodes are the nodes asked, in the order asked.
	Nodes []NodeResult
	// Wanted is how many usable nodes the cluster needs.
	Wanted int
}

// Usable are the nodes that can run members, in the order asked.
func (r Result) Usable(indexMapFallback bool) []NodeResult {
	var out []NodeResult
	for _, n := range r.Nodes {
		if n.Usable(indexMapFallback) {
			out = append(out, n)
		}
	}
	return out
}

// Prepare asks the agents of ordered nodes until wanted nodes are usable (or every node
// was asked): prepare the disks, then ensure vm.max_map_count. Nodes are asked in batches
// of as many as are still missing, a batch's agents at once (preparing a disk takes
// seconds: partitioning, mkfs), the next batch only for the nodes that failed; so no more
// nodes are prepared than the cluster needs, one broken node does not hold up the cluster
// while others have disks, and ten nodes take about the time of one. Results are in the
// order of ordered.
func Prepare(ctx context.Context, agents Agents, c *veltrixv1.VeltrixCluster, ordered []string, pvRoot PVRoot, wanted int) Result {
	res := Result{Wanted: wanted}
	usable, next := 0, 0
	seen := map[string]string{} // filesystem UUID -> the node that reported it
	for usable < wanted && next < len(ordered) {
		batch := ordered[next:min(next+wanted-usable, len(ordered))]
		next += len(batch)
		results := make([]NodeResult, len(batch))
		var wg sync.WaitGroup
		for i, node := range batch {
			wg.Go(func() { results[i] = prepareNode(ctx, agents.Node(node), c, node, pvRoot(node)) })
		}
		wg.Wait()
		for _, r := range results {
			refuseClaimed(&r, seen)
			if r.Usable(c.Spec.IndexMapFallback) {
				usable++
			}
			res.Nodes = append(res.Nodes, r)
		}
	}
	return res
}

// refuseClaimed refuses a node's disks when one of them has a filesystem UUID an earlier
// node reported (seen): an agent echoing another node's disk would otherwise make its
// volume name that disk. The agent's answer is then a lie like any CheckReply refuses.
func refuseClaimed(r *NodeResult, seen map[string]string) {
	for _, d := range r.Disks {
		if other, ok := seen[d.FilesystemUUID]; ok && other != r.Node {
			*r = NodeResult{Node: r.Node, Problem: ProblemBadReply, Message: "a filesystem UUID node " + other + " reported"}
			return
		}
	}
	for _, d := range r.Disks {
		seen[d.FilesystemUUID] = r.Node
	}
}

// RefuseVolumesElsewhere refuses a node's disks when one of them names a PersistentVolume
// that already exists pinned to another node (volumeNode returns that node, "" when there is
// no such volume): an agent reporting the filesystem UUID of a disk elsewhere, asked in
// another pass than that disk's node, would otherwise have the volume re-pinned to it.
func RefuseVolumesElsewhere(r *Result, volumeNode func(d resources.Disk) string) {
	for i := range r.Nodes {
		n := &r.Nodes[i]
		for _, d := range n.Disks {
			if other := volumeNode(d); other != "" && other != n.Node {
				*n = NodeResult{Node: n.Node, Problem: ProblemBadReply, Message: "a filesystem UUID whose volume is on node " + other}
				break
			}
		}
	}
}

// prepareNode asks one node's agent for the cluster's disks and its vm.max_map_count.
func prepareNode(ctx context.Context, agent Agent, c *veltrixv1.VeltrixCluster, node, pvRoot string) NodeResult {
	r := NodeResult{Node: node}
	checked := false
	if !c.Spec.IndexMapFallback {
		// Without the map fallback a node whose vm.max_map_count stays low is not used:
		// asked first, so that none of its disks is prepared for nothing. An agent that
		// does not answer is asked again after PrepareDisks, as with the fallback, so that
		// its condition says what is wrong with it.
		low, p, _ := ensureMaxMapCount(ctx, agent)
		if p == ProblemNone {
			if low {
				r.MaxMapCountLow = true
				return r
			}
			checked = true
		}
	}
	req := PrepareRequest(c, pvRoot)
	resp, err := agent.PrepareDisks(ctx, req)
	if err == nil {
		r.Disks, err = FromAgent(node, req, resp.GetDisks())
		var bad *BadReply
		switch {
		case errors.As(err, &bad):
			// The value goes to the log only: conditions and events get the stable message.
			klog.FromContext(ctx).Info("Refused the node agent's answer", "node", node, "problem", bad.Message, "value", bad.Value)
			r.Disks, r.Problem, r.Message = nil, ProblemBadReply, bad.Message
		case err != nil:
			r.Problem, r.Message = ProblemAgentError, err.Error()
		}
	} else {
		r.Problem, r.Message = Classify(err)
	}
	if r.Problem == ProblemNone && !checked {
		r.MaxMapCountLow, r.SysctlProblem, r.SysctlMessage = ensureMaxMapCount(ctx, agent)
	}
	return r
}

// ensureMaxMapCount asks the agent to raise vm.max_map_count to the minimum. An agent that
// may not raise it answers FailedPrecondition: the value is low and stays low.
func ensureMaxMapCount(ctx context.Context, agent Agent) (low bool, p Problem, msg string) {
	resp, err := agent.EnsureSysctl(ctx, &nodeagentv1.EnsureSysctlRequest{Name: MaxMapCount, Minimum: MinMaxMapCount})
	if err == nil {
		return !resp.GetStatus().GetMet(), ProblemNone, ""
	}
	if status.Code(err) == codes.FailedPrecondition {
		return true, ProblemNone, ""
	}
	p, msg = Classify(err)
	return false, p, msg
}

// Release releases the cluster's disks on each node (wiping them when asked); it returns
// the nodes whose agent did not do it, with the reason.
func Release(ctx context.Context, agents Agents, c *veltrixv1.VeltrixCluster, nodes []string, pvRoot PVRoot, wipe bool) map[string]string {
	failed := map[string]string{}
	for _, node := range nodes {
		if _, err := agents.Node(node).ReleaseDisks(ctx, ReleaseRequest(c, pvRoot(node), wipe)); err != nil {
			p, msg := Classify(err)
			failed[node] = fmt.Sprintf("%s: %s", p, msg)
		}
	}
	return failed
}

// Problems reports whether any node asked had a problem (disks or sysctl).
func (r Result) Problems() bool {
	for _, n := range r.Nodes {
		if n.Problem != ProblemNone || n.SysctlProblem != ProblemNone {
			return true
		}
	}
	return false
}

// PreparedFor lists the filesystem UUIDs of the disks a node's agent reports prepared for
// the cluster (under its PV path), or among known; it reads the report and changes nothing
// on the node. ok is false when the agent did not answer.
func PreparedFor(ctx context.Context, agent Agent, c *veltrixv1.VeltrixCluster, pvRoot string, known []string) (uuids []string, ok bool) {
	r, err := agent.GetNodeReport(ctx, &nodeagentv1.GetNodeReportRequest{})
	if err != nil {
		return nil, false
	}
	prefix := resources.PVPath(pvRoot, c, 0)
	for _, p := range r.GetPrepared() {
		u := p.GetFilesystemUuid()
		if u == "" {
			continue
		}
		if strings.HasPrefix(p.GetPvPath(), prefix) || slices.Contains(known, u) {
			uuids = append(uuids, u)
		}
	}
	sort.Strings(uuids)
	return uuids, true
}
