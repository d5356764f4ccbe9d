{{- /*
The controller's rules split by scope, as YAML {cluster: [...], namespaced: [...]}: a rule
whose resources are cluster-scoped (the list below, subresources included) goes to cluster,
every other to namespaced; a rule with several groups or resources is split into one rule per
group. The list covers what the operators' markers name; a resource missing from it is taken
as namespaced, so watchNamespaces would withhold it, never grant it cluster-wide.
*/ -}}
{{- define "opsuite-lib.controllerRulesByScope" -}}
{{- $clusterScoped := list "/nodes" "/persistentvolumes" "/namespaces"
  "storage.k8s.io/storageclasses" "storage.k8s.io/csidrivers" "storage.k8s.io/csinodes" "storage.k8s.io/volumeattachments"
  "authentication.k8s.io/tokenreviews" "authorization.k8s.io/subjectaccessreviews"
  "apiextensions.k8s.io/customresourcedefinitions" "scheduling.k8s.io/priorityclasses"
  "rbac.authorization.k8s.io/clusterroles" "rbac.authorization.k8s.io/clusterrolebindings"
  "admissionregistration.k8s.io/validatingadmissionpolicies" "nodeagent.opsuite.io/nodes" }}
{{- $cluster := list }}
{{- $namespaced := list }}
{{- range $rule := fromYamlArray (include "opsuite-lib.controllerRules" .) }}
{{- $rest := omit $rule "apiGroups" "resources" }}
{{- range $group := $rule.apiGroups }}
{{- $c := list }}
{{- $n := list }}
{{- range $res := $rule.resources }}
{{- if has (printf "%s/%s" $group (first (splitList "/" $res))) $clusterScoped }}
{{- $c = append $c $res }}
{{- else }}
{{- $n = append $n $res }}
{{- end }}
{{- end }}
{{- if $c }}
{{- $cluster = append $cluster (merge (dict "apiGroups" (list $group) "resources" $c) $rest) }}
{{- end }}
{{- if $n }}
{{- $namespaced = append $namespaced (merge (dict "apiGroups" (list $group) "resources" $n) $rest) }}
{{- end }}
{{- end }}
{{- end }}
{{- toYaml (dict "cluster" $cluster "namespaced" $namespaced) }}
{{- end }}

{{- /*
The controller's RBAC (takes the operator chart's root context): its ClusterRole from
files/role.yaml, the namespaced leader-election Role and their bindings. With
watchNamespaces, the rules on namespaced resources go to the ClusterRole
<fullname>-namespaced, bound by a RoleBinding in each watched namespace only, and the
ClusterRole <fullname> keeps the cluster-scoped ones: the operator can then read or write no
Secret, Pod or workload outside those namespaces.
*/ -}}
{{- define "opsuite-lib.rbac" -}}
{{- if .Values.rbac.create }}
{{- $fullname := include "opsuite-lib.fullname" . }}
{{- if .Values.watchNamespaces }}
{{- $rules := fromYaml (include "opsuite-lib.controllerRulesByScope" .) }}
{{- $sa := include "opsuite-lib.serviceAccountName" . }}
# The controller's rights on namespaced resources, granted in the watched namespaces only.
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: {{ $fullname }}-namespaced
  labels:
    {{- include "opsuite-lib.labels" . | nindent 4 }}
