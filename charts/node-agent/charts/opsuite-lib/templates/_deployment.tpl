{{- /*
The controller's Deployment. Called with a dict:
  ctx  the operator chart's root context (required)
  env  more container env entries, a YAML list rendered by the chart (optional), e.g. the
       operator's configuration
The node agent's client wiring (projected token, CA, NODE_AGENT_* env) is added when
nodeAgent.enabled.
*/ -}}
{{- define "opsuite-lib.deployment" -}}
{{- $ctx := required "opsuite-lib.deployment needs ctx" .ctx -}}
{{- with $ctx -}}
{{- $nodeAgent := .Values.nodeAgent.enabled }}
{{- $caConfigMap := include "opsuite-lib.nodeAgent.caVolumeConfigMap" . }}
{{- $env := list }}
{{- if .Values.bindPodIP }}
{{- $env = append $env (dict "name" "POD_IP" "valueFrom" (dict "fieldRef" (dict "fieldPath" "status.podIP"))) }}
{{- end }}
{{- if $nodeAgent }}
{{- $agent := include "opsuite-lib.nodeAgent.fullname" . }}
{{- $env = append $env (dict "name" "NODE_AGENT_NAMESPACE" "value" .Values.nodeAgent.namespace) }}
{{- $env = append $env (dict "name" "NODE_AGENT_SELECTOR" "value" (printf "app.kubernetes.io/name=node-agent,app.kubernetes.io/instance=%s" .Values.nodeAgent.release)) }}
{{- $env = append $env (dict "name" "NODE_AGENT_PORT" "value" (toString .Values.nodeAgent.port)) }}
{{- $env = append $env (dict "name" "NODE_AGENT_CA_CONFIGMAP" "value" (printf "%s-ca" $agent)) }}
{{- if $caConfigMap }}
{{- $env = append $env (dict "name" "NODE_AGENT_CA_DIR" "value" (include "opsuite-lib.nodeAgent.caDir" .)) }}
{{- end }}
{{- $env = append $env (dict "name" "NODE_AGENT_TOKEN_FILE" "value" (printf "%s/token" (include "opsuite-lib.nodeAgent.tokenDir" .))) }}
{{- end }}
{{- with $.env }}
{{- $env = concat $env (fromYamlArray .) }}
{{- end }}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ include "opsuite-lib.fullname" . }}
  namespace: {{ .Release.Namespace }}
  labels:
    {{- include "opsuite-lib.labels" . | nindent 4 }}
spec:
  replicas: {{ .Values.replicaCount }}
  selector:
    matchLabels:
      {{- include "opsuite-lib.selectorLabels" . | nindent 6 }}
  template:
    metadata:
      labels:
        {{- include "opsuite-lib.labels" . | nindent 8 }}
        {{- with .Values.podLabels }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      {{- with .Values.podAnnotations }}
      annotations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
    spec:
      serviceAccountName: {{ include "opsuite-lib.serviceAccountName" . }}
      automountServiceAccountToken: true
      {{- with .Values.imagePullSecrets }}
      imagePullSecrets:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with .Values.priorityClassName }}
      priorityClassName: {{ . }}
      {{- end }}
      # Restricted Pod Security: the image is a static binary run as the nonroot user it ships.
      securityContext:
        runAsNonRoot: true
        runAsUser: 65532
        runAsGroup: 65532
        seccompProfile:
          type: RuntimeDefault
      terminationGracePeriodSeconds: 30
      containers:
        - name: manager
          image: {{ include "opsuite-lib.image" . | quote }}
          imagePullPolicy: {{ .Values.image.pullPolicy }}
          args:
            {{- if .Values.leaderElection.enabled }}
            - --leader-elect
            - --leader-election-id={{ .Values.leaderElection.leaseName }}
            {{- else }}
            - --leader-elect=false
            {{- end }}
            - --metrics-bind-address={{ include "opsuite-lib.bindHost" . }}:{{ .Values.metrics.port }}
            - --health-probe-bind-address={{ include "opsuite-lib.bindHost" . }}:{{ .Values.health.port }}
            - --log-level={{ .Values.log.level }}
            - --log-format={{ .Values.log.format }}
            {{- with .Values.watchNamespaces }}
            - --namespaces={{ join "," . }}
            {{- end }}
            {{- range .Values.extraArgs }}
            - {{ . | quote }}
            {{- end }}
          {{- with $env }}
          env:
            {{- toYaml . | nindent 12 }}
          {{- end }}
          ports:
            - name: metrics
              containerPort: {{ .Values.metrics.port }}
              protocol: TCP
            - name: health
              containerPort: {{ .Values.health.port }}
              protocol: TCP
          livenessProbe:
            httpGet:
              path: /healthz
              port: health
            initialDelaySeconds: 15
            periodSeconds: 20
          readinessProbe:
            httpGet:
              path: /readyz
              port: health
            initialDelaySeconds: 5
            periodSeconds: 10
          securityContext:
            runAsNonRoot: true
            runAsUser: 65532
            runAsGroup: 65532
            readOnlyRootFilesystem: true
            allowPrivilegeEscalation: false
            capabilities:
              drop: ["ALL"]
            seccompProfile:
              type: RuntimeDefault
          {{- with .Values.resources }}
          resources:
            {{- toYaml . | nindent 12 }}
          {{- end }}
          {{- if $nodeAgent }}
          volumeMounts:
            - name: node-agent-token
              mountPath: {{ include "opsuite-lib.nodeAgent.tokenDir" . }}
              readOnly: true
            {{- if $caConfigMap }}
            - name: node-agent-ca
              mountPath: {{ include "opsuite-lib.nodeAgent.caDir" . }}
              readOnly: true
            {{- end }}
          {{- end }}
      {{- if $nodeAgent }}
      volumes:
        # The operator's own ServiceAccount token, rotated by the kubelet; the operator asks the
        # TokenRequest API with it for the per-node tokens the agents accept.
        - name: node-agent-token
          projected:
            sources:
              - serviceAccountToken:
                  path: token
                  expirationSeconds: {{ .Values.nodeAgent.token.expirationSeconds }}
                  {{- with .Values.nodeAgent.token.audience }}
                  audience: {{ . | quote }}
                  {{- end }}
        {{- if $caConfigMap }}
        # Files ca.crt and serverName (the name the agents' certificate carries).
        - name: node-agent-ca
          configMap:
            name: {{ $caConfigMap }}
        {{- end }}
      {{- end }}
      {{- with .Values.nodeSelector }}
      nodeSelector:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with .Values.tolerations }}
      tolerations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with .Values.affinity }}
      affinity:
        {{- toYaml . | nindent 8 }}
      {{- end }}
{{- end }}
{{- end }}
