package valdhelmsim

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// ValdReleaseGVK is the Vald Helm Operator's resource (api/vald/v1 in this repository).
// The simulator reads it unstructured, as a Helm operator reads any watched kind, so the
// tools module needs no dependency on the api module.
var ValdReleaseGVK = schema.GroupVersionKind{Group: "vald.vdaas.org", Version: "v1", Kind: "ValdRelease"}

// Condition types of a resource a Helm operator (operator-sdk's helm-operator, which the
// vdaas/vald-helm-operator image runs) manages.
const (
	ConditionInitialized    = "Initialized"
	ConditionDeployed       = "Deployed"
	ConditionReleaseFailed  = "ReleaseFailed"
	ConditionIrreconcilable = "Irreconcilable"
)

// Reasons of those conditions. Initialized carries none.
const (
	ReasonInstallSuccessful = "InstallSuccessful"
	ReasonUpgradeSuccessful = "UpgradeSuccessful"
	ReasonInstallError      = "InstallError"
	ReasonUpgradeError      = "UpgradeError"
	ReasonReconcileError    = "ReconcileError"
	// ReasonUninstallSuccessful goes with Deployed=False once a deleted release is gone.
	ReasonUninstallSuccessful = "UninstallSuccessful"
	ReasonUninstallError      = "UninstallError"
)

// Finalizer is the helm-operator's: it holds a deployed ValdRelease until its release is
// uninstalled.
const Finalizer = "uninstall-helm-release"

// Annotations that tell the simulator to fail. Their value is the message the condition
// carries, as the real operator carries Helm's error.
const (
	// AnnotationFail makes every install, upgrade or uninstall try of the release fail.
	AnnotationFail = "vald-helm-sim.opsuite.io/fail"
	// AnnotationIrreconcilable makes the release's reconciliation fail before any attempt.
	AnnotationIrreconcilable = "vald-helm-sim.opsuite.io/irreconcilable"
)

// Condition is the Helm operator's condition: no observedGeneration, and a reason that
// may be empty (Initialized has none).
type Condition struct {
	Type               string      `json:"type"`
	Status             string      `json:"status"`
	Reason             string      `json:"reason,omitempty"`
	Message            string      `json:"message,omitempty"`
	LastTransitionTime metav1.Time `json:"lastTransitionTime,omitempty"`
}

// Release is status.deployedRelease: the Helm release name and its rendered manifest.
type Release struct {
	Name     string `json:"name,omitempty"`
	Manifest string `json:"manifest,omitempty"`
}

// Status is the whole status a Helm operator writes; it replaces whatever was there.
type Status struct {
	Conditions      []Condition `json:"conditions"`
	DeployedRelease *Release    `json:"deployedRelease,omitempty"`
}

// Get returns the condition of type t, or nil.
func (s *Status) Get(t string) *Condition {
	for i := range s.Conditions {
		if s.Conditions[i].Type == t {
			return &s.Conditions[i]
		}
	}
	return nil
}

// Set adds or replaces the condition of c's type; the transition time moves only when the
// status does.
func (s *Status) Set(c Condition, now time.Time) {
	c.LastTransitionTime = metav1.NewTime(now.Truncate(time.Second))
	if old := s.Get(c.Type); old != nil {
		if old.Status == c.Status {
			c.LastTransitionTime = old.LastTransitionTime
		}
		*old = c
		return
	}
	s.Conditions = append(s.Conditions, c)
}

// Remove drops the condition of type t.
func (s *Status) Remove(t string) {
	out := s.Conditions[:0]
	for _, c := range s.Conditions {
		if c.Type != t {
			out = append(out, c)
		}
	}
	s.Conditions = out
}

// StatusOf reads status from an unstructured object; a status of another shape reads as
// empty, as the real operator treats it.
func StatusOf(obj map[string]any) Status {
	raw, ok := obj["status"].(map[string]any)
	if !ok {
		return Status{}
	}
	var s Status
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &s); err != nil {
		return Status{}
	}
	return s
}

// ToUnstructured renders the status for an unstructured object.
func (s Status) ToUnstructured() (map[string]any, error) {
	if s.Conditions == nil {
		s.Conditions = []Condition{}
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&s)
	if err != nil {
		return nil, fmt.Errorf("rendering status: %w", err)
	}
	return m, nil
}

// statusEqual says whether writing b over a would change nothing (nil and empty lists
// alike, times compared as instants).
func statusEqual(a, b Status) bool { return equality.Semantic.DeepEqual(a, b) }
