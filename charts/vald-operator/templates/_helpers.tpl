{{/*
The operator's configuration as container env (config.<ENV>, the defaults of its flags); an
empty value keeps the operator's built-in default and is not passed. GOMEMLIMIT and GOGC come
from goMemLimit and goGC, DEFAULT_VALDRELEASE_VALUES and GATEWAY_INGRESS_ANNOTATIONS (JSON)
from defaultValdReleaseValues and gatewayIngressAnnotations. A YAML list for
opsuite-lib.deployment's env.
*/}}
{{- define "vald-operator.configEnv" -}}
{{- with .Values.goMemLimit }}
- name: GOMEMLIMIT
  value: {{ . | quote }}
{{- end }}
{{- with .Values.goGC }}
- name: GOGC
  value: {{ . | quote }}
{{- end }}
{{- with .Values.defaultValdReleaseValues }}
- name: DEFAULT_VALDRELEASE_VALUES
  value: {{ toJson . | quote }}
{{- end }}
{{- with .Values.gatewayIngressAnnotations }}
- name: GATEWAY_INGRESS_ANNOTATIONS
  value: {{ toJson . | quote }}
{{- end }}
{{- range $name, $value := .Values.config }}
{{- if ne (toString $value) "" }}
- name: {{ $name }}
  value: {{ $value | quote }}
{{- end }}
{{- end }}
{{- end }}
