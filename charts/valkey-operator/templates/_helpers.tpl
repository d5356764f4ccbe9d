{{/* Chart name, overridable. */}}
{{- define "valkey-operator.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Fully qualified name: the release name alone when it already holds the chart name. */}}
{{- define "valkey-operator.fullname" -}}
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

{{- define "valkey-operator.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "valkey-operator.selectorLabels" -}}
app.kubernetes.io/name: {{ include "valkey-operator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "valkey-operator.labels" -}}
helm.sh/chart: {{ include "valkey-operator.chart" . }}
{{ include "valkey-operator.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/component: controller
app.kubernetes.io/part-of: opsuite
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "valkey-operator.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "valkey-operator.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* Image reference; the tag defaults to appVersion, the same tag `make images` writes. */}}
{{- define "valkey-operator.image" -}}
{{- $ref := printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- if .Values.image.digest }}
{{- $ref = printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- end }}
{{- $ref }}
{{- end }}

{{/* Host part of the listen addresses: every address, or only the pod IP (see bindPodIP). */}}
{{- define "valkey-operator.bindHost" -}}
{{- if .Values.bindPodIP }}$(POD_IP){{ end }}
{{- end }}

{{/*
Rules of the controller's ClusterRole, read from files/role.yaml: a verbatim copy of
deploy/rbac/valkey-operator/role.yaml, which controller-gen writes from the +kubebuilder:rbac markers
(charts/sync.sh copies it). Only ClusterRole documents count; their rules are concatenated.
*/}}
{{- define "valkey-operator.controllerRules" -}}
{{- $rules := list }}
{{- range $doc := regexSplit "(?m)^---[ \t]*$" (.Files.Get "files/role.yaml") -1 }}
{{- $obj := fromYaml $doc }}
{{- if eq (toString (get $obj "kind")) "ClusterRole" }}
{{- $rules = concat $rules (get $obj "rules" | default list) }}
{{- end }}
{{- end }}
{{- toYaml $rules }}
{{- end }}
