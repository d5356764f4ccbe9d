{{- /*
Grafana dashboards: the chart's files/dashboards/*.json (written by tools/cmd/dashboards) in
one ConfigMap carrying the label Grafana's dashboard sidecar looks for (kube-prometheus-stack:
grafana_dashboard: "1", every namespace). Takes the chart's root context.
*/ -}}
{{- define "opsuite-lib.dashboards" -}}
{{- $d := .Values.grafanaDashboards }}
{{- $files := .Files.Glob "files/dashboards/*.json" }}
{{- if and $d.enabled $files }}
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ include "opsuite-lib.fullname" . }}-dashboards
  namespace: {{ $d.namespace | default .Release.Namespace }}
  labels:
    {{- include "opsuite-lib.labels" . | nindent 4 }}
    {{ $d.label }}: {{ $d.labelValue | quote }}
    {{- with $d.labels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  {{- with $d.annotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
data:
  {{- $files.AsConfig | nindent 2 }}
{{- end }}
{{- end }}

{{- /*
PrometheusRule: the chart's files/prometheus-rules.yaml (a Prometheus rules file, `groups:`),
less the alerts named in prometheusRule.disabled, with prometheusRule.ruleLabels added to
every alert (an alert's own labels, e.g. severity, win). Rendered only where the cluster
serves monitoring.coreos.com/v1 PrometheusRule (Helm asks the API server's discovery;
`helm template` needs --api-versions monitoring.coreos.com/v1/PrometheusRule). Takes the
chart's root context.
*/ -}}
{{- define "opsuite-lib.prometheusRule" -}}
{{- $r := .Values.prometheusRule }}
{{- if and $r.enabled (.Capabilities.APIVersions.Has "monitoring.coreos.com/v1/PrometheusRule") }}
{{- $file := .Files.Get "files/prometheus-rules.yaml" | fromYaml }}
{{- if hasKey $file "Error" }}
{{- fail (printf "files/prometheus-rules.yaml: %s" $file.Error) }}
{{- end }}
{{- $groups := list }}
{{- range $file.groups }}
{{- $rules := list }}
{{- range .rules }}
{{- if not (get $r.disabled (.alert | default "")) }}
{{- $rule := deepCopy . }}
{{- if and .alert $r.ruleLabels }}
{{- $_ := set $rule "labels" (merge (deepCopy (.labels | default dict)) $r.ruleLabels) }}
{{- end }}
{{- $rules = append $rules $rule }}
{{- end }}
{{- end }}
{{- if $rules }}
{{- $groups = append $groups (dict "name" .name "rules" $rules) }}
{{- end }}
{{- end }}
{{- if $groups }}
apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata:
  name: {{ include "opsuite-lib.fullname" . }}
  namespace: {{ .Release.Namespace }}
  labels:
    {{- include "opsuite-lib.labels" . | nindent 4 }}
    {{- with $r.labels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
spec:
  groups:
    {{- toYaml $groups | nindent 4 }}
{{- end }}
{{- end }}
{{- end }}
