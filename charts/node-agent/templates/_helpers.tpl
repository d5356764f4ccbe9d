{{- /*
Names, labels, ServiceAccount, image and listen host come from the library chart opsuite-lib
(vendored in charts/opsuite-lib by charts/sync.sh), the operators' own; the component label is
Chart.yaml's opsuite.io/component annotation. The node-agent.* names stay for the templates.
*/ -}}

{{- define "node-agent.name" -}}{{ include "opsuite-lib.name" . }}{{- end }}
{{- define "node-agent.fullname" -}}{{ include "opsuite-lib.fullname" . }}{{- end }}
{{- define "node-agent.chart" -}}{{ include "opsuite-lib.chart" . }}{{- end }}
{{- define "node-agent.selectorLabels" -}}{{ include "opsuite-lib.selectorLabels" . }}{{- end }}
{{- define "node-agent.labels" -}}{{ include "opsuite-lib.labels" . }}{{- end }}
{{- define "node-agent.serviceAccountName" -}}{{ include "opsuite-lib.serviceAccountName" . }}{{- end }}
{{- define "node-agent.image" -}}{{ include "opsuite-lib.image" . }}{{- end }}
{{- define "node-agent.bindHost" -}}{{ include "opsuite-lib.bindHost" . }}{{- end }}

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
