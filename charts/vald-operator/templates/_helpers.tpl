{{/*
The operator's configuration as container env (config.<ENV>, the defaults of its flags); an
empty value keeps the operator's built-in default and is not passed. GOMEMLIMIT and GOGC come
from goMemLimit and goGC. A YAML list for
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
{{- range $name, $value := .Values.config }}
{{- if ne (toString $value) "" }}
- name: {{ $name }}
  value: {{ $value | quote }}
{{- end }}
{{- end }}
{{- end }}
