{{/*
Karpenter's chart keys (see the header of values.yaml), applied on top of this chart's own values.

Where a component's values are read:
  {{- $values := deepCopy .Values.controller }}
  {{- include "karpenter-policy.applyKarpenterKeys" (list . "controller" $values) }}
It renders nothing and sets, in the copy, each Karpenter key that is given: priorityClassName, tolerations,
topologySpreadConstraints and dnsPolicy for both components, logLevel for a component that sets none; replicas, podDisruptionBudget, serviceAccount and the
controller's settings.* for the controller.
*/}}
{{- define "karpenter-policy.applyKarpenterKeys" -}}
{{- $root := index . 0 }}
{{- $component := index . 1 }}
{{- $values := index . 2 }}
{{- $given := $root.Values }}
{{- range $key := list "priorityClassName" "tolerations" "topologySpreadConstraints" "dnsPolicy" }}
{{- if hasKey $given $key }}
{{- $_ := set $values $key (get $given $key) }}
{{- end }}
{{- end }}
{{- if and (not $values.logLevel) $given.logLevel }}
{{- $_ := set $values "logLevel" $given.logLevel }}
{{- end }}
{{- if eq $component "controller" }}
{{- if hasKey $given "replicas" }}
{{- $_ := set $values "replicas" $given.replicas }}
{{- end }}
{{- /* key by key: merge would not let a false (create: false) win over a true */}}
{{- range $key := list "podDisruptionBudget" "serviceAccount" }}
{{- range $name, $value := get $given $key | default dict }}
{{- $_ := set (get $values $key) $name $value }}
{{- end }}
{{- end }}
{{- $settings := $given.settings | default dict }}
{{- $aws := $settings.aws | default dict }}
{{- $_ := set $values "interruptionQueue" (include "karpenter-policy.setting" (list "controller.interruptionQueue" $values.interruptionQueue "settings.aws.interruptionQueueName" $aws.interruptionQueueName "settings.interruptionQueue" $settings.interruptionQueue)) }}
{{- $_ := set $values "defaultInstanceProfile" (include "karpenter-policy.setting" (list "controller.defaultInstanceProfile" $values.defaultInstanceProfile "settings.aws.defaultInstanceProfile" $aws.defaultInstanceProfile)) }}
{{- range $key := list "batchMaxDuration" "batchIdleDuration" }}
{{- with get $settings $key }}
{{- $_ := set $values $key . }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}

{{/*
The cluster's values (cluster.*) with Karpenter's settings for them, as YAML:
  {{- $cluster := include "karpenter-policy.cluster" . | fromYaml }}
*/}}
{{- define "karpenter-policy.cluster" -}}
{{- $cluster := deepCopy .Values.cluster }}
{{- $settings := .Values.settings | default dict }}
{{- $aws := $settings.aws | default dict }}
{{- $_ := set $cluster "name" (include "karpenter-policy.setting" (list "cluster.name" .Values.cluster.name "settings.clusterName" $settings.clusterName "settings.aws.clusterName" $aws.clusterName)) }}
{{- $_ := set $cluster "apiServerEndpoint" (include "karpenter-policy.setting" (list "cluster.apiServerEndpoint" .Values.cluster.apiServerEndpoint "settings.clusterEndpoint" $settings.clusterEndpoint "settings.aws.clusterEndpoint" $aws.clusterEndpoint)) }}
{{- $_ := set $cluster "caBundle" (include "karpenter-policy.setting" (list "cluster.caBundle" .Values.cluster.caBundle "settings.aws.clusterCABundle" $aws.clusterCABundle)) }}
{{- toYaml $cluster }}
{{- end }}

{{/*
One setting that several keys may give (ours first, then Karpenter's): (list KEY VALUE KEY VALUE ...). The value
given, or ""; two keys given different values stop the rendering, naming both.
*/}}
{{- define "karpenter-policy.setting" -}}
{{- $pairs := . }}
{{- $chosenKey := "" }}
{{- $chosen := "" }}
{{- range $i := until (int (div (len $pairs) 2)) }}
{{- $key := index $pairs (int (mul $i 2)) }}
{{- $value := index $pairs (int (add1 (mul $i 2))) | default "" }}
{{- if $value }}
{{- if and $chosen (ne (toString $value) $chosen) }}
{{- fail (printf "%s is %q but %s is %q: they set the same thing; keep one" $chosenKey $chosen $key (toString $value)) }}
{{- end }}
{{- $chosenKey = $key }}
{{- $chosen = toString $value }}
{{- end }}
{{- end }}
{{- $chosen }}
{{- end }}
