// Package crdcheck holds tests of the generated CRDs in deploy/crds as a person meets
// them through kubectl: the printer columns `kubectl get` shows and the conditions
// `kubectl wait` waits on. It has no code of its own.
package crdcheck
