package localcluster

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/opsuite/suite/tools/internal/podrunner"
)

//go:embed stages/*.yaml
var stageFiles embed.FS

// kwokStages are the upstream stage files kwok runs, in order.
var kwokStages = []string{
	"node-initialize.yaml",
	"node-heartbeat-with-lease.yaml",
	"pod-ready.yaml",
	"pod-complete.yaml",
	"pod-delete.yaml",
	"pvc-provision.yaml",
	"pvc-delete.yaml",
	"pv-bind.yaml",
	"pv-delete.yaml",
}

// runnerPodStages are the pod stages that must leave runner pods alone: the runner reports
// their readiness and completion from the real process, and deletes them once it has
// stopped the process.
var runnerPodStages = map[string]bool{"pod-ready": true, "pod-complete": true, "pod-delete": true}

// runnerAssignStage gives a runner pod its addresses (from kwok's allocator, like every
// other pod) and nothing else; the runner starts the process once the pod has an address.
const runnerAssignStage = `apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-runner-assign-address
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - key: '.metadata.deletionTimestamp'
      operator: 'DoesNotExist'
    - key: '.status.podIP'
      operator: 'DoesNotExist'
  next:
    statusTemplate: |
      {{ $hostIPs := NodeIPsWith .spec.nodeName }}
      {{ with $hostIPs }}
      hostIP: {{ index . 0 | Quote }}
      hostIPs:
      {{ range . }}
      - ip: {{ . | Quote }}
      {{ end }}
      {{ end }}
      {{ $podIPs := PodIPsWith .spec.nodeName ( or .spec.hostNetwork false ) ( or .metadata.uid "" ) ( or .metadata.name "" ) ( or .metadata.namespace "" ) }}
      {{ with $podIPs }}
      podIP: {{ index . 0 | Quote }}
      podIPs:
      {{ range . }}
      - ip: {{ . | Quote }}
      {{ end }}
      {{ end }}
`

// Readiness gates, by the kubelet's rule: kwok's pod-ready stage sets every readiness
// gate's condition True itself and Ready True at once, which overwrites what the gate's
// owner (an operator, through pods/status) says. Here the stage leaves gate conditions to
// their owners and sets Ready from them; gateReadyStage re-derives Ready of a running pod
// whenever a gate's condition changes. The reasons and messages are the kubelet's.

// gateMessagesTemplate sets $gateMsgs to one message per readiness gate whose condition is
// missing or not True, and $readySince to Ready's lastTransitionTime (kept while its status
// stays).
const gateMessagesTemplate = `{{ $gateMsgs := list }}
{{ range $g := .spec.readinessGates }}
{{ $s := "" }}
{{ range $.status.conditions }}{{ if eq .type $g.conditionType }}{{ $s = .status }}{{ end }}{{ end }}
{{ if eq $s "" }}{{ $gateMsgs = append $gateMsgs (printf "corresponding condition of pod readiness gate %q does not exist." $g.conditionType) }}
{{ else if ne $s "True" }}{{ $gateMsgs = append $gateMsgs (printf "the status of pod readiness gate %q is not \"True\", but %s" $g.conditionType $s) }}
{{ end }}
{{ end }}
{{ $readyStatus := "True" }}{{ if $gateMsgs }}{{ $readyStatus = "False" }}{{ end }}
{{ $readySince := Now }}
{{ range .status.conditions }}{{ if and (eq .type "Ready") (eq .status $readyStatus) }}{{ $readySince = .lastTransitionTime }}{{ end }}{{ end }}
`

// gateReadyFields are the Ready condition's status, reason and message (indented as fields
// of a list item) from $gateMsgs; null clears a previous reason and message in the merge.
const gateReadyFields = `{{ if $gateMsgs }}
  status: "False"
  reason: ReadinessGatesNotReady
  message: {{ join ", " $gateMsgs | Quote }}
{{ else }}
  status: "True"
  reason: null
  message: null
{{ end }}
`

