// Package chartcheck holds the tests of the Helm charts in charts/: `helm lint --strict` and
// `helm template` of every chart with the pinned helm, for the Kubernetes version of the
// control plane (shared/testenv.KubernetesVersion), and the rendered objects checked against
// what the suite promises (restricted Pod Security for the operators, probes, leader election,
// RBAC, the node agent's DaemonSet and roles, the node-agent wiring of the operators that
// call it). From a copy of the tree as git would check it out, every operator chart lints,
// renders, packages (with its vendored opsuite-lib library) and installs with a plain
// `helm install` on a real kube-apiserver, and charts/sync.sh --check fails when a vendored
// library copy drifts. An operator that calls the node agent installs on a cluster without
// the agent (its NOTES say so) and a `helm upgrade` binds it once the agent is there.
// SubjectAccessReviews on that API server check that an operator's
// ServiceAccount may do what calling the node agent takes and nothing more.
package chartcheck
