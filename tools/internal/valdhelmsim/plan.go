package valdhelmsim

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/opsuite/suite/api/vald/valdchart"
	"sigs.k8s.io/yaml"
)

// DeployedMessage is the Deployed condition's message. The real operator puts the chart's
// NOTES there; the stand-in's are fixed so its status settles.
const DeployedMessage = "vald-helm-sim: the Vald chart is simulated; no Vald component runs"

// Observed is one ValdRelease as the planner sees it.
type Observed struct {
	Namespace, Name string
	Generation      int64
	Annotations     map[string]string
	// Spec is the ValdRelease's spec (the Vald chart's values), hashed into the manifest.
	Spec   any
	Status Status
	// Deleting: the object has a deletionTimestamp.
	Deleting bool
	// HasFinalizer: the object carries Finalizer.
	HasFinalizer bool
	// Render is what the chart renders for Spec (valdchart.Objects).
	Render []valdchart.Resource
	// Taken are the objects of Render another release has installed.
	Taken []Taken
}

// Attempt names one install, upgrade or uninstall try: what it releases and whether it
// was told to fail with which message. A new key starts a new try (and its delay).
func (o Observed) Attempt() string {
	msg, failing := o.Annotations[AnnotationFail]
	what := strconv.FormatInt(o.Generation, 10)
	if o.Deleting {
		what = "uninstall"
	}
	return fmt.Sprintf("%s/%t/%s", what, failing, msg)
}

// Plan is the next status, the finalizer change, and how long until the pending try
// completes (0: none pending).
type Plan struct {
	Status       Status
	RequeueAfter time.Duration
	// AddFinalizer and RemoveFinalizer change the object's finalizers; an addition is
	// written before the status, a removal after it, as the real operator orders them.
	AddFinalizer, RemoveFinalizer bool
	// Installed: the try installed Render, whose objects the release now owns.
	Installed bool
}

// Next computes the status a Helm operator would show for o at now, when the try for
// o.Attempt() began at started and each try takes delay. finalizer says whether a
// release holds the object with Finalizer until it is uninstalled. It is pure: the
// caller keeps the start times and writes the result.
func Next(o Observed, started, now time.Time, delay time.Duration, finalizer bool) (Plan, error) {
	st := Status{Conditions: append([]Condition(nil), o.Status.Conditions...), DeployedRelease: o.Status.DeployedRelease}
	if o.Deleting {
		return uninstall(o, st, started, now, delay), nil
	}
	st.Set(Condition{Type: ConditionInitialized, Status: "True"}, now)
	// The real operator reads the release history before anything else; failing there it
	// stops, leaving the rest of the status as it was.
	if msg, ok := o.Annotations[AnnotationIrreconcilable]; ok {
		st.Set(Condition{Type: ConditionIrreconcilable, Status: "True", Reason: ReasonReconcileError, Message: msg}, now)
		return Plan{Status: st}, nil
	}
	st.Remove(ConditionIrreconcilable)

	deployedGen, deployed := releasedGeneration(st.DeployedRelease)
	hold := finalizer && !o.HasFinalizer
	failMsg, failing := o.Annotations[AnnotationFail]
	if deployed && deployedGen == o.Generation && !failing {
		// Nothing to upgrade: a failure of an abandoned try no longer applies.
		st.Remove(ConditionReleaseFailed)
		if d := st.Get(ConditionDeployed); d == nil || d.Status != "True" {
			st.Set(Condition{Type: ConditionDeployed, Status: "True", Reason: ReasonInstallSuccessful, Message: DeployedMessage}, now)
		}
		return Plan{Status: st, AddFinalizer: hold}, nil
	}
	if deployed {
		// With a release deployed, operator-sdk's helm-operator first renders the candidate
		// release, a dry-run upgrade (manager.Sync), at the start of every reconcile. What
		// Helm refuses there, values against the chart's schema and objects another
		// release owns, is Irreconcilable, at once, prefixed "failed to get candidate
		// release: "; the deployed release and the other conditions stay as they were,
		// and no upgrade is tried.
		if msg, retry := refusal(o, true); msg != "" {
			st.Set(Condition{Type: ConditionIrreconcilable, Status: "True", Reason: ReasonReconcileError, Message: "failed to get candidate release: " + msg}, now)
			plan := Plan{Status: st}
			if retry {
				plan.RequeueAfter = max(delay, time.Second)
			}
			return plan, nil
		}
	}
	// A try is under way: Helm installs or upgrades inside one reconcile, so until it ends
	// the status shows what the last try left.
	if left := delay - now.Sub(started); left > 0 {
		return Plan{Status: st, RequeueAfter: left}, nil
	}
	reason := ReasonInstallError
	if deployed {
		// A failure leaves the previous release deployed; Deployed keeps saying so.
		reason = ReasonUpgradeError
	}
	if failing {
		st.Set(Condition{Type: ConditionReleaseFailed, Status: "True", Reason: reason, Message: failMsg}, now)
		return Plan{Status: st}, nil
	}
	// An install meets the same refusals in Helm's install itself: ReleaseFailed, with
	// the helm-operator's "failed to install release: " (manager.InstallRelease). An
	// ownership refusal can clear without this release changing (the other one goes), so
	// the try is made again, as the real operator retries a failed reconcile.
	if !deployed {
		if msg, retry := refusal(o, false); msg != "" {
			plan := Plan{Status: st}
			if retry {
				plan.RequeueAfter = max(delay, time.Second)
			}
			plan.Status.Set(Condition{Type: ConditionReleaseFailed, Status: "True", Reason: reason, Message: "failed to install release: " + msg}, now)
			return plan, nil
		}
	}
	// Helm then applies the render. The API server refuses a new value for a PriorityClass
	// the release has, and every retry fails the same way until the values change (back to
	// the deployed value, or disabling the class, which the upgrade then deletes), so the
	// try is not repeated meanwhile.
	if deployed {
		if msg := priorityRefusal(releasedPriorities(st.DeployedRelease), renderedPriorities(o)); msg != "" {
			st.Set(Condition{Type: ConditionReleaseFailed, Status: "True", Reason: reason, Message: msg}, now)
			return Plan{Status: st}, nil
		}
	}
	reason = ReasonInstallSuccessful
	if deployed {
		reason = ReasonUpgradeSuccessful
	}
	manifest, err := renderManifest(o)
	if err != nil {
		return Plan{}, err
	}
	st.Remove(ConditionReleaseFailed)
	st.Set(Condition{Type: ConditionDeployed, Status: "True", Reason: reason, Message: DeployedMessage}, now)
	st.DeployedRelease = &Release{Name: o.Name, Manifest: manifest}
	return Plan{Status: st, AddFinalizer: hold, Installed: true}, nil
}

