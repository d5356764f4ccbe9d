package v1alpha1

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// LostNodeReplacement says whether a member of a lost node is replaced without a person.
// +kubebuilder:validation:Enum=Automatic;Manual
type LostNodeReplacement string

const (
	// LostNodeReplaceAutomatic replaces a lost member as soon as that loses nothing: it
	// leaves the HA membership (UNREGISTER INSTANCE, REMOVE COORDINATOR), its claims and
	// pod are deleted, and the StatefulSet makes it anew on another node, where it is
	// registered again.
	LostNodeReplaceAutomatic LostNodeReplacement = "Automatic"
	// LostNodeReplaceManual only reports the loss (MemberLost ReplacementManual) until the
	// annotation memgraph.com/replace-member names the member's pod.
	LostNodeReplaceManual LostNodeReplacement = "Manual"
)

// DefaultLostNodeGracePeriod is how long a member's node may be NotReady before it counts
// as lost: Kubernetes' own wait before it evicts the pods of a NotReady node.
const DefaultLostNodeGracePeriod = 5 * time.Minute

// LostNodesSpec is the policy for members whose volumes are on a lost node.
type LostNodesSpec struct {
	// Replace is Automatic (the default: replaced once nothing is lost by it) or Manual
	// (reported; the annotation memgraph.com/replace-member=<pod> replaces it).
	// +kubebuilder:default=Automatic
	// +optional
	Replace LostNodeReplacement `json:"replace,omitempty"`

	// GracePeriod is how long the node of a member's volumes may be NotReady (its Ready
	// condition False or Unknown) before it counts as lost; a deleted node is lost at
	// once. Default 5m.
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s') && duration(self) <= duration('168h')",message="lostNodes.gracePeriod must be a duration between 0s and 168h such as 5m: a node NotReady longer than it counts as lost"
	// +optional
	GracePeriod *metav1.Duration `json:"gracePeriod,omitempty"`
}

// LostNodesPolicy is spec.lostNodes with its defaults: whether replacement is automatic,
// and the grace period.
func (s *MemgraphClusterSpec) LostNodesPolicy() (automatic bool, grace time.Duration) {
	automatic, grace = true, DefaultLostNodeGracePeriod
	if l := s.LostNodes; l != nil {
		automatic = l.Replace != LostNodeReplaceManual
		if l.GracePeriod != nil {
			grace = l.GracePeriod.Duration
		}
	}
	return automatic, grace
}

// LostNode is a member whose volumes were on a lost node.
type LostNode struct {
	// Member is the member's pod.
	Member string `json:"member"`
	// Node is the Kubernetes node its volumes were pinned to.
	Node string `json:"node"`
	// Reason is Deleted or NotReady.
	Reason string `json:"reason"`
	// Since is when the operator found the node lost.
	Since metav1.Time `json:"since"`
	// Replacement is Replacing once the member left the HA membership and its claims and
	// pod were deleted, Replaced once it serves again on another node and is registered
	// again; empty before it started.
	// +optional
	Replacement string `json:"replacement,omitempty"`
}
