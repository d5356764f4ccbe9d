{{- /* The operator's own environment: its image, which data-instance pods run as the backup agent sidecar and the restore init container. */ -}}
{{- define "memgraph-operator.env" -}}
- name: MEMGRAPH_OPERATOR_IMAGE
  value: {{ include "opsuite-lib.image" . | quote }}
{{- end }}