// gateMessagesJQ is the same messages as one string in jq, for selectors: kwok matches a
// stage on the pod as it is.
const gateMessagesJQ = `((.status.conditions // []) as $c | [(.spec.readinessGates // [])[].conditionType as $t | ([$c[] | select(.type == $t)] | first) as $g | if $g == null then "corresponding condition of pod readiness gate \"\($t)\" does not exist." elif $g.status != "True" then "the status of pod readiness gate \"\($t)\" is not \"True\", but \($g.status)" else empty end] | join(", "))`

// kwokReadyCondition is the Ready condition in kwok's pod-ready stage, replaced by
// gateReadyCondition.
const kwokReadyCondition = `- lastTransitionTime: {{ $now | Quote }}
  status: "True"
  type: Ready
`

// kwokGateConditions is where kwok's pod-ready stage sets every gate's condition True.
const kwokGateConditions = `{{ range .spec.readinessGates }}
- lastTransitionTime: {{ $now | Quote }}
  status: "True"
  type: {{ .conditionType | Quote }}
{{ end }}
`

const gateReadyCondition = `- lastTransitionTime: {{ $readySince | Quote }}
  type: Ready
` + gateReadyFields

// gateReadyStage sets Ready of a running simulated pod with readiness gates (whose
// containers kwok made ready) when it no longer says what the gates' conditions do. Its
// weight makes kwok pick it over pod-mark-address, which matches every pod with an address:
// among several matching stages kwok picks at random, by weight when any has one.
var gateReadyStage = `apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-readiness-gates
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  weight: 1
  selector:
    matchExpressions:
    - key: '.metadata.deletionTimestamp'
      operator: 'DoesNotExist'
    - key: '.status.phase'
      operator: 'In'
      values:
      - 'Running'
    - key: '(.spec.readinessGates // []) | length > 0'
      operator: 'In'
      values:
      - 'true'
    - key: '.status.conditions[]? | select( .type == "ContainersReady" ) | .status'
      operator: 'In'
      values:
      - 'True'
    - key: ` + yamlQuote(gateMessagesJQ+` != ([(.status.conditions // [])[] | select(.type == "Ready") | if .status == "True" then "" else (.message // "") end] | first)`) + `
      operator: 'In'
      values:
      - 'true'
  next:
    statusTemplate: |
` + indent(`{{ $now := Now }}
`+gateMessagesTemplate+`conditions:
- lastTransitionTime: {{ $readySince | Quote }}
  type: Ready
`+gateReadyFields, "      ")

func yamlQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

func indent(s, pad string) string {
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	for i, l := range lines {
		if l != "" {
			lines[i] = pad + l
		}
	}
	return strings.Join(lines, "\n") + "\n"
}

// gatePodReady makes kwok's pod-ready stage leave readiness gates to their owners and set
// Ready from them.
func gatePodReady(stage map[string]any) error {
	spec, _ := stage["spec"].(map[string]any)
	next, _ := spec["next"].(map[string]any)
	tpl, _ := next["statusTemplate"].(string)
	if !strings.Contains(tpl, kwokReadyCondition) || !strings.Contains(tpl, kwokGateConditions) {
		return errors.New("kwok's pod-ready stage changed: its Ready condition or readiness gates are not where expected")
	}
	tpl = strings.Replace(tpl, kwokGateConditions, "", 1)
	tpl = strings.Replace(tpl, kwokReadyCondition, gateReadyCondition, 1)
	next["statusTemplate"] = gateMessagesTemplate + tpl
	return nil
}

// markAddressStage matches every pod that has an address and renders the address it
// already has: the patch is a no-op and never sent, but kwok records the address as used
// whenever a stage plays. Without it, a restarted kwok hands out addresses that pods kept
// from before the restart a second time.
const markAddressStage = `apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-mark-address
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - key: '.metadata.deletionTimestamp'
      operator: 'DoesNotExist'
    - key: '.status.podIP'
      operator: 'Exists'
    - key: '.status.phase == "Running" and ([.metadata.ownerReferences[]?.kind] | any(. == "Job"))'
      operator: 'NotIn'
      values:
      - 'true'
  next:
    statusTemplate: |
      podIP: {{ .status.podIP | Quote }}
`

