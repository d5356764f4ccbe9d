{{/* Chart name, overridable. */}}
{{- define "node-agent.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Fully qualified name: the release name alone when it already holds the chart name. */}}
{{- define "node-agent.fullname" -}}
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

{{- define "node-agent.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "node-agent.selectorLabels" -}}
app.kubernetes.io/name: {{ include "node-agent.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "node-agent.labels" -}}
helm.sh/chart: {{ include "node-agent.chart" . }}
{{ include "node-agent.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/component: node-agent
app.kubernetes.io/part-of: opsuite
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "node-agent.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "node-agent.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* Image reference; the tag defaults to appVersion, the same tag `make images` writes. */}}
{{- define "node-agent.image" -}}
{{- $ref := printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- if .Values.image.digest }}
{{- $ref = printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- end }}
{{- $ref }}
{{- end }}

{{/* Host part of the listen address: every address, or only the pod IP (see bindPodIP). */}}
{{- define "node-agent.bindHost" -}}
{{- if .Values.bindPodIP }}$(POD_IP){{ end }}
{{- end }}

{{/* "true" when each agent gets its own certificate (tls.mode perNode), else empty. */}}
{{- define "node-agent.perNode" -}}
{{- if eq .Values.tls.mode "perNode" }}true{{ end }}
{{- end }}

{{/* Secret holding tls.crt, tls.key and ca.crt (tls.mode shared). */}}
{{- define "node-agent.tlsSecretName" -}}
{{- default (printf "%s-tls" (include "node-agent.fullname" .)) .Values.tls.existingSecret }}
{{- end }}

{{/* The TLS server name clients verify while they dial a pod address; in perNode mode each
agent's certificate names <node>.<this>, and the CA ConfigMap publishes "*.<this>". */}}
{{- define "node-agent.serverName" -}}
{{- printf "%s.%s.svc" (include "node-agent.fullname" .) .Release.Namespace }}
{{- end }}
