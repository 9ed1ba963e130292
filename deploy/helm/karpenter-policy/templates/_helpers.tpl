{{/* Names: <fullname>-controller and <fullname>-webhook; fullname is the release name when it contains the
chart's name (helm install karpenter-policy ... gives the names of deploy/webhook/). */}}
{{- define "karpenter-policy.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "karpenter-policy.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 52 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 52 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 52 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "karpenter-policy.controller.name" -}}
{{- printf "%s-controller" (include "karpenter-policy.fullname" .) }}
{{- end }}

{{- define "karpenter-policy.webhook.name" -}}
{{- printf "%s-webhook" (include "karpenter-policy.fullname" .) }}
{{- end }}

{{/* The controller's ServiceAccount: controller.serviceAccount, or Karpenter's serviceAccount key, as YAML. */}}
{{- define "karpenter-policy.controller.serviceAccount" -}}
{{- $values := deepCopy .Values.controller }}
{{- include "karpenter-policy.applyKarpenterKeys" (list . "controller" $values) }}
{{- toYaml $values.serviceAccount }}
{{- end }}

{{- define "karpenter-policy.controller.serviceAccountName" -}}
{{- $account := include "karpenter-policy.controller.serviceAccount" . | fromYaml }}
{{- default (include "karpenter-policy.controller.name" .) $account.name }}
{{- end }}

{{/* Labels of every object; the component's selector labels are added where a component is meant. */}}
{{- define "karpenter-policy.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" | quote }}
app.kubernetes.io/name: {{ include "karpenter-policy.name" . | quote }}
app.kubernetes.io/instance: {{ .Release.Name | quote }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service | quote }}
app.kubernetes.io/part-of: karpenter-policy
{{- end }}

{{/* Selector labels of a component: include "karpenter-policy.selectorLabels" (list . "controller") */}}
{{- define "karpenter-policy.selectorLabels" -}}
{{- $root := index . 0 -}}
app.kubernetes.io/name: {{ include "karpenter-policy.name" $root | quote }}
app.kubernetes.io/instance: {{ $root.Release.Name | quote }}
app.kubernetes.io/component: {{ index . 1 | quote }}
{{- end }}

{{- define "karpenter-policy.image" -}}
{{- $tag := default .Chart.AppVersion .Values.image.tag }}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository $tag }}
{{- end }}
{{- end }}

{{/* The constraint-set ConfigMap's namespace ("" means the release namespace). */}}
{{- define "karpenter-policy.constraints.namespace" -}}
{{- default .Release.Namespace .Values.constraints.configMap.namespace }}
{{- end }}

{{- define "karpenter-policy.pinning.configMapName" -}}
{{- default (printf "%s-pinning" (include "karpenter-policy.webhook.name" .)) .Values.webhook.pinning.existingConfigMap }}
{{- end }}

{{- define "karpenter-policy.webhook.tlsSecretName" -}}
{{- if .Values.webhook.certManager.enabled }}
{{- printf "%s-tls" (include "karpenter-policy.webhook.name" .) }}
{{- else }}
{{- .Values.webhook.tls.secretName }}
{{- end }}
{{- end }}

{{/* The pods' affinity, each pod (anti-)affinity term that has no labelSelector given the component's pods (as in
Karpenter's chart): (list . "webhook" $values) */}}
{{- define "karpenter-policy.affinity" -}}
{{- $root := index . 0 }}
{{- $component := index . 1 }}
{{- $affinity := deepCopy ((index . 2).affinity | default dict) }}
{{- $selector := dict "matchLabels" (include "karpenter-policy.selectorLabels" (list $root $component) | fromYaml) }}
{{- range $kind := list "podAffinity" "podAntiAffinity" }}
{{- with get $affinity $kind }}
{{- range .requiredDuringSchedulingIgnoredDuringExecution }}
{{- if not .labelSelector }}
{{- $_ := set . "labelSelector" (deepCopy $selector) }}
{{- end }}
{{- end }}
{{- range .preferredDuringSchedulingIgnoredDuringExecution }}
{{- if and .podAffinityTerm (not .podAffinityTerm.labelSelector) }}
{{- $_ := set .podAffinityTerm "labelSelector" (deepCopy $selector) }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- if $affinity }}
{{- toYaml $affinity }}
{{- end }}
{{- end }}