// renderStages returns kwok's configuration: the upstream stages, adjusted so that pods
// matched by rules are left to the process runner, and provisioned volumes live in
// volumeDir.
func renderStages(rules podrunner.Rules, runner bool, volumeDir string) ([]byte, error) {
	managed := rules.JQManaged()
	var docs [][]byte
	for _, name := range kwokStages {
		raw, err := stageFiles.ReadFile("stages/" + name)
		if err != nil {
			return nil, err
		}
		text := strings.ReplaceAll(string(raw), "/tmp/kwok-local-path-provisioner", volumeDir)
		var stage map[string]any
		if err := yaml.Unmarshal([]byte(text), &stage); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		meta, _ := stage["metadata"].(map[string]any)
		if meta["name"] == "pod-ready" {
			if err := gatePodReady(stage); err != nil {
				return nil, err
			}
		}
		if runner && runnerPodStages[fmt.Sprint(meta["name"])] {
			addMatchExpression(stage, map[string]any{"key": managed, "operator": "NotIn", "values": []any{"true"}})
		}
		out, err := yaml.Marshal(stage)
		if err != nil {
			return nil, err
		}
		docs = append(docs, out)
		if meta["name"] == "pod-ready" {
			var gates map[string]any
			if err := yaml.Unmarshal([]byte(gateReadyStage), &gates); err != nil {
				return nil, fmt.Errorf("pod-readiness-gates: %w", err)
			}
			if runner {
				addMatchExpression(gates, map[string]any{"key": managed, "operator": "NotIn", "values": []any{"true"}})
			}
			out, err := yaml.Marshal(gates)
			if err != nil {
				return nil, err
			}
			docs = append(docs, out)
		}
	}
	docs = append(docs, []byte(markAddressStage), []byte(pvcResizeStage))
	if runner {
		var stage map[string]any
		if err := yaml.Unmarshal([]byte(runnerAssignStage), &stage); err != nil {
			return nil, err
		}
		addMatchExpression(stage, map[string]any{"key": managed, "operator": "In", "values": []any{"true"}})
		out, err := yaml.Marshal(stage)
		if err != nil {
			return nil, err
		}
		docs = append(docs, out)
	}
	return bytes.Join(docs, []byte("---\n")), nil
}

func addMatchExpression(stage map[string]any, expr map[string]any) {
	spec, _ := stage["spec"].(map[string]any)
	sel, _ := spec["selector"].(map[string]any)
	if sel == nil {
		sel = map[string]any{}
		spec["selector"] = sel
	}
	exprs, _ := sel["matchExpressions"].([]any)
	sel["matchExpressions"] = append(exprs, expr)
}

// storageClassManifest is kwok's default StorageClass; the volume stages provision for it.
// It allows volume expansion: pvcResizeStage plays the resizer.
func storageClassManifest() ([]byte, error) {
	raw, err := stageFiles.ReadFile("stages/storage-class.yaml")
	if err != nil {
		return nil, err
	}
	return append(bytes.TrimRight(raw, "\n"), []byte("\nallowVolumeExpansion: true\n")...), nil
}

// pvcResizeStage plays a CSI resizer doing online expansion: a bound kwok-volume claim
// whose request grew past its capacity gets the request as its capacity (its directory has
// no size to change). The PersistentVolume keeps its first capacity.
var pvcResizeStage = `apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pvc-resize
spec:
  resourceRef:
    apiGroup: v1
    kind: PersistentVolumeClaim
  selector:
    matchExpressions:
    - cel:
        expression: >-
          self.spec.storageClassName == 'kwok-volume'
    - cel:
        expression: >-
          !has(self.metadata.deletionTimestamp)
    - cel:
        expression: >-
          self.status.phase == 'Bound'
    - cel:
        expression: >-
          has(self.status.capacity) && has(self.spec.resources.requests) && self.spec.resources.requests.storage != self.status.capacity.storage
  steps:
  - patch:
      root: status
      subresource: status
      template: |
        capacity:
        {{ YAML .spec.resources.requests 1 }}
`
