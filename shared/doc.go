// Package shared is the root of libraries that know no single product: the operator kit
// every operator is built on.
//
//   - conditions: set metav1.Conditions with observedGeneration; Summarize them into one
//     state, knowing negative-polarity types (Degraded, ConfigurationWarning).
//   - status: one status write per pass, none when nothing changed.
//   - ssa: server-side apply under the controller's one field manager.
//   - reconciler: the reconcile skeleton (get, finalizer step, deep copy, the operator's
//     pass, one status write, events on transitions, Done/Wait/Terminal results,
//     <operator>_reconcile_* metrics).
//   - metrics: each object's state as a gauge (every state a series, deleted when the
//     object goes) and per-object operation counters, <operator>_* on controller-runtime's
//     registry.
//   - children: apply-then-prune of the objects an owner controls.
//   - envflag: flags whose defaults come from environment variables.
//   - manager: flags, logging, metrics (HTTPS, mounted certificate), probes, leader
//     election, cache selectors; Run is an operator binary's main.
//   - nodeagent: the node agent's client.
//   - testenv: the real control plane for tests, and helpers to start a manager, wait for
//     a status, count writes and find free ports.
package shared