// uninstall is the deletion of a release the finalizer holds: a try like any other, after
// which Deployed turns False and the finalizer goes; the fail annotation makes it fail
// and keeps the object.
func uninstall(o Observed, st Status, started, now time.Time, delay time.Duration) Plan {
	if !o.HasFinalizer {
		// Nothing of ours holds it (never installed, or not modelling the finalizer).
		return Plan{Status: o.Status}
	}
	if left := delay - now.Sub(started); left > 0 {
		return Plan{Status: st, RequeueAfter: left}
	}
	if msg, failing := o.Annotations[AnnotationFail]; failing {
		st.Set(Condition{Type: ConditionReleaseFailed, Status: "True", Reason: ReasonUninstallError, Message: msg}, now)
		return Plan{Status: st}
	}
	st.Remove(ConditionReleaseFailed)
	st.Set(Condition{Type: ConditionDeployed, Status: "False", Reason: ReasonUninstallSuccessful}, now)
	st.DeployedRelease = nil
	return Plan{Status: st, RemoveFinalizer: true}
}

// The manifest "rendered" for a release: one ConfigMap recording what was released. Its
// generation is how a restarted (or newly elected) simulator knows what is deployed, as
// the real operator knows from Helm's release records.
const manifestSource = "# Source: vald/templates/vald-helm-sim.yaml\n"

type manifestObject struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"metadata"`
	Data map[string]string `json:"data"`
}

func renderManifest(o Observed) (string, error) {
	values, err := json.Marshal(o.Spec)
	if err != nil {
		return "", fmt.Errorf("hashing the values of %s/%s: %w", o.Namespace, o.Name, err)
	}
	sum := sha256.Sum256(values)
	var m manifestObject
	m.APIVersion, m.Kind = "v1", "ConfigMap"
	m.Metadata.Name, m.Metadata.Namespace = o.Name+"-vald-helm-sim", o.Namespace
	m.Data = map[string]string{"generation": strconv.FormatInt(o.Generation, 10), "values-sha256": hex.EncodeToString(sum[:])}
	if len(o.Render) > 0 {
		m.Data["objects"] = encodeObjects(o.Render)
	}
	if pcs := renderedPriorities(o); len(pcs) > 0 {
		m.Data["priorityClasses"] = encodePriorities(pcs)
	}
	out, err := yaml.Marshal(m)
	if err != nil {
		return "", err
	}
	return "---\n" + manifestSource + string(out), nil
}

// releasedObjects reads the objects a deployed release installed (none for a release the
// simulator did not render).
func releasedObjects(r *Release) []valdchart.Resource {
	return decodeObjects(releasedData(r)["objects"])
}

// releasedData is the data of the ConfigMap the simulator records a deployed release in;
// nil for a release it did not render, or none.
func releasedData(r *Release) map[string]string {
	if r == nil || !strings.Contains(r.Manifest, manifestSource) {
		return nil
	}
	var m manifestObject
	if err := yaml.Unmarshal([]byte(strings.TrimPrefix(r.Manifest, "---\n")), &m); err != nil {
		return nil
	}
	return m.Data
}

// renderedPriorities is the PriorityClasses the chart renders for o's values.
func renderedPriorities(o Observed) []valdchart.PriorityClass {
	return valdchart.PriorityClasses(o.Namespace, valuesOf(o.Spec))
}

// releasedPriorities reads the values of the PriorityClasses a deployed release installed
// (none known for a release the simulator did not render, or rendered before it recorded
// them: its classes' values are not checked).
func releasedPriorities(r *Release) map[string]int64 {
	return decodePriorities(releasedData(r)["priorityClasses"])
}

// releasedGeneration reads the generation a deployed release was made from. A release
// the simulator did not render (another operator's) counts as generation 0: deployed,
// and upgraded at the next try.
func releasedGeneration(r *Release) (int64, bool) {
	if r == nil {
		return 0, false
	}
	gen, err := strconv.ParseInt(releasedData(r)["generation"], 10, 64)
	if err != nil {
		return 0, true
	}
	return gen, true
}
