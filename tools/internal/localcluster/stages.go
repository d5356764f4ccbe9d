package localcluster

import (
	"bytes"
	"embed"
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
		if runner && runnerPodStages[fmt.Sprint(meta["name"])] {
			addMatchExpression(stage, map[string]any{"key": managed, "operator": "NotIn", "values": []any{"true"}})
		}
		out, err := yaml.Marshal(stage)
		if err != nil {
			return nil, err
		}
		docs = append(docs, out)
	}
	docs = append(docs, []byte(markAddressStage))
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
func storageClassManifest() ([]byte, error) {
	return stageFiles.ReadFile("stages/storage-class.yaml")
}
