// Package chartcheck holds the tests of the Helm charts in charts/: `helm lint --strict` and
// `helm template` of every chart with the pinned helm, and the rendered objects checked
// against what the suite promises (restricted Pod Security for the operators, probes,
// leader election, RBAC, the node agent's DaemonSet and roles).
package chartcheck