{{/* Topology spread constraints, each with the component's pods as its labelSelector unless it has one (as in
Karpenter's chart): (list . "webhook" $values) */}}
{{- define "karpenter-policy.topologySpread" -}}
{{- $root := index . 0 }}
{{- $component := index . 1 }}
{{- range (index . 2).topologySpreadConstraints }}
{{- $constraint := deepCopy . }}
{{- if not $constraint.labelSelector }}
{{- $_ := set $constraint "labelSelector" (dict "matchLabels" (include "karpenter-policy.selectorLabels" (list $root $component) | fromYaml)) }}
{{- end }}
- {{ toYaml $constraint | nindent 2 | trim }}
{{- end }}
{{- end }}

{{/* Settings that cannot work together fail the rendering with a message naming the values. */}}
{{- define "karpenter-policy.validate" -}}
{{- $cluster := include "karpenter-policy.cluster" . | fromYaml }}
{{- $controller := deepCopy .Values.controller }}
{{- /* stops the rendering when Karpenter's settings.* and ours disagree */}}
{{- include "karpenter-policy.applyKarpenterKeys" (list . "controller" $controller) }}
{{- if not .Values.image.repository }}
{{- fail "image.repository is required: the image the release workflow publishes, <registry>/<owner>/karpenter-policy (e.g. ghcr.io/<owner>/karpenter-policy), or one built from deploy/webhook/Dockerfile" }}
{{- end }}
{{- if .Values.controller.enabled }}
{{- if not $cluster.name }}
{{- fail "cluster.name (or Karpenter's settings.clusterName) is required (the controller's --cluster-name: instance tags and node bootstrap)" }}
{{- end }}
{{- if not $cluster.kubernetesVersion }}
{{- fail "cluster.kubernetesVersion is required (the controller's --kubernetes-version X.Y: it picks the EKS AMIs)" }}
{{- end }}
{{- if not $cluster.apiServerEndpoint }}
{{- fail "cluster.apiServerEndpoint (or Karpenter's settings.clusterEndpoint) is required (the controller's --api-server-endpoint: what new nodes join, e.g. the EKS endpoint)" }}
{{- end }}
{{- end }}
{{- if .Values.webhook.enabled }}
{{- if ne (include "karpenter-policy.constraints.namespace" .) .Release.Namespace }}
{{- fail (printf "constraints.configMap.namespace is %q but the release namespace is %q: the webhook mounts the constraint-set ConfigMap, and a pod can only mount ConfigMaps of its own namespace (install the chart into %q, or compile with --configmap-namespace %s)" (include "karpenter-policy.constraints.namespace" .) .Release.Namespace (include "karpenter-policy.constraints.namespace" .) .Release.Namespace) }}
{{- end }}
{{- if and (not .Values.webhook.certManager.enabled) (or (not .Values.webhook.tls.secretName) (not .Values.webhook.tls.caBundle)) }}
{{- fail "webhook.certManager.enabled is false: set webhook.tls.secretName (a kubernetes.io/tls Secret in the release namespace) and webhook.tls.caBundle (the base64 PEM of the CA that signed it)" }}
{{- end }}
{{- end }}
{{- if and .Values.serviceMonitor.enabled (not (.Capabilities.APIVersions.Has "monitoring.coreos.com/v1/ServiceMonitor")) }}
{{- fail "serviceMonitor.enabled: the cluster does not serve monitoring.coreos.com/v1 ServiceMonitor (install the Prometheus Operator's CRDs first; with helm template, pass --api-versions monitoring.coreos.com/v1/ServiceMonitor)" }}
{{- end }}
{{- end }}

{{/* The webhook configurations' clientConfig: (list . "/path") */}}
{{- define "karpenter-policy.webhook.clientConfig" -}}
{{- $root := index . 0 -}}
service:
  name: {{ include "karpenter-policy.webhook.name" $root | quote }}
  namespace: {{ $root.Release.Namespace | quote }}
  path: {{ index . 1 | quote }}
  port: 443
{{- if not $root.Values.webhook.certManager.enabled }}
caBundle: {{ $root.Values.webhook.tls.caBundle | quote }}
{{- end }}
{{- end }}

{{/* What the Provisioner webhooks intercept. */}}
{{- define "karpenter-policy.webhook.provisionerRules" -}}
rules:
  - apiGroups: [karpenter.sh]
    apiVersions: [v1alpha5]
    resources: [provisioners]
    operations: [CREATE, UPDATE]
    scope: Cluster
# Provisioners are cluster-scoped, which a namespaceSelector does not filter: it is here for the rule that every
# webhook of this project leaves kube-system alone.
namespaceSelector:
  matchExpressions:
    - key: kubernetes.io/metadata.name
      operator: NotIn
      values: [kube-system]
{{- end }}
