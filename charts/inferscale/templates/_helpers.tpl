{{/* Names and labels shared by every template. */}}

{{- define "inferscale.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The release's full name: "<release>" if it already contains the chart name, else "<release>-inferscale". */}}
{{- define "inferscale.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "inferscale.selectorLabels" -}}
app.kubernetes.io/name: {{ include "inferscale.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "inferscale.labels" -}}
{{ include "inferscale.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: inferscale
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "inferscale.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "inferscale.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name must name an existing ServiceAccount when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The Lease the replicas elect their leader with (in the release's namespace). */}}
{{- define "inferscale.leaseName" -}}
{{- printf "%s-leader" (include "inferscale.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
What the operator does to InferenceServices and their children, wherever it serves them
(a ClusterRole for all namespaces, a Role per watched namespace). Each rule is one call
site in operator/inferscale (handlers.py, kube.py) or in kopf; nothing else.
*/}}
{{- define "inferscale.workloadRules" -}}
# kopf watches InferenceServices (list, watch), keeps its progress in their annotations
# (patch); the readiness handler reads the owner of a Deployment (get).
- apiGroups: ["inferscale.io"]
  resources: ["inferenceservices"]
  verbs: ["get", "list", "watch", "patch"]
# Status is written by server-side apply, one field manager per writer.
- apiGroups: ["inferscale.io"]
  resources: ["inferenceservices/status"]
  verbs: ["patch"]
# Engine Deployments: server-side apply (patch; create when it makes a new one), the
# replica count read at reconcile (get), the index and readiness watch (list, watch).
- apiGroups: ["apps"]
  resources: ["deployments"]
  verbs: ["get", "list", "watch", "create", "patch"]
# Service and PodDisruptionBudget: server-side apply, and the drift watch and index (list,
# watch) with a fresh read before each repair (get). Never deleted: owner references do that.
- apiGroups: [""]
  resources: ["services"]
  verbs: ["get", "list", "watch", "create", "patch"]
- apiGroups: ["policy"]
  resources: ["poddisruptionbudgets"]
  verbs: ["get", "list", "watch", "create", "patch"]
# Engine pods: the index the scaling tick counts (list, watch) and the deletion-cost
# annotation set before a scale-down (patch). Never create or delete.
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["list", "watch", "patch"]
# Only to check that a referenced Hugging Face token Secret has its key: get by name,
# no list or watch, so the operator cannot enumerate Secrets.
- apiGroups: [""]
  resources: ["secrets"]
  verbs: ["get"]
# Events about InferenceServices (the scaling loop's, and kopf's handler results).
- apiGroups: [""]
  resources: ["events"]
  verbs: ["create"]
{{- end -}}
