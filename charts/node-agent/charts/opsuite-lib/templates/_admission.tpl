{{- /*
A ValidatingAdmissionPolicy and its binding that hold the operator's ServiceAccount to the
Secrets, ConfigMaps and ServiceAccounts it manages, wherever RBAC lets it write them (RBAC
cannot select by label). Called with a dict:
  ctx          the operator chart's root context (required)
  managedBy    the value of app.kubernetes.io/managed-by the operator puts on what it
               creates (its resources builders), e.g. "valkey-operator" (required)
  ownerGroups  API groups of the operator's own kinds (list): an unlabelled object controlled
               by one of them (ownerReference with controller: true) is the operator's too,
               so it may put the label back on (adoption of a Secret whose label was removed)
For the operator's ServiceAccount only (matchConditions), the API server refuses:
- creating or changing a Secret, ConfigMap or ServiceAccount that does not end up labelled
  app.kubernetes.io/managed-by=<managedBy>;
- changing or deleting one that was neither labelled so nor controlled by the operator's
  kinds (a Secret of kube-system, say, even by adding the label);
- any write in admissionPolicy.protectedNamespaces (kube-system, kube-public and
  kube-node-lease by default: no database cluster lives there, and a system component may
  read an object it expects there by name, labelled or not);
- any Secret of type kubernetes.io/service-account-token, which the token controller would
  fill with a token of the ServiceAccount it names (kube-system's included);
- a TokenRequest (serviceaccounts/token) for any ServiceAccount but the operator's own (RBAC
  already grants no other; the policy keeps it so if a broader role is bound by hand).
Reads are RBAC's business: watchNamespaces narrows them (opsuite-lib.rbac).
*/ -}}
{{- define "opsuite-lib.admissionPolicy" -}}
{{- $ctx := required "opsuite-lib.admissionPolicy needs ctx" .ctx -}}
{{- $managedBy := required "opsuite-lib.admissionPolicy needs managedBy" .managedBy -}}
{{- $groups := list }}
{{- range .ownerGroups }}
{{- $groups = append $groups (printf "'%s/'" .) }}
{{- end }}
{{- with $ctx -}}
{{- if .Values.admissionPolicy.enabled }}
{{- $fullname := include "opsuite-lib.fullname" . }}
{{- $sa := include "opsuite-lib.serviceAccountName" . }}
{{- $label := "app.kubernetes.io/managed-by" }}
{{- $protected := list }}
{{- range .Values.admissionPolicy.protectedNamespaces }}
{{- $protected = append $protected (printf "'%s'" .) }}
{{- end }}
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: {{ $fullname }}-managed-objects
  labels:
    {{- include "opsuite-lib.labels" . | nindent 4 }}
spec:
  # An expression that cannot be evaluated refuses the request.
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
      - apiGroups: [""]
        apiVersions: ["*"]
        operations: ["CREATE", "UPDATE", "DELETE"]
        resources: ["secrets", "configmaps", "serviceaccounts"]
      - apiGroups: [""]
        apiVersions: ["*"]
        operations: ["CREATE"]
        resources: ["serviceaccounts/token"]
  matchConditions:
    - name: operator-service-account
      expression: {{ printf "request.userInfo.username == 'system:serviceaccount:%s:%s'" .Release.Namespace $sa | quote }}
  variables:
    - name: tokenRequest
      expression: "has(request.subResource) && request.subResource == 'token'"
    - name: labelled
      expression: {{ printf "object != null && has(object.metadata.labels) && '%s' in object.metadata.labels && object.metadata.labels['%s'] == '%s'" $label $label $managedBy | quote }}
    - name: wasLabelled
      expression: {{ printf "oldObject != null && has(oldObject.metadata.labels) && '%s' in oldObject.metadata.labels && oldObject.metadata.labels['%s'] == '%s'" $label $label $managedBy | quote }}
    - name: wasControlled
      expression: {{ printf "oldObject != null && has(oldObject.metadata.ownerReferences) && oldObject.metadata.ownerReferences.exists(r, has(r.controller) && r.controller && [%s].exists(g, r.apiVersion.startsWith(g)))" (join ", " $groups) | quote }}
  validations:
    - expression: {{ printf "!variables.tokenRequest || (request.namespace == '%s' && request.name == '%s')" .Release.Namespace $sa | quote }}
      message: {{ printf "the operator may request tokens for its own ServiceAccount %s/%s only" .Release.Namespace $sa | quote }}
      reason: Forbidden
    {{- if $protected }}
    - expression: {{ printf "variables.tokenRequest || !(request.namespace in [%s])" (join ", " $protected) | quote }}
      message: {{ printf "the operator may not write Secrets, ConfigMaps or ServiceAccounts in %s" (join ", " .Values.admissionPolicy.protectedNamespaces) | quote }}
      reason: Forbidden
    {{- end }}
    - expression: "variables.tokenRequest || request.operation == 'DELETE' || variables.labelled"
      message: {{ printf "the operator may create or change only Secrets, ConfigMaps and ServiceAccounts labelled %s=%s" $label $managedBy | quote }}
      reason: Forbidden
    - expression: "variables.tokenRequest || request.operation == 'CREATE' || variables.wasLabelled || variables.wasControlled"
      message: {{ printf "the operator may change or delete only Secrets, ConfigMaps and ServiceAccounts it manages (labelled %s=%s, or controlled by its own resources)" $label $managedBy | quote }}
      reason: Forbidden
    - expression: "request.resource.resource != 'secrets' || request.operation == 'DELETE' || !has(object.type) || object.type != 'kubernetes.io/service-account-token'"
      message: "the operator may not write Secrets of type kubernetes.io/service-account-token"
      reason: Forbidden
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: {{ $fullname }}-managed-objects
  labels:
    {{- include "opsuite-lib.labels" . | nindent 4 }}
spec:
  policyName: {{ $fullname }}-managed-objects
  validationActions: [Deny]
{{- end }}
{{- end }}
{{- end }}
