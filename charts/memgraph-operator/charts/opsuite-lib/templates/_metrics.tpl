{{- /* The metrics Service (takes the operator chart's root context). */ -}}
{{- define "opsuite-lib.metricsService" -}}
apiVersion: v1
kind: Service
metadata:
  name: {{ include "opsuite-lib.fullname" . }}-metrics
  namespace: {{ .Release.Namespace }}
  labels:
    {{- include "opsuite-lib.labels" . | nindent 4 }}
  {{- with .Values.metrics.service.annotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
spec:
  type: {{ .Values.metrics.service.type }}
  selector:
    {{- include "opsuite-lib.selectorLabels" . | nindent 4 }}
  ports:
    - name: metrics
      port: {{ .Values.metrics.service.port }}
      targetPort: metrics
      protocol: TCP
{{- end }}

{{- /* The ClusterRole a scraper binds to read the metrics endpoint. */ -}}
{{- define "opsuite-lib.metricsReader" -}}
{{- if .Values.rbac.create }}
# Bind this ClusterRole to a scraper's ServiceAccount (for example Prometheus) to let it
# read the metrics endpoint, which serves only callers the API server authorizes.
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: {{ include "opsuite-lib.fullname" . }}-metrics-reader
  labels:
    {{- include "opsuite-lib.labels" . | nindent 4 }}
rules:
  - nonResourceURLs: ["/metrics"]
    verbs: ["get"]
{{- end }}
{{- end }}

{{- /* A prometheus-operator ServiceMonitor for the metrics Service, when enabled. */ -}}
{{- define "opsuite-lib.serviceMonitor" -}}
{{- if .Values.serviceMonitor.enabled }}
apiVersion: monitoring.coreos.com/v1
kind: ServiceMonitor
metadata:
  name: {{ include "opsuite-lib.fullname" . }}
  namespace: {{ .Release.Namespace }}
  labels:
    {{- include "opsuite-lib.labels" . | nindent 4 }}
    {{- with .Values.serviceMonitor.labels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
spec:
  namespaceSelector:
    matchNames:
      - {{ .Release.Namespace }}
  selector:
    matchLabels:
      {{- include "opsuite-lib.selectorLabels" . | nindent 6 }}
  endpoints:
    - port: metrics
      path: /metrics
      # The per-object series carry the object's own namespace label (README "Metrics of
      # the objects"); without this Prometheus renames it exported_namespace and the
      # charts' dashboards and alerts would see the operator's namespace instead.
      honorLabels: true
      # The endpoint serves HTTPS with a self-signed certificate to authorized tokens.
      scheme: https
      bearerTokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token
      tlsConfig:
        insecureSkipVerify: true
      interval: {{ .Values.serviceMonitor.interval }}
      {{- with .Values.serviceMonitor.scrapeTimeout }}
      scrapeTimeout: {{ . }}
      {{- end }}
{{- end }}
{{- end }}
