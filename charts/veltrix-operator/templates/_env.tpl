{{- /* The operator's own environment: where the node agents bind-mount the disks. */ -}}
{{- define "veltrix-operator.env" -}}
- name: NODE_AGENT_PV_ROOT
  value: {{ .Values.pvRoot | quote }}
{{- end }}
