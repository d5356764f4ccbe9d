{{- /*
Helpers of the operator charts (and of the node-agent chart: names, labels, image). Every
template here takes the including chart's root context (.), so .Chart, .Values, .Files and
.Release are that chart's own. Template names are global across a chart and its subcharts,
hence the opsuite-lib. prefix.
*/ -}}

{{/* Chart name, overridable. */}}
{{- define "opsuite-lib.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Fully qualified name: the release name alone when it already holds the chart name. */}}
{{- define "opsuite-lib.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "opsuite-lib.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "opsuite-lib.selectorLabels" -}}
app.kubernetes.io/name: {{ include "opsuite-lib.name" . }}
app.kubernetes.io/instance: {{ .Release.Name | quote }}
{{- end }}

{{/* Common labels; the component is the chart's annotation opsuite.io/component, else controller. */}}
{{- define "opsuite-lib.labels" -}}
{{- $component := "controller" }}
{{- with .Chart.Annotations }}{{ with index . "opsuite.io/component" }}{{ $component = . }}{{ end }}{{ end -}}
helm.sh/chart: {{ include "opsuite-lib.chart" . }}
{{ include "opsuite-lib.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/component: {{ $component }}
app.kubernetes.io/part-of: opsuite
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "opsuite-lib.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "opsuite-lib.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* Image reference; the tag defaults to appVersion, the same tag `make images` writes. */}}
{{- define "opsuite-lib.image" -}}
{{- $ref := printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- if .Values.image.digest }}
{{- $ref = printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- end }}
{{- $ref }}
{{- end }}

{{/* Host part of the listen addresses: every address, or only the pod IP (see bindPodIP). */}}
{{- define "opsuite-lib.bindHost" -}}
{{- if .Values.bindPodIP }}$(POD_IP){{ end }}
{{- end }}

{{/*
Rules of the controller's ClusterRole, read from the operator chart's files/role.yaml: a
verbatim copy of deploy/rbac/<service>/role.yaml, which controller-gen writes from the
+kubebuilder:rbac markers (charts/sync.sh copies it). Only ClusterRole documents count; their
rules are concatenated.
*/}}
{{- define "opsuite-lib.controllerRules" -}}
{{- $rules := list }}
{{- range $doc := regexSplit "(?m)^---[ \t]*$" (.Files.Get "files/role.yaml") -1 }}
{{- $obj := fromYaml $doc }}
{{- if eq (toString (get $obj "kind")) "ClusterRole" }}
{{- $rules = concat $rules (get $obj "rules" | default list) }}
{{- end }}
{{- end }}
{{- toYaml $rules }}
{{- end }}

{{/*
The node agent's fullname as its chart computes it (charts/node-agent, opsuite-lib.fullname)
from nodeAgent.release, or nodeAgent.fullname when that release overrides its name. Its roles
(<fullname>-client, <fullname>-preparer, -sysctls, -reader) and CA ConfigMap (<fullname>-ca) carry it.
*/}}
{{- define "opsuite-lib.nodeAgent.fullname" -}}
{{- $na := .Values.nodeAgent }}
{{- if $na.fullname }}
{{- $na.fullname | trunc 63 | trimSuffix "-" }}
{{- else if contains "node-agent" $na.release }}
{{- $na.release | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-node-agent" $na.release | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}

{{/* Where the operator finds the node agent's CA and its projected token (see values.yaml). */}}
{{- define "opsuite-lib.nodeAgent.tokenDir" -}}/var/run/secrets/opsuite.io/node-agent/token{{- end }}
{{- define "opsuite-lib.nodeAgent.caDir" -}}/var/run/secrets/opsuite.io/node-agent/ca{{- end }}

{{/*
The ConfigMap in the release namespace the CA is mounted from: nodeAgent.caConfigMap, else the
agent's own <fullname>-ca when the operator shares the agent's namespace (a pod mounts only
ConfigMaps of its namespace); empty when neither, and the operator reads the agent's ConfigMap
through the API (NODE_AGENT_CA_CONFIGMAP).
*/}}
{{- define "opsuite-lib.nodeAgent.caVolumeConfigMap" -}}
{{- if .Values.nodeAgent.caConfigMap }}
{{- .Values.nodeAgent.caConfigMap }}
{{- else if eq .Values.nodeAgent.namespace .Release.Namespace }}
{{- include "opsuite-lib.nodeAgent.fullname" . }}-ca
{{- end }}
{{- end }}

{{/*
Whether the agent's namespace is there for the RoleBinding <fullname>-node-agent-client:
- "found": it exists, or it is the release's own namespace (helm makes that one first);
- "missing": a live cluster lacks it, so a binding into it would fail the whole install;
- "offline": no cluster to ask (helm template, lint, a client-side dry run: lookup returns
  nothing there). A live cluster always has the namespace default, so an empty lookup of it
  and of the release namespace means no cluster; the binding renders, as with the agent.
*/}}
{{- define "opsuite-lib.nodeAgent.namespaceState" -}}
{{- $ns := .Values.nodeAgent.namespace }}
{{- if or (eq $ns .Release.Namespace) (lookup "v1" "Namespace" "" $ns) }}found
{{- else if or (lookup "v1" "Namespace" "" "default") (lookup "v1" "Namespace" "" .Release.Namespace) }}missing
{{- else }}offline
{{- end }}
{{- end }}

{{/* NOTES lines on the node-agent wiring, empty when nodeAgent.enabled is off. */}}
{{- define "opsuite-lib.notes.nodeAgent" -}}
{{- if .Values.nodeAgent.enabled }}
{{- $agent := include "opsuite-lib.nodeAgent.fullname" . }}

The operator calls the node agent {{ $agent }} in namespace {{ .Values.nodeAgent.namespace }}
(roles {{ $agent }}-{{ .Values.nodeAgent.role }} and {{ $agent }}-client, CA ConfigMap {{ $agent }}-ca). Check it runs:
  kubectl -n {{ .Values.nodeAgent.namespace }} get pods -l {{ printf "app.kubernetes.io/name=node-agent,app.kubernetes.io/instance=%s" .Values.nodeAgent.release }}
{{- if and .Values.rbac.create (eq (include "opsuite-lib.nodeAgent.namespaceState" .) "missing") }}

NODE AGENT NOT FOUND: namespace {{ .Values.nodeAgent.namespace }} does not exist, so the node agent is not
installed there and the RoleBinding {{ include "opsuite-lib.fullname" . }}-node-agent-client (find the agent pods,
read its CA) was left out: the operator runs, but cannot call the agent. Install the node agent
(charts/node-agent, release {{ .Values.nodeAgent.release }} in namespace {{ .Values.nodeAgent.namespace }}), then bind it with
  helm upgrade {{ .Release.Name }} <this chart> -n {{ .Release.Namespace }} --reuse-values
{{- end }}
{{- end }}
{{- end }}
