{{- /* The operator's own environment: its image, which the members' pods copy the preStop hand-over binary from. */ -}}
{{- define "valkey-operator.env" -}}
- name: VALKEY_OPERATOR_IMAGE
  value: {{ include "opsuite-lib.image" . | quote }}
{{- end }}
