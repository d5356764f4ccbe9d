{{- /*
The chart's own helpers. Names, labels, ServiceAccount, image and listen host are the library
chart's (opsuite-lib.*, vendored in charts/opsuite-lib by charts/sync.sh), called directly; the
component label is Chart.yaml's opsuite.io/component annotation.
*/ -}}

{{/* "true" when each agent gets its own certificate (tls.mode perNode), else empty. */}}
{{- define "node-agent.perNode" -}}
{{- if eq .Values.tls.mode "perNode" }}true{{ end }}
{{- end }}

{{/* Secret holding tls.crt, tls.key and ca.crt (tls.mode shared). */}}
{{- define "node-agent.tlsSecretName" -}}
{{- default (printf "%s-tls" (include "opsuite-lib.fullname" .)) .Values.tls.existingSecret }}
{{- end }}

{{/* The TLS server name clients verify while they dial a pod address; in perNode mode each
agent's certificate names <node>.<this>, and the CA ConfigMap publishes "*.<this>". */}}
{{- define "node-agent.serverName" -}}
{{- printf "%s.%s.svc" (include "opsuite-lib.fullname" .) .Release.Namespace }}
{{- end }}
