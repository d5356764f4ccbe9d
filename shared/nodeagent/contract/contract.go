// Package contract holds the names the node agent and its callers must agree on: the token
// audience of each node's agent and the virtual resource RBAC authorizes calls against. It
// has no dependencies, so the agent imports it without the client library.
package contract

import "strings"

// AudiencePrefix starts the token audience of every agent; the node's name follows.
const AudiencePrefix = "nodeagent.opsuite.io/"

// Audience is the only token audience the agent on node accepts: a token minted for one
// node's agent is refused by every other agent, so a leaked or logged token cannot be
// replayed elsewhere.
func Audience(node string) string { return AudiencePrefix + node }

// The virtual, cluster-scoped resource every call is authorized against with a
// SubjectAccessReview, named after the agent's node (RBAC resourceNames limit a caller to
// some nodes).
const (
	Group    = "nodeagent.opsuite.io"
	Resource = "nodes"
	// SubresourceDisks is updated by PrepareDisks and ReleaseDisks.
	SubresourceDisks = "disks"
	// SubresourceSysctls is updated by EnsureSysctl.
	SubresourceSysctls = "sysctls"
)

// PerNodeServerNamePrefix starts a server name that stands for one name per agent: when the
// chart's serverName is "*.<name>", each agent's certificate names its node as
// "<node>.<name>" (NodeServerName), and a client verifies that name, not a shared one, so the
// agent of one node cannot pose as another's.
const PerNodeServerNamePrefix = "*."

// NodeServerName is the name the certificate of node's agent carries under serverName: the
// shared name itself, or "<node>.<name>" when serverName is "*.<name>".
func NodeServerName(serverName, node string) string {
	if rest, ok := strings.CutPrefix(serverName, PerNodeServerNamePrefix); ok {
		return node + "." + rest
	}
	return serverName
}