rules:
  {{- toYaml $rules.namespaced | nindent 2 }}
{{- range $ns := .Values.watchNamespaces }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: {{ $fullname }}
  namespace: {{ $ns }}
  labels:
    {{- include "opsuite-lib.labels" $ | nindent 4 }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: {{ $fullname }}-namespaced
subjects:
  - kind: ServiceAccount
    name: {{ $sa }}
    namespace: {{ $.Release.Namespace }}
{{- end }}
{{- if $rules.cluster }}
---
# The controller's rights on cluster-scoped resources.
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: {{ $fullname }}
  labels:
    {{- include "opsuite-lib.labels" . | nindent 4 }}
rules:
  {{- toYaml $rules.cluster | nindent 2 }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: {{ $fullname }}
  labels:
    {{- include "opsuite-lib.labels" . | nindent 4 }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: {{ $fullname }}
subjects:
  - kind: ServiceAccount
    name: {{ $sa }}
    namespace: {{ .Release.Namespace }}
{{- end }}
{{- else }}
# The controller's permissions, generated from its +kubebuilder:rbac markers: least privilege,
# no verb the controller does not use.
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: {{ $fullname }}
  labels:
    {{- include "opsuite-lib.labels" . | nindent 4 }}
rules:
  {{- include "opsuite-lib.controllerRules" . | nindent 2 }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: {{ $fullname }}
  labels:
    {{- include "opsuite-lib.labels" . | nindent 4 }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: {{ $fullname }}
subjects:
  - kind: ServiceAccount
    name: {{ include "opsuite-lib.serviceAccountName" . }}
    namespace: {{ .Release.Namespace }}
{{- end }}
{{- if .Values.leaderElection.enabled }}
---
# Leader election: the Lease lives in the release namespace (client-go's LeaseLock only gets,
# creates and updates it: the e2e audit saw no other verb), and controller-runtime records
# each leadership taken as one core Event (its leader election uses the core recorder,
# never events.k8s.io). The Event names the new leader's identity, unique per process, so
# it never repeats into a series: create, never patch (tools/e2e TestRBACMatchesUse).
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: {{ $fullname }}-leader-election
  namespace: {{ .Release.Namespace }}
  labels:
    {{- include "opsuite-lib.labels" . | nindent 4 }}
rules:
  - apiGroups: ["coordination.k8s.io"]
    resources: ["leases"]
    verbs: ["get", "create", "update"]
  - apiGroups: [""]
    resources: ["events"]
    verbs: ["create"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: {{ $fullname }}-leader-election
  namespace: {{ .Release.Namespace }}
  labels:
    {{- include "opsuite-lib.labels" . | nindent 4 }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: {{ $fullname }}-leader-election
subjects:
  - kind: ServiceAccount
    name: {{ include "opsuite-lib.serviceAccountName" . }}
    namespace: {{ .Release.Namespace }}
{{- end }}
{{- end }}
{{- end }}

{{- /*
With nodeAgent.enabled (and rbac.create), what calling the node agent takes
(charts/node-agent/templates/rbac.yaml defines the agent's roles):
- <agent>-<nodeAgent.role>, bound cluster-wide: get on nodes.nodeagent.opsuite.io and update
  on what the operator asks of the agents, the virtual resource the agent authorizes every
  call with: preparer (nodes/disks and nodes/sysctls), sysctls (nodes/sysctls only) or reader
  (reports only). The binding's name carries the role, so a `helm upgrade` that changes the
  role replaces the binding (a binding's roleRef cannot change);
- <agent>-client, bound in the agent's namespace only: find the agent pods, read its CA
  ConfigMap <agent>-ca;
- create on serviceaccounts/token for the operator's own ServiceAccount only: it requests
  per-node tokens (audience nodeagent.opsuite.io/<node>) with the TokenRequest API.
The RoleBinding renders only where the agent's namespace exists (or no cluster can be asked,
see opsuite-lib.nodeAgent.namespaceState): installed before the agent, the release works
unbound, its NOTES say so, and a `helm upgrade` once the agent is installed binds it.
*/ -}}
{{- define "opsuite-lib.nodeAgentRBAC" -}}
{{- if and .Values.rbac.create .Values.nodeAgent.enabled }}
{{- $fullname := include "opsuite-lib.fullname" . }}
{{- $agent := include "opsuite-lib.nodeAgent.fullname" . }}
{{- $sa := include "opsuite-lib.serviceAccountName" . }}
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: {{ $fullname }}-node-agent-{{ .Values.nodeAgent.role }}
  labels:
    {{- include "opsuite-lib.labels" . | nindent 4 }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: {{ $agent }}-{{ .Values.nodeAgent.role }}
subjects:
  - kind: ServiceAccount
    name: {{ $sa }}
    namespace: {{ .Release.Namespace }}
{{- if ne (include "opsuite-lib.nodeAgent.namespaceState" .) "missing" }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: {{ $fullname }}-node-agent-client
  namespace: {{ .Values.nodeAgent.namespace }}
  labels:
    {{- include "opsuite-lib.labels" . | nindent 4 }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: {{ $agent }}-client
subjects:
  - kind: ServiceAccount
    name: {{ $sa }}
    namespace: {{ .Release.Namespace }}
{{- end }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: {{ $fullname }}-node-agent-token
  namespace: {{ .Release.Namespace }}
  labels:
    {{- include "opsuite-lib.labels" . | nindent 4 }}
rules:
  - apiGroups: [""]
    resources: ["serviceaccounts/token"]
    resourceNames: [{{ $sa | quote }}]
    verbs: ["create"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: {{ $fullname }}-node-agent-token
  namespace: {{ .Release.Namespace }}
  labels:
    {{- include "opsuite-lib.labels" . | nindent 4 }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: {{ $fullname }}-node-agent-token
subjects:
  - kind: ServiceAccount
    name: {{ $sa }}
    namespace: {{ .Release.Namespace }}
{{- end }}
{{- end }}
